"""The fabric report: `analyse(fabric)` runs every analysis once over one graph.

`FabricReport.to_dict()` is JSON-safe (no inf/NaN, only dicts, lists, str, numbers,
bools and None) with stable keys and lists in a fixed order, for the API and for
snapshots; `render_text(report)` is the same in aligned tables for a terminal.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from fabric.topology.bisection import BisectionReport, bisection_bandwidth
from fabric.topology.degraded import DegradedLink, degraded_links
from fabric.topology.graph import SWITCH_SWITCH, FabricGraph, natural_key
from fabric.topology.oversubscription import OversubscriptionReport, leaf_oversubscription
from fabric.topology.spof import SpofReport, find_spofs
from fabric.topology.tiers import LEAF, TIER_ORDER, Tiers, detect_tiers
from fabric.topology.types import Fabric


@dataclass(slots=True)
class SwitchTier:
    switch: str  # key
    name: str
    tier: str  # leaf / spine / core / unknown
    source: str  # "operator" or "detected"
    level: int  # 0 leaf, 1 spine, 2+ core, -1 unknown
    pod: int | None  # None for core / unknown switches
    hosts: int  # distinct hosts cabled to it (links up or down)
    host_ports: int  # host cables (up or down)
    switch_links: int  # live cables to other switches
    uplinks: int  # live cables to a higher tier


@dataclass(slots=True)
class TierReport:
    switches: list[SwitchTier]  # natural name order
    pods: int
    hosts_per_leaf: dict[str, int]  # leaf name -> hosts, natural name order
    non_leaf_with_hosts: list[str]  # spines/cores that also carry host cables (e.g. storage on a spine)


@dataclass(slots=True)
class Counts:
    switches: int
    switches_by_tier: dict[str, int]  # every tier in TIER_ORDER, zero included
    hosts: int
    hosts_by_role: dict[str, int]  # sorted by role
    links: int
    links_up: int
    links_down: int
    host_links: int  # host-switch cables, up or down
    switch_links: int  # switch-switch cables, up or down
    host_facing_gbps: float  # sum of the data rates of the live host links
    unreachable_hosts: int


@dataclass(slots=True)
class FabricReport:
    counts: Counts
    tiers: TierReport
    oversubscription: OversubscriptionReport
    bisection: BisectionReport
    spof: SpofReport
    degraded_links: list[DegradedLink]

    def to_dict(self) -> dict[str, Any]:
        return _json_safe(asdict(self))


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def analyse(fabric: Fabric) -> FabricReport:
    graph = FabricGraph.build(fabric)
    tiers = detect_tiers(graph)
    return analyse_graph(graph, tiers)


def analyse_graph(graph: FabricGraph, tiers: Tiers) -> FabricReport:
    """Same as `analyse` for callers that already hold the graph (e.g. to build a HopIndex from it too)."""
    spof = find_spofs(graph, tiers)
    return FabricReport(
        counts=_counts(graph, tiers, len(spof.unreachable_hosts)),
        tiers=_tier_report(graph, tiers),
        oversubscription=leaf_oversubscription(graph, tiers),
        bisection=bisection_bandwidth(graph, tiers),
        spof=spof,
        degraded_links=degraded_links(graph, tiers),
    )


def _counts(graph: FabricGraph, tiers: Tiers, unreachable: int) -> Counts:
    by_tier = dict.fromkeys(TIER_ORDER, 0)
    for r in tiers.role:
        by_tier[r] += 1
    roles = Counter(graph.host_roles)
    up = sum(1 for link in graph.links if link.up)
    n_switch_links = sum(1 for k in graph.link_kind if k == SWITCH_SWITCH)
    host_links = sum(len(x) for x in graph.host_links_all)
    host_gbps = sum(graph.links[li].capacity_gbps for hl in graph.host_links for _, li in hl)
    return Counts(
        switches=graph.n_switches,
        switches_by_tier=by_tier,
        hosts=graph.n_hosts,
        hosts_by_role=dict(sorted(roles.items())),
        links=len(graph.links),
        links_up=up,
        links_down=len(graph.links) - up,
        host_links=host_links,
        switch_links=n_switch_links,
        host_facing_gbps=host_gbps,
        unreachable_hosts=unreachable,
    )


def _tier_report(graph: FabricGraph, tiers: Tiers) -> TierReport:
    rows: list[SwitchTier] = []
    for s in graph.switch_order():
        rows.append(
            SwitchTier(
                switch=graph.switch_keys[s],
                name=graph.switch_names[s],
                tier=tiers.role[s],
                source=tiers.source[s],
                level=tiers.level[s],
                pod=tiers.pod[s] if tiers.pod[s] >= 0 else None,
                hosts=len({h for h, _ in graph.sw_hosts_all[s]}),
                host_ports=len(graph.sw_hosts_all[s]),
                switch_links=len(graph.sw_adj[s]),
                uplinks=sum(1 for w, _ in graph.sw_adj[s] if tiers.is_uplink(s, w)),
            )
        )
    return TierReport(
        switches=rows,
        pods=tiers.n_pods,
        hosts_per_leaf={r.name: r.hosts for r in rows if r.tier == LEAF},
        non_leaf_with_hosts=[r.name for r in rows if r.tier != LEAF and r.host_ports],
    )


# --- text -------------------------------------------------------------------------------------------------------


def render_text(report: FabricReport, max_rows: int | None = 60, max_names: int = 6) -> str:
    """Aligned tables for a terminal. Tables longer than `max_rows` are cut with a "... N more" line
    (None: print all); host lists show `max_names` names then "+N more"."""
    out: list[str] = []
    c = report.counts
    tiers = ", ".join(f"{t} {n}" for t, n in c.switches_by_tier.items() if n or t != "unknown")
    roles = ", ".join(f"{r} {n}" for r, n in c.hosts_by_role.items())
    out += _title("Fabric report")
    out.append(f"Switches: {c.switches} ({tiers})   pods: {report.tiers.pods}")
    out.append(f"Hosts: {c.hosts} ({roles or 'none'})   unreachable: {c.unreachable_hosts}")
    out.append(
        f"Links: {c.links} (up {c.links_up}, down {c.links_down}; host {c.host_links}, "
        f"inter-switch {c.switch_links})   host-facing capacity: {_gbps(c.host_facing_gbps)}"
    )

    out += _title("Switch tiers")
    out += _table(
        ["SWITCH", "TIER", "SOURCE", "POD", "HOSTS", "HOST PORTS", "SWITCH LINKS", "UPLINKS"],
        [
            [
                r.name,
                r.tier,
                r.source,
                "-" if r.pod is None else r.pod,
                r.hosts,
                r.host_ports,
                r.switch_links,
                r.uplinks,
            ]
            for r in report.tiers.switches
        ],
        max_rows,
    )
    if report.tiers.non_leaf_with_hosts:
        out.append(f"Non-leaf switches carrying hosts: {', '.join(report.tiers.non_leaf_with_hosts)}")

    o = report.oversubscription
    out += _title("Leaf oversubscription (host-facing / uplink, live links)")
    out += _table(
        ["LEAF", "HOSTS", "HOST Gb/s", "UPLINKS", "UPLINK Gb/s", "RATIO"],
        [[r.name, r.hosts, _num(r.host_gbps), r.uplinks, _num(r.uplink_gbps), _ratio(r.ratio)] for r in o.leaves],
        max_rows,
    )
    if o.worst is not None:
        out.append(f"Worst leaf: {o.worst} at {_ratio(o.worst_ratio)}")

    b = report.bisection
    out += _title("Bisection bandwidth")
    full = "n/a" if b.ratio is None else f"{b.ratio:.2f}"
    out.append(f"{_gbps(b.gbps)} from half A to half B: {full} of full bisection")
    out.append(
        f"Half A: {b.half_a_ports} host ports, {_gbps(b.half_a_gbps)}, on {_names(b.half_a_switches, max_names * 2)}"
    )
    out.append(
        f"Half B: {b.half_b_ports} host ports, {_gbps(b.half_b_gbps)}, on {_names(b.half_b_switches, max_names * 2)}"
    )

    s = report.spof
    out += _title("Single points of failure")
    out.append("   ".join(f"{scope}: {n}" for scope, n in s.by_scope.items()))
    host_link = s.by_scope.get("host-link", 0)
    if host_link:
        out.append(f"{host_link} hosts are single-homed: their only link is a SPOF (not listed one by one).")
    sw_rows = [
        [x.name, x.tier, x.scope, len(x.hosts), _hosts_cell(x.hosts, x.storage_hosts, max_names)] for x in s.switches
    ]
    if sw_rows:
        out.append("Switches:")
        out += _table(["SWITCH", "TIER", "SCOPE", "CUTS OFF", "HOSTS"], sw_rows, max_rows)
    fabric_links = [x for x in s.links if x.scope != "host-link"]
    if fabric_links:
        out.append("Inter-switch links:")
        out += _table(
            ["LINK", "A", "B", "CUTS OFF", "HOSTS"],
            [[x.link, x.a, x.b, len(x.hosts), _hosts_cell(x.hosts, x.storage_hosts, max_names)] for x in fabric_links],
            max_rows,
        )
    if not sw_rows and not fabric_links and not host_link:
        out.append("None: every host survives the loss of any one switch or link.")
    if s.unreachable_hosts:
        out.append(f"Already unreachable: {_names(s.unreachable_hosts, max_names)}")
    out.append("Leaves with a single uplink path:" + ("" if s.single_uplink_leaves else " none"))
    if s.single_uplink_leaves:
        out += _table(
            ["LEAF", "UPLINKS", "TO", "HOSTS"],
            [
                [x.name, x.uplinks, ", ".join(x.uplink_switches) or "-", _names(x.hosts, max_names)]
                for x in s.single_uplink_leaves
            ],
            max_rows,
        )

    out += _title("Degraded links")
    if report.degraded_links:
        out += _table(
            ["A", "B", "CLASS", "Gb/s", "EXPECTED", "REASON"],
            [
                [d.a, d.b, d.link_class, _num(d.capacity_gbps), _num(d.expected_gbps), d.reason]
                for d in report.degraded_links
            ],
            max_rows,
        )
    else:
        out.append("None.")
    return "\n".join(out).lstrip("\n") + "\n"


_NUMERIC = re.compile(r"^-?\d+(\.\d+)?(:1)?$")


def _title(text: str) -> list[str]:
    return ["", text, "-" * len(text)]


def _table(headers: list[str], rows: list[list[Any]], max_rows: int | None) -> list[str]:
    shown = rows if max_rows is None or len(rows) <= max_rows else rows[:max_rows]
    cells = [[str(v) for v in row] for row in shown]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    # Numbers (and "2.40:1" ratios) right-aligned, text left-aligned, decided per column.
    numeric = [bool(cells) and all(_NUMERIC.match(r[i]) for r in cells) for i in range(len(headers))]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    lines = [line(headers), line(["-" * w for w in widths])]
    lines += [line(r) for r in cells]
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more rows")
    return lines


def _names(names: list[str], limit: int) -> str:
    names = sorted(names, key=natural_key)
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" +{len(names) - limit} more"


def _hosts_cell(hosts: list[str], storage: list[str], limit: int) -> str:
    text = _names(hosts, limit)
    return f"{text} (storage: {_names(storage, limit)})" if storage else text


def _num(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.1f}"


def _gbps(x: float) -> str:
    return f"{_num(x)} Gb/s"


def _ratio(r: float | None) -> str:
    return "no uplinks" if r is None else f"{r:.2f}:1"
