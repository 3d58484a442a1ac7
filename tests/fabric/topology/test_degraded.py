from fabric.topology.degraded import DegradedLink, degraded_links, usual_rates
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


def _rows(b: FabricBuilder) -> list[tuple[str, str, str, float, str]]:
    return [(r.a, r.b, r.link_class, r.expected_gbps, r.reason) for r in degraded(b)]


def test_a_loopback_is_listed_with_its_own_class():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1)
    b.link("guid-spine1", "guid-spine1", 400.0)
    # It is up, so its 400 is the usual rate of its class (the only loopback), and what it "should" run at.
    assert _rows(b) == [
        ("spine1", "spine1", "loopback", 400.0, "loopback: a switch cabled to itself, never routed over")
    ]


def test_a_down_cable_between_two_servers_is_host_host():
    # No other host-host cable is up, so that class has no usual rate: expected 0.
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=2)
    b.link("h1-1", "h1-2", 0.0, up=False)
    assert _rows(b) == [("h1-1", "h1-2", "host-host", 0.0, "down")]


def test_a_slow_host_link_is_of_the_host_class():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=2)
    b.link(b.host("slow"), "guid-leaf1", 200.0)
    assert _rows(b) == [("slow", "leaf1", "host", 400.0, "runs at 200 Gb/s, host links usually run at 400")]


def test_a_spine_to_leaf_cable_is_named_leaf_spine_whichever_end_comes_first():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1, links_per_pair=2)
    b.link("guid-spine1", "guid-leaf1", 100.0)
    assert [r.link_class for r in degraded(b)] == ["leaf-spine"]


def test_the_most_common_rate_is_usual_even_when_a_faster_one_exists():
    # Two hosts at 200 and one at 400: 200 is usual; the 400 link is fast, not degraded; nothing is listed.
    b = FabricBuilder()
    leaf = b.switch("leaf1")
    for name, gbps in (("a", 200.0), ("b", 200.0), ("c", 400.0)):
        b.link(b.host(name), leaf, gbps)
    assert _rows(b) == []


def test_a_tie_of_rates_goes_to_the_faster_one_whatever_the_order():
    # One host at 200 (listed first) and one at 400: a tie, so 400 is usual and the 200 link is slow.
    b = FabricBuilder()
    leaf = b.switch("leaf1")
    b.link(b.host("a"), leaf, 200.0)
    b.link(b.host("b"), leaf, 400.0)
    assert _rows(b) == [("a", "leaf1", "host", 400.0, "runs at 200 Gb/s, host links usually run at 400")]


def test_down_links_do_not_count_towards_the_usual_rate():
    # One host link up at 200, two down at 400: the usual host rate is 200, so the up link is fine and the
    # down ones expect 200.
    b = FabricBuilder()
    leaf = b.switch("leaf1")
    b.link(b.host("a"), leaf, 200.0)
    b.link(b.host("b"), leaf, 400.0, up=False)
    b.link(b.host("c"), leaf, 400.0, up=False)
    assert _rows(b) == [("b", "leaf1", "host", 200.0, "down"), ("c", "leaf1", "host", 200.0, "down")]


def test_links_of_unknown_speed_do_not_count_towards_the_usual_rate():
    # Two host links of unknown speed (0) and one at 400: 400 is usual, and is what the unknown ones expect.
    b = FabricBuilder()
    leaf = b.switch("leaf1")
    b.link(b.host("a"), leaf, 0.0)
    b.link(b.host("b"), leaf, 0.0)
    b.link(b.host("c"), leaf, 400.0)
    assert _rows(b) == [("a", "leaf1", "host", 400.0, "speed unknown"), ("b", "leaf1", "host", 400.0, "speed unknown")]


def test_a_link_of_unknown_speed_is_listed_where_its_class_has_no_usual_rate():
    b = FabricBuilder()
    b.link(b.host("a"), b.switch("leaf1"), 0.0)
    assert _rows(b) == [("a", "leaf1", "host", 0.0, "speed unknown")]


def test_rates_of_one_gbps_and_below_are_rates_like_any_other():
    # Two hosts at 1 Gb/s, one at 0.5: 1 is usual; only the 0.5 link is slow.
    b = FabricBuilder()
    leaf = b.switch("leaf1")
    for name, gbps in (("a", 1.0), ("b", 1.0), ("c", 0.5)):
        b.link(b.host(name), leaf, gbps)
    assert _rows(b) == [("c", "leaf1", "host", 1.0, "runs at 0.5 Gb/s, host links usually run at 1")]


def test_a_link_at_its_supported_rate_is_not_degraded():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1)
    b.link(b.host("exact"), "guid-leaf1", 400.0, supported=400.0)
    assert _rows(b) == []


def test_only_the_usual_rate_is_the_reason_where_the_link_runs_at_its_supported_rate():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=2)
    b.link(b.host("old"), "guid-leaf1", 200.0, supported=200.0)
    assert _rows(b) == [("old", "leaf1", "host", 400.0, "runs at 200 Gb/s, host links usually run at 400")]


def test_only_the_supported_rate_is_the_reason_where_the_link_runs_at_the_usual_rate():
    # Usual host rate 200 (three hosts); this one could do 400 but trained to 200.
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=3, host_gbps=200.0)
    b.link(b.host("trained-down"), "guid-leaf1", 200.0, supported=400.0)
    assert _rows(b) == [("trained-down", "leaf1", "host", 400.0, "runs at 200 Gb/s, both ends support 400")]


def test_usual_rates_work_out_the_classes_when_not_given():
    b = two_tier(leaves=2, spines=1, hosts_per_leaf=2, host_gbps=200.0, up_gbps=400.0)
    g = FabricGraph.build(b.fabric)
    assert usual_rates(g, detect_tiers(g)) == {"host": 200.0, "leaf-spine": 400.0}
