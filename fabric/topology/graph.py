"""Adjacency of a `Fabric`, built once and indexed by small integers.

Every analysis (tiers, oversubscription, bisection, SPOFs, distances) reads this
structure instead of the raw link list, so the fabric is walked once per report.
Switches are numbered 0..S-1 and hosts 0..H-1 in two separate index spaces: a host
is never a transit vertex (an HCA does not forward packets), so the analyses treat
the switch graph as the fabric and hosts as endpoints hanging off it.

Two views are kept: `*_all` holds every link, including links that are down
(structure: what the fabric is built as, used to detect tiers); the plain names
hold only links that are up (state: what carries traffic now).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabric.topology.types import Fabric, TLink

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[object, ...]:
    """Sort key that orders "ib2" before "ib10" and "leaf9" before "leaf10"."""
    return tuple(int(part) if part.isdigit() else part.lower() for part in _DIGITS.split(text))


# Link kinds, by what its two ends are.
SWITCH_SWITCH = 0
HOST_SWITCH = 1
HOST_HOST = 2  # back-to-back cable between two servers: no fabric path, ignored by the analyses
# A cable between two ports of one switch (a test plug, a miscabling): kept so reports can flag it,
# in no adjacency list, so no path, tier, SPOF or bandwidth figure ever goes over it.
LOOPBACK = 3


@dataclass(slots=True)
class FabricGraph:
    fabric: Fabric
    switch_keys: list[str]
    switch_names: list[str]
    switch_roles: list[str]  # operator-set role per switch ("" = detect)
    switch_index: dict[str, int]
    host_keys: list[str]
    host_roles: list[str]
    host_index: dict[str, int]
    links: list[TLink]
    # Per link: kind and the two ends as indices. For HOST_SWITCH links `end_a` is the
    # switch and `end_b` the host whatever the order in the TLink; for HOST_HOST both are hosts;
    # for LOOPBACK both are the one switch.
    link_kind: list[int]
    end_a: list[int]
    end_b: list[int]
    # Switch -> [(neighbour switch, link index)], one entry per link (parallel links repeat).
    sw_adj_all: list[list[tuple[int, int]]] = field(default_factory=list)
    sw_adj: list[list[tuple[int, int]]] = field(default_factory=list)
    # Switch -> [(host, link index)] and host -> [(switch, link index)].
    sw_hosts_all: list[list[tuple[int, int]]] = field(default_factory=list)
    sw_hosts: list[list[tuple[int, int]]] = field(default_factory=list)
    host_links_all: list[list[tuple[int, int]]] = field(default_factory=list)
    host_links: list[list[tuple[int, int]]] = field(default_factory=list)
    # Indices of LOOPBACK links (a switch cabled to itself), in link order.
    loopbacks: list[int] = field(default_factory=list)
    # natural_key of each switch name / hostname, computed once for the many sorts of a report.
    switch_sort: list[tuple[object, ...]] = field(default_factory=list)
    host_sort: list[tuple[object, ...]] = field(default_factory=list)

    @classmethod
    def build(cls, fabric: Fabric) -> FabricGraph:
        """Index the fabric. Raises ValueError naming the problem on duplicate keys or dangling links."""
        switch_index: dict[str, int] = {}
        for sw in fabric.switches:
            if sw.key in switch_index:
                raise ValueError(f"switch key {sw.key!r} appears twice")
            switch_index[sw.key] = len(switch_index)
        host_index: dict[str, int] = {}
        for h in fabric.hosts:
            if h.key in host_index:
                raise ValueError(f"host key {h.key!r} appears twice")
            if h.key in switch_index:
                raise ValueError(f"key {h.key!r} names both a switch and a host")
            host_index[h.key] = len(host_index)

        n_sw, n_host = len(switch_index), len(host_index)
        g = cls(
            fabric=fabric,
            switch_keys=[s.key for s in fabric.switches],
            switch_names=[s.name or s.key for s in fabric.switches],
            switch_roles=[s.role for s in fabric.switches],
            switch_index=switch_index,
            host_keys=[h.key for h in fabric.hosts],
            host_roles=[h.role for h in fabric.hosts],
            host_index=host_index,
            links=list(fabric.links),
            link_kind=[],
            end_a=[],
            end_b=[],
            sw_adj_all=[[] for _ in range(n_sw)],
            sw_adj=[[] for _ in range(n_sw)],
            sw_hosts_all=[[] for _ in range(n_sw)],
            sw_hosts=[[] for _ in range(n_sw)],
            host_links_all=[[] for _ in range(n_host)],
            host_links=[[] for _ in range(n_host)],
        )
        g.switch_sort = [natural_key(name) for name in g.switch_names]
        g.host_sort = [natural_key(key) for key in g.host_keys]
        kind, end_a, end_b = g.link_kind, g.end_a, g.end_b
        sw_get, host_get = switch_index.get, host_index.get
        for li, link in enumerate(g.links):
            sa, sb = sw_get(link.a), sw_get(link.b)
            if sa is not None and sb is not None:
                if sa == sb:
                    kind.append(LOOPBACK)
                    end_a.append(sa)
                    end_b.append(sb)
                    g.loopbacks.append(li)
                    continue
                kind.append(SWITCH_SWITCH)
                end_a.append(sa)
                end_b.append(sb)
                g.sw_adj_all[sa].append((sb, li))
                g.sw_adj_all[sb].append((sa, li))
                if link.up:
                    g.sw_adj[sa].append((sb, li))
                    g.sw_adj[sb].append((sa, li))
                continue
            ha, hb = host_get(link.a), host_get(link.b)
            if sa is not None and hb is not None:
                s, h = sa, hb
            elif sb is not None and ha is not None:
                s, h = sb, ha
            elif ha is not None and hb is not None:
                kind.append(HOST_HOST)
                end_a.append(ha)
                end_b.append(hb)
                continue
            else:
                missing = link.a if sa is None and ha is None else link.b
                raise ValueError(f"link {link.key!r} names {missing!r}, which is neither a switch nor a host")
            kind.append(HOST_SWITCH)
            end_a.append(s)
            end_b.append(h)
            g.sw_hosts_all[s].append((h, li))
            g.host_links_all[h].append((s, li))
            if link.up:
                g.sw_hosts[s].append((h, li))
                g.host_links[h].append((s, li))
        return g

    @property
    def n_switches(self) -> int:
        return len(self.switch_keys)

    @property
    def n_hosts(self) -> int:
        return len(self.host_keys)

    def link_names(self, li: int) -> tuple[str, str]:
        """Display names of a link's two ends (switch name or hostname), in the TLink's order."""
        link = self.links[li]
        return self.vertex_name(link.a), self.vertex_name(link.b)

    def vertex_name(self, key: str) -> str:
        i = self.switch_index.get(key)
        return self.switch_names[i] if i is not None else key

    def switch_order(self) -> list[int]:
        """Switch indices in natural name order (ties by key): the order every report lists them in."""
        return sorted(range(self.n_switches), key=lambda i: (self.switch_sort[i], self.switch_keys[i]))
