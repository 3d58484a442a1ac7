"""Single points of failure: switches and links whose loss cuts hosts off the fabric.

Model. Hosts are endpoints, never transit (an HCA does not forward), so the fabric
is the graph of switches and the live cables between them; a host hangs off every
switch it has a live link to. "The fabric" is the connected part of that graph
holding the most host ports; hosts that already cannot reach it are listed as
`unreachable_hosts` and left out of the SPOF analysis. A host is cut off by the
loss of an element when none of its switches is left in the largest remaining part
(largest by host ports).

Elements found, with the hosts each one cuts off:
* switches: articulation points of the switch graph (Tarjan, iterative) plus every
  switch that is the only switch some host is cabled to;
* links: bridges of the switch graph (parallel cables are not bridges) plus each
  host's only live link.

`scope` says what kind of redundancy is missing:
* "host-link": the only link of a single-homed host (cuts off that host only);
* "leaf": a switch that is the only access switch of the hosts it cuts off, all of
  them cabled straight to it. A spine that carries host ports is "leaf" scope for
  them (SX6036: ib7 is the only switch of storage node tank1, whose two ports both
  go to ib7);
* "fabric": an element inside the switch fabric (spine, core, inter-switch cable)
  whose loss cuts off hosts cabled elsewhere.

Also listed: leaves whose live uplinks all go to one switch (or that have none),
with their hosts: one switch failure away from isolation even if not a SPOF yet.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from fabric.topology.graph import FabricGraph, natural_key
from fabric.topology.tiers import LEAF, Tiers

STORAGE = "storage"
HOST_LINK = "host-link"
LEAF_SCOPE = "leaf"
FABRIC = "fabric"
SCOPES: tuple[str, ...] = (FABRIC, LEAF_SCOPE, HOST_LINK)  # report order: most serious first


@dataclass(slots=True)
class SwitchSpof:
    switch: str  # key
    name: str
    tier: str
    scope: str
    hosts: list[str]  # hostnames cut off, natural order
    storage_hosts: list[str]  # those of them with role "storage": losing storage strands every job reading it


@dataclass(slots=True)
class LinkSpof:
    link: str  # key
    a: str  # end names (switch name or hostname)
    b: str
    scope: str
    hosts: list[str]
    storage_hosts: list[str]


@dataclass(slots=True)
class SingleUplinkLeaf:
    switch: str
    name: str
    uplinks: int  # live uplink cables
    uplink_switches: list[str]  # names of the switches they go to (zero or one)
    hosts: list[str]


@dataclass(slots=True)
class SpofReport:
    switches: list[SwitchSpof] = field(default_factory=list)
    links: list[LinkSpof] = field(default_factory=list)
    by_scope: dict[str, int] = field(default_factory=dict)  # entries (switches + links) per scope
    single_uplink_leaves: list[SingleUplinkLeaf] = field(default_factory=list)
    unreachable_hosts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Dfs:
    disc: list[int]
    size: list[int]
    order: list[int]  # switches by discovery time: a DFS subtree is a contiguous slice
    cc: list[int]
    cc_range: list[tuple[int, int]]
    separated: list[list[int]]  # per switch: children whose subtree its removal separates
    bridges: list[tuple[int, int, int]]  # (parent, child, link index)


def _tarjan(graph: FabricGraph) -> _Dfs:
    """Articulation points and bridges of the live switch graph, without recursion."""
    n = graph.n_switches
    adj = graph.sw_adj
    disc = [-1] * n
    low = [0] * n
    size = [1] * n
    ptr = [0] * n
    parent = [-1] * n
    pedge = [-1] * n
    cc = [-1] * n
    order: list[int] = []
    cc_range: list[tuple[int, int]] = []
    separated: list[list[int]] = [[] for _ in range(n)]
    bridges: list[tuple[int, int, int]] = []
    for root in range(n):
        if disc[root] >= 0:
            continue
        cid = len(cc_range)
        start = len(order)
        disc[root] = low[root] = start
        order.append(root)
        cc[root] = cid
        stack = [root]
        while stack:
            v = stack[-1]
            av = adj[v]
            i = ptr[v]
            descended = False
            while i < len(av):
                w, e = av[i]
                i += 1
                if e == pedge[v]:  # skip the cable we came by, not its parallel twins
                    continue
                if disc[w] < 0:
                    disc[w] = low[w] = len(order)
                    order.append(w)
                    cc[w] = cid
                    parent[w] = v
                    pedge[w] = e
                    stack.append(w)
                    descended = True
                    break
                if disc[w] < low[v]:
                    low[v] = disc[w]
            ptr[v] = i
            if descended:
                continue
            stack.pop()
            p = parent[v]
            if p >= 0:
                size[p] += size[v]
                if low[v] < low[p]:
                    low[p] = low[v]
                if low[v] >= disc[p]:
                    separated[p].append(v)
                if low[v] > disc[p]:
                    bridges.append((p, v, pedge[v]))
        cc_range.append((start, len(order)))
    return _Dfs(disc, size, order, cc, cc_range, separated, bridges)


def find_spofs(graph: FabricGraph, tiers: Tiers) -> SpofReport:
    dfs = _tarjan(graph)
    report = SpofReport()
    ports = [len(h) for h in graph.sw_hosts]
    prefix = [0]
    for s in dfs.order:
        prefix.append(prefix[-1] + ports[s])
    hosted = [pos for pos, s in enumerate(dfs.order) if ports[s]]  # DFS positions of switches with hosts

    def range_ports(lo: int, hi: int) -> int:
        return prefix[hi] - prefix[lo]

    hosts = graph.host_keys
    if not dfs.cc_range:
        report.unreachable_hosts = _names(graph, set(range(graph.n_hosts)))
        report.by_scope = dict.fromkeys(SCOPES, 0)
        return report
    main = max(range(len(dfs.cc_range)), key=lambda c: (range_ports(*dfs.cc_range[c]), -c))
    cc_lo, cc_hi = dfs.cc_range[main]

    # Each reachable host's distinct switches inside the main part, and its live links there.
    host_sw: list[list[int]] = []
    sole: dict[int, list[int]] = {}  # switch -> hosts whose only switch it is
    unreachable: set[int] = set()
    host_link_spofs: list[LinkSpof] = []
    for h, hl in enumerate(graph.host_links):
        in_main = [(s, li) for s, li in hl if dfs.cc[s] == main]
        sws = sorted({s for s, _ in in_main})
        host_sw.append(sws)
        if not sws:
            unreachable.add(h)
            continue
        if len(sws) == 1:
            sole.setdefault(sws[0], []).append(h)
        if len(in_main) == 1:
            li = in_main[0][1]
            a, b = graph.link_names(li)
            storage = [hosts[h]] if graph.host_roles[h] == STORAGE else []
            host_link_spofs.append(LinkSpof(graph.links[li].key, a, b, HOST_LINK, [hosts[h]], storage))

    def cut_off(parts: list[tuple[int, int]], removed: int, main_part: int) -> set[int]:
        """Hosts left without a switch in the main part when `removed` (-1: none) goes and the
        main CC splits into the DFS-order ranges `parts` plus the rest (part -1)."""
        starts = [lo for lo, _ in parts]

        def part_of(s: int) -> int:
            d = dfs.disc[s]
            k = bisect_right(starts, d) - 1
            return k if k >= 0 and d < parts[k][1] else -1

        minor = [rng for k, rng in enumerate(parts) if k != main_part]
        if main_part != -1:
            # The rest as ranges: the gaps of the CC between the parts and the removed switch.
            holes = sorted([*parts, *([(dfs.disc[removed], dfs.disc[removed] + 1)] if removed >= 0 else [])])
            pos = cc_lo
            for lo, hi in holes:
                if pos < lo:
                    minor.append((pos, lo))
                pos = max(pos, hi)
            if pos < cc_hi:
                minor.append((pos, cc_hi))
        lost: set[int] = set()
        for lo, hi in minor:
            # Visit only the switches of the range that carry hosts: cost follows what is cut off.
            for pos in hosted[bisect_left(hosted, lo) : bisect_left(hosted, hi)]:
                for h, _ in graph.sw_hosts[dfs.order[pos]]:
                    sws = host_sw[h]
                    # Most hosts hang off one switch, which is here, on the lost side.
                    if len(sws) == 1 or not any(t != removed and part_of(t) == main_part for t in sws):
                        lost.add(h)
        return lost

    def main_part_of(parts: list[tuple[int, int]], rest_ports: int) -> int:
        best, best_ports = -1, rest_ports  # the rest wins ties: it holds the DFS root
        for k, (lo, hi) in enumerate(parts):
            p = range_ports(lo, hi)
            if p > best_ports:
                best, best_ports = k, p
        return best

    switch_spofs: list[SwitchSpof] = []
    for v in dfs.order[cc_lo:cc_hi]:
        lost = set(sole.get(v, ()))
        sep = dfs.separated[v]
        parts = [(dfs.disc[c], dfs.disc[c] + dfs.size[c]) for c in sep]
        rest_ports = range_ports(cc_lo, cc_hi) - ports[v] - sum(range_ports(lo, hi) for lo, hi in parts)
        rest_size = (cc_hi - cc_lo) - 1 - sum(hi - lo for lo, hi in parts)
        if len(parts) + (1 if rest_size else 0) >= 2:
            lost |= cut_off(parts, v, main_part_of(parts, rest_ports))
        if not lost:
            continue
        direct = {h for h, _ in graph.sw_hosts[v]}
        scope = LEAF_SCOPE if lost <= direct else FABRIC
        switch_spofs.append(
            SwitchSpof(
                switch=graph.switch_keys[v],
                name=graph.switch_names[v],
                tier=tiers.role[v],
                scope=scope,
                hosts=_names(graph, lost),
                storage_hosts=_names(graph, {h for h in lost if graph.host_roles[h] == STORAGE}),
            )
        )

    link_spofs = list(host_link_spofs)
    for _parent, c, li in dfs.bridges:
        if dfs.cc[c] != main:
            continue
        lo, hi = dfs.disc[c], dfs.disc[c] + dfs.size[c]
        sub_ports = range_ports(lo, hi)
        rest_ports = range_ports(cc_lo, cc_hi) - sub_ports
        lost = cut_off([(lo, hi)], -1, 0 if sub_ports > rest_ports else -1)
        if lost:
            a, b = graph.link_names(li)
            storage = {h for h in lost if graph.host_roles[h] == STORAGE}
            link_spofs.append(LinkSpof(graph.links[li].key, a, b, FABRIC, _names(graph, lost), _names(graph, storage)))

    rank = {s: i for i, s in enumerate(SCOPES)}
    switch_spofs.sort(key=lambda x: (rank[x.scope], natural_key(x.name), x.switch))
    link_spofs.sort(key=lambda x: (rank[x.scope], natural_key(x.a), natural_key(x.b), x.link))
    by_scope = dict.fromkeys(SCOPES, 0)
    for item in (*switch_spofs, *link_spofs):
        by_scope[item.scope] += 1
    report.switches = switch_spofs
    report.links = link_spofs
    report.by_scope = by_scope
    report.unreachable_hosts = _names(graph, unreachable)
    report.single_uplink_leaves = _single_uplink_leaves(graph, tiers)
    return report


def _names(graph: FabricGraph, host_indices: set[int]) -> list[str]:
    return [graph.host_keys[h] for h in sorted(host_indices, key=lambda h: (graph.host_sort[h], graph.host_keys[h]))]


def _single_uplink_leaves(graph: FabricGraph, tiers: Tiers) -> list[SingleUplinkLeaf]:
    rows: list[SingleUplinkLeaf] = []
    for s in graph.switch_order():
        if tiers.role[s] != LEAF or not graph.sw_hosts[s]:
            continue
        ups = [w for w, _ in graph.sw_adj[s] if tiers.is_uplink(s, w)]
        targets = [graph.switch_names[w] for w in set(ups)]
        if len(targets) <= 1:
            rows.append(
                SingleUplinkLeaf(
                    switch=graph.switch_keys[s],
                    name=graph.switch_names[s],
                    uplinks=len(ups),
                    uplink_switches=targets,
                    hosts=_names(graph, {h for h, _ in graph.sw_hosts[s]}),
                )
            )
    return rows
