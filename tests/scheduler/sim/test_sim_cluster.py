"""Cluster specs: NODESxGPUS[/NODES_PER_LEAF][:OVERSUB], Tiresias spec files, the generated fat tree."""

from pathlib import Path

import pytest

from scheduler.core.topology import LEVEL_LEAF_GROUP, LEVEL_POD_GROUP
from scheduler.sim.cluster import (
    ClusterSpec,
    build_cluster,
    load_tiresias_cluster_spec,
    looks_like_spec,
    parse_cluster_spec,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("2x4", ClusterSpec(2, 4)),
        ("32X4", ClusterSpec(32, 4)),
        ("16x4/4", ClusterSpec(16, 4, 4)),
        ("16x4/4:2", ClusterSpec(16, 4, 4, 2.0)),
        (" 8x8/2:1.5 ", ClusterSpec(8, 8, 2, 1.5)),
    ],
)
def test_parse_spec(text, spec):
    assert parse_cluster_spec(text) == spec
    assert looks_like_spec(text)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("4", "is not NODESxGPUS"),
        ("0x4", "must be >= 1"),
        ("4x4/0", "nodes per leaf must be >= 1"),
        ("4x4/2:0.5", "oversubscription must be >= 1"),
        ("4x4:2", "needs /NODES_PER_LEAF"),
        ("prod-cluster", "is not NODESxGPUS"),
    ],
)
def test_bad_spec(text, words):
    with pytest.raises(ValueError, match=words):
        parse_cluster_spec(text)


def test_bad_model_or_rate():
    with pytest.raises(ValueError, match="unknown GPU model 'K80'"):
        parse_cluster_spec("2x4", gpu_model="K80")
    with pytest.raises(ValueError, match="unknown link rate 'omnipath'"):
        parse_cluster_spec("2x4", link_rate="omnipath")


def test_any_leaf_size_and_oversubscription():
    c = build_cluster(parse_cluster_spec("5x8/1:3"))
    assert len(c.leaves_in_order()) == 5
    assert c.group_uplink_gbs[c.node_group[0]] == pytest.approx(12.5 / 3)


def test_label():
    assert parse_cluster_spec("16x4/4:2").label == "16x4/4:2"
    assert parse_cluster_spec("2x4").label == "2x4"


def test_tiresias_cluster_spec_file():
    spec = load_tiresias_cluster_spec(FIXTURES / "tiresias_n32g4.csv")
    assert (spec.nodes, spec.gpus_per_node, spec.nodes_per_leaf) == (32, 4, None)  # one switch


def test_tiresias_cluster_spec_file_errors(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("num_switch,num_node_p_switch\n1,4\n")
    with pytest.raises(ValueError, match="needs the columns"):
        load_tiresias_cluster_spec(p)
    p.write_text("num_switch,num_node_p_switch,num_gpu_p_node\n2,x,4\n")
    with pytest.raises(ValueError, match=r"bad.csv:2: num_node_p_switch 'x'"):
        load_tiresias_cluster_spec(p)
    p.write_text("num_switch,num_node_p_switch,num_gpu_p_node\n2,4,4\n")
    assert load_tiresias_cluster_spec(p).nodes_per_leaf == 4


def test_one_leaf_cluster():
    c = build_cluster(parse_cluster_spec("32x4"))
    assert (c.n_nodes, c.n_gpus, c.max_gpus_per_node) == (32, 128, 4)
    assert len(set(c.node_group)) == 1
    assert len(c.leaves_in_order()) == 1
    assert c.level_of(c.node_gpus[0][:2]) == 0  # 4 x V100 = one NVLink island
    assert c.level_of([c.node_gpus[0][0], c.node_gpus[31][0]]) == LEVEL_LEAF_GROUP
    assert all(nic == pytest.approx(12.5) for nic in c.node_nic_gbs)  # one EDR HCA: 100 Gb/s


def test_oversubscribed_fat_tree():
    c = build_cluster(parse_cluster_spec("16x4/4:2"))
    leaves = c.leaves_in_order()
    assert [len(leaf) for leaf in leaves] == [4, 4, 4, 4]
    for g, up in c.group_uplink_gbs.items():
        hosts = sum(c.node_nic_gbs[i] for i in range(c.n_nodes) if c.node_group[i] == g)
        assert hosts / up == pytest.approx(2.0)  # 2:1
    a, b = leaves[0][0], leaves[1][0]
    assert c.level_of([c.node_gpus[a][0], c.node_gpus[b][0]]) == LEVEL_POD_GROUP
    assert c.host_links and c.group_links


def test_partial_last_leaf_has_uplinks_for_its_hosts():
    c = build_cluster(parse_cluster_spec("6x4/4:2"))
    assert [len(leaf) for leaf in c.leaves_in_order()] == [4, 2]
    last = c.node_group[5]
    assert c.group_uplink_gbs[last] == pytest.approx(2 * 12.5 / 2)


def test_pcie_gpus_are_single_islands():
    c = build_cluster(parse_cluster_spec("2x4", gpu_model="L4"))
    assert c.level_of(c.node_gpus[0][:2]) == 1  # same node, two islands


def test_the_slurm_churn_cluster():
    # 32 nodes x 8 GPUs, 4 leaves of 8 nodes, 2:1: each leaf has 8 x 100 Gb/s of hosts and half that,
    # 400 Gb/s = 50 GB/s, of uplinks; nodes 0-7 under the first leaf, 8-15 under the second, ...
    c = build_cluster(parse_cluster_spec("32x8/8:2"))
    assert (c.n_nodes, c.n_gpus, c.label) == (32, 256, "32x8/8:2")
    assert c.leaves_in_order() == [list(range(k * 8, k * 8 + 8)) for k in range(4)]
    assert c.leaves() == tuple(tuple(leaf) for leaf in c.leaves_in_order())
    assert all(c.group_uplink_gbs[c.node_group[k * 8]] == pytest.approx(50.0) for k in range(4))
    assert c.level_of(c.node_gpus[0] + c.node_gpus[7]) == LEVEL_LEAF_GROUP
    assert c.level_of(c.node_gpus[7] + c.node_gpus[8]) > LEVEL_LEAF_GROUP
