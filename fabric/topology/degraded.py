"""Degraded links: down, of unknown speed, or running slower than they should.

An up link is degraded when its data rate is
* below `supported_gbps` (the best rate both ends support, when known): it trained
  down, usually a bad cable or a dirty connector; or
* below the usual rate of its class: the most common rate among up links of the
  same kind (host links, leaf-spine, spine-core, ...; ties go to the faster rate).
  This catches a link that trained to 2x or QDR in an HDR fabric when the inventory
  does not know what the ports support.
A link that is down is listed as such; one whose speed the fabric did not report
("4x???", capacity 0) is listed as "speed unknown". A loopback (a switch cabled to itself)
is always listed: it carries no traffic and is never routed over.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from fabric.topology.graph import HOST_HOST, HOST_SWITCH, LOOPBACK, FabricGraph, natural_key
from fabric.topology.tiers import TIER_ORDER, Tiers

_RANK = {t: i for i, t in enumerate(TIER_ORDER)}


@dataclass(slots=True)
class DegradedLink:
    link: str  # key
    a: str  # end names
    b: str
    link_class: str  # "host", "leaf-spine", "spine-core", ...
    up: bool
    capacity_gbps: float
    expected_gbps: float  # what it should run at (0 when unknown)
    reason: str  # "down", "speed unknown", or why the rate is low (several joined by "; ")


def link_class(graph: FabricGraph, tiers: Tiers, li: int) -> str:
    kind = graph.link_kind[li]
    if kind == HOST_SWITCH:
        return "host"
    if kind == HOST_HOST:
        return "host-host"
    if kind == LOOPBACK:
        return "loopback"
    ra, rb = tiers.role[graph.end_a[li]], tiers.role[graph.end_b[li]]
    if _RANK[ra] > _RANK[rb]:
        ra, rb = rb, ra
    return f"{ra}-{rb}"


def usual_rates(graph: FabricGraph, tiers: Tiers, classes: list[str] | None = None) -> dict[str, float]:
    """Most common data rate among up links of each class (faster wins ties)."""
    if classes is None:
        classes = [link_class(graph, tiers, li) for li in range(len(graph.links))]
    counts: dict[str, Counter[float]] = {}
    for link, cls in zip(graph.links, classes, strict=True):
        if link.up and link.capacity_gbps > 0:
            c = counts.get(cls)
            if c is None:
                c = counts[cls] = Counter()
            c[link.capacity_gbps] += 1
    return {cls: max(c.items(), key=lambda kv: (kv[1], kv[0]))[0] for cls, c in counts.items()}


def degraded_links(graph: FabricGraph, tiers: Tiers) -> list[DegradedLink]:
    classes = [link_class(graph, tiers, li) for li in range(len(graph.links))]
    usual = usual_rates(graph, tiers, classes)
    rows: list[DegradedLink] = []
    for li, link in enumerate(graph.links):
        cls = classes[li]
        cap = link.capacity_gbps
        usual_cap = usual.get(cls, 0.0)
        if link.up and 0 < cap and cap >= link.supported_gbps and cap >= usual_cap and cls != "loopback":
            continue  # the common case, decided without building strings
        reasons: list[str] = []
        if cls == "loopback":
            reasons.append("loopback: a switch cabled to itself, never routed over")
        elif not link.up:
            reasons.append("down")
        elif cap <= 0:
            reasons.append("speed unknown")
        else:
            if link.supported_gbps > cap:
                reasons.append(f"runs at {cap:g} Gb/s, both ends support {link.supported_gbps:g}")
            if usual_cap > cap:
                reasons.append(f"runs at {cap:g} Gb/s, {cls} links usually run at {usual_cap:g}")
        a, b = graph.link_names(li)
        expected = max(link.supported_gbps, usual_cap)
        rows.append(DegradedLink(link.key, a, b, cls, link.up, cap, expected, "; ".join(reasons)))
    rows.sort(key=lambda r: (natural_key(r.a), natural_key(r.b), r.link))
    return rows
