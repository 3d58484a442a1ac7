"""Host-to-host distance for placement: `HopIndex.build(fabric).distance(a, b)`.

Definitions
* `hops`: the number of links on the shortest up/down path between the two hosts,
  host links included: 0 for the same host, 2 through a shared leaf
  (host-leaf-host), 4 through a spine (host-leaf-spine-leaf-host), 6 through a
  core. -1 when no path exists. A multi-homed host (rail-optimised DGX) counts
  from whichever of its switches gives the shortest path.
* `level`: 0 same host, 1 the hosts share a switch (same leaf), 2 they have
  switches in the same pod (same spine group), 3 only the core joins them,
  4 unreachable.

Cost. Build only groups hosts by the set of switches they are cabled to (all hosts
of a leaf, or of a rail-optimised scalable unit, share one group) and keeps each
switch's live neighbours. A query is two dict look-ups and a cache hit; the first
query for a pair of groups walks up from both groups (leaf -> spines -> cores,
by tier) and meets in the middle with set intersections, so the cost is paid once
per pair of groups, not per pair of hosts. Links that are down do not count.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from fabric.topology.graph import FabricGraph
from fabric.topology.tiers import Tiers, detect_tiers
from fabric.topology.types import Fabric

LEVEL_SAME_HOST = 0
LEVEL_LEAF = 1
LEVEL_POD = 2
LEVEL_CORE = 3
LEVEL_UNREACHABLE = 4


@dataclass(frozen=True, slots=True)
class Distance:
    hops: int  # links on the shortest up/down path, host links included; -1 when unreachable
    level: int  # LEVEL_SAME_HOST .. LEVEL_UNREACHABLE

    @property
    def reachable(self) -> bool:
        return self.hops >= 0


UNREACHABLE = Distance(-1, LEVEL_UNREACHABLE)
SAME_HOST = Distance(0, LEVEL_SAME_HOST)


class HopIndex:
    def __init__(self, graph: FabricGraph, tiers: Tiers) -> None:
        self._graph = graph
        self._tiers = tiers
        self._nbrs: list[frozenset[int]] = [frozenset(w for w, _ in adj) for adj in graph.sw_adj]
        group_of_set: dict[frozenset[int], int] = {}
        self._group: dict[str, int] = {}
        self._group_switches: list[frozenset[int]] = []
        for h, links in enumerate(graph.host_links):
            sws = frozenset(s for s, _ in links)
            g = group_of_set.get(sws)
            if g is None:
                g = group_of_set[sws] = len(self._group_switches)
                self._group_switches.append(sws)
            self._group[graph.host_keys[h]] = g
        self._group_pods = [frozenset(tiers.pod[s] for s in sws if tiers.pod[s] >= 0) for sws in self._group_switches]
        self._up: list[list[frozenset[int]] | None] = [None] * len(self._group_switches)
        self._cache: dict[int, Distance] = {}

    @classmethod
    def build(cls, fabric: Fabric) -> HopIndex:
        graph = FabricGraph.build(fabric)
        return cls(graph, detect_tiers(graph))

    @classmethod
    def from_graph(cls, graph: FabricGraph, tiers: Tiers) -> HopIndex:
        return cls(graph, tiers)

    @property
    def hosts(self) -> list[str]:
        return list(self._graph.host_keys)

    def switches_of(self, host: str) -> list[str]:
        """Keys of the switches `host` has a live link to (its leaves), in index order."""
        return [self._graph.switch_keys[s] for s in sorted(self._group_switches[self._group_of(host)])]

    def distance(self, host_a: str, host_b: str) -> Distance:
        if host_a == host_b:
            self._group_of(host_a)
            return SAME_HOST
        ga, gb = self._group_of(host_a), self._group_of(host_b)
        if ga > gb:
            ga, gb = gb, ga
        key = ga * len(self._group_switches) + gb
        d = self._cache.get(key)
        if d is None:
            d = self._cache[key] = self._group_distance(ga, gb)
        return d

    def _group_of(self, host: str) -> int:
        try:
            return self._group[host]
        except KeyError:
            raise KeyError(f"unknown host {host!r}") from None

    def _group_distance(self, ga: int, gb: int) -> Distance:
        sa, sb = self._group_switches[ga], self._group_switches[gb]
        if not sa or not sb:
            return UNREACHABLE
        if not sa.isdisjoint(sb):
            return Distance(2, LEVEL_LEAF)
        level = LEVEL_POD if not self._group_pods[ga].isdisjoint(self._group_pods[gb]) else LEVEL_CORE
        up_a, up_b = self._ancestors(ga), self._ancestors(gb)
        # Meet in the middle: the smallest t = i + j with up_a[i] and up_b[j] sharing a switch.
        for t in range(1, len(up_a) + len(up_b) - 1):
            for i in range(max(0, t - len(up_b) + 1), min(t, len(up_a) - 1) + 1):
                if not up_a[i].isdisjoint(up_b[t - i]):
                    return Distance(t + 2, level)
        # No common ancestor (lateral cables, tiers that do not nest): plain shortest path.
        t = self._bfs(sa, sb)
        return Distance(t + 2, level) if t >= 0 else UNREACHABLE

    def _ancestors(self, g: int) -> list[frozenset[int]]:
        """Switches reachable from the group by going strictly up the tiers, by distance."""
        cached = self._up[g]
        if cached is not None:
            return cached
        level = self._tiers.level
        frontier = self._group_switches[g]
        seen = set(frontier)
        out = [frontier]
        while frontier:
            nxt = set()
            for v in frontier:
                lv = level[v]
                if lv < 0:
                    continue
                for w in self._nbrs[v]:
                    if level[w] > lv and w not in seen:
                        nxt.add(w)
            seen |= nxt
            frontier = frozenset(nxt)
            if frontier:
                out.append(frontier)
        self._up[g] = out
        return out

    def _bfs(self, sources: frozenset[int], targets: frozenset[int]) -> int:
        dist = dict.fromkeys(sources, 0)
        queue = deque(sources)
        while queue:
            v = queue.popleft()
            for w in self._nbrs[v]:
                if w not in dist:
                    if w in targets:
                        return dist[v] + 1
                    dist[w] = dist[v] + 1
                    queue.append(w)
        return -1
