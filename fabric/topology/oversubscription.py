"""Leaf oversubscription: host-facing capacity over uplink capacity, in Gb/s.

Only links that are up count, on both sides: a leaf that lost two uplinks is more
oversubscribed now, which is what placement must price. Uplinks are cables to a
switch of a higher tier (leaf-to-leaf cables are neither). A leaf without any
uplink has no finite ratio: `ratio` is None and `no_uplinks` is set.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric.topology.graph import FabricGraph
from fabric.topology.tiers import LEAF, Tiers


@dataclass(slots=True)
class LeafOversubscription:
    switch: str  # key
    name: str
    hosts: int  # distinct hosts with a live link to this leaf
    host_gbps: float
    uplinks: int
    uplink_gbps: float
    ratio: float | None  # host_gbps / uplink_gbps; None when there is no uplink capacity
    no_uplinks: bool


@dataclass(slots=True)
class OversubscriptionReport:
    leaves: list[LeafOversubscription]
    worst: str | None  # name of the worst leaf (a leaf without uplinks beats any ratio)
    worst_ratio: float | None  # None when the worst leaf has no uplinks or there are no leaves


def leaf_oversubscription(graph: FabricGraph, tiers: Tiers) -> OversubscriptionReport:
    rows: list[LeafOversubscription] = []
    links = graph.links
    for s in graph.switch_order():
        if tiers.role[s] != LEAF:
            continue
        host_gbps = sum(links[li].capacity_gbps for _, li in graph.sw_hosts[s])
        hosts = len({h for h, _ in graph.sw_hosts[s]})
        ups = [li for w, li in graph.sw_adj[s] if tiers.is_uplink(s, w)]
        up_gbps = sum(links[li].capacity_gbps for li in ups)
        ratio = host_gbps / up_gbps if up_gbps > 0 else None
        rows.append(
            LeafOversubscription(
                switch=graph.switch_keys[s],
                name=graph.switch_names[s],
                hosts=hosts,
                host_gbps=host_gbps,
                uplinks=len(ups),
                uplink_gbps=up_gbps,
                ratio=ratio,
                no_uplinks=up_gbps <= 0,
            )
        )
    worst: LeafOversubscription | None = None
    for row in rows:
        if worst is None or _severity(row) > _severity(worst):
            worst = row
    return OversubscriptionReport(
        leaves=rows,
        worst=worst.name if worst else None,
        worst_ratio=worst.ratio if worst else None,
    )


def _severity(row: LeafOversubscription) -> tuple[bool, float]:
    # No uplinks is worse than any ratio, but only when the leaf has hosts to strand.
    # Rows come in name order and only a strictly worse row replaces the current one,
    # so ties go to the first name and the answer is stable.
    return (row.no_uplinks and row.host_gbps > 0, row.ratio or 0.0)
