import dataclasses

import pytest

from fabric.topology.distance import (
    LEVEL_CORE,
    LEVEL_LEAF,
    LEVEL_POD,
    LEVEL_SAME_HOST,
    LEVEL_UNREACHABLE,
    Distance,
    HopIndex,
)
from tests.fabric.topology.factories import FabricBuilder, three_tier, two_tier


def test_same_host_is_zero():
    idx = HopIndex.build(two_tier().fabric)
    assert idx.distance("h1-1", "h1-1") == Distance(0, LEVEL_SAME_HOST)


def test_same_leaf_is_two_links():
    idx = HopIndex.build(two_tier().fabric)
    assert idx.distance("h1-1", "h1-2") == Distance(2, LEVEL_LEAF)


def test_leaves_sharing_a_spine_are_four_links():
    idx = HopIndex.build(two_tier().fabric)
    assert idx.distance("h1-1", "h3-2") == Distance(4, LEVEL_POD)


def test_through_the_core_is_six_links():
    idx = HopIndex.build(three_tier().fabric)
    assert idx.distance("p1h1-1", "p1h2-1") == Distance(4, LEVEL_POD)
    assert idx.distance("p1h1-1", "p2h2-2") == Distance(6, LEVEL_CORE)


def test_distance_is_symmetric():
    idx = HopIndex.build(three_tier().fabric)
    assert idx.distance("p2h1-1", "p1h1-1") == idx.distance("p1h1-1", "p2h1-1")


def test_host_on_a_spine_is_one_switch_hop_from_the_leaves():
    # tank1 on spine1 (as on SX6036's ib7): host - leaf1 - spine1 - tank1 is 3 links.
    b = two_tier(leaves=2, spines=2)
    b.link(b.host("tank1", role="storage"), "guid-spine1", count=2)
    idx = HopIndex.build(b.fabric)
    assert idx.distance("h1-1", "tank1") == Distance(3, LEVEL_POD)


def test_multi_homed_host_uses_its_nearest_leaf():
    b = two_tier(leaves=3, spines=1, hosts_per_leaf=1)
    b.link(b.host("rail"), "guid-leaf1")
    b.link("rail", "guid-leaf3")
    idx = HopIndex.build(b.fabric)
    assert idx.distance("rail", "h3-1") == Distance(2, LEVEL_LEAF)
    assert idx.distance("rail", "h2-1") == Distance(4, LEVEL_POD)
    assert idx.switches_of("rail") == ["guid-leaf1", "guid-leaf3"]


def test_down_links_are_not_paths():
    b = two_tier(leaves=2, spines=1, hosts_per_leaf=1, links_per_pair=1)
    uplink = next(i for i, lk in enumerate(b.fabric.links) if lk.a == "guid-leaf2")
    b.fabric.links[uplink] = dataclasses.replace(b.fabric.links[uplink], up=False)
    idx = HopIndex.build(b.fabric)
    assert idx.distance("h1-1", "h2-1") == Distance(-1, LEVEL_UNREACHABLE)
    assert not idx.distance("h1-1", "h2-1").reachable


def test_host_without_links_is_unreachable():
    b = two_tier(leaves=1, spines=1)
    b.host("cold")
    idx = HopIndex.build(b.fabric)
    assert idx.distance("cold", "h1-1").level == LEVEL_UNREACHABLE
    assert idx.distance("cold", "cold") == Distance(0, LEVEL_SAME_HOST)


def test_lateral_cable_is_found_when_no_common_ancestor():
    # Two leaves cabled only to each other: no spine above them, the shortest path still counts.
    b = FabricBuilder()
    l1, l2 = b.switch("leaf1"), b.switch("leaf2")
    b.link(l1, l2)
    b.link(b.host("a"), l1)
    b.link(b.host("b"), l2)
    idx = HopIndex.build(b.fabric)
    assert idx.distance("a", "b") == Distance(3, LEVEL_POD)


def test_unknown_host_raises_key_error_naming_it():
    idx = HopIndex.build(two_tier().fabric)
    with pytest.raises(KeyError, match="nobody"):
        idx.distance("h1-1", "nobody")


def test_queries_are_answered_from_the_group_cache():
    # All hosts of a leaf share one group: many host pairs, one computed group pair.
    idx = HopIndex.build(two_tier(leaves=2, hosts_per_leaf=8).fabric)
    for i in range(1, 9):
        for j in range(1, 9):
            idx.distance(f"h1-{i}", f"h2-{j}")
    assert len(idx._cache) == 1
