"""Queue policies: FIFO, priority + fair share (default), LAS; pluggable and deterministic."""

from scheduler.core import FifoPolicy, LasPolicy, PriorityFairSharePolicy, policy_by_name, schedule
from scheduler.core.policies import PolicyContext, ServiceRank
from scheduler.core.types import JobRequest, Quota, TenantState


def job(jid, tenant="a", prio=50, seq=None, gpus=1, attained=0.0, est=None, submitted=0.0):
    return JobRequest(
        id=jid,
        tenant=tenant,
        pool=1,
        gpus=gpus,
        priority=prio,
        queue_seq=seq if seq is not None else jid,
        attained_gpu_s=attained,
        est_runtime_s=est,
        submitted_at=submitted,
    )


def ids(jobs):
    return [j.id for j in jobs]


def ctx(**tenants):
    return PolicyContext({n: t for n, t in tenants.items()})


def test_fifo_is_submission_order():
    jobs = [job(3, prio=100), job(1, prio=0), job(2)]
    assert ids(FifoPolicy().order(jobs, ctx())) == [1, 2, 3]


def test_priority_class_goes_first():
    jobs = [job(1, prio=10), job(2, prio=100), job(3, prio=50)]
    assert ids(PriorityFairSharePolicy().order(jobs, ctx())) == [2, 3, 1]


def test_age_breaks_ties_within_a_tenant():
    jobs = [job(2, seq=20), job(1, seq=10), job(3, seq=30)]
    assert ids(PriorityFairSharePolicy().order(jobs, ctx())) == [1, 2, 3]


def test_requeued_job_keeps_its_place_in_line():
    jobs = [job(5, seq=50), job(99, seq=7)]  # job 99 was requeued, its queue_seq is from its submission
    assert ids(PriorityFairSharePolicy().order(jobs, ctx())) == [99, 5]


def test_fair_share_favours_the_tenant_that_used_less():
    t = ctx(a=TenantState("a", {1: Quota(8, 0)}, usage_decayed=100.0), b=TenantState("b", {1: Quota(8, 0)}))
    jobs = [job(1, "a", seq=1), job(2, "b", seq=2)]
    assert ids(PriorityFairSharePolicy().order(jobs, t)) == [2, 1]


def test_fair_share_interleaves_tenants():
    t = ctx(a=TenantState("a", {1: Quota(4, 0)}), b=TenantState("b", {1: Quota(4, 0)}))
    jobs = [job(i, "a", seq=i) for i in range(1, 5)] + [job(10 + i, "b", seq=10 + i) for i in range(1, 5)]
    order = PriorityFairSharePolicy().order(jobs, t)
    assert [j.tenant for j in order] == ["a", "b"] * 4


def test_fair_share_weights_by_guaranteed_quota():
    t = ctx(a=TenantState("a", {1: Quota(30, 0)}), b=TenantState("b", {1: Quota(10, 0)}))
    jobs = [job(i, "a", seq=i) for i in range(1, 7)] + [job(10 + i, "b", seq=10 + i) for i in range(1, 3)]
    order = [j.tenant for j in PriorityFairSharePolicy().order(jobs, t)]
    assert order[:4].count("a") == 3  # a is entitled to three times b's share


def test_running_usage_counts_for_fair_share():
    t = PolicyContext({"a": TenantState("a"), "b": TenantState("b")}, running_gpus={"a": 16.0})
    jobs = [job(1, "a", seq=1), job(2, "b", seq=2)]
    assert ids(PriorityFairSharePolicy().order(jobs, t)) == [2, 1]


def test_priority_is_clamped_to_the_tenant_maximum():
    t = ctx(a=TenantState("a", max_priority=10), b=TenantState("b"))
    jobs = [job(1, "a", prio=100), job(2, "b", prio=50)]
    assert ids(PriorityFairSharePolicy().order(jobs, t)) == [2, 1]


def test_las_runs_least_attained_service_first():
    jobs = [job(1, attained=100_000), job(2, attained=10), job(3, attained=5000)]
    assert ids(LasPolicy().order(jobs, ctx())) == [2, 3, 1]


def test_las_is_fifo_inside_a_queue():
    jobs = [job(2, seq=2, attained=100), job(1, seq=1, attained=3000)]
    assert ids(LasPolicy().order(jobs, ctx())) == [1, 2]  # both under the first 3600 GPU-s threshold


def test_las_respects_priority_by_default_and_can_ignore_it():
    jobs = [job(1, prio=0, attained=0), job(2, prio=100, attained=1e6)]
    assert ids(LasPolicy().order(jobs, ctx())) == [2, 1]
    assert ids(LasPolicy(respect_priority=False).order(jobs, ctx())) == [1, 2]


def test_policy_by_name():
    assert isinstance(policy_by_name("fifo"), FifoPolicy)
    assert isinstance(policy_by_name("las"), LasPolicy)
    assert isinstance(policy_by_name("priority-fairshare"), PriorityFairSharePolicy)


def test_unknown_policy_name_lists_the_known_ones():
    try:
        policy_by_name("edf")
    except KeyError as exc:
        assert "fifo" in str(exc) and "las" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected KeyError")


def test_schedule_uses_the_given_policy():
    from tests.scheduler.core.builders import SnapBuilder

    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=1)
    b.pool(1, "train")
    b.job(1, priority=0)
    b.job(2, priority=100)
    assert schedule(b.snapshot()).placements[0].job_id == 2
    d = schedule(b.snapshot(), policy=FifoPolicy())
    assert d.placements[0].job_id == 1 and d.queue_order == [1, 2] and d.stats["policy"] == "fifo"


# ----------------------------------------------------------------------- inside a tenant (ServiceRank)

SERVICE = ServiceRank()  # levels: 0 below 600 GPU-s, 1 below 600 x 4 = 2400, 2 above (3 levels)


def svc_ctx(now: float = 0.0, service: ServiceRank = SERVICE, **tenants) -> PolicyContext:
    return PolicyContext({n: t for n, t in tenants.items()}, now=now, service=service)


def test_service_levels():
    levels = [SERVICE.level(job(1, attained=a)) for a in (0, 599, 600, 2399, 2400, 1e9)]
    assert levels == [0, 0, 1, 1, 2, 2]


def test_less_attained_service_goes_first_inside_a_tenant():
    jobs = [job(1, attained=2400), job(2, attained=700), job(3, attained=0)]
    assert ids(PriorityFairSharePolicy().order(jobs, svc_ctx())) == [3, 2, 1]


def test_inside_a_level_the_least_estimated_work_left_goes_first():
    jobs = [
        job(1, gpus=1, est=1000.0),  # 1 x 1000 = 1000 GPU-s left
        job(2, gpus=4, est=100.0),  # 4 x 100 = 400
        job(3, gpus=1),  # no estimate: after those that gave one
        job(4, gpus=2, est=300.0, attained=100.0),  # ran 50 s: 2 x 250 = 500
        job(5, gpus=1, est=100.0, attained=200.0),  # ran past its estimate: like no estimate
    ]
    assert ids(PriorityFairSharePolicy().order(jobs, svc_ctx())) == [2, 4, 1, 3, 5]


def test_jobs_without_estimates_keep_submission_order_inside_a_level():
    jobs = [job(3, seq=3, gpus=8), job(1, seq=1, gpus=1), job(2, seq=2, gpus=4)]
    assert ids(PriorityFairSharePolicy().order(jobs, svc_ctx())) == [1, 2, 3]


def test_priority_and_fair_share_stay_above_service():
    t = {"a": TenantState("a", {1: Quota(4, 0)}), "b": TenantState("b", {1: Quota(4, 0)})}
    jobs = [
        job(1, "a", attained=1e6),  # tenant a's, level 2
        job(2, "a", attained=0),
        job(3, "b", attained=1e6),
        job(4, "c", prio=100, attained=1e6),  # a higher class beats any level
    ]
    order = ids(PriorityFairSharePolicy().order(jobs, PolicyContext(t, service=SERVICE)))
    # Priority 100 first; then a and b interleave by fair share, each line in service order: a's first job
    # (job 2, level 0) and b's (job 3) both at ratio 0 / 4, by queue_seq 2 < 3; then a's second (job 1) at
    # (0 + 1 GPU x 1 h) / 4 = 0.25.
    assert order == [4, 2, 3, 1]


def test_aging_puts_a_starving_job_first():
    aged = ServiceRank(aging_s=3600.0)
    jobs = [job(1, gpus=8, attained=1e6, submitted=0.0), job(2, est=10.0, submitted=4000.0)]
    # At 5000 s job 1 has waited 5000 - 0 - 1e6 / 8 < 0 s (it ran 125000 s): no aging; job 2 first.
    assert ids(PriorityFairSharePolicy().order(jobs, svc_ctx(5000.0, aged))) == [2, 1]
    jobs[0] = job(1, gpus=8, attained=8000.0, submitted=0.0)  # ran 1000 s, waited 5000 - 1000 = 4000 >= 3600
    assert ids(PriorityFairSharePolicy().order(jobs, svc_ctx(5000.0, aged))) == [1, 2]
    assert aged.starving(jobs[0], 5000.0) and not aged.starving(jobs[1], 5000.0)


def test_without_a_service_rank_a_tenant_keeps_submission_order():
    jobs = [job(1, seq=1, attained=1e6), job(2, seq=2, est=1.0)]
    assert ids(PriorityFairSharePolicy().order(jobs, ctx())) == [1, 2]


def test_sort_keys_agree_with_key():
    aged = ServiceRank(aging_s=3600.0)
    jobs = [
        job(1, attained=0.0),
        job(2, attained=599.0),
        job(3, gpus=4, attained=2400.0, est=10_000.0),
        job(4, gpus=2, est=100.0, attained=300.0),
        job(5, gpus=8, attained=1e9),
        job(6, gpus=8, attained=8000.0, submitted=0.0),
    ]
    for rank in (SERVICE, aged):
        keys = rank.sort_keys(jobs, 5000.0)
        assert {j.id: keys[j.id][:3] for j in jobs} == {j.id: rank.key(j, 5000.0) for j in jobs}
