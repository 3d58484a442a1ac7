"""The communication-aware runtime model: placement sensitivity by model, contention, costs."""

import pytest

from fabric.topology.types import Fabric, THost, TLink, TSwitch
from scheduler.core.types import GpuState, NodeState
from scheduler.sim.cluster import SimCluster, build_cluster, parse_cluster_spec
from scheduler.sim.runtime import (
    MODEL_PROFILES,
    RuntimeModel,
    RuntimeParams,
    Work,
    profile,
    reference_ideal_step,
)


def work(model: str, gpus: int) -> Work:
    p = profile(model)
    return Work(gpus, p.compute_s(), p.grad_bytes)


@pytest.fixture(scope="module")
def tree():
    c = build_cluster(parse_cluster_spec("16x4/4:2"))
    return c, RuntimeModel(c)


def gpus_on(c, nodes):
    return [p for n in nodes for p in c.node_gpus[n]]


def test_profiles_are_in_one_place():
    for name in ("vgg16", "resnet50", "alexnet", "cifar10", "bert", "ResNet-50", "compute-only"):
        assert name in MODEL_PROFILES
    assert profile("VGG16") is MODEL_PROFILES["vgg16"]
    assert profile("no-such-model") is MODEL_PROFILES["default"]
    assert MODEL_PROFILES["vgg16"].grad_bytes == pytest.approx(138.357544e6 * 4)  # torchvision's num_params


def test_tiresias_steps_are_its_testbed_steps_on_a_v100():
    """ResNet-50: 1-GPU jobs of Tiresias' 60-job trace take 0.153 s a step on its P100s; Gavel measured a V100
    1.622x a P100 on ResNet-50 at batch 32 (7.930 / 4.888 steps/s): 0.153 / 1.6223 = 0.09431 s."""
    assert profile("resnet50").compute_s() == pytest.approx(0.153 * 4.888323684976709 / 7.930372537553422)
    assert profile("resnet50").compute_s() == pytest.approx(0.09431, abs=1e-5)


def test_gavel_steps_are_its_measured_v100_throughputs():
    """ResNet-50 at batch 64 alone on a V100: 4.525762 steps/s, so 1 / 4.525762 = 0.22096 s a step."""
    assert profile("ResNet-50").compute_s(64) == pytest.approx(1 / 4.525762)


def test_pollux_steps_interpolate_and_accumulate():
    """imagenet at 133.3 images per GPU: between the artifact's 115 (0.5590 s) and 163 (0.7612 s):
    0.5590 + 0.2022 x 18.33 / 48 = 0.63623 s. bert at 64 per GPU, 12 at most per micro-batch: 6 micro-batches
    of 11 (the artifact's rule: ceil(64 / 12) = 6, ceil(64 / 6) = 11): 6 x 0.8416 = 5.0496 s. yolov3 at 16
    with micro-batches of 8 at most: 2 x 0.3237 = 0.6474 s."""
    assert profile("imagenet").compute_s(400 / 3) == pytest.approx(0.5590 + 0.2022 * (400 / 3 - 115) / 48)
    assert profile("bert").compute_s(64) == pytest.approx(6 * 0.8416)
    assert profile("yolov3").compute_s(16) == pytest.approx(2 * 0.3237)
    assert profile("cifar10").compute_s(16) == pytest.approx(0.0423)  # below the smallest batch measured


def test_one_gpu_and_compute_only_jobs_never_slow_down(tree):
    c, m = tree
    leaves = c.leaves_in_order()
    spread = gpus_on(c, [leaves[0][0], leaves[1][0]])
    r = m.rates({1: (work("vgg16", 1), [0]), 2: (work("compute-only", 8), spread)})
    assert r[1] == (1.0, 0.0)
    assert r[2] == (1.0, 0.0)


def test_ideal_placements_run_at_full_speed(tree):
    c, m = tree
    leaf = c.leaves_in_order()[0]
    r = m.rates({1: (work("vgg16", 4), c.node_gpus[0]), 2: (work("vgg16", 8), gpus_on(c, leaf[1:3]))})
    assert r[1][0] == pytest.approx(1.0)
    assert r[2][0] == pytest.approx(1.0)


def _crossing_rates(c, m, model: str, others: int) -> float:
    """An 8-GPU job with one node in leaf 0 and one in leaf 1, `others` more crossing jobs on those leaves."""
    leaves = c.leaves_in_order()
    jobs = {0: (work(model, 8), gpus_on(c, [leaves[0][0], leaves[1][0]]))}
    for k in range(others):
        jobs[k + 1] = (work("vgg16", 8), gpus_on(c, [leaves[0][k + 1], leaves[1][k + 1]]))
    return m.rates(jobs)[0][0]


def test_large_models_are_very_sensitive_small_ones_less(tree):
    c, m = tree
    rates = {name: _crossing_rates(c, m, name, others=3) for name in ("vgg16", "alexnet", "resnet50", "googlenet")}
    assert rates["alexnet"] < rates["vgg16"] < rates["resnet50"] < 1.0
    assert rates["vgg16"] < 0.75  # hundreds of MB per 0.1 s step: the oversubscribed spine costs a lot
    assert rates["resnet50"] > 0.8
    assert _crossing_rates(c, m, "compute-only", others=3) == 1.0


def test_other_jobs_on_the_uplinks_slow_a_crossing_job(tree):
    c, m = tree
    alone = _crossing_rates(c, m, "vgg16", others=0)
    crowded = _crossing_rates(c, m, "vgg16", others=3)
    assert crowded < alone < 1.0  # alone it pays the spine's ECMP factor only; crowded, the 2:1 oversubscription


def test_same_leaf_beats_cross_spine(tree):
    c, m = tree
    leaves = c.leaves_in_order()
    same = m.rates({1: (work("vgg16", 8), gpus_on(c, leaves[0][:2]))})[1][0]
    cross = m.rates({1: (work("vgg16", 8), gpus_on(c, [leaves[0][0], leaves[1][0]]))})[1][0]
    assert same > cross


def test_ranks_per_node_matter_on_rail_optimised_nodes():
    """NCCL runs a ring per rail and a GPU drives the HCA of its PCIe switch: on nodes of 8 GPUs with 4 EDR
    rails (4 x 12.5 = 50 GB/s), a ring with 8 GPUs on each of 2 nodes reaches all 4 rails (50 x 0.96 =
    48 GB/s) but one with 2 GPUs on a node reaches 1 rail there (12.5 x 0.96 = 12 GB/s)."""
    switches = [TSwitch("L", "L", "leaf")]
    hosts, links, nodes = [], [], []
    for i in range(3):
        host = f"n{i}"
        hosts.append(THost(host))
        links += [TLink(f"{host}-L-{r}", host, "L", 100.0, a_port=r + 1, b_port=4 * i + r + 1) for r in range(4)]
        gpus = tuple(GpuState(8 * i + g + 1, g, "V100", 32768, nvlink_gbps=300.0) for g in range(8))
        nodes.append(NodeState(host, gpus=gpus, nvlink_islands=(tuple(range(8)),), hca_gbps=400.0))
    c = SimCluster.from_inventory(Fabric(switches=switches, hosts=hosts, links=links), nodes)
    m = RuntimeModel(c)
    w = Work(16, 0.1, 100e6)
    assert c.node_nic_gbs[0] == pytest.approx(50.0)
    assert m.busbw({1: (w, c.node_gpus[0] + c.node_gpus[1])})[1] == pytest.approx(48.0)
    ragged = c.node_gpus[0] + c.node_gpus[1][:6] + c.node_gpus[2][:2]
    assert m.busbw({1: (w, ragged)})[1] == pytest.approx(12.0)


def test_nvlink_island_beats_spanning_islands():
    """A DGX-1-like node: 8 GPUs in two NVLink islands of 4 (PCIe between them)."""
    gpus = tuple(GpuState(i + 1, i, "V100", 32768, nvlink_gbps=300.0) for i in range(8))
    node = NodeState("n1", gpus=gpus, nvlink_islands=((0, 1, 2, 3), (4, 5, 6, 7)), hca_gbps=100.0)
    c = SimCluster.from_inventory(Fabric(), [node])
    m = RuntimeModel(c)
    one = m.rates({1: (work("vgg16", 4), [0, 1, 2, 3])})[1][0]
    two = m.rates({1: (work("vgg16", 4), [0, 1, 4, 5])})[1][0]
    assert one == pytest.approx(1.0)
    assert two < 0.9


def test_duty_cycle_and_link_utilisation(tree):
    c, m = tree
    leaves = c.leaves_in_order()
    jobs = {
        1: (work("vgg16", 8), gpus_on(c, [leaves[0][0], leaves[1][0]])),
        2: (work("vgg16", 4), c.node_gpus[leaves[2][0]]),
    }
    rates = m.rates(jobs)
    assert 0 < rates[1][1] < 1 and rates[2][1] > 0  # share of the step spent in the all-reduce
    util = m.link_utilisation(jobs, rates)
    crossing_uplinks = c.group_links[c.node_group[leaves[0][0]]]
    assert all(util[k] > 0 for k in crossing_uplinks)
    assert not any(k in util for k in c.group_links[c.node_group[leaves[2][0]]])  # one node: no fabric traffic


def test_checkpoint_cost_grows_with_the_model():
    p = RuntimeParams()
    small, big = profile("googlenet").grad_bytes, profile("vgg19").grad_bytes
    assert p.checkpoint_s(small) < p.checkpoint_s(big)
    assert p.move_cost_s(big) == pytest.approx(p.checkpoint_s(big) + p.restart_s)
    assert p.restart_s == 30.0  # the engine's Config.restart_overhead_s


def test_reference_ideal_step():
    w = work("resnet50", 1)
    assert reference_ideal_step(w) == pytest.approx(w.step_compute_s)
    assert reference_ideal_step(work("resnet50", 8)) > w.step_compute_s  # two nodes: the ring over EDR
