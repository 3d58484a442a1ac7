"""The placement loop's memo of turns that changed nothing (engine._Round.remember_turns): a job alike to an
earlier one in all its turn reads gets that one's reason without a turn. It must never change a decision."""

from dataclasses import replace

import pytest

from scheduler.core import build_topology, schedule
from scheduler.core.engine import _Round
from scheduler.core.policies import FifoPolicy, PriorityFairSharePolicy
from scheduler.core.synthetic import next_round, synthetic_snapshot
from scheduler.core.types import Config
from tests.scheduler.core.builders import config, two_leaves
from tests.scheduler.core.decisions import everything


def _without_memo(snap, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(_Round, "remember_turns", False)
        return schedule(snap)


CONFIGS = {
    "default": Config(),
    "no backfill": Config(backfill=False),
    "no service order": Config(service_order=False, service_preemption=False),
    "many preemption tries": Config(max_preemption_attempts=200, reservations_per_pool=3),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_churn_rounds_decide_the_same_with_and_without_the_memo(name, monkeypatch):
    # A filled cluster, then churn rounds (5 % of the running jobs end, as many arrive): every placement, reason,
    # reservation, preemption and counter is the same whether alike jobs take their turn or not.
    snap = synthetic_snapshot(gpus=1024, pending=4000, seed=13)
    snap = replace(snap, topology=build_topology(snap.fabric), config=CONFIGS[name])
    dec = schedule(snap)
    assert everything(dec) == everything(_without_memo(snap, monkeypatch))
    for i in range(3):
        snap = next_round(snap, dec, 0.05, seed=i)
        dec = schedule(snap)
        assert everything(dec) == everything(_without_memo(snap, monkeypatch))


def test_jobs_alike_but_for_their_tenant_get_each_their_tenants_reason():
    # Tenant a's quota is spent (8 guaranteed, no borrowing, 8 running); b has room but the cluster is full.
    # The queue alternates a, b: a's jobs are refused by quota, b's wait for GPUs; each keeps its own reason.
    b = two_leaves()
    b.pool(1, "train")
    b.tenant("a", {1: (8, 0)})
    b.tenant("b", {1: (64, 0)})
    b.run(20, {"n1": list(range(8))}, tenant="a")
    b.run(21, {h: list(range(8)) for h in ("n2", "n3", "n4")}, tenant="b")
    for j in range(1, 41):
        b.job(j, gpus=8, tenant="a" if j % 2 else "b")
    d = schedule(b.snapshot(config(service_preemption=False)))
    a_reasons = {d.pending_reasons[j] for j in range(1, 41, 2)}
    b_reasons = {d.pending_reasons[j] for j in range(2, 41, 2)} - {d.pending_reasons[2]}
    assert len(a_reasons) == 1 and a_reasons.pop().startswith("tenant quota")
    assert len(b_reasons) == 1 and not b_reasons.pop().startswith("tenant quota")
    assert d.stats["quota_blocked"] == 20


def test_a_placement_forgets_the_remembered_turns_of_its_tenant():
    # n4 has 2 GPUs free; no reservations. Tenant a may use 8 GPUs, no borrowing. Jobs 1 and 2 (8 GPUs, alike) wait
    # for GPUs: job 2's turn is job 1's, remembered. Job 3 (1 GPU) starts: a now uses 1. Job 4, alike to 1 and 2,
    # would take a to 9: refused by quota, not told job 2's reason (a turn remembered before its tenant's placement is
    # forgotten).
    b = two_leaves()
    b.pool(1, "train")
    b.tenant("a", {1: (8, 0)})
    b.tenant("b", {1: (64, 0)})
    for i, h in enumerate(("n1", "n2", "n3")):
        b.run(20 + i, {h: list(range(8))}, tenant="b")
    b.run(23, {"n4": list(range(6))}, tenant="b")
    for j, gpus in ((1, 8), (2, 8), (3, 1), (4, 8)):
        b.job(j, gpus=gpus, tenant="a")
    cfg = config(service_order=False, service_preemption=False, reservations_per_pool=0)
    d = schedule(b.snapshot(cfg), FifoPolicy())
    assert [p.job_id for p in d.placements] == [3]
    assert d.pending_reasons[1] == d.pending_reasons[2]
    assert not d.pending_reasons[2].startswith("tenant quota")
    assert d.pending_reasons[4] == (
        "tenant quota: 1 GPU in use + 8 asked = 9, more than 8 guaranteed + 0 borrowable = 8"
    )


def _full(b, **kw):
    """n1-n4 (32 GPUs) all held by four running jobs 20-23."""
    for i, h in enumerate(("n1", "n2", "n3", "n4")):
        b.run(20 + i, {h: list(range(8))}, **kw)


def reserving_n4():
    """n1-n3 held for 100,000 s; job 23 holds 4 of n4's GPUs and ends in 1,000 s. Job 1 (8 GPUs), first in line,
    reserves n4 from then."""
    b = two_leaves()
    b.pool(1, "train")
    for i, h in enumerate(("n1", "n2", "n3")):
        b.run(20 + i, {h: list(range(8))}, est_runtime_s=100_000.0)
    b.run(23, {"n4": [0, 1, 2, 3]}, est_runtime_s=1_600.0)  # started 600 s ago
    b.job(1, gpus=8, est_runtime_s=3_600.0)
    return b


def test_a_short_job_backfills_where_an_alike_long_one_could_not():
    # n4 has 4 GPUs free; job 23 holds its other 4 and ends in 1,000 s. Job 1 (8 GPUs) is first in line and
    # reserves n4 from then. Jobs 2-5 (1 GPU each, alike but for their estimates) come next: jobs 2, 3 and 5 would
    # run 5,000 s, past the reservation, so they wait; job 4 runs 100 s, ends before it, and backfills onto n4.
    b = reserving_n4()
    b.job(2, gpus=1, est_runtime_s=5_000.0)
    b.job(3, gpus=1, est_runtime_s=5_000.0)
    b.job(4, gpus=1, est_runtime_s=100.0)
    b.job(5, gpus=1, est_runtime_s=5_000.0)
    d = schedule(b.snapshot(config(service_order=False, service_preemption=False)))
    assert [p.job_id for p in d.placements] == [4]
    assert d.placements[0].nodes == ("n4",)
    assert d.pending_reasons[2] == d.pending_reasons[3] == d.pending_reasons[5]


def test_a_higher_priority_job_preempts_after_alike_lower_ones_could_not():
    # First in line (FIFO) three jobs of priority 10, like every running job: they may not preempt and wait. Job 4,
    # alike but of priority 50, preempts one of them.
    b = two_leaves()
    b.pool(1, "train")
    _full(b, priority=10)
    b.job(1, gpus=8, priority=10)
    b.job(2, gpus=8, priority=10)
    b.job(3, gpus=8, priority=10)
    b.job(4, gpus=8, priority=50)
    d = schedule(b.snapshot(config(service_preemption=False)), FifoPolicy())
    assert {p.for_job for p in d.preemptions} == {4}
    assert len(d.preemptions) == 1


def test_a_job_with_less_service_preempts_after_alike_ones_with_more_could_not():
    # Every running job has had 100,000 GPU-seconds (service level 2). Jobs 1-3 have had as much: a job of
    # their own level does not give way to them. Job 4, alike but new (level 0), takes one job's GPUs (least
    # attained service: it ran 12,500 s, far more than twice its checkpoint and restart, 2 x 90 s).
    b = two_leaves()
    b.pool(1, "train")
    _full(b, attained_gpu_s=100_000.0)
    b.job(1, gpus=8, attained_gpu_s=100_000.0)
    b.job(2, gpus=8, attained_gpu_s=100_000.0)
    b.job(3, gpus=8, attained_gpu_s=100_000.0)
    b.job(4, gpus=8)
    d = schedule(b.snapshot(config()), FifoPolicy())
    assert {p.for_job for p in d.preemptions} == {4}
    assert len(d.preemptions) == 1


def test_a_preemption_try_in_another_pool_that_spends_the_budget_changes_what_alike_jobs_are_told():
    # Pools a (n1, n2) and b (n3, n4), full of priority-10 jobs that started 100 s ago (300 s minimum run, no
    # exemption for priority), two preemption tries a round. Job 1 (pool a) tries: it could preempt in 200 s.
    # Job 2, alike, is told the same without a try. Job 3 (pool b) spends the second try. Job 4, alike to 1 and 2,
    # may not try any more this round, so it is not told it may preempt.
    b = two_leaves()
    b.pool(1, "a", hosts=["n1", "n2"])
    b.pool(2, "b", hosts=["n3", "n4"])
    for i, (h, pool) in enumerate((("n1", 1), ("n2", 1), ("n3", 2), ("n4", 2))):
        b.run(20 + i, {h: list(range(8))}, pool=pool, priority=10, started_at=b.now - 100)
    b.job(1, gpus=8, pool=1)
    b.job(2, gpus=8, pool=1)
    b.job(3, gpus=8, pool=2)
    b.job(4, gpus=8, pool=1)
    cfg = config(
        service_preemption=False,
        reservations_per_pool=0,
        max_preemption_attempts=2,
        preemption_min_run_priority_exempt=False,
    )
    d = schedule(b.snapshot(cfg), FifoPolicy())
    assert d.stats["preemption_attempts"] == 2
    assert "may preempt in about" in d.pending_reasons[1]
    assert d.pending_reasons[2] == d.pending_reasons[1]
    assert "may preempt" not in d.pending_reasons[4]


# The fair-share policy hands each job's estimate in queue order beside it (PolicyContext.out_ests); FIFO does not.
POLICIES = {"fair share": PriorityFairSharePolicy, "fifo": FifoPolicy}
# A run of remembered turns ends at each job that might end before its pool's earliest reservation, or reads every
# job's estimate where many might (engine._Round.short_runs_share).
RUNS = {"end at them": 1.0, "read estimates": 0.0}


@pytest.fixture(params=RUNS)
def runs(request, monkeypatch):
    monkeypatch.setattr(_Round, "short_runs_share", RUNS[request.param])


@pytest.mark.usefixtures("runs")
@pytest.mark.parametrize("policy", POLICIES)
def test_a_short_job_amid_remembered_long_ones_still_backfills(policy):
    # As above with three long jobs before the short one: job 2 searches, job 3's turn is remembered, job 4 reads
    # it, and the jobs after 4 are read as a run while they match it. Job 5 (100 s) ends before job 1's reservation:
    # its turn is not job 3's, and it backfills onto n4; jobs 6 and 7, long again, wait like 2-4.
    b = reserving_n4()
    for j in range(2, 8):
        b.job(j, gpus=1, est_runtime_s=100.0 if j == 5 else 5_000.0)
    d = schedule(b.snapshot(config(service_order=False, service_preemption=False)), POLICIES[policy]())
    assert [p.job_id for p in d.placements] == [5]
    assert {d.pending_reasons[j] for j in (2, 3, 4, 6, 7)} == {d.pending_reasons[2]}
    assert d.queue_order == [1, 2, 3, 4, 5, 6, 7]
    assert d.queue_reasons[4] is None  # job 5 was placed


@pytest.mark.usefixtures("runs")
@pytest.mark.parametrize("policy", POLICIES)
def test_a_short_job_amid_remembered_ones_backfills_in_the_pool_that_reserved_last(policy):
    # Pools a (n1, n2) and b (n3, n4), alike: one node held for 100,000 s, the other half held by a job that ends in
    # 1,000 s. Job 1 (8 GPUs, pool a) reserves n2; jobs 2-4 (pool a, long) wait, 4 reading 3's turn. Job 5 (8 GPUs,
    # pool b) then reserves n4: pool b's earliest reservation is set after pool a's. Jobs 6-10 (pool b) are 6, 7, 8
    # and 10 long, 9 short: 9 ends before job 5's reservation and backfills onto n4 though 8 read 7's turn.
    b = two_leaves()
    b.pool(1, "a", hosts=["n1", "n2"])
    b.pool(2, "b", hosts=["n3", "n4"])
    b.run(20, {"n1": list(range(8))}, pool=1, est_runtime_s=100_000.0)
    b.run(21, {"n2": [0, 1, 2, 3]}, pool=1, est_runtime_s=1_600.0)  # started 600 s ago
    b.run(22, {"n3": list(range(8))}, pool=2, est_runtime_s=100_000.0)
    b.run(23, {"n4": [0, 1, 2, 3]}, pool=2, est_runtime_s=1_600.0)
    b.job(1, gpus=8, pool=1, est_runtime_s=3_600.0)
    for j in (2, 3, 4):
        b.job(j, gpus=1, pool=1, est_runtime_s=5_000.0)
    b.job(5, gpus=8, pool=2, est_runtime_s=3_600.0)
    for j in range(6, 11):
        b.job(j, gpus=1, pool=2, est_runtime_s=100.0 if j == 9 else 5_000.0)
    d = schedule(b.snapshot(config(service_order=False, service_preemption=False)), POLICIES[policy]())
    assert [r.job_id for r in d.reservations] == [1, 5]
    assert [p.job_id for p in d.placements] == [9]
    assert d.placements[0].nodes == ("n4",)
    assert {d.pending_reasons[j] for j in (6, 7, 8, 10)} == {d.pending_reasons[6]}
