"""The fabric report's figures and text on small fabrics, every expected value worked out by hand."""

from __future__ import annotations

from fabric.topology.report import _json_safe, analyse, render_text
from tests.fabric.topology.factories import FabricBuilder, two_tier


def _small() -> FabricBuilder:
    # core1 over spine1 and spine2; leaf1 and leaf2 under both spines; h1 on leaf1, h2 and h3 (its cable down)
    # on leaf2, storage tank1 on spine1. 10 cables: 4 leaf-spine, 2 spine-core, 4 host (one down).
    b = FabricBuilder()
    core = b.switch("core1")
    spines = [b.switch("spine1"), b.switch("spine2")]
    for sp in spines:
        b.link(sp, core)
    for name in ("leaf1", "leaf2"):
        leaf = b.switch(name)
        for sp in spines:
            b.link(leaf, sp)
    b.link(b.host("h1"), "guid-leaf1")
    b.link(b.host("h2"), "guid-leaf2")
    b.link(b.host("h3"), "guid-leaf2", up=False)
    b.link(b.host("tank1", role="storage"), spines[0])
    return b


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_the_counts_of_the_small_fabric():
    c = analyse(_small().fabric).counts
    assert (c.switches, c.hosts, c.links, c.links_up, c.links_down, c.host_links, c.switch_links) == (
        5, 4, 10, 9, 1, 4, 6
    )  # fmt: skip
    assert c.switches_by_tier == {"leaf": 2, "spine": 2, "core": 1, "unknown": 0}
    assert c.hosts_by_role == {"compute": 3, "storage": 1}
    assert (c.host_facing_gbps, c.unreachable_hosts) == (1200.0, 1)


def test_the_tier_rows_of_the_small_fabric():
    # (name, tier, level, pod, hosts, host ports, live switch links, uplinks): core1 is in no pod; a spine
    # has 1 uplink (core1) of its 3 live switch links; h3's cable is down but counts as a host port.
    rows = analyse(_small().fabric).tiers.switches
    assert [(r.name, r.tier, r.level, r.pod, r.hosts, r.host_ports, r.switch_links, r.uplinks) for r in rows] == [
        ("core1", "core", 2, None, 0, 0, 2, 0),
        ("leaf1", "leaf", 0, 0, 1, 1, 2, 2),
        ("leaf2", "leaf", 0, 0, 2, 2, 2, 2),
        ("spine1", "spine", 1, 0, 1, 1, 3, 1),
        ("spine2", "spine", 1, 0, 0, 0, 3, 1),
    ]


def test_the_text_of_the_small_fabric():
    text = render_text(analyse(_small().fabric))
    lines = _lines(text)
    assert lines[:5] == [
        "Fabric report",
        "-------------",
        "Switches: 5 (leaf 2, spine 2, core 1)   pods: 1",
        "Hosts: 4 (compute 3, storage 1)   unreachable: 1",
        "Links: 10 (up 9, down 1; host 4, inter-switch 6)   host-facing capacity: 1200 Gb/s",
    ]
    table = lines[lines.index("Switch tiers") + 2 :][:7]
    assert [row.split() for row in table[2:]] == [
        ["core1", "core", "detected", "-", "0", "0", "2", "0"],
        ["leaf1", "leaf", "detected", "0", "1", "1", "2", "2"],
        ["leaf2", "leaf", "detected", "0", "2", "2", "2", "2"],
        ["spine1", "spine", "detected", "0", "1", "1", "3", "1"],
        ["spine2", "spine", "detected", "0", "0", "0", "3", "1"],
    ]
    assert "Non-leaf switches carrying hosts: spine1" in lines
    assert "Already unreachable: h3" in lines
    # Three single-homed hosts (h1, h2, tank1): their links are host-link SPOFs, not listed one by one;
    # no inter-switch link is one (every leaf has two spines), so there is no such table, and no "None".
    assert "3 hosts are single-homed: their only link is a SPOF (not listed one by one)." in lines
    assert "Inter-switch links:" not in lines
    assert not any(line.startswith("None: every host survives") for line in lines)
    assert "Leaves with a single uplink path: none" in lines
    assert "more rows" not in text


def test_a_fabric_without_a_core_still_names_the_core_tier():
    assert "Switches: 3 (leaf 2, spine 1, core 0)   pods: 1" in _lines(render_text(analyse(two_tier(2, 1, 1).fabric)))


def test_switches_of_unknown_tier_are_counted_when_there_are_some():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1)
    b.link(b.switch("isl1"), b.switch("isl2"))
    assert "Switches: 4 (leaf 1, spine 1, core 0, unknown 2)   pods: 1" in _lines(render_text(analyse(b.fabric)))


def test_a_fabric_without_hosts():
    b = FabricBuilder()
    b.link(b.switch("leaf1"), b.switch("spine1"))
    lines = _lines(render_text(analyse(b.fabric)))
    assert "Hosts: 0 (none)   unreachable: 0" in lines
    assert "0 Gb/s from half A to half B: n/a of full bisection" in lines


def test_single_uplink_leaves_and_inter_switch_spofs_are_tabled():
    # One spine: each leaf's one uplink is a SPOF for its two hosts, and so is the spine.
    lines = _lines(render_text(analyse(two_tier(leaves=2, spines=1, hosts_per_leaf=2, links_per_pair=1).fabric)))
    assert "Inter-switch links:" in lines
    at = lines.index("Leaves with a single uplink path:")
    assert [row.split(maxsplit=3) for row in lines[at + 3 : at + 5]] == [
        ["leaf1", "1", "spine1", "h1-1, h1-2"],
        ["leaf2", "1", "spine1", "h2-1, h2-2"],
    ]


def test_a_leaf_without_any_uplink_goes_to_a_dash():
    b = FabricBuilder()
    b.link(b.host("h1"), b.switch("leaf1"))
    lines = _lines(render_text(analyse(b.fabric)))
    at = lines.index("Leaves with a single uplink path:")
    assert lines[at + 3].split() == ["leaf1", "0", "-", "h1"]


def _leaf_spof_hosts_cell(hosts: int) -> str:
    # One leaf under one spine: the leaf is a SPOF for all its hosts; the row ends with the hosts cell.
    lines = _lines(render_text(analyse(two_tier(leaves=1, spines=1, hosts_per_leaf=hosts).fabric)))
    at = lines.index("Switches:")
    row = next(line for line in lines[at + 3 :] if line.startswith("leaf1"))
    return row.split(maxsplit=4)[4]


def test_six_hosts_are_all_named():
    assert _leaf_spof_hosts_cell(6) == "h1-1, h1-2, h1-3, h1-4, h1-5, h1-6"


def test_a_seventh_host_is_counted():
    assert _leaf_spof_hosts_cell(7) == "h1-1, h1-2, h1-3, h1-4, h1-5, h1-6 +1 more"


def test_each_half_of_the_bisection_names_twelve_switches():
    # 26 leaves with one host each: half A = leaf1..leaf13, half B = leaf14..leaf26; 12 names each, +1 more.
    lines = _lines(render_text(analyse(two_tier(leaves=26, spines=1, hosts_per_leaf=1).fabric)))
    half_a = next(line for line in lines if line.startswith("Half A:"))
    half_b = next(line for line in lines if line.startswith("Half B:"))
    assert half_a.endswith("on " + ", ".join(f"leaf{i}" for i in range(1, 13)) + " +1 more")
    assert half_b.endswith("on " + ", ".join(f"leaf{i}" for i in range(14, 26)) + " +1 more")


def test_sixty_rows_are_printed_in_full():
    # 59 leaves + 1 spine = 60 switch rows: none cut.
    text = render_text(analyse(two_tier(leaves=59, spines=1, hosts_per_leaf=1, links_per_pair=2).fabric))
    assert "more rows" not in text


def test_the_sixty_first_row_is_cut():
    lines = _lines(render_text(analyse(two_tier(leaves=60, spines=1, hosts_per_leaf=1, links_per_pair=2).fabric)))
    at = lines.index("Switch tiers")
    assert lines[at + 2 + 2 + 60] == "... 1 more rows"


def test_json_safe_turns_keys_to_text_and_infinities_to_none():
    assert _json_safe({1: [float("inf"), (2, float("nan"))], "x": {"y": -float("inf")}}) == {
        "1": [None, [2, None]],
        "x": {"y": None},
    }
