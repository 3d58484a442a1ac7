"""Queue policies: FIFO, priority + fair share (default), LAS; pluggable and deterministic."""

from scheduler.core import FifoPolicy, LasPolicy, PriorityFairSharePolicy, policy_by_name, schedule
from scheduler.core.policies import PolicyContext
from scheduler.core.types import JobRequest, Quota, TenantState


def job(jid, tenant="a", prio=50, seq=None, gpus=1, attained=0.0):
    return JobRequest(
        id=jid,
        tenant=tenant,
        pool=1,
        gpus=gpus,
        priority=prio,
        queue_seq=seq if seq is not None else jid,
        attained_gpu_s=attained,
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
    from tests.scheduler_core.builders import SnapBuilder

    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=1)
    b.pool(1, "train")
    b.job(1, priority=0)
    b.job(2, priority=100)
    assert schedule(b.snapshot()).placements[0].job_id == 2
    d = schedule(b.snapshot(), policy=FifoPolicy())
    assert d.placements[0].job_id == 1 and d.queue_order == [1, 2] and d.stats["policy"] == "fifo"
