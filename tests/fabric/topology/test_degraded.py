from fabric.topology.degraded import DegradedLink, degraded_links
from fabric.topology.graph import FabricGraph
from fabric.topology.tiers import detect_tiers
from tests.fabric.topology.factories import FabricBuilder, two_tier


def degraded(b: FabricBuilder) -> list[DegradedLink]:
    g = FabricGraph.build(b.fabric)
    return degraded_links(g, detect_tiers(g))


def test_healthy_fabric_has_none():
    assert degraded(two_tier()) == []


def test_host_and_switch_links_have_their_own_usual_rate():
    # QDR hosts and FDR10 inter-switch cables, as in the SX6036 fabric: nothing is degraded.
    assert degraded(two_tier(host_gbps=32.0, up_gbps=40.0)) == []


def test_link_below_its_supported_rate():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1, links_per_pair=1)
    b.link(b.host("slow"), "guid-leaf1", 200.0, supported=400.0)
    rows = degraded(b)
    assert [(r.a, r.b, r.capacity_gbps, r.expected_gbps) for r in rows] == [("slow", "leaf1", 200.0, 400.0)]
    assert "both ends support 400" in rows[0].reason


def test_link_below_the_usual_rate_of_its_tier():
    b = two_tier(leaves=2, spines=2, links_per_pair=2)
    b.link("guid-leaf2", "guid-spine1", 100.0)  # trained to 1x
    rows = degraded(b)
    assert len(rows) == 1
    assert rows[0].link_class == "leaf-spine"
    assert rows[0].expected_gbps == 400.0
    assert "leaf-spine links usually run at 400" in rows[0].reason


def test_down_link_is_listed_as_down():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1)
    b.link("guid-leaf1", "guid-spine1", 0.0, up=False)
    rows = degraded(b)
    assert [(r.reason, r.up) for r in rows] == [("down", False)]


def test_unknown_speed_is_listed():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1)
    b.link(b.host("mystery"), "guid-leaf1", 0.0)
    assert [r.reason for r in degraded(b)] == ["speed unknown"]


def test_both_reasons_are_given():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=3)
    b.link(b.host("bad"), "guid-leaf1", 100.0, supported=200.0)
    (row,) = degraded(b)
    assert row.reason.count("runs at 100 Gb/s") == 2
    assert row.expected_gbps == 400.0
