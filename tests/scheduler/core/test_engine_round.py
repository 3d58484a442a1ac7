"""The scheduling round (scheduler/core/engine.py) case by case: what a shared job takes from its tenant's
quota, the reservation tries per pool, the leaf-wait limits, the texts of preemptions, and the garbage
collector's state around a round. Every expected value is worked out by hand in the comment beside it."""

from __future__ import annotations

import gc

from scheduler.core import schedule
from scheduler.core.policies import FifoPolicy
from scheduler.core.types import Share
from tests.scheduler.core.builders import SnapBuilder, config


def one_node(sharing: str = "exclusive", replicas: int = 1, gpus: int = 8) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=gpus)
    b.pool(1, "p", sharing=sharing, replicas=replicas)
    return b


# ---------------------------------------------------------------- need_equiv: a shared job's quota charge


def test_a_time_sliced_gpu_takes_one_replicas_share_of_the_quota():
    # 4 replicas a GPU: each 1-GPU time-sliced job is 1/4 = 0.25 GPU-equivalents. Quota 1 guaranteed, 0
    # borrowable: jobs 1-4 take 0.25 + 0.25 + 0.25 + 0.25 = 1.0 <= 1; job 5 would make 1.25 > 1.
    # (2 GPUs x 4 replicas = 8 slots: room is never what stops job 5.)
    b = one_node("timeslice", replicas=4, gpus=2)
    b.tenant("t", {1: (1, 0)})
    for j in range(1, 6):
        b.job(j, sharing="timeslice")
    d = schedule(b.snapshot())
    assert sorted(p.job_id for p in d.placements) == [1, 2, 3, 4]
    assert d.stats["quota_blocked"] == 1 and 5 in d.pending_reasons
    # Nothing of tenant t runs that could give way to job 5 (least attained service): it does not try.
    assert d.stats["preemption_attempts"] == 0


def test_a_mig_instance_takes_its_compute_slices_of_the_quota():
    # A 3g.40gb instance is 3 of an H100's 7 compute slices: 3/7 of a GPU. Quota 1 guaranteed, 0 borrowable:
    # jobs 1 and 2 take 6/7 <= 1, job 3 would make 9/7 > 1. Room: 2 GPUs x 2 instances (starts 0 and 4) = 4.
    b = one_node("mig", gpus=2)
    b.tenant("t", {1: (1, 0)})
    for j in range(1, 4):
        b.job(j, sharing="mig", mig_profile="3g.40gb")
    d = schedule(b.snapshot())
    assert sorted(p.job_id for p in d.placements) == [1, 2]
    assert d.stats["quota_blocked"] == 1 and 3 in d.pending_reasons


def test_an_mps_share_takes_its_compute_percentage_of_the_quota():
    # Quota 1 guaranteed, 0 borrowable; 2 MPS GPUs. Job 1 (50 %) takes 0.50, job 2 (50 %) 0.50 more: 1.00 <= 1,
    # both start (on one GPU, 100 %). Job 3 (1 %) would make 1.01 > 1: refused by the quota, not for room
    # (the second GPU is empty).
    b = one_node("mps", gpus=2)
    b.tenant("t", {1: (1, 0)})
    for j, pct in ((1, 50), (2, 50), (3, 1)):
        b.job(j, sharing="mps", mps_compute_pct=pct, mps_memory_mib=1000)
    d = schedule(b.snapshot())
    assert sorted(p.job_id for p in d.placements) == [1, 2]
    assert d.stats["quota_blocked"] == 1 and 3 in d.pending_reasons


# ---------------------------------------------------------------- reservations


def test_at_most_four_reservation_plans_a_pool_and_round():
    # One node, all 8 GPUs held by job 20 (not preemptible, 1000 s left). Jobs 1-5 ask 1-5 GPUs: five classes,
    # none fits now, each would fit once job 20 ends. With room for 8 reservations a pool, the round still
    # plans only the first four classes (jobs 1-4): 4 reservations, job 5 gets none.
    b = one_node()
    b.run(20, {"n1": list(range(8))}, preemptible=False, started_at=b.now - 100, est_runtime_s=1100.0)
    for j in range(1, 6):
        b.job(j, gpus=j)
    d = schedule(b.snapshot(config(reservations_per_pool=8)))
    assert d.placements == []
    assert sorted(r.job_id for r in d.reservations) == [1, 2, 3, 4]
    assert d.stats["reservations"] == 4
    assert all(r.start_at == b.now + 1000 for r in d.reservations)  # 100 s run + 1000 s left of 1100 s


# ---------------------------------------------------------------- preemption texts


def test_preempting_for_a_shared_job_names_the_share_it_frees():
    # One MPS GPU (n1, index 0): job 20 holds 30 %, job 21 60 % (10 % free). Job 1 (priority 100) asks 50 %:
    # without job 21 there is 70 % free, enough; without job 20 only 40 %. So job 21 goes, and the reason
    # names an MPS share of GPU 0 on n1.
    b = one_node("mps", gpus=1)
    b.run(20, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 30, 1000)], sharing="mps", priority=10)
    b.run(21, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 60, 1000)], sharing="mps", priority=10)
    b.job(1, sharing="mps", mps_compute_pct=50, mps_memory_mib=1000, priority=100)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.preemptions] == [21]
    assert d.pending_reasons[1] == "preempting job 21 to free a mps share of GPU 0 on n1; starts when they stop"


# ---------------------------------------------------------------- the garbage collector around a round


def test_the_garbage_collector_is_on_again_after_a_round():
    b = one_node()
    b.job(1)
    gc.enable()
    schedule(b.snapshot())
    assert gc.isenabled()


def test_a_disabled_garbage_collector_stays_off_after_a_round():
    b = one_node()
    b.job(1)
    gc.disable()
    try:
        schedule(b.snapshot())
        assert not gc.isenabled()
    finally:
        gc.enable()


# ---------------------------------------------------------------- waiting for one leaf


def leaf_fabric(n2_left_s: float = 100.0, n2_est_s: float | None = None) -> SnapBuilder:
    """Leaves L1 (n1, n2) and L2 (n3, n4), one 400 Gb/s uplink each (2:1). n2 is busy (job 20) for
    `n2_left_s` more, n4 (job 21) for 10 h. A 2 x 8 gang fits now only as n1 + n3, across leaves; in one
    leaf (n1 + n2) once job 20 ends."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.leaf("L2", ["n3", "n4"], {"S1": 1})
    b.pool(1, "train")
    est = n2_est_s if n2_est_s is not None else 3500.0 + n2_left_s
    b.run(20, {"n2": list(range(8))}, started_at=b.now - 3500, est_runtime_s=est, preemptible=False)
    b.run(21, {"n4": list(range(8))}, started_at=b.now - 100, est_runtime_s=36000.0, preemptible=False)
    return b


def test_no_leaf_wait_is_planned_when_no_shape_may_be():
    # Two 2 x 8 gangs: with the default limit job 1 waits 100 s for L1 (tests/.../test_leaf_wait.py: crossing
    # would cost about 2599 s). leaf_wait_plans = 0 plans no shape at all: job 1 starts across leaves now.
    b = leaf_fabric()
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(2, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot(config(leaf_wait_plans=0)))
    p = d.placement_for(1)
    assert p is not None and p.level == "pod" and sorted(p.nodes) == ["n1", "n3"]
    assert d.stats["leaf_waits"] == 0 and [r.job_id for r in d.reservations if r.basis == "leaf"] == []


def test_a_leaf_wait_no_shorter_than_the_cost_of_crossing_starts_now():
    # Job 20 on n2 has overrun an estimate of 0 s: it is expected to end min(60, 0 / 4) = 0 s from now, so
    # one leaf (n1 + n2) is the gang's at once: wait = 0 s. Job 1 estimates 0 s of run time itself, so crossing
    # costs (slowdown - 1) x 0 s x (1 + rings) = 0 s. A wait equal to the cost is not worth it: job 1 starts
    # now, across leaves (n1 + n3), and no leaf reservation is made.
    b = leaf_fabric(n2_est_s=0.0)
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=0.0)
    d = schedule(b.snapshot())
    p = d.placement_for(1)
    assert p is not None and p.level == "pod" and sorted(p.nodes) == ["n1", "n3"]
    assert d.stats["leaf_waits"] == 0 and d.reservations == []


# ---------------------------------------------------------------- the round's counters


COUNTERS = (
    "pending",
    "placed",
    "placed_backfill_window",
    "class_skips",
    "searches",
    "invalid",
    "quota_blocked",
    "preemption_attempts",
    "victims",
    "reservations",
    "claims",
    "claims_started",
    "claims_dropped",
    "min_run_protected",
    "leaf_waits",
)


def test_a_quiet_rounds_counters_start_from_zero():
    # An empty 8-GPU node and one 1-GPU job: 1 pending, 1 search, 1 placed; nothing else happens.
    b = one_node()
    b.job(1)
    d = schedule(b.snapshot())
    assert {k: d.stats[k] for k in COUNTERS} == {
        "pending": 1,
        "placed": 1,
        "placed_backfill_window": 0,
        "class_skips": 0,
        "searches": 1,
        "invalid": 0,
        "quota_blocked": 0,
        "preemption_attempts": 0,
        "victims": 0,
        "reservations": 0,
        "claims": 0,
        "claims_started": 0,
        "claims_dropped": 0,
        "min_run_protected": 0,
        "leaf_waits": 0,
    }


def test_phase_times_are_milliseconds_to_three_decimals(monkeypatch):
    # A clock that moves 2^-10 s between readings: each phase takes 2^-10 s = 0.9765625 ms -> 0.977 ms; the
    # round's total is 6 readings after its first: 6 x 0.9765625 = 5.859375 ms -> 5.859 ms.
    import scheduler.core.engine as engine

    ticks = iter(range(1000))

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            return next(ticks) / 1024

    monkeypatch.setattr(engine, "time", Clock)
    b = one_node()
    b.job(1)
    d = schedule(b.snapshot())
    assert d.stats["ms"] == {
        "build": 0.977,
        "failures": 0.977,
        "order": 0.977,
        "place": 0.977,
        "migrate": 0.977,
        "total": 5.859,
    }


def test_only_a_priority_above_two_to_the_62_tries_to_preempt_where_nothing_is_preemptible():
    # 2^62 stands for "no victim" (the lowest victim priority of a pool without preemptible jobs). Job 20 (not
    # preemptible) holds all 8 GPUs; the tenant allows priorities up to 2^63. Job 1 (priority 2^62) does not
    # outrank "no victim" and does not try; job 2 (2^62 + 1) does, once, and finds no plan: 1 attempt.
    b = one_node()
    b.tenant("t", max_priority=1 << 63)
    b.run(20, {"n1": list(range(8))}, preemptible=False)
    b.job(1, gpus=8, priority=1 << 62)
    b.job(2, gpus=8, priority=(1 << 62) + 1)
    d = schedule(b.snapshot())
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 1


# ---------------------------------------------------------------- who tries to preempt


def test_a_job_does_not_try_to_preempt_jobs_of_its_own_priority():
    # Job 20 (tenant b, priority 50, preemptible, not borrowed) holds all 8 GPUs. Job 1 (tenant a, priority 50,
    # no quota: it would borrow) is blocked. 50 is not above the pool's lowest victim priority 50, a borrower
    # reclaims nothing, and the two are of different tenants (no service levels between them): no attempt.
    b = one_node()
    b.run(20, {"n1": list(range(8))}, tenant="b", priority=50)
    b.job(1, gpus=8, tenant="a", priority=50)
    d = schedule(b.snapshot())
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 0


def test_a_job_in_its_quota_preempts_a_lower_priority_job_of_another_tenant():
    # Tenant a has 8 GPUs guaranteed in the pool: job 1 (8 GPUs, priority 100) is in quota. Job 20 of tenant b
    # (priority 10, not borrowed) holds all 8: 100 > 10, so it is preempted for job 1, though nobody borrows.
    b = one_node()
    b.tenant("a", {1: (8, 0)})
    b.run(20, {"n1": list(range(8))}, tenant="b", priority=10)
    b.job(1, gpus=8, tenant="a", priority=100)
    d = schedule(b.snapshot())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]
    assert d.preemptions[0].reason == "preempted for job 1 (priority 100 over 10)"
    # No job was stopping at the snapshot, so there was nothing to wait for first: one attempt, the preemption.
    assert d.stats["preemption_attempts"] == 1


def test_a_tenants_own_job_gives_way_for_its_quota_only_if_that_frees_enough_of_it():
    # 4 GPUs, tenant t guaranteed 3, borrows 0. Job 20 (GPUs 0-1, 1600 GPU-s: service level 1, ran 400 s > the
    # 300 s minimum, 1600 / 2 = 800 s expected left > 2 x (60 + 30) = 180 s) and job 21 (GPU 2, not preemptible)
    # use 3. Job 1 (3 GPUs, level 0) would make 3 + 3 = 6 > 3: quota-blocked. Preempting job 20 frees the GPUs
    # it needs (0, 1 and the free 3), but the quota then holds 3 - 2 + 3 = 4 > 3: no preemption.
    b = one_node(gpus=4)
    b.tenant("t", {1: (3, 0)})
    b.run(20, {"n1": [0, 1]}, started_at=b.now - 400, attained_gpu_s=1600.0)
    b.run(21, {"n1": [2]}, preemptible=False)
    b.job(1, gpus=3)
    d = schedule(b.snapshot())
    assert d.preemptions == [] and d.reservations == []
    assert d.stats["quota_blocked"] == 1 and d.stats["preemption_attempts"] == 1


# ---------------------------------------------------------------- claims of earlier preemptions


def test_a_stop_recorded_before_the_victims_last_start_is_no_claim():
    # Job 20 is stopping; its record says it was preempted for job 1 at now - 1000, but it started again at
    # now - 100: that record is from an earlier preemption, so job 1 has no claim on its GPUs. Job 1 (8 GPUs)
    # takes its turn: EASY reserves for it at now + 120 (a stopping job ends within preemption_grace_s).
    b = one_node()
    gpus = tuple(b.gpu_id("n1", i) for i in range(8))
    b.run(
        20,
        {"n1": list(range(8))},
        started_at=b.now - 100,
        stopping=True,
        preempted_for=1,
        preempted_at=b.now - 1000,
        preempted_gpus=gpus,
    )
    b.job(1, gpus=8)
    d = schedule(b.snapshot())
    assert d.stats["claims"] == 0
    assert [(r.job_id, r.start_at, r.basis) for r in d.reservations] == [(1, b.now + 120, "backfill")]


def test_a_non_preemptible_job_with_more_service_makes_nobody_try():
    # Job 20 of tenant t (not preemptible, 1600 GPU-s: service level 1) holds all 8 GPUs; job 1 of t (level 0,
    # the same priority 50) is blocked. Only preemptible jobs can give way, so job 1 does not try: 0 attempts.
    b = one_node()
    b.run(20, {"n1": list(range(8))}, started_at=b.now - 400, attained_gpu_s=1600.0, preemptible=False)
    b.job(1, gpus=8)
    d = schedule(b.snapshot())
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 0


def test_an_invalid_request_is_counted_once():
    # Job 1 asks for an A100; the pool has only H100s: invalid (1). Job 2 (1 GPU) starts.
    b = one_node()
    b.job(1, gpu_model="A100")
    b.job(2)
    d = schedule(b.snapshot())
    assert d.stats["invalid"] == 1 and d.stats["placed"] == 1
    assert d.pending_reasons[1] == "no A100 GPUs in pool 'p'"


def test_single_node_jobs_in_the_queue_are_no_rings_that_would_cross():
    # The leaf fabric with one 2 x 8 gang (job 1) and, behind it (priority 10), a 1-GPU job and an 8-GPU job of
    # any shape (nodes not given, 8 <= 8 GPUs a node): neither will span nodes, so job 1 is the only multi-node
    # job waiting. Crossing alone it loses only the spine hops' latency, 30 x (6 - 5) us a step = 0.76 s of
    # its 3600 s (test_leaf_wait.py) < the 100 s wait for L1: it starts now across leaves (n1 + n3).
    b = leaf_fabric()
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(2, gpus=1, priority=10, est_runtime_s=3600.0)
    b.job(3, gpus=8, priority=10, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    p = d.placement_for(1)
    assert p is not None and p.level == "pod" and sorted(p.nodes) == ["n1", "n3"]
    assert d.stats["leaf_waits"] == 0


def test_the_victims_of_a_round_are_capped():
    # Two nodes, each held by a priority-10 job (20 on n1, 21 on n2); jobs 1 and 2 (priority 100) need a whole
    # node each. max_victims_per_round = 1: job 1 preempts job 20 (1 victim, the cap), job 2 may not try.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.pool(1, "p")
    b.run(20, {"n1": list(range(8))}, priority=10)
    b.run(21, {"n2": list(range(8))}, priority=10)
    b.job(1, gpus=8, priority=100)
    b.job(2, gpus=8, priority=100)
    d = schedule(b.snapshot(config(max_victims_per_round=1)))
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]
    assert d.stats["victims"] == 1 and d.stats["preemption_attempts"] == 1


def test_a_failed_preemption_stands_for_its_class():
    # Job 20 (priority 10, preemptible) holds GPUs 0-3, job 21 (not preemptible) 4-7. Jobs 1 and 2 (8 GPUs,
    # priority 50) are one class: job 1 tries, but freeing job 20 leaves only 4 GPUs: no plan. Job 2 does not
    # try again: 1 attempt in all.
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3]}, priority=10)
    b.run(21, {"n1": [4, 5, 6, 7]}, preemptible=False)
    b.job(1, gpus=8)
    b.job(2, gpus=8)
    d = schedule(b.snapshot())
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 1


def test_a_quota_blocked_job_may_only_take_its_own_tenants_gpus():
    # 4 GPUs; tenant t guaranteed 2, borrows 0. Job 20 of t (GPUs 0-1, 1600 GPU-s: level 1, ran 400 s, 800 s
    # expected left > 180 s) uses both. Job 22 of tenant u (priority 10) holds GPUs 2-3. Job 1 of t (2 GPUs,
    # level 0): 2 + 2 = 4 > 2, quota-blocked. Only its own tenant's job may give way for its quota: job 20
    # (2 - 2 + 2 = 2 <= 2), not job 22, though a priority-10 job would be the cheaper victim otherwise.
    b = one_node(gpus=4)
    b.tenant("t", {1: (2, 0)})
    b.run(20, {"n1": [0, 1]}, started_at=b.now - 400, attained_gpu_s=1600.0)
    b.run(22, {"n1": [2, 3]}, tenant="u", priority=10, started_at=b.now - 4000)
    b.job(1, gpus=2)
    d = schedule(b.snapshot())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]
    assert "least attained service" in d.preemptions[0].reason
    assert d.pending_reasons[1] == "preempting job 20 to free 2 GPUs on n1; starts when they stop"


def test_a_quota_exactly_met_after_the_preemption_allows_it():
    # As in the quota test above, but tenant t's guarantee is 3 - 1e-9 GPUs: after preempting job 20 the quota
    # holds 3 - 2 + 2 = 3.0, and the limit with its tolerance is 2.999999999 + 0 + 1e-9 = 3.0 (in floating
    # point): not above it, so job 20 gives way to job 1 (2 GPUs: 0 and 1, or 3).
    b = one_node(gpus=4)
    b.tenant("t", {1: (3 - 1e-9, 0)})
    b.run(20, {"n1": [0, 1]}, started_at=b.now - 400, attained_gpu_s=1600.0)
    b.run(21, {"n1": [2]}, preemptible=False)
    b.job(1, gpus=2)
    d = schedule(b.snapshot())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]


def test_with_no_minimum_run_time_a_job_that_started_in_the_future_may_be_preempted():
    # preemption_min_run_s = 0 (and no priority exemption): no job is protected, not even job 20 whose start
    # lies 10 s after the snapshot's now (a node clock ahead). Job 1 (priority 100) preempts it.
    b = one_node()
    b.run(20, {"n1": list(range(8))}, priority=10, started_at=b.now + 10)
    b.job(1, gpus=8, priority=100)
    d = schedule(b.snapshot(config(preemption_min_run_s=0.0, preemption_min_run_priority_exempt=False)))
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]
    assert d.stats["min_run_protected"] == 0


def test_a_requeued_victim_preempted_exactly_the_claim_time_ago_still_leaves_a_claim():
    # Job 20 was preempted for job 1 exactly preemption_claim_s = 300 s ago and is back in the queue (ahead of
    # job 1: queue_seq 1). 300 <= 300: job 1 still has first call on the 8 GPUs, before the queue: it starts.
    b = one_node()
    gpus = tuple(b.gpu_id("n1", i) for i in range(8))
    b.job(20, gpus=8, preempted_for=1, preempted_at=b.now - 300, preempted_gpus=gpus)
    b.job(1, gpus=8)
    d = schedule(b.snapshot())
    assert d.stats["claims"] == 1 and d.stats["claims_started"] == 1
    assert [p.job_id for p in d.placements] == [1]


def test_a_victim_preempted_at_its_start_time_leaves_a_claim():
    # Job 20 is stopping; it was preempted for job 1 at the very second it started (now - 10): the record is
    # not older than its start, so it is this run's preemption, and job 1 claims its GPUs (1 claim).
    b = one_node()
    gpus = tuple(b.gpu_id("n1", i) for i in range(8))
    b.run(
        20,
        {"n1": list(range(8))},
        started_at=b.now - 10,
        stopping=True,
        preempted_for=1,
        preempted_at=b.now - 10,
        preempted_gpus=gpus,
    )
    b.job(1, gpus=8)
    d = schedule(b.snapshot())
    assert d.stats["claims"] == 1
    assert [(r.job_id, r.basis) for r in d.reservations] == [(1, "stopping")]


def test_preempting_for_a_two_gpu_shared_job_names_its_first_share():
    # Time-slicing, 1 replica a GPU, 2 GPUs on n1: job 20 (priority 10) holds GPU 0's replica, GPU 1 is free.
    # Job 1 (priority 100) wants a replica on 2 GPUs: freeing job 20 is enough. Its placement takes GPU 0 and
    # GPU 1 (one NVLink island; time-sliced GPUs all rank alike, so in index order): the reason names the
    # first, GPU 0.
    b = one_node("timeslice", replicas=1, gpus=2)
    b.run(20, {}, shares=[Share(b.gpu_id("n1", 0), "timeslice", replica=0)], sharing="timeslice", priority=10)
    b.job(1, gpus=2, sharing="timeslice", priority=100)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.preemptions] == [20]
    assert d.pending_reasons[1] == ("preempting job 20 to free a timeslice share of GPU 0 on n1; starts when they stop")


def test_with_no_victims_allowed_a_quota_blocked_job_does_not_try():
    # The quota case above (job 20 of t would give way to job 1 for t's quota), with max_victims_per_round = 0:
    # 0 victims taken is not below 0, so job 1 does not try at all.
    b = one_node(gpus=4)
    b.tenant("t", {1: (2, 0)})
    b.run(20, {"n1": [0, 1]}, started_at=b.now - 400, attained_gpu_s=1600.0)
    b.job(1, gpus=2)
    d = schedule(b.snapshot(config(max_victims_per_round=0)))
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 0
    assert d.stats["quota_blocked"] == 1


def test_a_job_of_any_shape_larger_than_a_node_counts_as_a_ring_that_would_cross():
    # As in test_leaf_wait.py's two gangs, but job 2 asks 16 GPUs without a shape: more than the 8 a node has,
    # so it spans nodes too. Job 1 then reckons with one more ring on the leaves' uplinks: at the oversubscribed
    # share a step takes 1.36098 x ideal, 0.36098 x 3600 s x 2 rings = 2599 s > the 100 s wait: job 1 waits.
    b = leaf_fabric()
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(2, gpus=16, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    assert d.placement_for(1) is None
    assert [(r.job_id, r.start_at, r.basis) for r in d.reservations] == [(1, b.now + 100, "leaf")]


def test_running_gpus_count_in_the_fair_share_order():
    # Tenants a, b, c, one pending 1-GPU job each (ids 1, 2, 3), equal priority, entitlement 1 each. Fair-share
    # charge = decayed usage + running GPUs x 1 h horizon: a runs 1 GPU (job 20): 1.0; b has 0.5 GPU-h decayed,
    # c 1.5. The line goes by charge: b (0.5), a (1.0), c (1.5).
    b = one_node()
    b.tenant("a")
    b.tenant("b", usage_decayed=0.5)
    b.tenant("c", usage_decayed=1.5)
    b.run(20, {"n1": [0]}, tenant="a")
    b.job(1, tenant="a")
    b.job(2, tenant="b")
    b.job(3, tenant="c")
    d = schedule(b.snapshot(config(service_order=False)))
    assert d.queue_order == [2, 1, 3]


def test_the_rings_already_on_the_first_leafs_uplinks_count_in_the_cost_of_crossing():
    # Leaves L1 (n1, n2), L2 (n3, n4), L3 (n5), one 400 Gb/s uplink each. Job 20 runs on n2 + n5: a ring over
    # L1's and L3's uplinks, ending in 2000 s. Job 21 holds n4 for 10 h. Job 1 (2 x 8, 3600 s) fits now only
    # as n1 + n3, beside job 20's ring on L1's uplinks: 50 GB/s / 2 rings x 0.9 (ECMP) x 0.96 = 21.6 GB/s, a
    # step of 1.36098 x ideal (test_leaf_wait.py). Crossing costs it and the one ring there
    # 0.36098 x 3600 s x (1 + 1) = 2599 s > the 2000 s wait for L1 (n1 + n2): job 1 waits.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.leaf("L2", ["n3", "n4"], {"S1": 1})
    b.leaf("L3", ["n5"], {"S1": 1})
    b.pool(1, "train")
    b.run(20, {"n2": list(range(8)), "n5": list(range(8))}, started_at=b.now - 1600, est_runtime_s=3600.0)
    b.run(21, {"n4": list(range(8))}, started_at=b.now - 100, est_runtime_s=36000.0, preemptible=False)
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    assert d.placement_for(1) is None and d.preemptions == []
    assert [(r.job_id, r.start_at, r.nodes) for r in d.reservations] == [(1, b.now + 2000, ("n1", "n2"))]
    assert d.pending_reasons[1] == (
        "waiting about 33 min for leaf L1 as running jobs end: across leaves now it would cost about 43 min "
        "(its ring slowed on shared uplinks, and theirs)"
    )


def unplaced_pair(left_s: float, gangs: int) -> tuple[SnapBuilder, object]:
    """Leaf L1 (n1, n2), both busy `left_s` more (est 4 x left_s, run 3 x left_s: past 3/4 of it, so its
    floor of min(60, est / 4) from now is left_s too), and u1, u2: nodes absent from the fabric (no group, a
    ring between them crosses at the fabric level, over no known uplinks). `gangs` 2 x 8 jobs of 3600 s wait.

    Job 1 fits now only on u1 + u2: 48 GB/s HCAs, 30 ring steps at 7 us (fabric) instead of 5 us (one leaf):
    its step 0.1 + 1.875 x 2^30 / 48e9 + 30 x 7e-6 = 0.1421531 s against the ideal 0.1420931 s (the same at
    5 us), a slowdown of 1 + 0.00006 / 0.1420931 = 1.00042226: crossing costs 0.00042226 x 3600 = 1.52 s,
    for itself alone (no known leaf: no rings beside it, and no hosts to share the uplinks with)."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.node("u1")
    b.node("u2")
    b.fabric.hosts = [h for h in b.fabric.hosts if h.key not in ("u1", "u2")]
    b.pool(1, "train")
    for jid, host in ((20, "n1"), (21, "n2")):
        b.run(jid, {host: list(range(8))}, started_at=b.now - 3 * left_s, est_runtime_s=4 * left_s)
    for jid in range(1, gangs + 1):
        b.job(jid, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    return b, schedule(b.snapshot())


def test_a_gang_over_nodes_of_no_known_leaf_starts_when_the_wait_is_longer_than_its_own_cost():
    # 2 s >= 1.52 s: job 1 starts on u1 + u2, alone (no ring counted beside it) ...
    for gangs in (1, 2):  # ... and with another gang waiting (no leaf's hosts to share uplinks with either)
        _, d = unplaced_pair(2.0, gangs)
        p = d.placement_for(1)
        assert p is not None and sorted(p.nodes) == ["u1", "u2"] and p.level == "fabric", gangs


def test_a_gang_over_nodes_of_no_known_leaf_waits_when_the_wait_is_shorter_than_its_own_cost():
    # 1 s < 1.52 s: job 1 waits for L1 (n1 + n2), alone or with another gang waiting.
    for gangs in (1, 2):
        b, d = unplaced_pair(1.0, gangs)
        assert d.placement_for(1) is None, gangs
        assert [(r.job_id, r.start_at, r.basis) for r in d.reservations if r.job_id == 1] == [(1, b.now + 1, "leaf")], (
            gangs
        )


# ---------------------------------------------------------------- more of the placement loop


def las_quota_case(**cfg) -> tuple[SnapBuilder, object]:
    """5 GPUs; tenant t guaranteed 2, borrows 0. Job 20 of t (GPUs 0-1, 1600 GPU-s: level 1, ran 400 s > 300 s,
    800 s expected left > 180 s) uses both; job 22 of tenant u (not preemptible) holds GPUs 2-3; GPU 4 is free.
    Job 1 of t (2 GPUs, level 0) is quota-blocked (2 + 2 = 4 > 2), fits only with job 20's GPUs, and may have
    job 20 give way (2 - 2 + 2 = 2 <= 2). Job 2 of tenant u (1 GPU, priority 10) comes after it."""
    b = one_node(gpus=5)
    b.tenant("t", {1: (2, 0)})
    b.run(20, {"n1": [0, 1]}, started_at=b.now - 400, attained_gpu_s=1600.0)
    b.run(22, {"n1": [2, 3]}, tenant="u", preemptible=False)
    b.job(1, gpus=2)
    b.job(2, tenant="u", priority=10)
    return b, schedule(b.snapshot(config(**cfg)))


def test_with_backfill_off_a_quota_preemptor_blocks_its_pool():
    # Job 1 preempts job 20; backfill off: job 2 waits behind job 1, whatever GPU may be free.
    _, d = las_quota_case(backfill=False)
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]
    assert d.placements == [] and d.pending_reasons[2] == "waiting behind job 1 (backfill off)"


def test_with_no_preemption_attempts_allowed_a_quota_blocked_job_does_not_try():
    # max_preemption_attempts = 0: 0 attempts made is not below 0; job 1 stays quota-blocked, job 2 starts
    # (on GPU 4).
    _, d = las_quota_case(max_preemption_attempts=0)
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 0
    assert [p.job_id for p in d.placements] == [2]


def test_a_quota_blocked_job_whose_victim_is_young_says_when_it_may_preempt():
    # Job 20 started only 100 s ago (of the 300 s minimum; same priority, so not exempt): 200 s left, about
    # 3 min. The quota text: 2 GPUs in use + 2 asked = 4 > 2 guaranteed + 0 borrowable.
    b = one_node(gpus=4)
    b.tenant("t", {1: (2, 0)})
    b.run(20, {"n1": [0, 1]}, started_at=b.now - 100, attained_gpu_s=1600.0)
    b.run(22, {"n1": [2, 3]}, tenant="u", preemptible=False)  # job 1 needs job 20's GPUs
    b.job(1, gpus=2)
    d = schedule(b.snapshot())
    assert d.preemptions == [] and d.stats["min_run_protected"] == 1
    assert d.pending_reasons[1] == (
        "tenant quota: 2 GPUs in use + 2 asked = 4, more than 2 guaranteed + 0 borrowable = 2; may preempt in "
        "about 3 min, when the jobs it needs have run their minimum time"
    )


def test_quota_blocked_jobs_alike_spend_one_preemption_try_between_them():
    # 6 GPUs, FIFO, 2 preemption tries a round. Tenant t is guaranteed 2 GPUs, borrows 0; its job 20 (GPUs 0-1,
    # 1600 GPU-s: level 1) started 100 s ago, within the 300 s minimum run. Jobs 1-3 of t (2 GPUs each, level 0)
    # are quota-blocked (2 + 2 = 4 > 2) and alike: job 1 tries to have job 20 give way and cannot yet (200 s
    # left: about 3 min); jobs 2 and 3 read the same and do not try again. Job 21 of tenant v (priority 10) holds
    # GPUs 2-5; job 4 of tenant u (priority 100, 4 GPUs, within u's guaranteed 4) fits nowhere else and takes
    # the second try: job 21 gives way to it.
    b = one_node(gpus=6)
    b.tenant("t", {1: (2, 0)})
    b.tenant("u", {1: (4, 0)})
    b.run(20, {"n1": [0, 1]}, priority=50, started_at=b.now - 100, attained_gpu_s=1600.0)
    b.run(21, {"n1": [2, 3, 4, 5]}, tenant="v", priority=10)
    for jid in (1, 2, 3):
        b.job(jid, gpus=2, priority=50)
    b.job(4, gpus=4, tenant="u", priority=100)
    d = schedule(b.snapshot(config(max_preemption_attempts=2)), FifoPolicy())
    assert d.stats["preemption_attempts"] == 2
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(21, 4)]
    wait = (
        "tenant quota: 2 GPUs in use + 2 asked = 4, more than 2 guaranteed + 0 borrowable = 2; may preempt in "
        "about 3 min, when the jobs it needs have run their minimum time"
    )
    assert [d.pending_reasons[j] for j in (1, 2, 3)] == [wait, wait, wait]


def stopping_case(**cfg) -> tuple[SnapBuilder, object]:
    """8 GPUs: job 20 is stopping on GPUs 0-3 (preempted by someone else earlier), job 21 (priority 10) holds
    4-7. Job 1 (4 GPUs, priority 100) fits once job 20 is gone: it waits for that (one attempt) rather than
    preempt. Job 2 (tenant u, 1 GPU, priority 5) comes after it."""
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3]}, stopping=True)
    b.run(21, {"n1": [4, 5, 6, 7]}, priority=10)
    b.job(1, gpus=4, priority=100)
    b.job(2, tenant="u", priority=5)
    return b, schedule(b.snapshot(config(**cfg)))


def test_a_job_that_fits_once_stopping_jobs_are_gone_waits_for_them():
    b, d = stopping_case()
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 1
    # Job 20 stops within preemption_grace_s = 120 s; job 2 (EASY) is reserved for then too.
    assert [(r.job_id, r.start_at, r.basis) for r in d.reservations] == [
        (1, b.now + 120, "stopping"),
        (2, b.now + 120, "backfill"),
    ]


def test_with_backfill_off_a_job_waiting_for_stopping_jobs_blocks_its_pool():
    _, d = stopping_case(backfill=False)
    assert d.pending_reasons[2] == "waiting behind job 1 (backfill off)"


def test_with_backfill_off_a_preemptor_blocks_its_pool():
    # Job 20 (priority 10) holds all 8 GPUs; job 1 (priority 100) preempts it. Job 2 (tenant u, priority 5, 1
    # GPU) then waits behind job 1.
    b = one_node()
    b.run(20, {"n1": list(range(8))}, priority=10)
    b.job(1, gpus=8, priority=100)
    b.job(2, tenant="u", priority=5)
    d = schedule(b.snapshot(config(backfill=False)))
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]
    assert d.pending_reasons[2] == "waiting behind job 1 (backfill off)"


def test_a_starving_job_counts_as_service_level_0():
    # Service aging 1000 s. Job 1 (4 GPUs, 1600 GPU-s received: level 1) has waited 5000 - 1600 / 4 = 4600 s
    # >= 1000 s: starving, so it is treated as level 0 and job 20 of its tenant (level 1: 1600 GPU-s, ran 400 s,
    # 400 s expected left > 180 s) gives way to it.
    b = one_node(gpus=4)
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 400, attained_gpu_s=1600.0)
    b.job(1, gpus=4, attained_gpu_s=1600.0, submitted_at=b.now - 5000)
    d = schedule(b.snapshot(config(service_aging_s=1000.0)))
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]


def test_a_starving_job_does_not_preempt_jobs_of_level_0():
    # The same starving job 1 (level 0 for this), and job 20 at level 0 too (400 GPU-s, 100 s run, 900 s of
    # its 1000 s estimate left): a job gives way only to one at least a level below it: no attempt.
    b = one_node(gpus=4)
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 400, attained_gpu_s=400.0, est_runtime_s=1000.0)
    b.job(1, gpus=4, attained_gpu_s=1600.0, submitted_at=b.now - 5000)
    d = schedule(b.snapshot(config(service_aging_s=1000.0)))
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 0


def test_a_job_ending_exactly_at_the_reserved_start_runs_in_the_backfill_window():
    # Job 20 (not preemptible) holds GPUs 0-3 until now + 1000 (started now - 100, estimate 1100). Job 1 (8
    # GPUs, priority 60) is reserved all 8 from now + 1000 and holds the free 4-7. Job 2 (4 GPUs, estimate
    # 1000 s) ends at now + 1000 <= now + 1000: it may use the held GPUs meanwhile.
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 100, est_runtime_s=1100.0, preemptible=False)
    b.job(1, gpus=8, priority=60)
    b.job(2, gpus=4, est_runtime_s=1000.0)
    d = schedule(b.snapshot())
    assert [(r.job_id, r.start_at) for r in d.reservations] == [(1, b.now + 1000)]
    p = d.placement_for(2)
    assert p is not None and sorted(s.gpu_id for s in p.shares) == [b.gpu_id("n1", i) for i in (4, 5, 6, 7)]
    assert d.stats["placed_backfill_window"] == 1 and d.stats["placed"] == 1


def test_a_job_of_a_class_is_priced_for_its_own_dataset():
    # L1 (n1, n2, storage s0) and L2 (n3, storage s1), one 400 Gb/s uplink each (L1 3:1, L2 2:1). Jobs 1 and 2
    # ask 8 GPUs (one class) and read 10 GB a step, job 1 from s0, job 2 from s1. Inside a leaf a node reads at
    # 48 GB/s: 0.208 s a step; through the spine at most 48 / 3 x 0.9 = 14.4 GB/s: 0.694 s. Job 1 takes n1 or
    # n2, next to s0; job 2, priced for its own dataset, takes n3, next to s1 (not the other L1 node).
    b = SnapBuilder()
    b.spine("S1")
    b.node("s0", storage=True)
    b.node("s1", storage=True)
    b.leaf("L1", ["n1", "n2", "s0"], {"S1": 1})
    b.leaf("L2", ["n3", "s1"], {"S1": 1})
    b.pool(1, "train")
    io = {"workload": "data-intensive", "io_bytes_per_step": 10e9}
    b.job(1, gpus=8, dataset_node="s0", **io)
    b.job(2, gpus=8, dataset_node="s1", **io)
    d = schedule(b.snapshot())
    assert d.placement_for(1) is not None and d.placement_for(1).nodes in (("n1",), ("n2",))
    assert d.placement_for(2) is not None and d.placement_for(2).nodes == ("n3",)


# ---------------------------------------------------------------- reclaiming borrowed GPUs


def test_a_job_in_its_quota_reclaims_gpus_another_tenant_borrowed():
    # Tenant a has 8 GPUs guaranteed; job 20 of tenant u (same priority 50) borrowed all 8. Job 1 of a (8 GPUs)
    # is in quota, and u is a borrower other than a: it may preempt, and takes them back.
    b = one_node()
    b.tenant("a", {1: (8, 0)})
    b.run(20, {"n1": list(range(8))}, tenant="u", borrowed=True)
    b.job(1, gpus=8, tenant="a")
    d = schedule(b.snapshot())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]
    assert d.preemptions[0].reason == "preempted for job 1 (reclaiming GPUs tenant u borrowed)"


def test_a_tenant_that_alone_borrowed_in_a_pool_has_nothing_to_reclaim():
    # Tenant a (16 guaranteed) runs job 20 on all 8 GPUs, marked borrowed when it started; job 1 of a (8 GPUs,
    # same priority, same service level 0) is in quota (8 + 8 = 16). The only borrower is a itself: no attempt.
    b = one_node()
    b.tenant("a", {1: (16, 0)})
    b.run(20, {"n1": list(range(8))}, tenant="a", borrowed=True)
    b.job(1, gpus=8, tenant="a")
    d = schedule(b.snapshot())
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 0


def test_of_two_borrowing_tenants_the_other_ones_gpus_are_reclaimed():
    # Tenant a (8 guaranteed) borrowed 4 GPUs (job 20), tenant u the other 4 (job 21), both priority 50. Job 1 of
    # a (4 GPUs) is in quota (4 + 4 = 8): two tenants borrow, so it may try, and reclaims u's job 21 (its own
    # job 20 is not another tenant's borrowing).
    b = one_node()
    b.tenant("a", {1: (8, 0)})
    b.run(20, {"n1": [0, 1, 2, 3]}, tenant="a", borrowed=True)
    b.run(21, {"n1": [4, 5, 6, 7]}, tenant="u", borrowed=True)
    b.job(1, gpus=4, tenant="a")
    d = schedule(b.snapshot())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(21, 1)]


# ---------------------------------------------------------------- minimum run time and service thresholds


def test_every_job_of_a_class_says_when_it_may_preempt():
    # Job 20 (priority 10) started 100 s ago: 200 s of its 300 s minimum left (no priority exemption). Jobs 1
    # and 2 (priority 100, 8 GPUs) are one class: job 1 finds it would preempt job 20 in about 3 min; job 2
    # (no new attempt) says the same.
    b = one_node()
    b.run(20, {"n1": list(range(8))}, priority=10, started_at=b.now - 100)
    b.job(1, gpus=8, priority=100)
    b.job(2, gpus=8, priority=100)
    d = schedule(b.snapshot(config(preemption_min_run_priority_exempt=False)))
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 1
    for jid in (1, 2):
        assert d.pending_reasons[jid].endswith(
            "; may preempt in about 3 min, when the jobs it needs have run their minimum time"
        ), jid


def test_a_job_expected_to_run_exactly_the_payoff_time_is_not_preempted_for_service():
    # Job 20 of t: 4 GPUs, 720 GPU-s (level 1: >= 600), ran 400 s, no estimate: expected left = 720 / 4 = 180 s,
    # exactly service_preempt_pays 2 x (checkpoint 60 + restart 30) = 180 s, not more: it does not give way to
    # job 1 (level 0).
    b = one_node(gpus=4)
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 400, attained_gpu_s=720.0)
    b.job(1, gpus=4)
    d = schedule(b.snapshot())
    assert d.preemptions == [] and d.stats["preemption_attempts"] == 1


def test_a_one_second_minimum_run_still_protects_a_job_half_a_second_old():
    # preemption_min_run_s = 1 (no priority exemption); job 20 started 0.5 s ago: 0.5 s left, protected.
    b = one_node()
    b.run(20, {"n1": list(range(8))}, priority=10, started_at=b.now - 0.5)
    b.job(1, gpus=8, priority=100)
    d = schedule(b.snapshot(config(preemption_min_run_s=1.0, preemption_min_run_priority_exempt=False)))
    assert d.preemptions == [] and d.stats["min_run_protected"] == 1


# ---------------------------------------------------------------- more reservations and leaf waits


def test_reservations_a_pool_holds_are_capped_by_reservations_per_pool():
    # As in the four-tries test, with room for 3 reservations a pool: jobs 1-3 get one, jobs 4 and 5 none.
    b = one_node()
    b.run(20, {"n1": list(range(8))}, preemptible=False, started_at=b.now - 100, est_runtime_s=1100.0)
    for j in range(1, 6):
        b.job(j, gpus=j)
    d = schedule(b.snapshot(config(reservations_per_pool=3)))
    assert sorted(r.job_id for r in d.reservations) == [1, 2, 3] and d.stats["reservations"] == 3


def test_rings_that_would_cross_beside_a_gang_are_capped_by_the_other_hosts_of_its_leaves():
    # Three 2 x 8 gangs wait (test_leaf_wait.py's fabric): two others, but each leaf has only 2 - 1 = 1 other
    # host to cross from, so one ring beside job 1: 0.36098 x 3600 s x (1 + 1) = 2599 s, about 43 min.
    b = leaf_fabric()
    for jid in (1, 2, 3):
        b.job(jid, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    assert d.pending_reasons[1] == (
        "waiting about 2 min for leaf L1 as running jobs end: across leaves now it would cost about 43 min "
        "(its ring slowed on shared uplinks, and theirs)"
    )


def test_a_victim_kept_off_its_old_gpus_does_not_fail_its_class():
    # Job 20 was preempted for job 1 (long ago: no claim any more) from GPUs 0-3 and is back in the queue; job 1
    # still waits (priority 10, 8 GPUs, job 21 holds 4-7 and is not preemptible). While job 1 waits, job 20 may
    # not take GPUs 0-3: it finds nothing. Job 30, of job 20's class (4 GPUs) but nobody's victim, may: it
    # starts on GPUs 0-3. No reservations (reservations_per_pool = 0), so both see the same class key.
    b = one_node()
    b.run(21, {"n1": [4, 5, 6, 7]}, preemptible=False)
    gpus = tuple(b.gpu_id("n1", i) for i in range(4))
    b.job(20, gpus=4, preempted_for=1, preempted_at=b.now - 1000, preempted_gpus=gpus)
    b.job(30, gpus=4)
    b.job(1, gpus=8, priority=10)
    d = schedule(b.snapshot(config(reservations_per_pool=0)))
    assert [p.job_id for p in d.placements] == [30]
    assert sorted(s.gpu_id for s in d.placements[0].shares) == list(gpus)


def test_a_job_kept_out_by_several_reservations_is_told_the_first_one():
    # Job 20 (not preemptible) holds GPUs 0-5 until now + 1000; 6 and 7 are free. Two reservations a pool: job 1
    # (8 GPUs, priority 70) is reserved from now + 1000 and holds GPUs 6-7; job 2 (6 GPUs, priority 60) is
    # reserved too, on GPUs 0-5 once job 20 ends (holding nothing now). Job 3 (2 GPUs, no estimate) would fit on
    # 6-7 but for the reservations: it waits for the pool's first reserved job, job 1.
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3, 4, 5]}, started_at=b.now - 100, est_runtime_s=1100.0, preemptible=False)
    b.job(1, gpus=8, priority=70)
    b.job(2, gpus=6, priority=60)
    b.job(3, gpus=2)
    d = schedule(b.snapshot(config(reservations_per_pool=2)))
    assert sorted(r.job_id for r in d.reservations) == [1, 2]
    assert d.pending_reasons[3] == "waiting for reserved start of job 1 (backfill window too short)"


def test_a_victim_may_go_back_to_its_old_gpus_once_its_beneficiary_started():
    # n1: GPUs 0-3 free (job 20's before it was preempted for job 1), 4-7 held by job 21 (not preemptible); n2
    # free. Job 1 (8 GPUs, priority 100) starts on n2 this round. Job 20 (4 GPUs, back in the queue) is then
    # nobody's kept-off victim any more: it starts on n1's GPUs 0-3.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.pool(1, "p")
    b.run(21, {"n1": [4, 5, 6, 7]}, preemptible=False)
    gpus = tuple(b.gpu_id("n1", i) for i in range(4))
    b.job(20, gpus=4, preempted_for=1, preempted_at=b.now - 1000, preempted_gpus=gpus)
    b.job(1, gpus=8, priority=100)
    d = schedule(b.snapshot())
    assert d.placement_for(1) is not None and d.placement_for(1).nodes == ("n2",)
    p = d.placement_for(20)
    assert p is not None and sorted(s.gpu_id for s in p.shares) == list(gpus)


def test_the_wait_for_a_minimum_run_is_that_of_the_youngest_victim_needed():
    # No priority exemption. Job 20 (GPUs 0-3, priority 10) started 299.75 s ago: 300 - 299.75 = 0.25 s of its
    # minimum left; job 21 (GPUs 4-7, priority 10) has run 1000 s. Job 1 (8 GPUs, priority 100) needs both: it
    # may preempt in max(0.25, 0 for job 21) = 0.25 s, "about 0 s".
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3]}, priority=10, started_at=b.now - 299.75)
    b.run(21, {"n1": [4, 5, 6, 7]}, priority=10, started_at=b.now - 1000)
    b.job(1, gpus=8, priority=100)
    d = schedule(b.snapshot(config(preemption_min_run_priority_exempt=False)))
    assert d.preemptions == [] and d.stats["min_run_protected"] == 1
    assert d.pending_reasons[1].endswith(
        "; may preempt in about 0 s, when the jobs it needs have run their minimum time"
    )
