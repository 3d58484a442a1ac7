"""How the placer scores a candidate (`Placer._eval`, the uplinks and rings it shares, the storage term, the
saturated slowdown) on small fabrics, every figure worked by hand from the cost model (costmodel.py):

    step = compute + comm + io, slowdown = step / ideal, score = slowdown + fragmentation
    comm = 2 (n - 1) / n * S / B + 2 (n - 1) * latency[level]

Defaults used below: S = 1 GiB (training), compute 0.1 s on an H100, net_efficiency 0.96, spine_factor 0.9,
core_factor 0.8, latency per ring step (island, node, leaf, pod, fabric) = (2, 3, 5, 6, 7) us, NVLink 900 GB/s x
0.53 = 477 GB/s, PCIe 20 GB/s; a 400 Gb/s HCA or cable is 50 GB/s.
"""

from __future__ import annotations

import pytest

from scheduler.core import schedule
from scheduler.core.placement import Placer
from scheduler.core.state import ClusterState
from scheduler.core.topology import build_topology
from tests.scheduler.core.builders import SnapBuilder, config, two_leaves

GIB = float(1 << 30)
HOT = "; best available despite hot or erroring links"


def place_one(b: SnapBuilder, **job):
    b.job(1, **job)
    d = schedule(b.snapshot())
    assert len(d.placements) == 1, d.pending_reasons
    return d.placements[0]


def placer_of(b: SnapBuilder, **snap_kw) -> Placer:
    snap = b.snapshot(**snap_kw)
    return Placer(ClusterState(snap, build_topology(snap.fabric)))


def found(b: SnapBuilder, **job):
    """The placer, the job's context and the best candidate `Placer.find` gives for job 1."""
    placer = placer_of(b)
    ctx, error = placer.context(b.job(1, **job))
    assert error is None, error
    return placer, ctx, placer.find(ctx)


def two_pods(core_gbps: float = 200.0, storage: bool = False, busy: bool = True) -> SnapBuilder:
    """Core C1 over two pods: L1 (n1, n2) under S1 and L2 (n3, n4, and with `storage` the storage host stor1)
    under S2, two 400 Gb/s uplinks a leaf. Pod 1 reaches the core over one `core_gbps` cable, pod 2 over two of
    400 Gb/s. n2 and n4 are busy (unless not `busy`), so a 2 x 8 gang takes n1 and n3, through the core."""
    b = SnapBuilder()
    b.core("C1")
    b.spine("S1")
    b.spine("S2")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    if storage:
        b.node("stor1", gpus=0, storage=True)
    b.leaf("L2", ["n3", "n4", *(["stor1"] if storage else [])], {"S2": 2})
    b.uplink("S1", "C1", gbps=core_gbps)
    b.uplink("S2", "C1", count=2)
    b.pool(1, "train")
    if busy:
        b.run(8, {"n2": list(range(8))})
        b.run(9, {"n4": list(range(8))})
    return b


# ----------------------------------------------------------------------------------------- hot leaves


def test_a_gang_crossing_a_hot_leaf_through_the_spine_is_flagged():
    # n2 and n4 busy: the 2 x 8 gang must take n1 and n3, through S1. L1's uplink runs at 90 % (hot from 80 %):
    # the placement is the only one and says it sits on a hot link.
    b = two_leaves()
    b.pool(1, "train")
    b.run(8, {"n2": list(range(8))})
    b.run(9, {"n4": list(range(8))})
    b.util["L1-S1"] = 0.9
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert (sorted(p.nodes), p.level) == (["n1", "n3"], "pod")
    assert p.explanation.endswith(HOT)


def test_a_gang_crossing_cool_leaves_through_the_spine_is_not_flagged():
    b = two_leaves()
    b.pool(1, "train")
    b.run(8, {"n2": list(range(8))})
    b.run(9, {"n4": list(range(8))})
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert (sorted(p.nodes), p.level) == (["n1", "n3"], "pod")
    assert not p.explanation.endswith(HOT)


def test_a_gang_on_a_node_whose_link_logs_errors_is_flagged():
    # n3 and n4 busy: the gang must take n1 + n2; n1's host link logs errors (not hot: no utilisation).
    b = two_leaves()
    b.pool(1, "train")
    b.run(8, {"n3": list(range(8)), "n4": list(range(8))})
    b.errors["n1-L1"] = True
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert sorted(p.nodes) == ["n1", "n2"]
    assert p.explanation.endswith(HOT)


def test_a_gang_inside_a_leaf_with_hot_uplinks_is_not_flagged():
    # n3 and n4 busy: the gang takes n1 + n2 inside L1. Its ring never leaves the leaf, so L1's hot uplink
    # does not concern it.
    b = two_leaves()
    b.pool(1, "train")
    b.run(8, {"n3": list(range(8)), "n4": list(range(8))})
    b.util["L1-S1"] = 0.9
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert (sorted(p.nodes), p.level) == (["n1", "n2"], "leaf")
    assert not p.explanation.endswith(HOT)


# ----------------------------------------------------------------------------------------- uplinks


def test_a_ring_through_the_core_is_held_to_its_pods_core_uplink():
    # n1 + n3 through the core. Pod 1's one 200 Gb/s core cable: 25 GB/s, and 800 Gb/s of leaf cables below it
    # (oversubscription 4) leave 800 / 4 / 8 = 25 GB/s: min(HCA 50, L1 uplinks 100, L2 uplinks 100, pod 1 25,
    # pod 2 100) = 25 (alone on it: no ECMP loss) x 0.96 = 24 GB/s.
    p = place_one(two_pods(), gpus=16, gpus_per_node=8)
    assert (p.nodes, p.level) == (("n1", "n3"), "fabric")
    assert p.cost["bandwidth_gbs"] == pytest.approx(24.0)


# ----------------------------------------------------------------------------------------- the candidate's terms


def test_two_gpus_on_a_free_node_of_a_free_leaf_pay_each_fragmentation_term_once():
    # 2 of n1's 8 GPUs (one NVLink island), L1 (n1, n2) wholly free before: one island broken (0.02), one
    # node (0.02), one leaf (0.05), 6 of 8 GPUs left free on the node touched (0.01 x 0.75), no extra node:
    # 0.0975. The step is the ideal one (2 GPUs in one island): slowdown 1.0.
    b = two_leaves()
    b.pool(1, "train")
    p = place_one(b, gpus=2)
    assert p.nodes == ("n1",)
    assert p.cost["slowdown"] == 1.0
    assert p.cost["fragmentation"] == pytest.approx(0.0975)
    assert p.score == pytest.approx(1.0975)


def test_a_one_gpu_job_all_reduces_nothing():
    # One GPU: no ring, comm 0; compute 0.1 s on an idle H100, the ideal step: slowdown 1.0.
    b = two_leaves()
    b.pool(1, "train")
    p = place_one(b, gpus=1)
    assert p.cost["comm_s"] == 0.0
    assert p.cost["slowdown"] == 1.0


def test_an_island_the_placement_does_not_touch_is_not_broken():
    # n1: islands 0-3 and 4-7, all free, alone on L1. 2 GPUs take one island: that island (0.02), the node (0.02)
    # and the leaf (0.05) are left partly used, 6 of 8 GPUs free (0.01 x 0.75); the other island stays whole:
    # 0.0975.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.pool(1, "train")
    p = place_one(b, gpus=2)
    assert p.cost["fragmentation"] == pytest.approx(0.0975)


def test_each_candidate_a_gang_search_prices_counts_once():
    # Free 2 x 8 gang on two free leaves: one candidate per leaf (n1 + n2, n3 + n4), both inside a leaf and
    # not flagged, so the search stops there: 2 evaluations.
    b = two_leaves()
    b.pool(1, "train")
    placer = placer_of(b)
    ctx, error = placer.context(b.job(1, gpus=16, gpus_per_node=8))
    assert error is None
    cand = placer.find(ctx)
    assert [node.name for node, _ in cand.picks] == ["n1", "n2"]
    assert placer.evaluations == 2


def test_a_gpu_reporting_negative_utilisation_computes_no_faster_than_an_idle_one():
    # utilisation -0.5 (a broken exporter): the busiest GPU's load is read from 0 up, so the compute is the
    # idle 0.1 s / 1.0, not 0.1 / (1 + 0.5).
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    for h in ("n1", "n2"):
        for i in range(8):
            b.set_gpu(h, i, utilisation=-0.5)
    p = place_one(b, gpus=8)
    assert p.cost["compute_s"] == pytest.approx(0.1)
    assert p.cost["slowdown"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------- storage


def test_a_job_on_the_node_that_holds_its_dataset_reads_nothing_over_the_network():
    # The dataset is on n1 itself: placed there, the job's io is 0 (the ideal step counts a read over n1's
    # own HCA: 2**30 B / 48 GB/s, so the placement is better than ideal).
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    p = place_one(b, gpus=8, workload="data-intensive", dataset_node="n1")
    assert p.nodes == ("n1",)
    assert p.cost["io_s"] == 0.0
    assert p.cost["slowdown"] < 1.0


def test_four_gpus_of_eight_read_their_dataset_over_half_the_nodes_hca():
    # stor1 beside n1 on L1. 4 of n1's 8 GPUs drive 4/8 of its 50 GB/s HCA: min(25, stor1's 50) x 0.96 = 24 GB/s;
    # inside the leaf nothing else lowers it. 2.4e9 B a step: io = 2.4e9 / 24e9 = 0.1 s.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "stor1"], {"S1": 1})
    b.set_node("stor1", storage=True)
    b.pool(1, "train", hosts=["n1"])
    p = place_one(b, gpus=4, workload="data-intensive", dataset_node="stor1", io_bytes_per_step=2.4e9)
    assert p.cost["io_s"] == pytest.approx(0.1)


# ----------------------------------------------------------------------------------------- saturated slowdown


def two_to_one(host_gbps: float = 400.0) -> SnapBuilder:
    """L1 (n1, n2) and L2 (n3, n4) under S1, one 400 Gb/s uplink each (2:1 with 400 Gb/s hosts); n2 and n4
    busy, so a 2 x 8 gang takes n1 + n3 through the spine."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1}, host_gbps=host_gbps)
    b.leaf("L2", ["n3", "n4"], {"S1": 1}, host_gbps=host_gbps)
    b.pool(1, "train")
    b.run(8, {"n2": list(range(8))})
    b.run(9, {"n4": list(range(8))})
    return b


def test_a_ring_across_a_busy_leaf_expects_its_hosts_share_of_the_uplinks():
    # Now: alone on the uplinks, the ring gets min(HCA 50, uplink 50) x 0.96 = 48 GB/s. Once both hosts of each
    # leaf talk across it: 50 GB/s / 2 hosts x 0.9 (ECMP) x 0.96 = 21.6 GB/s. comm = 2 x 15/16 x 2**30 / 21.6e9
    # + 2 x 15 x 6 us (pod); the ideal: whole nodes on one leaf at 48 GB/s, 2 x 15 x 5 us.
    placer, ctx, cand = found(two_to_one(), gpus=16, gpus_per_node=8)
    assert [node.name for node, _ in cand.picks] == ["n1", "n3"]
    assert cand.bw == pytest.approx(48.0)
    comm = 2 * 15 / 16 * GIB / 21.6e9 + 30 * 6e-6
    ideal = 0.1 + 2 * 15 / 16 * GIB / 48e9 + 30 * 5e-6
    assert ctx.ideal == pytest.approx(ideal)
    assert placer.saturated_slowdown(ctx, cand) == pytest.approx((0.1 + comm) / ideal)
    assert placer.saturated_slowdown(ctx, cand) > cand.slowdown


def test_a_ring_held_below_its_hosts_uplink_share_keeps_its_slowdown():
    # 100 Gb/s hosts: the HCA gives 12.5 x 0.96 = 12 GB/s, below the saturated uplink share 50 / 2 x 0.9 x 0.96
    # = 21.6: nothing changes.
    placer, ctx, cand = found(two_to_one(host_gbps=100.0), gpus=16, gpus_per_node=8)
    assert cand.level == 3 and cand.bw == pytest.approx(12.0)
    assert placer.saturated_slowdown(ctx, cand) == cand.slowdown


def test_a_ring_inside_one_leaf_keeps_its_slowdown():
    # n3 + n4 busy instead: the gang is n1 + n2 inside L1, it crosses no uplink.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.leaf("L2", ["n3", "n4"], {"S1": 1})
    b.pool(1, "train")
    b.run(8, {"n3": list(range(8)), "n4": list(range(8))})
    placer, ctx, cand = found(b, gpus=16, gpus_per_node=8)
    assert [node.name for node, _ in cand.picks] == ["n1", "n2"] and cand.level == 2
    assert placer.saturated_slowdown(ctx, cand) == cand.slowdown


def test_a_single_node_job_keeps_its_slowdown():
    placer, ctx, cand = found(two_to_one(), gpus=4)
    assert len(cand.picks) == 1
    assert placer.saturated_slowdown(ctx, cand) == cand.slowdown


def beside_a_lone_leaf(uplink_gbps: float | None) -> SnapBuilder:
    """L1 (n1, n2) under S1 with one 400 Gb/s uplink, n2 busy; L3 holds n5 alone, cabled to S1 at `uplink_gbps`
    (None: no uplink at all, L3 is a pod of its own with no way out). A 2 x 8 gang takes n1 + n5."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.leaf("L3", ["n5"], {"S1": 1} if uplink_gbps else {}, uplink_gbps=uplink_gbps or 0.0)
    b.pool(1, "train")
    b.run(8, {"n2": list(range(8))})
    return b


def test_a_leaf_without_uplinks_sets_no_saturated_share_of_its_own():
    # n1 + n5 (levels apart: through the core or not at all, 7 us a ring step). L3 has no uplink capacity to
    # share, so only L1's counts: 50 GB/s / 2 hosts x 0.9 x 0.96 = 21.6 GB/s (L1 is group 0: it is not skipped
    # as a node outside the fabric would be).
    placer, ctx, cand = found(beside_a_lone_leaf(None), gpus=16, gpus_per_node=8)
    assert [node.name for node, _ in cand.picks] == ["n1", "n5"] and cand.level == 4
    assert cand.bw == pytest.approx(48.0)
    comm = 2 * 15 / 16 * GIB / 21.6e9 + 30 * 7e-6
    ideal = 0.1 + 2 * 15 / 16 * GIB / 48e9 + 30 * 5e-6
    assert placer.saturated_slowdown(ctx, cand) == pytest.approx((0.1 + comm) / ideal)


def test_a_one_gigabit_uplink_of_a_one_host_leaf_is_that_hosts_whole_share():
    # L3's one uplink runs at 1 Gb/s = 0.125 GB/s; its one host has all of it. Now: 0.125 x 0.96 = 0.12 GB/s (the
    # bottleneck). Saturated: 0.125 / 1 host x 0.9 x 0.96 = 0.108 GB/s (L1's 21.6 is higher). Through S1: 6 us.
    placer, ctx, cand = found(beside_a_lone_leaf(1.0), gpus=16, gpus_per_node=8)
    assert [node.name for node, _ in cand.picks] == ["n1", "n5"] and cand.level == 3
    assert cand.bw == pytest.approx(0.12)
    comm = 2 * 15 / 16 * GIB / 0.108e9 + 30 * 6e-6
    assert placer.saturated_slowdown(ctx, cand) == pytest.approx((0.1 + comm) / ctx.ideal)


# ----------------------------------------------------------------------------------------- rings of preempted jobs


def preempted_ring(early_gang: bool) -> SnapBuilder:
    """L1 (n1, n2), L2 (n3, n4) under S1, one 400 Gb/s uplink each. Job 20 (priority 10) is a 4 + 4 ring on n1 and
    n3, through both leaves' uplinks; the rest of n1 and n3, and 6 GPUs of n2 and n4, run high-priority jobs.
    Job 1 (4 GPUs on one node) can only start by preempting job 20; job 2 (2 + 2) then fits on n2 + n4 only,
    across the spine. With `early_gang`, L3 (n5, n6, 2 GPUs free each) and job 5 (2 + 2), queued first, are
    added: job 5 takes n5 + n6 inside L3, before the preemption."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.leaf("L2", ["n3", "n4"], {"S1": 1})
    if early_gang:
        b.leaf("L3", ["n5", "n6"], {"S1": 2})
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2, 3], "n3": [0, 1, 2, 3]}, priority=10)
    for jid, host, gpus in ((21, "n1", [4, 5, 6, 7]), (22, "n3", [4, 5, 6, 7]), (23, "n2", list(range(6)))):
        b.run(jid, {host: gpus}, priority=100)
    b.run(24, {"n4": list(range(6))}, priority=100)
    if early_gang:
        b.run(25, {"n5": list(range(6))}, priority=100)
        b.run(26, {"n6": list(range(6))}, priority=100)
        b.job(5, gpus=4, nodes=2, gpus_per_node=2, priority=100)
    b.job(1, gpus=4, nodes=1, priority=100)
    b.job(2, gpus=4, nodes=2, gpus_per_node=2, priority=100)
    return b


def test_a_ring_preempted_this_round_no_longer_shares_the_uplinks():
    # Job 20 stops for job 1 (single-node candidates only are priced before that). Job 2's ring then crosses
    # L1's and L2's uplinks alone: min(HCA 50, uplinks 50) x 0.96 = 48 GB/s, not 50 / 2 x 0.9 x 0.96 = 21.6
    # beside job 20's ring.
    d = schedule(preempted_ring(early_gang=False).snapshot(config(leaf_wait=False)))
    assert [p.job_id for p in d.preemptions] == [20]
    assert d.placement_for(2).nodes == ("n2", "n4")
    assert d.placement_for(2).cost["bandwidth_gbs"] == pytest.approx(48.0)


@pytest.mark.xfail(
    strict=True,
    reason="bug: the ring load is built once, at the first multi-node price of the round; a ring preempted after "
    "that (here job 20, after job 5 was placed) still counts on its uplinks, so job 2 gets 21.6 GB/s instead of 48",
)
def test_a_ring_preempted_after_another_gang_was_placed_no_longer_shares_the_uplinks():
    d = schedule(preempted_ring(early_gang=True).snapshot(config(leaf_wait=False)))
    assert [p.job_id for p in d.preemptions] == [20]
    assert d.placement_for(5).nodes == ("n5", "n6")
    assert d.placement_for(2).nodes == ("n2", "n4")
    assert d.placement_for(2).cost["bandwidth_gbs"] == pytest.approx(48.0)


# ----------------------------------------------------------------------------------------- more of the terms


def test_gpus_left_out_of_the_placement_do_not_slow_it():
    # n1's GPUs 4-7 run at 90 % for work outside the scheduler; a 4-GPU job takes the idle 0-3, and only the
    # GPUs it runs on set its pace: compute 0.1 s, the ideal.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "train")
    for i in range(4, 8):
        b.set_gpu("n1", i, utilisation=0.9)
    p = place_one(b, gpus=4)
    assert p.cost["compute_s"] == pytest.approx(0.1)


def test_two_gpus_of_one_island_all_reduce_over_nvlink():
    # 2 GPUs of n1's island: 900 x 0.53 = 477 GB/s; comm = 2 x 1/2 x 2**30 / 477e9 + 2 x 1 x 2 us.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "train")
    p = place_one(b, gpus=2)
    assert p.cost["bandwidth_gbs"] == pytest.approx(477.0)
    assert p.cost["comm_s"] == pytest.approx(GIB / 477e9 + 4e-6)


def test_a_gang_that_takes_a_whole_leaf_breaks_no_leaf():
    # 2 x 8 on n1 + n2, all of L1: nothing of the leaf is left, so it is not "left partly used"; no island or
    # node is left partly used either, nothing is left free on the nodes, no extra node: fragmentation 0.
    b = two_leaves()
    b.pool(1, "train")
    b.run(9, {"n3": [0]})
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert sorted(p.nodes) == ["n1", "n2"]
    assert p.cost["fragmentation"] == 0.0


def test_a_ring_whose_first_leaf_has_the_thinner_uplink_is_held_to_it():
    # As two_to_one, but L1 (the first leaf group, id 0) has one 200 Gb/s uplink: 25 GB/s, and 800 Gb/s of hosts
    # at oversubscription 4 leave 800 / 4 / 8 = 25: min(HCA 50, L1 25, L2 50) x 0.96 = 24 GB/s.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1}, uplink_gbps=200.0)
    b.leaf("L2", ["n3", "n4"], {"S1": 1})
    b.pool(1, "train")
    b.run(8, {"n2": list(range(8))})
    b.run(9, {"n4": list(range(8))})
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert (sorted(p.nodes), p.level) == (["n1", "n3"], "pod")
    assert p.cost["bandwidth_gbs"] == pytest.approx(24.0)


def test_a_dataset_across_the_core_is_read_at_the_pods_share_of_the_core():
    # two_pods with stor1 on L2 (pod 2), n3 busy too: the 4-GPU job can only take n1 (pod 1). 4 of 8 GPUs:
    # min(50 x 4/8, stor1's 50) x 0.96 = 24 GB/s; across leaves / max(oeff L1 = 800/800 = 1, L2 = 1200/800 = 1.5)
    # = 16; across the core / max(pod 1: 800/200 = 4, pod 2: 800/800 = 1) x 0.8 = 3.2 GB/s. 3.2e9 B: 1.0 s.
    b = two_pods(storage=True)
    b.run(7, {"n3": list(range(8))})
    p = place_one(b, gpus=4, workload="data-intensive", dataset_node="stor1", io_bytes_per_step=3.2e9)
    assert p.nodes == ("n1",)
    assert p.cost["io_s"] == pytest.approx(1.0)


def test_one_byte_a_step_from_the_dataset_is_still_read():
    # 1 B over 24 GB/s (4 of n1's 8 GPUs, stor1 beside it): 1 / 24e9 s.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "stor1"], {"S1": 1})
    b.set_node("stor1", storage=True)
    b.pool(1, "train", hosts=["n1"])
    p = place_one(b, gpus=4, workload="data-intensive", dataset_node="stor1", io_bytes_per_step=1.0)
    assert p.cost["io_s"] == pytest.approx(1 / 24e9)


# ----------------------------------------------------------------------------------------- through the core


def test_a_ring_beside_another_through_the_core_gets_half_the_pods_core_uplink():
    # two_pods, but n2 and n4 hold a 4 + 4 ring (job 7) through the core and single-node jobs on their other
    # GPUs. n1 + n3 share every uplink with job 7's ring: pod 1's core cable 25 GB/s / 2 x 0.8 (ECMP) = 10 (its
    # 800 Gb/s of leaf cables at oversubscription 4 leave 25, more than that); L1 and L2 100 / 2 x 0.9 = 45,
    # pod 2 100 / 2 x 0.8 = 40, the HCAs 50 (job 7 is on other nodes): 10 x 0.96 = 9.6 GB/s.
    b = two_pods(busy=False)
    b.run(7, {"n2": [0, 1, 2, 3], "n4": [0, 1, 2, 3]})
    b.run(8, {"n2": [4, 5, 6, 7]})
    b.run(9, {"n4": [4, 5, 6, 7]})
    _, _, cand = found(b, gpus=16, gpus_per_node=8)
    assert [node.name for node, _ in cand.picks] == ["n1", "n3"] and cand.level == 4
    assert cand.bw == pytest.approx(9.6)


def test_a_ring_through_a_half_used_core_cable_gets_what_is_left_of_it():
    # two_pods with pod 1's core cable 50 % used: 200 x 0.5 = 100 Gb/s left below 800 Gb/s of leaf cables,
    # oversubscription 8: 800 / 8 / 8 = 12.5 GB/s (below the cable's 25): 12.5 x 0.96 = 12 GB/s.
    b = two_pods()
    b.util["S1-C1"] = 0.5
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert (p.nodes, p.level) == (("n1", "n3"), "fabric")
    assert p.cost["bandwidth_gbs"] == pytest.approx(12.0)


def test_a_one_gigabit_core_cable_is_the_rings_bottleneck():
    # 1 Gb/s = 0.125 GB/s (800 Gb/s of leaf cables below it: 800 / 800 / 8 = 0.125 too): 0.125 x 0.96 = 0.12 GB/s.
    _, _, cand = found(two_pods(core_gbps=1.0), gpus=16, gpus_per_node=8)
    assert [node.name for node, _ in cand.picks] == ["n1", "n3"] and cand.level == 4
    assert cand.bw == pytest.approx(0.12)


def test_a_dataset_in_the_oversubscribed_pod_is_read_at_that_pods_share_of_the_core():
    # As the dataset across the core, the other way round: stor1 on L1 (pod 1, oversubscribed 4:1 to the core),
    # the job on n3 (pod 2). n1 busy, so L1 holds no candidate. 4 of 8 GPUs: min(25, 50) x 0.96 = 24 GB/s;
    # / max(oeff L2 = 800/800 = 1, L1 = 1200/800 = 1.5) = 16; / max(pod 2: 1, pod 1: 4) x 0.8 = 3.2 GB/s: 1.0 s.
    b = SnapBuilder()
    b.core("C1")
    b.spine("S1")
    b.spine("S2")
    b.node("stor1", gpus=0, storage=True)
    b.leaf("L1", ["n1", "n2", "stor1"], {"S1": 2})
    b.leaf("L2", ["n3", "n4"], {"S2": 2})
    b.uplink("S1", "C1", gbps=200.0)
    b.uplink("S2", "C1", count=2)
    b.pool(1, "train")
    for jid, host in ((6, "n1"), (7, "n2"), (8, "n4")):
        b.run(jid, {host: list(range(8))})
    p = place_one(b, gpus=4, workload="data-intensive", dataset_node="stor1", io_bytes_per_step=3.2e9)
    assert p.nodes == ("n3",)
    assert p.cost["io_s"] == pytest.approx(1.0)


def test_a_node_outside_the_fabric_reads_its_dataset_through_the_core_at_no_oversubscription():
    # x1 is in no leaf (absent from the fabric: reachable at its own 400 Gb/s HCA, 50 GB/s, in no pod). stor1 on
    # L1 (two uplinks: 1:1; pod 1 has no core cable: oversubscription 1). 4 of x1's 8 GPUs: min(25, 50) x 0.96
    # = 24 GB/s, / max(1, 1) = 24, across the core / max(1, 1) x 0.8 = 19.2 GB/s. 1.92e9 B: 0.1 s.
    b = SnapBuilder()
    b.spine("S1")
    b.node("stor1", gpus=0, storage=True)
    b.leaf("L1", ["n1", "stor1"], {"S1": 2})
    b.node("x1")
    b.fabric.hosts = [h for h in b.fabric.hosts if h.key != "x1"]
    b.pool(1, "train")
    b.run(6, {"n1": list(range(8))})
    p = place_one(b, gpus=4, workload="data-intensive", dataset_node="stor1", io_bytes_per_step=1.92e9)
    assert p.nodes == ("x1",)
    assert p.cost["io_s"] == pytest.approx(0.1)
