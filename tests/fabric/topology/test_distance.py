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


def test_the_levels_are_the_numbers_the_docs_give():
    # Placement and the API compare these numbers: 0 same host .. 4 unreachable.
    assert (LEVEL_SAME_HOST, LEVEL_LEAF, LEVEL_POD, LEVEL_CORE, LEVEL_UNREACHABLE) == (0, 1, 2, 3, 4)


def test_a_host_is_reachable_from_itself():
    assert HopIndex.build(two_tier().fabric).distance("h1-1", "h1-1").reachable is True


def test_hosts_lists_every_host_in_fabric_order():
    b = FabricBuilder()
    sw = b.switch("sw1")
    for name in ("b", "a", "c"):
        b.link(b.host(name), sw)
    assert HopIndex.build(b.fabric).hosts == ["b", "a", "c"]


def test_a_distance_cannot_be_changed_in_place():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Distance(2, 1).hops = 4


def test_a_lateral_cable_between_leaves_is_not_an_up_down_path():
    # leaf1 - leaf2 are cabled to each other and both to spine1: the up/down path goes through the spine
    # (host-leaf1-spine1-leaf2-host: 4 links), not across the lateral cable (3).
    b = FabricBuilder()
    spine = b.switch("spine1")
    leaves = [b.switch("leaf1"), b.switch("leaf2")]
    for n, leaf in enumerate(leaves, start=1):
        b.link(b.host(f"h{n}"), leaf)
        b.link(leaf, spine)
    b.link(leaves[0], leaves[1])
    assert HopIndex.build(b.fabric).distance("h1", "h2") == Distance(4, 2)


@pytest.mark.parametrize("storage_first", [True, False])
def test_a_host_on_a_spine_is_three_links_from_a_host_under_it(storage_first):
    # tank1 hangs off spine1 itself; gpu1 off leaf1 under spine1; core1 above: gpu1-leaf1-spine1-tank1 = 3 links
    # (not 5 over core1). Both host orders, so either one is the first group.
    b = FabricBuilder()
    core, spine, leaf = b.switch("core1"), b.switch("spine1"), b.switch("leaf1")
    b.link(spine, core)
    b.link(leaf, spine)
    hosts = [("tank1", spine), ("gpu1", leaf)] if storage_first else [("gpu1", leaf), ("tank1", spine)]
    for name, sw in hosts:
        b.link(b.host(name, role="storage" if name == "tank1" else "compute"), sw)
    idx = HopIndex.build(b.fabric)
    assert idx.distance("gpu1", "tank1") == Distance(3, 2)
    assert idx.distance("tank1", "gpu1") == Distance(3, 2)


def test_without_a_common_ancestor_the_shortest_path_counts_every_cable():
    # leaf1 - x (spine) - y (spine) - leaf2: no switch is above both leaves, so the plain shortest path counts:
    # 1 + 3 switch cables + 1 = 5 links.
    b = FabricBuilder()
    leaf1, x, y, leaf2 = b.switch("leaf1"), b.switch("x"), b.switch("y"), b.switch("leaf2")
    b.link(b.host("h1"), leaf1)
    b.link(b.host("h2"), leaf2)
    b.link(leaf1, x)
    b.link(x, y)
    b.link(y, leaf2)
    assert HopIndex.build(b.fabric).distance("h1", "h2") == Distance(5, 2)


def test_hosts_on_two_core_switches_share_no_pod():
    # core1 and core2 (an operator's cores, so in no pod) each carry a host and meet at spine1 (which has
    # leaf1 under it): core1-spine1-core2, 4 links, joined only at the core level.
    b = FabricBuilder()
    spine, leaf = b.switch("spine1"), b.switch("leaf1")
    b.link(leaf, spine)
    b.link(b.host("h0"), leaf)
    for n in (1, 2):
        core = b.switch(f"core{n}", role="core")
        b.link(core, spine)
        b.link(b.host(f"h{n}"), core)
    assert HopIndex.build(b.fabric).distance("h1", "h2") == Distance(4, 3)


@pytest.mark.parametrize("storage_first", [True, False])
def test_a_host_on_a_real_spine_meets_the_leaf_below_it_one_hop_up(storage_first):
    # spine1 carries tank1 but also sees leaf1 and leaf2, so it is a spine (level 1), under core1. gpu1 on
    # leaf1 climbs one hop to spine1, where tank1 sits: 1 + 1 + 1 = 3 links. The longer up-path over core1
    # (gpu1-leaf1-spine1-core1-spine1-tank1) must not win.
    b = FabricBuilder()
    core, spine = b.switch("core1"), b.switch("spine1")
    leaf1, leaf2 = b.switch("leaf1"), b.switch("leaf2")
    b.link(spine, core)
    b.link(leaf1, spine)
    b.link(leaf2, spine)
    b.link(b.host("h2"), leaf2)
    hosts = [("tank1", spine), ("gpu1", leaf1)] if storage_first else [("gpu1", leaf1), ("tank1", spine)]
    for name, sw in hosts:
        b.link(b.host(name), sw)
    idx = HopIndex.build(b.fabric)
    assert idx.distance("gpu1", "tank1") == Distance(3, LEVEL_POD)
    assert idx.distance("tank1", "gpu1") == Distance(3, LEVEL_POD)
