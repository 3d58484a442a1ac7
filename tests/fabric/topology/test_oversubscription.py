import pytest

from fabric.topology.graph import FabricGraph
from fabric.topology.oversubscription import OversubscriptionReport, leaf_oversubscription
from fabric.topology.tiers import detect_tiers
from tests.fabric.topology.factories import FabricBuilder, two_tier


def oversub(b: FabricBuilder) -> OversubscriptionReport:
    g = FabricGraph.build(b.fabric)
    return leaf_oversubscription(g, detect_tiers(g))


def test_non_blocking_leaf_is_one_to_one():
    # 4 hosts x 400 down, 2 spines x 2 cables x 400 up: 1600 / 1600.
    r = oversub(two_tier(leaves=2, spines=2, hosts_per_leaf=4, links_per_pair=2))
    assert [row.ratio for row in r.leaves] == [1.0, 1.0]
    assert r.leaves[0].host_gbps == 1600.0
    assert r.leaves[0].uplink_gbps == 1600.0


def test_two_to_one_leaf():
    # 8 hosts x 400 = 3200 down, 2 spines x 2 x 400 = 1600 up.
    r = oversub(two_tier(leaves=2, spines=2, hosts_per_leaf=8, links_per_pair=2))
    assert r.leaves[0].ratio == 2.0


def test_down_uplink_raises_the_ratio():
    b = two_tier(leaves=1, spines=2, hosts_per_leaf=4, links_per_pair=2)
    b.link("guid-leaf1", "guid-spine1", 400.0, up=False)  # a fifth cable, down: does not count
    b.fabric.links = [lk for lk in b.fabric.links if lk.key != "l7"]  # drop one of the 4 live uplinks l5..l8
    r = oversub(b)
    assert r.leaves[0].uplinks == 3
    assert r.leaves[0].ratio == pytest.approx(1600 / 1200)


def test_worst_leaf_is_the_highest_ratio():
    b = two_tier(leaves=3, spines=1, hosts_per_leaf=2, links_per_pair=2)
    b.link(b.host("extra"), "guid-leaf2")
    r = oversub(b)
    assert r.worst == "leaf2"
    assert r.worst_ratio == pytest.approx(1200 / 800)


def test_leaf_without_uplinks_has_no_ratio_and_is_worst():
    b = two_tier(leaves=2, spines=1, hosts_per_leaf=2)
    lonely = b.switch("leaf9")
    b.link(b.host("h9"), lonely)
    b.link(lonely, "guid-leaf1")  # a lateral cable is not an uplink
    r = oversub(b)
    row = next(x for x in r.leaves if x.name == "leaf9")
    assert row.ratio is None
    assert row.no_uplinks
    assert r.worst == "leaf9"
    assert r.worst_ratio is None


def test_leaves_listed_in_natural_order():
    r = oversub(two_tier(leaves=11, spines=1))
    assert [x.name for x in r.leaves][:3] == ["leaf1", "leaf2", "leaf3"]
    assert r.leaves[-1].name == "leaf11"


def test_a_tie_for_worst_goes_to_the_first_leaf_by_name():
    # leaf1: 2 hosts x 400 = 800 over one 400 uplink = 2.0; leaf2 and leaf3 get a third host: 1200 / 400 = 3.0 each.
    b = two_tier(leaves=3, spines=1, hosts_per_leaf=2, links_per_pair=1)
    b.link(b.host("extra2"), "guid-leaf2")
    b.link(b.host("extra3"), "guid-leaf3")
    r = oversub(b)
    assert [row.ratio for row in r.leaves] == [2.0, 3.0, 3.0]
    assert r.worst == "leaf2"
    assert r.worst_ratio == 3.0


def test_a_dark_leaf_without_uplinks_strands_nobody_and_is_not_the_worst():
    # leaf1, leaf2: 4 hosts x 400 = 1600 over one 400 uplink = 4.0. leaf3's server and uplink are both down:
    # still a leaf (a host cable), no live host port (0 Gb/s) and no live uplink, so nothing to strand.
    b = two_tier(leaves=2, spines=1, hosts_per_leaf=4, links_per_pair=1)
    dark = b.switch("leaf3")
    b.link(b.host("h3-1"), dark, up=False)
    b.link(dark, "guid-spine1", up=False)
    r = oversub(b)
    row = r.leaves[2]
    assert (row.name, row.hosts, row.host_gbps, row.uplinks, row.ratio, row.no_uplinks) == (
        "leaf3",
        0,
        0,
        0,
        None,
        True,
    )
    assert r.worst == "leaf1"
    assert r.worst_ratio == 4.0


def test_any_uplink_capacity_above_zero_gives_a_ratio():
    # One 400 host port over a single 1 Gb/s uplink: 400 / 1 = 400, a finite ratio, and the leaf has an uplink.
    b = FabricBuilder()
    b.switch("spine1")
    leaf = b.switch("leaf1")
    b.link(b.host("h1"), leaf, 400.0)
    b.link(leaf, "guid-spine1", 1.0)
    row = oversub(b).leaves[0]
    assert (row.uplink_gbps, row.ratio, row.no_uplinks) == (1.0, 400.0, False)


def test_a_leaf_without_uplinks_is_worst_even_with_a_single_1_gbps_host_port():
    # leaf1: 4 x 400 over one 400 uplink = 4.0. leaf2: one live 1 Gb/s host port and no uplink: that host is
    # stranded, which beats any ratio.
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=4, links_per_pair=1)
    lonely = b.switch("leaf2")
    b.link(b.host("slow"), lonely, 1.0)
    r = oversub(b)
    assert [(row.name, row.host_gbps, row.ratio) for row in r.leaves] == [("leaf1", 1600.0, 4.0), ("leaf2", 1.0, None)]
    assert r.worst == "leaf2"
    assert r.worst_ratio is None


def test_with_every_leaf_under_one_to_one_a_leaf_without_live_hosts_is_not_the_worst():
    # leaf1: one 400 host port over 2 x 400 uplinks = 0.5; leaf2: its only server is down, one live uplink:
    # 0 / 400 = 0.0. The worst is leaf1 at 0.5.
    b = FabricBuilder()
    b.switch("spine1")
    leaf1, leaf2 = b.switch("leaf1"), b.switch("leaf2")
    b.link(b.host("h1"), leaf1)
    b.link(leaf1, "guid-spine1", count=2)
    b.link(b.host("h2"), leaf2, up=False)
    b.link(leaf2, "guid-spine1")
    r = oversub(b)
    assert [(row.name, row.ratio) for row in r.leaves] == [("leaf1", 0.5), ("leaf2", 0.0)]
    assert (r.worst, r.worst_ratio) == ("leaf1", 0.5)
