"""Shared GPUs in the placer: which GPU a share takes, and the cost terms of the candidate (fragmentation,
bandwidth, level), each value worked out by hand from CostParams' defaults:

    w_leftover 0.01, nvlink_efficiency 0.53, pcie_gbps 20, latency_s (2e-6 island, 3e-6 node, ...),
    interference mps 0.25, mig 0, timeslice 1; a training step of 0.1 s on an H100 (strength 1.0) and
    1 GiB all-reduced; with one partition and an idle GPU, compute = ideal and slowdown = 1.0.
"""

import pytest

from scheduler.core import schedule
from scheduler.core.placement import Placer
from scheduler.core.state import ClusterState
from scheduler.core.topology import build_topology
from scheduler.core.types import CostParams, Share
from tests.scheduler.core.builders import SnapBuilder, config

NO_MIX = config(fragmentation_max_classes=0)  # MPS packs (least compute left first): no request-mix term


def one_node(sharing: str, replicas: int = 1, gpus: int = 2, hosts=("n1",), **node_kw) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", list(hosts), {"S1": 1}, gpus=gpus, **node_kw)
    b.pool(1, "shared", sharing=sharing, replicas=replicas)
    return b


def place(b: SnapBuilder, cfg=NO_MIX):
    d = schedule(b.snapshot(cfg))
    assert len(d.placements) == 1, d.pending_reasons
    return d.placements[0]


def gpu_of(b: SnapBuilder, gpu_id: int) -> tuple[str, int]:
    return next(k for k, g in b.gpus.items() if g["id"] == gpu_id)


def placer_for(b: SnapBuilder, cfg=NO_MIX) -> Placer:
    return Placer(ClusterState(b.snapshot(cfg), build_topology(b.fabric)))


# ---------------------------------------------------------------- fragmentation term of a shared candidate


def test_mps_share_costs_the_compute_left_on_its_gpu():
    # GPU 1 has 60 % of its compute held: the share packs there, room = (100 - 60) / 100 = 0.4,
    # fragmentation = 0.01 x 0.4 = 0.004, score = slowdown 1.0 + 0.004.
    b = one_node("mps")
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "mps", 60, 20000)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=10000)
    p = place(b)
    assert p.shares == (Share(b.gpu_id("n1", 1), "mps", 30, 10000),)
    assert p.cost["slowdown"] == pytest.approx(1.0)
    assert p.cost["fragmentation"] == pytest.approx(0.004)
    assert p.score == pytest.approx(1.004)


def test_mig_share_costs_the_memory_slices_left_on_its_gpu():
    # A 3g.40gb at start 4 holds memory slices 4..7 (4 of 8): room = 1 - 4/8 = 0.5 before the new
    # instance, fragmentation = 0.01 x 0.5 = 0.005; MIG is isolated, so slowdown 1.0.
    b = one_node("mig")
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "mig", 43, 40960, "3g.40gb", 4)], sharing="mig")
    b.job(1, sharing="mig", mig_profile="2g.20gb")
    p = place(b)
    assert p.shares[0].gpu_id == b.gpu_id("n1", 1)
    assert p.cost["slowdown"] == pytest.approx(1.0)
    assert p.cost["fragmentation"] == pytest.approx(0.005)


def test_timeslice_share_costs_the_replicas_already_used():
    # One GPU, 4 replicas, 1 taken: fragmentation = 0.01 x 1 / (1 GPU x 4 replicas) = 0.0025.
    b = one_node("timeslice", replicas=4, gpus=1)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "timeslice", 25, 0, None, None, 0)], sharing="timeslice")
    b.job(1, sharing="timeslice")
    p = place(b)
    assert p.shares[0].replica == 1  # replica 0 is held
    assert p.cost["fragmentation"] == pytest.approx(0.0025)
    assert p.score == pytest.approx(1.0025)


# ---------------------------------------------------------------- several GPUs: the all-reduce inside the node


def test_two_gpu_share_in_one_island_all_reduces_over_nvlink():
    # 2 GPUs in one H100 island: bw = 900 x 0.53 = 477 GB/s; comm = 2 (2-1)/2 x 2**30 B / 477e9 B/s
    # + 2 (2-1) x 2e-6 s (island latency) = 2**30 / 477e9 + 4e-6.
    b = one_node("timeslice", replicas=2, gpus=2)
    b.job(1, gpus=2, sharing="timeslice")
    p = place(b)
    assert p.level == "island"
    assert p.cost["bandwidth_gbs"] == pytest.approx(477.0)
    assert p.cost["comm_s"] == pytest.approx(2**30 / 477e9 + 4e-6)


def test_two_gpu_share_across_islands_all_reduces_over_pcie():
    # GPUs 0 and 1 in islands of their own: PCIe 20 GB/s, node latency 3e-6 s per step:
    # comm = 2**30 / 20e9 + 2 x 3e-6.
    b = one_node("timeslice", replicas=2, gpus=2, islands=[(0,), (1,)])
    b.job(1, gpus=2, sharing="timeslice")
    p = place(b)
    assert p.level == "node"
    assert p.cost["bandwidth_gbs"] == pytest.approx(20.0)
    assert p.cost["comm_s"] == pytest.approx(2**30 / 20e9 + 6e-6)


def test_one_gpu_share_has_no_all_reduce():
    b = one_node("timeslice", replicas=2, gpus=2)
    b.job(1, sharing="timeslice")
    p = place(b)
    assert p.level == "island"
    assert p.cost["bandwidth_gbs"] is None
    assert p.cost["comm_s"] == 0.0


# ---------------------------------------------------------------- host CPU and memory of shared jobs


def test_shared_single_gpu_skips_a_node_without_the_host_cpu():
    # n1 has 500 millicores in all, n2 4000: a time-sliced job asking 1000 goes to n2 although n1's GPU
    # comes first in the buckets.
    b = one_node("timeslice", replicas=2, gpus=1, hosts=("n1", "n2"))
    b.set_node("n1", cpu_milli=500)
    b.set_node("n2", cpu_milli=4000)
    b.job(1, sharing="timeslice", host_cpu_milli=1000)
    p = place(b)
    assert p.nodes == ("n2",)


# ---------------------------------------------------------------- GPUs that take no MPS share at all


def test_mps_share_with_host_cpu_skips_an_unhealthy_gpu():
    # The job asks host CPU, so the mix (built from the pending jobs) is CPU-aware and every node state is
    # scored as a whole. GPU 0 is unhealthy: it is no MPS GPU at all, so it is neither a candidate nor
    # the representative of the empty GPUs; the share goes to GPU 1.
    b = one_node("mps", gpus=2)
    b.set_node("n1", cpu_milli=8000)
    b.set_gpu("n1", 0, healthy=False)
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000, host_cpu_milli=1000)
    p = place(b, cfg=None)
    assert p.shares[0].gpu_id == b.gpu_id("n1", 1)


def test_mps_share_with_host_cpu_skips_a_gpu_held_whole():
    # GPU 0 is still held whole by job 9 (an exclusive job from before the pool shared by MPS): no MPS GPU,
    # so the share goes to GPU 1, as for an unhealthy GPU.
    b = one_node("mps", gpus=2)
    b.set_node("n1", cpu_milli=8000)
    b.run(9, {"n1": [0]})
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000, host_cpu_milli=1000)
    p = place(b, cfg=None)
    assert p.shares[0].gpu_id == b.gpu_id("n1", 1)


def test_mig_room_counts_the_first_memory_slice():
    # A 1g.10gb at start 0 holds memory slice 0 only: room = 1 - 1/8 = 0.875, fragmentation 0.00875.
    b = one_node("mig", gpus=1)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mig", 14, 10240, "1g.10gb", 0)], sharing="mig")
    b.job(1, sharing="mig", mig_profile="1g.10gb")
    p = place(b)
    assert p.cost["fragmentation"] == pytest.approx(0.00875)


# ---------------------------------------------------------------- one shared GPU: the first few candidates


def found(b: SnapBuilder, job, cfg=NO_MIX):
    """(the placer, its best candidate) for `job` (already added to b)."""
    placer = placer_for(b, cfg)
    ctx, error = placer.context(job)
    assert error is None
    return placer, placer.find(ctx)


def test_single_share_scores_at_most_four_busy_gpus():
    # Time-slicing: slowdown = 1 / (1 - utilisation). GPUs 0..4 (all 0 replicas used, in bucket order) are
    # busy 0.5, 0.5, 0.5, 0.2, 0.1: slowdowns 2, 2, 2, 1.25, 1.11. None is ideal, so the first four are
    # scored and GPU 3 (1.25) wins; GPU 4 would be better but is never looked at. Evaluations: 4 scored,
    # plus 1 for the winner's candidate = 5.
    b = one_node("timeslice", replicas=2, gpus=5)
    for i, u in enumerate((0.5, 0.5, 0.5, 0.2, 0.1)):
        b.set_gpu("n1", i, utilisation=u)
    job = b.job(1, sharing="timeslice")
    placer, cand = found(b, job)
    assert [g.index for g, _ in cand.shares] == [3]
    assert cand.slowdown == pytest.approx(1.25)
    assert placer.evaluations == 5


def test_single_share_stops_at_an_ideal_gpu():
    # GPU 0 is idle: slowdown 1.0, ideal, the search stops there (1 scored + 1 for the candidate).
    b = one_node("timeslice", replicas=2, gpus=3)
    job = b.job(1, sharing="timeslice")
    placer, cand = found(b, job)
    assert [g.index for g, _ in cand.shares] == [0]
    assert placer.evaluations == 2


def test_single_share_keeps_the_first_of_equal_scores():
    # Both GPUs are 50 % busy: slowdown 2.0 each, fragmentation 0: the first in bucket order stays.
    b = one_node("timeslice", replicas=2, gpus=2)
    b.set_gpu("n1", 0, utilisation=0.5)
    b.set_gpu("n1", 1, utilisation=0.5)
    job = b.job(1, sharing="timeslice")
    placer, cand = found(b, job)
    assert [g.index for g, _ in cand.shares] == [0]
    assert placer.evaluations == 3  # 2 scored (neither ideal), 1 candidate built


def test_single_share_weighs_replicas_used_against_load():
    # Two replicas a GPU. GPU 1 (0 used, bucket 0, first) is 50 % busy: 1 / 0.5 = 2.0 + 0.
    # GPU 0 (1 used) is 49.9 % busy: 1 / 0.501 = 1.99601 + 0.01 x 1/2 = 2.00101. GPU 1 wins by the
    # replicas term alone.
    b = one_node("timeslice", replicas=2, gpus=2)
    b.set_gpu("n1", 0, utilisation=0.499, timeslice_used=1)
    b.set_gpu("n1", 1, utilisation=0.5)
    job = b.job(1, sharing="timeslice")
    _, cand = found(b, job)
    assert [g.index for g, _ in cand.shares] == [1]


def test_single_share_within_a_billionth_of_ideal_stops_the_search():
    # GPU 0 is busy u = 9.999999717180685e-10: its slowdown 1 / (1 - u) is, in binary64, exactly 1 + 1e-9,
    # the edge of "ideal" (tolerance 1e-9): the search stops there, although idle GPU 1 (1.0) would be
    # better by a billionth.
    u = 9.999999717180685e-10
    assert 1.0 / (1.0 - u) == 1.0 + 1e-9
    b = one_node("timeslice", replicas=2, gpus=2)
    b.set_gpu("n1", 0, utilisation=u)
    job = b.job(1, sharing="timeslice")
    placer, cand = found(b, job)
    assert [g.index for g, _ in cand.shares] == [0]
    assert placer.evaluations == 2


def test_single_share_on_a_weaker_model_still_looks_past_a_busy_gpu():
    # A100 (strength 0.4): the slowdown is relative to the job's ideal on the same model, so GPU 0, 50 %
    # busy, is 2.0x, not ideal, and idle GPU 1 (1.0x) wins.
    b = one_node("timeslice", replicas=2, gpus=2, model="A100")
    b.set_gpu("n1", 0, utilisation=0.5)
    job = b.job(1, sharing="timeslice")
    _, cand = found(b, job)
    assert [g.index for g, _ in cand.shares] == [1]
    assert cand.slowdown == pytest.approx(1.0)


def test_single_share_on_a_model_of_strength_zero():
    # A model priced at strength 0 is floored at 1e-6 (no division by zero): compute = 0.1 / 1e-6 s on
    # every GPU, the same as the ideal, so slowdown 1.0 on the idle GPU 0.
    cfg = config(fragmentation_max_classes=0, cost=CostParams(gpu_strength={"H100": 0.0}))
    b = one_node("timeslice", replicas=2, gpus=2)
    job = b.job(1, sharing="timeslice")
    _, cand = found(b, job, cfg)
    assert [g.index for g, _ in cand.shares] == [0]
    assert cand.slowdown == pytest.approx(1.0)


# ---------------------------------------------------------------- several shared GPUs on one node


def test_multi_gpu_share_skips_an_unhealthy_gpu():
    # GPU 0 is unhealthy: the 2 replicas go to GPUs 1 and 2 (GPU 0 would come first by island and room).
    b = one_node("timeslice", replicas=2, gpus=3)
    b.set_gpu("n1", 0, healthy=False)
    b.job(1, gpus=2, sharing="timeslice")
    p = place(b)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [1, 2]


def test_multi_gpu_share_skips_a_gpu_held_whole():
    b = one_node("timeslice", replicas=2, gpus=3)
    b.run(9, {"n1": [0]})
    b.job(1, gpus=2, sharing="timeslice")
    p = place(b)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [1, 2]


def test_multi_gpu_share_scores_the_first_max_candidates_nodes():
    # max_candidates 2: n1 (50 % busy: compute 0.1 / 0.5 = 0.2 s) and n2 (20 %: 0.1 / 0.8 = 0.125 s) are
    # scored, n2 wins; n3 (idle, ideal) is never looked at. Evaluations: 2. With the NVLink all-reduce
    # c = 2**30 / 477e9 + 4e-6 s on both sides, n2's slowdown = (0.125 + c) / (0.1 + c).
    cfg = config(fragmentation_max_classes=0, max_candidates=2)
    b = one_node("timeslice", replicas=2, gpus=2, hosts=("n1", "n2", "n3"))
    for host, u in (("n1", 0.5), ("n2", 0.2)):
        for i in (0, 1):
            b.set_gpu(host, i, utilisation=u)
    job = b.job(1, gpus=2, sharing="timeslice")
    placer, cand = found(b, job, cfg)
    assert {g.node.name for g, _ in cand.shares} == {"n2"}
    c = 2**30 / 477e9 + 4e-6
    assert cand.slowdown == pytest.approx((0.125 + c) / (0.1 + c))
    assert placer.evaluations == 2


def test_multi_gpu_share_spanning_islands_fills_island_after_island():
    # Islands {0, 3}, {1}, {2}; 3 replicas needed, no island holds 3: island 0's GPUs 0 and 3 first, then
    # island 1's GPU 1 (not GPUs 0, 1, 2 in index order).
    b = one_node("timeslice", replicas=2, gpus=4, islands=[(0, 3), (1,), (2,)])
    b.job(1, gpus=3, sharing="timeslice")
    p = place(b)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [0, 1, 3]
    assert p.level == "node"


def test_multi_gpu_mps_share_skips_a_gpu_with_time_slices():
    # GPU 0 still runs a time-sliced context (from before the pool shared by MPS): no MPS share there,
    # the job's 2 shares go to GPUs 1 and 2.
    b = one_node("mps", gpus=3)
    b.set_gpu("n1", 0, timeslice_used=1)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [1, 2]


def test_multi_gpu_mps_share_never_passes_full_compute():
    # GPU 0 has 71 % held: 71 + 30 = 101 % > 100 %, so not there, although it has the least room left.
    b = one_node("mps", gpus=3)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 71, 1000)], sharing="mps")
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [1, 2]


def test_multi_gpu_mps_share_fills_a_gpu_to_exactly_full_compute():
    # GPU 0 has 70 % held: 70 + 30 = 100 % fits, and it has the least room left (0.3): GPUs 0 and 1.
    b = one_node("mps", gpus=3)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 70, 1000)], sharing="mps")
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [0, 1]


def test_multi_gpu_mig_share_skips_a_gpu_with_mps_shares():
    b = one_node("mig", gpus=3)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 30, 1000)], sharing="mps")
    b.job(1, gpus=2, sharing="mig", mig_profile="1g.10gb")
    p = place(b)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [1, 2]


# ---------------------------------------------------------------- the share itself


def test_timeslice_share_of_three_replicas():
    # 100 / 3 = 33.3 -> 33 % of the compute, no memory of its own, replica 0.
    b = one_node("timeslice", replicas=3, gpus=1)
    b.job(1, sharing="timeslice")
    p = place(b)
    assert p.shares == (Share(b.gpu_id("n1", 0), "timeslice", 33, 0, None, None, 0),)


def test_timeslice_share_of_six_replicas():
    # 100 / 6 = 16.7 -> 17 %.
    b = one_node("timeslice", replicas=6, gpus=1)
    b.job(1, sharing="timeslice")
    p = place(b)
    assert p.shares == (Share(b.gpu_id("n1", 0), "timeslice", 17, 0, None, None, 0),)


def test_mig_share_of_a_whole_gpu_profile():
    # 7g.80gb: 7 of 7 compute slices = 100 %, 80 x 1024 = 81920 MiB, from slice 0.
    b = one_node("mig", gpus=1)
    b.job(1, sharing="mig", mig_profile="7g.80gb")
    p = place(b)
    assert p.shares == (Share(b.gpu_id("n1", 0), "mig", 100, 81920, "7g.80gb", 0),)


def test_multi_gpu_share_skips_a_node_without_the_host_cpu():
    # n1 has 500 millicores, n2 4000; the job asks 1000 per node: n2, although n1 scores the same and
    # comes first.
    b = one_node("timeslice", replicas=2, gpus=2, hosts=("n1", "n2"))
    b.set_node("n1", cpu_milli=500)
    b.set_node("n2", cpu_milli=4000)
    b.job(1, gpus=2, sharing="timeslice", host_cpu_milli=1000)
    p = place(b)
    assert p.nodes == ("n2",)


def test_multi_gpu_share_takes_an_island_that_holds_exactly_the_job():
    # Islands {0, 1} and {2, 3}; GPU 1 is unhealthy, so island 0 has 1 fitting GPU and island 1 exactly the
    # 2 the job needs: GPUs 2 and 3, one island (not GPUs 0 and 2 across islands).
    b = one_node("timeslice", replicas=2, gpus=4, islands=[(0, 1), (2, 3)])
    b.set_gpu("n1", 1, healthy=False)
    b.job(1, gpus=2, sharing="timeslice")
    p = place(b)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [2, 3]
    assert p.level == "island"


def test_multi_gpu_mps_share_against_the_mix_takes_an_island_that_holds_exactly_the_job():
    # As above with MPS and the request mix on (the pending job's class): one node, so one candidate,
    # GPUs 2 and 3 of island {2, 3}.
    b = one_node("mps", gpus=4, islands=[(0, 1), (2, 3)])
    b.set_gpu("n1", 1, healthy=False)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b, cfg=None)
    assert sorted(gpu_of(b, sh.gpu_id)[1] for sh in p.shares) == [2, 3]
    assert p.level == "island"


# ---------------------------------------------------------------- MPS without a request mix: packing


def test_mps_share_packs_onto_an_empty_gpu_when_none_is_in_use():
    b = one_node("mps", gpus=2)
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b)
    assert p.shares == (Share(b.gpu_id("n1", 0), "mps", 30, 1000),)
    assert p.cost["fragmentation"] == pytest.approx(0.01)  # room 100 / 100 = 1.0


def test_mps_share_fills_the_memory_left_exactly():
    # GPU 0 has 81920 - 71920 = 10000 MiB left, exactly the job's: it packs there (30 % left of compute
    # held, bucket 70 before the empty GPU 1).
    b = one_node("mps", gpus=2)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 30, 71920)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=10000)
    p = place(b)
    assert p.shares == (Share(b.gpu_id("n1", 0), "mps", 30, 10000),)


def test_mps_share_that_fits_nowhere_is_not_placed():
    # Both GPUs have 80 % held: 80 + 30 > 100 everywhere.
    b = one_node("mps", gpus=2)
    for i in (0, 1):
        b.run(9 + i, {}, shares=[Share(b.gpu_id("n1", i), "mps", 80, 1000)], sharing="mps")
    job = b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    _, cand = found(b, job)
    assert cand is None


def test_multi_gpu_share_prices_nvlink_at_its_first_gpus_rate():
    # GPUs of one island that report different NVLink rates (900 and 600 GB/s): the ring is priced at the rate
    # of the first GPU it takes (the order of least room left; time-slicing: index order), GPU 0:
    # 900 x 0.53 = 477 GB/s, as whole GPUs are priced at their lowest GPU's rate.
    b = one_node("timeslice", replicas=2, gpus=2)
    b.set_gpu("n1", 1, nvlink_gbps=600.0)
    b.job(1, gpus=2, sharing="timeslice")
    p = place(b)
    assert p.cost["bandwidth_gbs"] == pytest.approx(477.0)


# ---------------------------------------------------------------- MPS against the request mix: which empty GPU


def test_mps_share_against_the_mix_takes_the_first_of_equally_idle_empty_gpus():
    b = one_node("mps", gpus=2)
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b, cfg=None)
    assert p.shares == (Share(b.gpu_id("n1", 0), "mps", 30, 1000),)


def test_mps_share_against_the_mix_takes_the_least_loaded_empty_gpu():
    b = one_node("mps", gpus=3)
    for i, u in enumerate((0.3, 0.1, 0.2)):
        b.set_gpu("n1", i, utilisation=u)
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b, cfg=None)
    assert p.shares == (Share(b.gpu_id("n1", 1), "mps", 30, 1000),)


def test_mps_share_against_the_mix_may_ask_a_gpus_whole_memory():
    # 81920 MiB is all an H100 has: an empty GPU still takes it.
    b = one_node("mps", gpus=1)
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=81920)
    p = place(b, cfg=None)
    assert p.shares == (Share(b.gpu_id("n1", 0), "mps", 30, 81920),)


def test_mps_share_against_the_mix_never_takes_a_gpu_held_whole():
    # GPU 1 is held whole (not empty, no MPS room): the share goes to GPU 0 although GPU 1 is idler.
    b = one_node("mps", gpus=2)
    b.run(9, {"n1": [1]})
    b.set_gpu("n1", 0, utilisation=0.5)
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b, cfg=None)
    assert p.shares == (Share(b.gpu_id("n1", 0), "mps", 30, 1000),)


def test_mps_share_with_host_cpu_fills_a_gpu_to_exactly_full_compute():
    # CPU-aware mix. GPU 0 has 70 % held: the 30 % share fills it exactly (nothing left to strand), which
    # beats breaking the empty GPU 1 that the mix's whole-GPU prior still wants.
    b = one_node("mps", gpus=2)
    b.set_node("n1", cpu_milli=8000)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 70, 1000)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000, host_cpu_milli=1000)
    p = place(b, cfg=None)
    assert p.shares[0].gpu_id == b.gpu_id("n1", 0)


def test_mps_share_with_host_cpu_never_passes_full_compute():
    # GPU 0 has 71 % held: 71 + 30 > 100, so GPU 1.
    b = one_node("mps", gpus=2)
    b.set_node("n1", cpu_milli=8000)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 71, 1000)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000, host_cpu_milli=1000)
    p = place(b, cfg=None)
    assert p.shares[0].gpu_id == b.gpu_id("n1", 1)


def test_mps_share_against_the_mix_costs_the_whole_gpu_it_breaks():
    # The mix: the pending job's class (1 GPU, 30 %, 1000 MiB, weight 1) and the prior of 4 whole GPUs; both
    # kept (the first covers 4/5 < 95 %). Integer weights: whole 10000, the job's round(10000 x 1/4) = 2500,
    # denominator 12500. On the empty GPU (100 % left) the share leaves 70 %: the whole-GPU class no longer fits
    # there (fragment 0 -> 70), the 30 % class still does (0 -> 0): change 10000 x 70 = 700000.
    # Cost = w_fragmentation 0.1 / (12500 x 100) x 700000 = 0.056.
    b = one_node("mps", gpus=1)
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    p = place(b, cfg=None)
    assert p.cost["fragmentation"] == pytest.approx(0.056)
    assert p.score == pytest.approx(1.056)
