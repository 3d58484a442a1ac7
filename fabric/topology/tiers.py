"""Switch tiers (leaf / spine / core) and pods, detected from the graph.

Rule, in order:
1. A role an operator set on the switch (`TSwitch.role`) wins.
2. Leaf candidates are the switches with at least one host cable (up or down:
   a leaf whose servers are powered off is still a leaf) plus operator leaves.
3. In a tree, leaves are not cabled to each other, so a candidate cabled to two or
   more other candidates is really a spine that also carries a few host ports (real
   fabrics do this: spine ib7 of the SX6036 fabric holds storage node tank1).
   Repeatedly drop the candidate cabled to the most other candidates (ties: fewer
   host cables, then more switch neighbours, then name) until none touches two.
   A spine sees many leaves, a leaf sees its spines, so the spines go first even
   when every spine carries a storage node. A single lateral cable between two
   leaves (or two back-to-back leaves with no spine) leaves both as leaves.
4. The remaining candidates are the leaves (level 0); every other switch gets its
   BFS distance from the leaf set over switch-switch cables: 1 = spine, >= 2 = core.
   A switch no leaf reaches is "unknown" (level -1).
5. A pod is a connected group of leaves and spines once the core is removed
   (the spine group a leaf's traffic stays in); a 2-tier fabric is one pod.

Limitations (set the role where they bite): a switch with no host cable at all is
classed by its distance from the leaves, so an empty leaf in a 2-tier fabric reads
as a core; a core switch carrying a host (no leaf neighbours) reads as a leaf.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from fabric.topology.graph import FabricGraph, natural_key

LEAF = "leaf"
SPINE = "spine"
CORE = "core"
UNKNOWN = "unknown"
TIER_ORDER: tuple[str, ...] = (LEAF, SPINE, CORE, UNKNOWN)
_ROLE_LEVEL = {LEAF: 0, SPINE: 1, CORE: 2}


@dataclass(slots=True)
class Tiers:
    role: list[str]  # per switch index: leaf / spine / core / unknown
    level: list[int]  # 0 leaf, 1 spine, 2+ core, -1 unknown; "up" means towards a higher level
    source: list[str]  # "operator" or "detected"
    pod: list[int]  # pod number of a leaf or spine, -1 for core / unknown
    n_pods: int

    def is_uplink(self, from_switch: int, to_switch: int) -> bool:
        """True when a cable from `from_switch` to `to_switch` goes up the tree."""
        lf, lt = self.level[from_switch], self.level[to_switch]
        return lf >= 0 and lt > lf


def detect_tiers(graph: FabricGraph) -> Tiers:
    n = graph.n_switches
    operator = [r if r in _ROLE_LEVEL else "" for r in graph.switch_roles]
    host_cables = [len(h) for h in graph.sw_hosts_all]
    sw_neighbours = [{w for w, _ in adj} for adj in graph.sw_adj_all]

    forced = {i for i in range(n) if operator[i] == LEAF}
    candidates = forced | {i for i in range(n) if host_cables[i] and not operator[i]}
    _drop_adjacent_candidates(graph, candidates, forced, host_cables, sw_neighbours)

    level = [-1] * n
    queue: deque[int] = deque()
    for i in sorted(candidates):
        level[i] = 0
        queue.append(i)
    while queue:
        v = queue.popleft()
        for w in sw_neighbours[v]:
            if level[w] < 0:
                level[w] = level[v] + 1
                queue.append(w)

    role: list[str] = []
    source: list[str] = []
    for i in range(n):
        if operator[i]:
            role.append(operator[i])
            source.append("operator")
            # An operator's word also fixes the level, so "up" follows the roles they set.
            level[i] = _ROLE_LEVEL[operator[i]]
        else:
            lv = level[i]
            role.append(UNKNOWN if lv < 0 else LEAF if lv == 0 else SPINE if lv == 1 else CORE)
            source.append("detected")

    pod, n_pods = _pods(graph, role, sw_neighbours)
    return Tiers(role=role, level=level, source=source, pod=pod, n_pods=n_pods)


def _drop_adjacent_candidates(
    graph: FabricGraph,
    candidates: set[int],
    forced: set[int],
    host_cables: list[int],
    sw_neighbours: list[set[int]],
) -> None:
    cand_nb = {i: sw_neighbours[i] & candidates for i in candidates}
    conflicted = {i for i, nb in cand_nb.items() if len(nb) >= 2 and i not in forced}
    while conflicted:
        # Few switches are ever dropped (spines with host ports), so a linear scan per drop is cheap.
        worst = max(
            conflicted,
            key=lambda i: (
                len(cand_nb[i]),
                -host_cables[i],
                len(sw_neighbours[i]),
                natural_key(graph.switch_names[i]),
            ),
        )
        candidates.discard(worst)
        conflicted.discard(worst)
        for j in cand_nb.pop(worst):
            nb = cand_nb[j]
            nb.discard(worst)
            if len(nb) < 2:
                conflicted.discard(j)


def _pods(graph: FabricGraph, role: list[str], sw_neighbours: list[set[int]]) -> tuple[list[int], int]:
    n = graph.n_switches
    in_pod_tier = [r in (LEAF, SPINE) for r in role]
    comp = [-1] * n
    comps: list[list[int]] = []
    for start in range(n):
        if not in_pod_tier[start] or comp[start] >= 0:
            continue
        cid = len(comps)
        members = [start]
        comp[start] = cid
        stack = [start]
        while stack:
            v = stack.pop()
            for w in sw_neighbours[v]:
                if in_pod_tier[w] and comp[w] < 0:
                    comp[w] = cid
                    members.append(w)
                    stack.append(w)
        comps.append(members)
    # Number pods by their first leaf in name order, so pod 0 holds "leaf001" / "ib1".
    with_leaf = []
    for cid, members in enumerate(comps):
        leaves = [natural_key(graph.switch_names[i]) for i in members if role[i] == LEAF]
        if leaves:
            with_leaf.append((min(leaves), cid))
    renumber = {cid: k for k, (_, cid) in enumerate(sorted(with_leaf))}
    pod = [renumber.get(c, -1) if c >= 0 else -1 for c in comp]
    return pod, len(renumber)
