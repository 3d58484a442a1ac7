"""The scheduler's fabric index: leaf groups (a rail-optimised scalable unit is one), pods, levels."""

from fabric.importers.fattree import generate_fat_tree
from fabric.topology.convert import fabric_from_parsed
from scheduler.core.topology import (
    LEVEL_FABRIC,
    LEVEL_LEAF_GROUP,
    LEVEL_NODE,
    LEVEL_POD_GROUP,
    ROLE_GROUP_UPLINK,
    ROLE_HOST,
    build_topology,
)
from tests.scheduler.core.builders import two_leaves


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
