"""Least attained service inside a tenant (docs/scheduler.md, "Queue order" and "Preemption"): a tenant's
own job that has had much more GPU time gives way to its new one, after its minimum run time, when that
pays; never across tenants, never between jobs of one service level.

Defaults: service levels of 600 GPU-s x 4 (0: < 600, 1: < 2400, 2: the rest), preemption_min_run_s 300,
service_preempt_pays 2 x (checkpoint_cost_s 60 + restart_overhead_s 30) = 180 s of expected remaining time.
"""

from __future__ import annotations

import random

from scheduler.core import schedule
from tests.scheduler.core.builders import SnapBuilder, config


def one_node(gpus: int = 4) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=gpus)
    b.pool(1, "train")
    return b


def long_runner(b: SnapBuilder, *, ran_s: float = 400.0, tenant: str = "t", **kw) -> None:
    """Job 20 holds all 4 GPUs of n1 and has run `ran_s`: 4 x 400 = 1600 GPU-s, service level 1."""
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - ran_s, attained_gpu_s=4 * ran_s, tenant=tenant, **kw)


def test_new_job_preempts_its_tenants_job_with_more_service():
    b = one_node()
    long_runner(b)  # level 1 (1600 GPU-s), ran 400 s >= 300, expected to run as long again: 400 > 180
    b.job(1, gpus=4)  # level 0
    d = schedule(b.snapshot())
    (p,) = d.preemptions
    assert (p.job_id, p.for_job) == (20, 1)
    assert "least attained service" in p.reason
    assert d.pending_reasons[1] == "preempting job 20 to free 4 GPUs on n1; starts when they stop"


def test_a_running_jobs_current_run_counts_toward_its_level():
    # As the database adapter gives it: no service on record yet, its 4 shares held for 400 s: 1600 GPU-s, level 1.
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 400, serving_since=(b.now - 400,) * 4)
    b.job(1, gpus=4)
    (p,) = schedule(b.snapshot()).preemptions
    assert (p.job_id, p.for_job) == (20, 1)


def test_a_running_jobs_current_run_counts_toward_what_it_has_left():
    # 1600 GPU-s on record (level 1) and 4 shares held for 100 s: 2000 GPU-s, 500 s run of a 650 s estimate. 150 s
    # left does not pay for a preemption (2 x (60 s checkpoint + 30 s restart) = 180 s): it is kept. From its record
    # alone it would have run 400 s and have 250 s left, and give way.
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 100, serving_since=(b.now - 100,) * 4, attained_gpu_s=1600.0,
          est_runtime_s=650.0)  # fmt: skip
    b.job(1, gpus=4)
    assert schedule(b.snapshot(config(preemption_min_run_s=0))).preemptions == []


def test_a_requeued_job_waits_with_the_service_of_the_run_it_lost():
    # Job 20 ran 400 s on 4 GPUs (its current run) until a GPU failed: 1600 GPU-s, level 1, behind job 1 (level 0)
    # of the same tenant though it was queued first.
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 400, serving_since=(b.now - 400,) * 4)
    b.set_gpu("n1", 0, healthy=False)
    b.job(1, gpus=2)
    d = schedule(b.snapshot())
    assert [j for j, _ in d.requeues] == [20]
    assert d.queue_order == [1, 20]


def test_a_job_at_the_same_level_is_not_preempted():
    b = one_node()
    long_runner(b, ran_s=140.0)  # 560 GPU-s: level 0, like the new job
    b.job(1, gpus=4)
    d = schedule(b.snapshot(config(preemption_min_run_s=0)))
    assert d.preemptions == []


def test_minimum_run_time_protects_a_job_that_just_restarted():
    b = one_node()
    # 1600 GPU-s received in earlier runs, but this run started 100 s ago: 200 s left of its minimum run time.
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 100, attained_gpu_s=1600.0)
    b.job(1, gpus=4)
    d = schedule(b.snapshot())
    assert d.preemptions == []
    assert d.stats["min_run_protected"] == 1
    assert "may preempt in about 3 min" in d.pending_reasons[1]  # 200 s, rounded


def test_it_does_not_pay_to_preempt_a_job_expected_to_end_soon():
    b = one_node()
    # Level 1, ran 400 s, but its estimate says 100 s are left: 100 < 180 s of checkpoint and restart x 2.
    long_runner(b, est_runtime_s=500.0)
    b.job(1, gpus=4)
    assert schedule(b.snapshot()).preemptions == []


def test_another_tenants_job_never_gives_way():
    b = one_node()
    long_runner(b, tenant="u")
    b.job(1, gpus=4, tenant="t")
    assert schedule(b.snapshot()).preemptions == []


def test_a_higher_priority_job_is_not_preempted_by_service():
    b = one_node()
    long_runner(b, priority=100)
    b.job(1, gpus=4, priority=50)
    assert schedule(b.snapshot()).preemptions == []


def test_off_switch():
    b = one_node()
    long_runner(b)
    b.job(1, gpus=4)
    assert schedule(b.snapshot(config(service_preemption=False))).preemptions == []


def test_a_job_blocked_by_its_quota_takes_its_own_longer_jobs_share():
    b = one_node()
    b.tenant("t", {1: (4.0, 0.0)})  # 4 GPUs guaranteed, no borrowing: job 1 is blocked by its quota first
    long_runner(b)
    b.job(1, gpus=4)
    d = schedule(b.snapshot())
    (p,) = d.preemptions
    assert (p.job_id, p.for_job) == (20, 1)
    # Used 4 - freed 4 + 4 = 4 <= 4: the swap keeps the tenant inside its quota.


def test_a_job_blocked_only_by_its_quota_waits_when_gpus_are_free():
    b = one_node(gpus=8)
    b.tenant("t", {1: (4.0, 0.0)})
    long_runner(b)  # GPUs 0-3; GPUs 4-7 are free, so preempting job 20 frees quota but no GPU job 1 needs
    b.job(1, gpus=4)
    d = schedule(b.snapshot())
    assert d.preemptions == []
    assert d.pending_reasons[1] == (
        "tenant quota: 4 GPUs in use + 4 asked = 8, more than 4 guaranteed + 0 borrowable = 4"
    )


def test_quota_blocked_job_does_not_preempt_when_the_swap_breaks_the_quota():
    b = one_node(gpus=8)
    b.tenant("t", {1: (6.0, 0.0)})
    b.run(21, {"n1": [4, 5]}, started_at=b.now - 400, attained_gpu_s=800.0)  # 2 GPUs, level 1
    b.run(22, {"n1": [6, 7]}, started_at=b.now - 100, attained_gpu_s=200.0)  # 2 GPUs, level 0
    b.job(1, gpus=8)  # quota: used 4 - at most 2 freed by job 21 + 8 = 10 > 6
    assert schedule(b.snapshot()).preemptions == []


def test_the_preemptors_quota_is_held_for_it_in_the_same_round():
    b = one_node(gpus=8)
    b.tenant("t", {1: (8.0, 0.0)})
    long_runner(b)  # GPUs 0-3, level 1
    b.run(21, {"n1": [4, 5, 6]}, started_at=b.now - 50, attained_gpu_s=150.0)  # level 0, young
    b.job(1, gpus=4)  # level 0, submitted first: quota 7 + 4 = 11 > 8, preempts job 20
    b.job(2, gpus=1)  # fits GPU 7, and the quota would have 8 - 7 = 1 left ...
    d = schedule(b.snapshot())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]
    # ... but job 1 holds its 4 from now on: 7 - 4 (job 20) + 4 (job 1) = 7, and job 2's 1 fits: 8 <= 8.
    assert [p.job_id for p in d.placements] == [2]
    b2 = one_node(gpus=8)
    b2.tenant("t", {1: (8.0, 0.0)})
    long_runner(b2)
    b2.run(21, {"n1": [4, 5, 6]}, started_at=b2.now - 50, attained_gpu_s=150.0)
    b2.job(1, gpus=5)  # needs 5: 7 - 4 + 5 = 8, so nothing is left for job 2
    b2.job(2, gpus=1)
    d2 = schedule(b2.snapshot())
    assert [(p.job_id, p.for_job) for p in d2.preemptions] == [(20, 1)]
    assert d2.placements == []


def test_a_waiting_beneficiary_keeps_its_quota_while_its_victim_stops():
    # Round after the preemption of job 20 for job 1 (node agents: job 20 is still stopping, GPUs 0-3).
    b = one_node(gpus=8)
    b.tenant("t", {1: (8.0, 0.0)})
    b.run(
        20,
        {"n1": [0, 1, 2, 3]},
        started_at=b.now - 400,
        attained_gpu_s=1600.0,
        stopping=True,
        preempted_for=1,
        preempted_at=b.now - 10,
        preempted_gpus=(b.gpu_id("n1", 0), b.gpu_id("n1", 1), b.gpu_id("n1", 2), b.gpu_id("n1", 3)),
    )
    b.run(21, {"n1": [4, 5, 6]}, started_at=b.now - 50, attained_gpu_s=150.0)
    b.job(1, gpus=4)
    b.job(2, gpus=1)
    d = schedule(b.snapshot())
    # Job 1 waits for job 20's GPUs with 7 - 4 (leaving for it) + 4 = 7 of the quota: job 2 still fits (8).
    assert "waiting for" in d.pending_reasons[1]
    assert [p.job_id for p in d.placements] == [2]
    assert d.stats["claims"] == 1 and d.stats["claims_dropped"] == 0


def test_rounds_are_deterministic_under_shuffled_input():
    def build(seed: int):
        b = one_node(gpus=8)
        long_runner(b)
        b.run(21, {"n1": [4, 5, 6, 7]}, started_at=b.now - 900, attained_gpu_s=3600.0)  # level 2
        for jid in (1, 2, 3):
            b.job(jid, gpus=4)
        rnd = random.Random(seed)
        rnd.shuffle(b.pending)
        rnd.shuffle(b.running)
        return schedule(b.snapshot())

    first = build(0)
    assert [(p.job_id, p.for_job) for p in first.preemptions]
    for seed in range(1, 6):
        d = build(seed)
        assert [(p.job_id, p.for_job) for p in d.preemptions] == [(p.job_id, p.for_job) for p in first.preemptions]
        assert d.queue_order == first.queue_order


def test_a_quota_blocked_job_that_fits_on_free_gpus_preempts_nobody_even_where_its_own_jobs_gpus_fit_better():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1}, gpus=8)
    b.pool(1, "train")
    b.tenant("t", {1: (4.0, 0.0)})
    b.run(20, {"n1": [0, 1, 2, 3]}, started_at=b.now - 400, attained_gpu_s=1600.0, tenant="t")  # level 1
    b.run(30, {"n1": [4, 5, 6, 7]}, started_at=b.now - 400, attained_gpu_s=1600.0, tenant="u")
    b.job(1, gpus=4)  # quota 4 + 4 > 4; n2 is free. With job 20 gone, n1's four GPUs would be the tighter fit.
    d = schedule(b.snapshot())
    assert d.preemptions == []
    assert d.pending_reasons[1] == (
        "tenant quota: 4 GPUs in use + 4 asked = 8, more than 4 guaranteed + 0 borrowable = 4"
    )


def test_the_line_may_preempt_when_any_of_its_running_jobs_has_more_service_not_only_the_first_or_last():
    # Three running jobs of the tenant's line fill n1. Job 20 (1 GPU, 200 GPU-s) and job 22 (2 GPUs, 2 x 200 = 400
    # GPU-s) are at level 0 like the new job; job 21, listed between them, has had 3200 GPU-s on 1 GPU (level 2) and
    # is expected to run 3200 s more (> 180 s): it gives way to job 1.
    b = one_node()
    b.run(20, {"n1": [0]}, started_at=b.now - 200, attained_gpu_s=200.0)
    b.run(21, {"n1": [1]}, started_at=b.now - 3200, attained_gpu_s=3200.0)
    b.run(22, {"n1": [2, 3]}, started_at=b.now - 200, attained_gpu_s=400.0)
    b.job(1, gpus=1)
    (p,) = schedule(b.snapshot()).preemptions
    assert (p.job_id, p.for_job) == (21, 1)
