import pytest

from fabric.topology.graph import FabricGraph
from fabric.topology.oversubscription import OversubscriptionReport, leaf_oversubscription
from fabric.topology.tiers import detect_tiers
from tests.topology.factories import FabricBuilder, two_tier


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
