"""The scheduler's fabric index: leaf groups (a rail-optimised scalable unit is one), pods, levels."""

from fabric.importers.fattree import generate_fat_tree
from fabric.topology.convert import fabric_from_parsed
from fabric.topology.types import TLink
from scheduler.core.topology import (
    LEVEL_FABRIC,
    LEVEL_LEAF_GROUP,
    LEVEL_NODE,
    LEVEL_POD_GROUP,
    ROLE_GROUP_UPLINK,
    ROLE_HOST,
    ROLE_POD_UPLINK,
    build_topology,
)
from tests.scheduler.core.builders import SnapBuilder, two_leaves


def test_a_rail_optimised_scalable_unit_is_one_leaf_group():
    topo = build_topology(fabric_from_parsed(generate_fat_tree(64)))  # 2 SUs of 32 DGX, 8 rails each
    compute = [g for g in topo.groups if g.hosts[0].startswith("gpu")]
    assert [len(g.hosts) for g in compute] == [32, 32]
    assert [len(g.switches) for g in compute] == [8, 8]
    assert compute[0].label == "leaf group leaf001-leaf008"
    assert topo.host_level("gpu0001", "gpu0032") == LEVEL_LEAF_GROUP
    assert topo.host_level("gpu0001", "gpu0033") == LEVEL_POD_GROUP


def test_classic_tree_groups_are_leaves():
    b = two_leaves()
    topo = build_topology(b.fabric)
    assert [g.label for g in topo.groups] == ["leaf L1", "leaf L2"]
    assert topo.host_level("n1", "n1") == LEVEL_NODE
    assert topo.host_level("n1", "n2") == LEVEL_LEAF_GROUP
    assert topo.host_level("n1", "n3") == LEVEL_POD_GROUP
    assert topo.host_level("n1", "nowhere") == LEVEL_FABRIC


def test_links_have_roles_for_the_live_model():
    b = two_leaves()
    topo = build_topology(b.fabric)
    assert topo.link_role["n1-L1"] == (ROLE_HOST, "n1", 400.0)
    assert topo.link_role["L1-S1"][0] == ROLE_GROUP_UPLINK
    assert topo.groups[0].uplink_gbps == 800.0 and topo.groups[0].host_gbps == 800.0


def test_three_tier_fabric_has_pods_joined_by_the_core():
    topo = build_topology(fabric_from_parsed(generate_fat_tree(300, gpus_per_node=8)))
    assert len(topo.pods) > 1
    first, last = topo.groups[0].hosts[0], next(g for g in topo.groups if g.pod == len(topo.pods) - 1).hosts[0]
    assert topo.host_level(first, last) == LEVEL_FABRIC


def test_down_host_link_leaves_the_group():
    from dataclasses import replace

    b = two_leaves()
    b.fabric.links[:] = [replace(link, up=False) if link.key == "n1-L1" else link for link in b.fabric.links]
    topo = build_topology(b.fabric)
    assert "n1" not in topo.group_of


def _two_pods() -> SnapBuilder:
    """Core C1 over two pods: L1 (n1, n2) - S1 and L2 (n3, n4) - S2, every cable 400 Gb/s.

    Pod 1: L1-S1 x2 (800 down), S1-C1 x1 (400 up). Pod 2: L2-S2 x3 (1200 down), S2-C1 x2 (800 up).
    """
    b = SnapBuilder()
    b.core("C1")
    b.spine("S1")
    b.spine("S2")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.leaf("L2", ["n3", "n4"], {"S2": 3})
    b.uplink("S1", "C1")
    b.uplink("S2", "C1", count=2)
    return b


def _group_of_host(topo, host):
    return topo.groups[topo.group_of[host]]


def test_role_numbers_are_the_ones_the_simulator_reads():
    # scheduler.sim.cluster sorts link_role entries by the plain numbers 0 (host), 1 (group), 2 (pod)
    assert (ROLE_HOST, ROLE_GROUP_UPLINK, ROLE_POD_UPLINK) == (0, 1, 2)


def test_a_pod_adds_up_its_leaf_spine_and_spine_core_capacity():
    topo = build_topology(_two_pods().fabric)
    assert [(p.down_gbps, p.up_gbps) for p in topo.pods] == [(800.0, 400.0), (1200.0, 800.0)]


def test_spine_core_links_are_pod_uplinks_of_their_spines_pod():
    topo = build_topology(_two_pods().fabric)
    assert topo.link_role["S1-C1"] == (ROLE_POD_UPLINK, 0, 400.0)
    assert topo.link_role["S2-C1.2"] == (ROLE_POD_UPLINK, 1, 400.0)


def test_pods_are_labelled_counting_from_one():
    topo = build_topology(_two_pods().fabric)
    assert [p.label for p in topo.pods] == ["pod 1", "pod 2"]


def test_each_pod_lists_its_leaf_groups():
    topo = build_topology(_two_pods().fabric)
    assert [p.groups for p in topo.pods] == [[topo.group_of["n1"]], [topo.group_of["n3"]]]


def test_a_two_tier_fabric_is_one_pod_with_no_core_capacity():
    topo = build_topology(two_leaves().fabric)
    # two leaves with two 400 Gb/s cables each to S1; nothing above the spine
    assert [(p.down_gbps, p.up_gbps) for p in topo.pods] == [(1600.0, 0.0)]


def test_a_host_cabled_only_to_a_core_switch_is_in_no_pod():
    b = _two_pods()
    b.node("s1", gpus=0)
    b.fabric.links.append(TLink("s1-C1", "s1", "guid-C1", 200.0))
    topo = build_topology(b.fabric)
    g = _group_of_host(topo, "s1")
    assert g.pod == -1
    assert all(g.id not in p.groups for p in topo.pods)


def test_a_group_with_a_leaf_in_a_pod_belongs_to_that_pod_even_if_it_also_touches_the_core():
    b = _two_pods()
    b.node("d1")
    b.fabric.links.append(TLink("d1-L1", "d1", "guid-L1", 400.0))
    b.fabric.links.append(TLink("d1-C1", "d1", "guid-C1", 400.0))
    topo = build_topology(b.fabric)
    assert _group_of_host(topo, "d1").pod == 0


def test_a_lateral_cable_between_leaves_is_no_uplink():
    b = two_leaves()
    b.uplink("L1", "L2")
    topo = build_topology(b.fabric)
    assert "L1-L2" not in topo.link_role
    assert [g.uplink_gbps for g in topo.groups] == [800.0, 800.0]
    assert topo.pods[0].down_gbps == 1600.0


def test_core_links_of_a_spine_with_no_leaves_belong_to_no_pod():
    b = _two_pods()
    b.spine("S9")  # cabled to the core only: no leaf, so in no pod
    b.uplink("S9", "C1", 100.0)
    topo = build_topology(b.fabric)
    assert "S9-C1" not in topo.link_role
    assert [p.up_gbps for p in topo.pods] == [400.0, 800.0]
