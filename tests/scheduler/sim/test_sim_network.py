"""The network model of the replay held against hand-computed cases (scheduler/sim/runtime.py).

Constants used in the arithmetic (the engine's CostParams, docs/scheduler.md): EDR 100 Gb/s = 12.5 GB/s,
net_efficiency 0.96 (so a node's HCA carries 12.0 GB/s of ring traffic), spine_factor 0.9 (ECMP loss once
two rings share a leaf's uplinks), V100 NVLink 300 GB/s x nvlink_efficiency 0.53 = 159 GB/s, per ring
step latency 2 us (island), 3 us (node), 5 us (leaf), 6 us (through a spine). V100 clusters: a step's
compute is the profile's V100 seconds unchanged. Work(16, 0.1, 100e6): 16 ranks, 0.1 s of compute,
100 MB of gradients; a 16-rank ring all-reduce moves 2 x 15/16 = 1.875 x S per rank.
"""

import random

import pytest

from fabric.topology.types import Fabric, THost, TLink, TSwitch
from scheduler.core.types import GpuState, NodeState
from scheduler.sim.cluster import SimCluster, build_cluster, parse_cluster_spec
from scheduler.sim.runtime import RuntimeModel, Work, max_min_share, profile

W16 = Work(16, 0.1, 100e6)
# One leaf, alone: B = min(NVLink 159, HCA 12.0) = 12.0 GB/s;
# comm = 1.875 x 100e6 / 12e9 + 2 x 15 x 5e-6 = 0.015625 + 0.00015; this is also the ideal step.
IDEAL16 = 0.1 + 1.875 * 100e6 / 12e9 + 30 * 5e-6


def step16(busbw_gbs: float, latency_s: float = 6e-6) -> float:
    """Step of W16 with its ring at `busbw_gbs`, 30 ring steps of `latency_s` (6 us: across the spine)."""
    return 0.1 + 1.875 * 100e6 / (busbw_gbs * 1e9) + 30 * latency_s


@pytest.fixture(scope="module")
def fat():
    """The churn cluster: 32 nodes x 8 V100, one EDR HCA each, 4 leaves of 8 at 2:1 (uplinks 50 GB/s a leaf)."""
    c = build_cluster(parse_cluster_spec("32x8/8:2"))
    return c, RuntimeModel(c), c.leaves_in_order()


@pytest.fixture(scope="module")
def small():
    """4 nodes x 8 V100 in 2 leaves of 2 at 2:1: a leaf's uplinks carry 2 x 12.5 / 2 = 12.5 GB/s."""
    c = build_cluster(parse_cluster_spec("4x8/2:2"))
    return c, RuntimeModel(c), c.leaves_in_order()


def on(c, *nodes):
    return [p for n in nodes for p in c.node_gpus[n]]


def test_one_gpu_job_runs_at_rate_one(fat):
    _c, m, _ = fat
    assert m.rates({1: (Work(1, 0.1, 100e6), [0])}) == {1: (1.0, 0.0)}


def test_nvlink_only_job_is_ideal(fat):
    """8 ranks in one NVLink island: B = 159 GB/s; comm = 2 x 7/8 x 100e6 / 159e9 + 14 x 2e-6 s, which is
    the ideal step's comm too (the job fits one island), so rate 1."""
    c, m, _ = fat
    w = Work(8, 0.1, 100e6)
    (rate, duty) = m.rates({1: (w, c.node_gpus[0])})[1]
    comm = 1.75 * 100e6 / 159e9 + 14 * 2e-6
    assert m.busbw({1: (w, c.node_gpus[0])})[1] == pytest.approx(159.0)
    assert rate == pytest.approx(1.0)
    assert duty == pytest.approx(comm / (0.1 + comm))


def test_two_nodes_in_one_leaf_alone(fat):
    """2 nodes x 8 GPUs in leaf 0, nothing else running: B = 12.0 GB/s, the ideal placement: rate 1;
    duty = (0.015625 + 0.00015) / 0.115775 = 0.13626."""
    c, m, leaves = fat
    jobs = {1: (W16, on(c, leaves[0][0], leaves[0][1]))}
    assert m.busbw(jobs)[1] == pytest.approx(12.0)
    rate, duty = m.rates(jobs)[1]
    assert rate == pytest.approx(1.0)
    assert duty == pytest.approx((1.875 * 100e6 / 12e9 + 30 * 5e-6) / IDEAL16)


def test_across_leaves_alone_pays_only_the_spine_hop_latency(fat):
    """One node in leaf 0, one in leaf 1, no other traffic: one ring flow on 50 x 0.96 = 48 GB/s of uplinks,
    no collision (ECMP loss needs two flows): B = 12.0 GB/s as inside a leaf. Only the ring steps' latency
    grows (6 us instead of 5): rate = 0.115775 / 0.115805 = 0.99974."""
    c, m, leaves = fat
    jobs = {1: (W16, on(c, leaves[0][0], leaves[1][0]))}
    assert m.busbw(jobs)[1] == pytest.approx(12.0)
    assert m.rates(jobs)[1][0] == pytest.approx(IDEAL16 / step16(12.0))


def test_two_jobs_share_one_2to1_uplink_and_get_half(small):
    """Leaf 0 = nodes 0, 1 with 12.5 GB/s of uplinks (2:1). Job A: node 0 + node 2, job B: node 1 + node 3;
    both rings cross leaf 0's uplinks: 12.5 x 0.96 x 0.9 (ECMP, two flows) = 10.8 GB/s shared max-min by
    two rings: 5.4 GB/s each, under half the 12.0 one HCA gives. step = 0.1 + 1.875 x 100e6 / 5.4e9 +
    30 x 6e-6 = 0.134902; rate = 0.115775 / 0.134902 = 0.85822."""
    c, m, leaves = small
    jobs = {1: (W16, on(c, leaves[0][0], leaves[1][0])), 2: (W16, on(c, leaves[0][1], leaves[1][1]))}
    bw = m.busbw(jobs)
    assert bw[1] == pytest.approx(5.4) and bw[2] == pytest.approx(5.4)
    r = m.rates(jobs)
    assert r[1][0] == pytest.approx(IDEAL16 / step16(5.4))
    assert r[1][0] == pytest.approx(0.85822, abs=1e-5)
    # Alone, the same ring has the 12.0 GB/s of the uplinks to itself (one flow: no ECMP loss).
    assert m.busbw({1: jobs[1]})[1] == pytest.approx(12.0)


def test_a_busy_2to1_leaf_halves_every_crossing_ring(fat):
    """All 8 nodes of leaf 0 each in a 2-node job to leaf 1: 8 flows on 48 x 0.9 = 43.2 GB/s: 5.4 GB/s each
    (a 2:1 leaf: 50 GB/s for 100 GB/s of HCAs, halved, less the ECMP loss)."""
    c, m, leaves = fat
    jobs = {k: (W16, on(c, leaves[0][k], leaves[1][k])) for k in range(8)}
    assert all(b == pytest.approx(5.4) for b in m.busbw(jobs).values())
    assert all(r == pytest.approx(IDEAL16 / step16(5.4)) for r, _ in m.rates(jobs).values())


def test_a_ring_leaves_its_leaf_once(fat):
    """4 jobs of 32 ranks, each 2 nodes in leaf 0 and 2 in leaf 1 (leaf 0 full): a ring ordered leaf by leaf
    crosses leaf 0's uplinks once, so 4 flows (not 8 nodes' worth): 4 x 12.0 = 48 > 43.2 GB/s, so
    43.2 / 4 = 10.8 GB/s each."""
    c, m, leaves = fat
    w = Work(32, 0.1, 100e6)
    jobs = {
        k: (w, on(c, leaves[0][2 * k], leaves[0][2 * k + 1], leaves[1][2 * k], leaves[1][2 * k + 1])) for k in range(4)
    }
    assert all(b == pytest.approx(10.8) for b in m.busbw(jobs).values())


def test_jobs_inside_one_leaf_leave_the_uplinks_alone(fat):
    """Leaf 0: nodes 1-6 in three 2-node jobs that stay in the leaf, node 0 in a job crossing to leaf 1.
    The in-leaf rings use only their own HCAs; the crossing ring is alone on the uplinks: 12.0 GB/s."""
    c, m, leaves = fat
    L0, L1 = leaves[0], leaves[1]
    jobs = {k: (W16, on(c, L0[1 + 2 * k], L0[2 + 2 * k])) for k in range(3)}
    jobs[9] = (W16, on(c, L0[0], L1[0]))
    bw = m.busbw(jobs)
    assert bw == pytest.approx({0: 12.0, 1: 12.0, 2: 12.0, 9: 12.0})
    assert m.rates(jobs)[0][0] == pytest.approx(1.0)


def test_busy_uplink_and_quiet_uplink(fat):
    """Leaf 0 full of crossing rings (7 to leaf 1, the 8th, J7, to leaf 2): each gets 43.2 / 8 = 5.4 GB/s,
    J7 too (leaf 0 is its bottleneck). Job K crosses leaf 2 -> leaf 3: leaf 2 carries J7 (5.4) and K, two
    flows on 43.2 GB/s: K is limited by its HCA only, 12.0 GB/s, and runs at the alone-across rate."""
    c, m, leaves = fat
    jobs = {k: (W16, on(c, leaves[0][k], leaves[1][k])) for k in range(7)}
    jobs[7] = (W16, on(c, leaves[0][7], leaves[2][0]))
    jobs[8] = (W16, on(c, leaves[2][1], leaves[3][0]))
    bw = m.busbw(jobs)
    assert all(bw[k] == pytest.approx(5.4) for k in range(8))
    assert bw[8] == pytest.approx(12.0)
    r = m.rates(jobs)
    assert r[8][0] == pytest.approx(IDEAL16 / step16(12.0))
    assert r[7][0] == pytest.approx(IDEAL16 / step16(5.4))


def _two_leaves(hca_gbps: list[float], uplink_gbps: float) -> SimCluster:
    """Nodes 0, 1 on leaf A and 2, 3 on leaf B (8 V100 each in one NVLink island), HCAs at the given rates,
    each leaf joined to one spine by `uplink_gbps`."""
    switches = [TSwitch("A", "A", "leaf"), TSwitch("B", "B", "leaf"), TSwitch("S", "S", "spine")]
    hosts, links, nodes = [], [], []
    for i, rate in enumerate(hca_gbps):
        host, leaf = f"n{i}", "A" if i < 2 else "B"
        hosts.append(THost(host))
        links.append(TLink(f"{host}-{leaf}", host, leaf, rate))
        gpus = tuple(GpuState(8 * i + g + 1, g, "V100", 32768, nvlink_gbps=300.0) for g in range(8))
        nodes.append(NodeState(host, gpus=gpus, nvlink_islands=(tuple(range(8)),), hca_gbps=rate))
    links += [TLink("A-S", "A", "S", uplink_gbps), TLink("B-S", "B", "S", uplink_gbps)]
    return SimCluster.from_inventory(Fabric(switches=switches, hosts=hosts, links=links), nodes)


def test_a_ring_that_needs_less_than_its_share_leaves_the_rest():
    """Leaf A's uplink: 100 Gb/s = 12.5 GB/s x 0.96 x 0.9 (two flows) = 10.8 GB/s. Ring A (node 0, EDR, to
    node 2) could use 12.0; ring B starts on node 1 whose HCA is QDR (32 Gb/s = 4 GB/s x 0.96 = 3.84 GB/s).
    Max-min: B stops at 3.84, A takes the rest, 10.8 - 3.84 = 6.96 GB/s (an even split would give 5.4)."""
    c = _two_leaves([100.0, 32.0, 100.0, 100.0], 100.0)
    m = RuntimeModel(c)
    jobs = {1: (W16, on(c, 0, 2)), 2: (W16, on(c, 1, 3))}
    bw = m.busbw(jobs)
    assert bw[2] == pytest.approx(3.84)
    assert bw[1] == pytest.approx(6.96)


def test_two_rings_on_one_hca_share_it(fat):
    """Node 0 of leaf 0 holds 4 GPUs of ring A (with node 1) and 4 of ring B (with node 2): one HCA (12.0
    GB/s) for two rings: 6.0 each. A ring on 4 of a node's 8 GPUs alone gets the whole HCA (one HCA: every
    GPU reaches all of it): 12.0."""
    c, m, leaves = fat
    n0, n1, n2 = leaves[0][:3]
    w = Work(8, 0.1, 100e6)
    a = c.node_gpus[n0][:4] + c.node_gpus[n1][:4]
    b = c.node_gpus[n0][4:] + c.node_gpus[n2][:4]
    assert m.busbw({1: (w, a), 2: (w, b)}) == pytest.approx({1: 6.0, 2: 6.0})
    assert m.busbw({1: (w, a)}) == pytest.approx({1: 12.0})


def test_resnet50_two_nodes_of_eight_on_edr(fat):
    """ResNet-50 (25.557032 M fp32 parameters: S = 102.228 MB), 2 nodes x 8 V100 in one leaf:
    comm = 1.875 x 102.228128e6 / 12e9 + 30 x 5e-6 = 0.016123 s; with 8 such rings through one busy 2:1
    leaf: 1.875 x 102.228128e6 / 5.4e9 + 30 x 6e-6 = 0.035676 s."""
    c, m, leaves = fat
    p = profile("resnet50")
    assert p.grad_bytes == pytest.approx(102.228128e6)
    w = Work(16, p.compute_s(), p.grad_bytes)
    comp = p.compute_s()
    comm_leaf = 1.875 * 102.228128e6 / 12e9 + 30 * 5e-6
    rate, duty = m.rates({1: (w, on(c, leaves[0][0], leaves[0][1]))})[1]
    assert rate == pytest.approx(1.0)
    assert duty == pytest.approx(comm_leaf / (comp + comm_leaf))
    busy = {k: (w, on(c, leaves[0][k], leaves[1][k])) for k in range(8)}
    comm_busy = 1.875 * 102.228128e6 / 5.4e9 + 30 * 6e-6
    assert m.rates(busy)[0][0] == pytest.approx((comp + comm_leaf) / (comp + comm_busy))


def test_rates_do_not_depend_on_job_order(fat):
    c, _m, leaves = fat
    jobs = {k: (W16, on(c, leaves[0][k], leaves[1 + k % 3][k])) for k in range(8)}
    jobs[20] = (Work(8, 0.1, 100e6), c.node_gpus[leaves[3][7]])
    jobs[21] = (Work(1, 0.1, 100e6), c.node_gpus[leaves[1][7]][:1])
    expected = RuntimeModel(c).rates(jobs)
    items = list(jobs.items())
    for seed in range(5):
        random.Random(seed).shuffle(items)
        fresh = RuntimeModel(c)
        assert fresh.rates(dict(items)) == expected
        assert fresh.link_utilisation(dict(items), expected) == RuntimeModel(c).link_utilisation(jobs, expected)


def test_link_utilisation_is_ring_traffic_times_duty(small):
    """Two rings of 5.4 GB/s across leaf 0 (the 2:1 case above), each busy a fraction d of its step:
    leaf 0's uplinks (12.5 GB/s) carry 2 x 5.4 x d; node 0's HCA link (12.5 GB/s) 5.4 x d."""
    c, m, leaves = small
    jobs = {1: (W16, on(c, leaves[0][0], leaves[1][0])), 2: (W16, on(c, leaves[0][1], leaves[1][1]))}
    rates = m.rates(jobs)
    d = (1.875 * 100e6 / 5.4e9 + 30 * 6e-6) / step16(5.4)
    assert rates[1][1] == pytest.approx(d)
    util = m.link_utilisation(jobs, rates)
    for key in c.group_links[c.node_group[leaves[0][0]]]:
        assert util[key] == pytest.approx(2 * 5.4 * d / 12.5)
    for key in c.host_links[leaves[0][0]]:
        assert util[key] == pytest.approx(5.4 * d / 12.5)


def test_max_min_share_by_hand():
    """Link X (10) carries flows 1, 2, 3; link Y (4) carries 3 and 4; flow 1 wants at most 1.
    Y fills first: 4 / 2 = 2 for flows 3 and 4; then flow 1 stops at its cap 1; flow 2 takes what X has
    left: 10 - 1 - 2 = 7."""
    share = max_min_share(
        {"X": 10.0, "Y": 4.0}, {1: (1.0, ("X",)), 2: (99.0, ("X",)), 3: (99.0, ("X", "Y")), 4: (99.0, ("Y",))}
    )
    assert share == pytest.approx({1: 1.0, 2: 7.0, 3: 2.0, 4: 2.0})
