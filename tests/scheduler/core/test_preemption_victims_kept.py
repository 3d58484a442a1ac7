"""The engine keeps the victims per node by what decides who may be one (engine._Round._preempt); a job that
differs from an earlier one in any of it finds its own victims. Each case: job 1 tries and finds nobody, job 2
(FIFO after it) differs in one thing only and preempts. No reservations: one for job 1 would keep job 2 off
its GPUs."""

from scheduler.core import FifoPolicy, schedule
from tests.scheduler.core.builders import config, two_leaves


def _cluster(b):
    b.pool(1, "train")
    # n3 and n4 run tenant c's priority-100 jobs: nobody here may preempt them.
    b.run(23, {"n3": list(range(8))}, tenant="c", priority=100)
    b.run(24, {"n4": list(range(8))}, tenant="c", priority=100)


def test_a_job_within_its_quota_finds_victims_a_borrowing_one_of_its_tenant_could_not():
    # Tenant a is guaranteed 16 GPUs and runs 8 (job 22 on n2, not preemptible). Job 1 (16 GPUs) would take a to
    # 24: borrowing, it may only preempt borrowed jobs or a's own, and n1 runs c's. Job 2 (8 GPUs: 16, within the
    # guarantee) may preempt any lower priority: c's priority-10 job on n1.
    b = two_leaves()
    _cluster(b)
    b.tenant("a", {1: (16, 100)})
    b.run(21, {"n1": list(range(8))}, tenant="c", priority=10)
    b.run(22, {"n2": list(range(8))}, tenant="a", priority=100, preemptible=False)
    b.job(1, gpus=16, tenant="a", priority=50)
    b.job(2, gpus=8, tenant="a", priority=50)
    d = schedule(b.snapshot(config(service_preemption=False, reservations_per_pool=0)), FifoPolicy())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(21, 2)]


def test_a_job_with_less_service_finds_victims_one_with_more_could_not():
    # All of tenant a, priority 50. Job 21 on n1 is at service level 2 but ends in 50 s (not worth a restart),
    # job 22 on n2 at level 1 runs another 9,875 s. Job 1 (level 1) may only take level 2 and up: nobody.
    # Job 2 (level 0) may take level 1: job 22.
    b = two_leaves()
    _cluster(b)
    b.run(21, {"n1": list(range(8))}, tenant="a", priority=50, attained_gpu_s=100_000.0, est_runtime_s=12_550.0)
    b.run(22, {"n2": list(range(8))}, tenant="a", priority=50, attained_gpu_s=1_000.0, est_runtime_s=10_000.0)
    b.job(1, gpus=8, tenant="a", priority=50, attained_gpu_s=1_000.0)
    b.job(2, gpus=8, tenant="a", priority=50)
    d = schedule(b.snapshot(config(reservations_per_pool=0)), FifoPolicy())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(22, 2)]


def test_a_job_blocked_by_capacity_finds_victims_one_blocked_by_quota_could_not():
    # Tenant a is guaranteed 16 and may borrow 8; it runs 16. Job 1 (16 GPUs: 32) is refused by the quota; it may
    # only ask a's own jobs of its priority with more service to give way, and job 21 (level 2) ends in 50 s.
    # Job 2 (8 GPUs: 24, borrowing) waits for capacity only, and may preempt a's priority-10 job 22.
    b = two_leaves()
    _cluster(b)
    b.tenant("a", {1: (16, 8)})
    b.run(21, {"n1": list(range(8))}, tenant="a", priority=50, attained_gpu_s=100_000.0, est_runtime_s=12_550.0)
    b.run(22, {"n2": list(range(8))}, tenant="a", priority=10)
    b.job(1, gpus=16, tenant="a", priority=50)
    b.job(2, gpus=8, tenant="a", priority=50)
    d = schedule(b.snapshot(config(reservations_per_pool=0)), FifoPolicy())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(22, 2)]


def test_a_job_of_another_tenant_may_take_what_a_tenant_borrowed_when_its_own_job_may_not():
    # Both jobs within their tenants' quotas, priority 50. Job 21 on n1 is tenant a's, borrowed, priority 50: a
    # reclaim for another tenant's job, not for a's own. On n2, c's priority-10 job 22 holds 4 GPUs beside a job
    # that may not be preempted: freeing it leaves 4, too few. Job 1 (tenant a) tries and finds nothing that
    # fits; job 2 (tenant b), alike otherwise, preempts job 21.
    b = two_leaves()
    _cluster(b)
    b.tenant("a", {1: (16, 100)})
    b.tenant("b", {1: (16, 100)})
    b.run(21, {"n1": list(range(8))}, tenant="a", priority=50, borrowed=True)
    b.run(22, {"n2": [0, 1, 2, 3]}, tenant="c", priority=10)
    b.run(25, {"n2": [4, 5, 6, 7]}, tenant="c", priority=100, preemptible=False)
    b.job(1, gpus=8, tenant="a", priority=50)
    b.job(2, gpus=8, tenant="b", priority=50)
    d = schedule(b.snapshot(config(service_preemption=False, reservations_per_pool=0)), FifoPolicy())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(21, 2)]
    assert d.stats["preemption_attempts"] == 2
