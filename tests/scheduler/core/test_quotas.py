"""Quotas: guaranteed share, borrowing idle GPUs up to a limit, reclaim by preemption."""

from scheduler.core import schedule
from scheduler.core.quotas import QuotaBook, QuotaVerdict
from scheduler.core.types import Config, JobRequest, PoolState, Quota, Share, TenantState
from tests.scheduler.core.builders import SnapBuilder


def cluster(nodes: int = 2, gpus: int = 8) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", [f"n{i + 1}" for i in range(nodes)], {"S1": nodes}, gpus=gpus)
    b.pool(1, "train")
    return b


def test_job_within_guaranteed_quota_runs_unborrowed():
    b = cluster()
    b.tenant("a", {1: (8, 0)})
    b.job(1, gpus=8, tenant="a")
    p = schedule(b.snapshot()).placements[0]
    assert p.borrowed is False


def test_idle_capacity_can_be_borrowed_up_to_the_limit():
    b = cluster()
    b.tenant("a", {1: (4, 4)})
    b.job(1, gpus=8, tenant="a")
    p = schedule(b.snapshot()).placements[0]
    assert p.borrowed is True


def test_borrowing_limit_reached():
    b = cluster()
    b.tenant("a", {1: (8, 0)})
    b.run(9, {"n1": list(range(8))}, tenant="a")
    b.job(1, gpus=1, tenant="a")
    d = schedule(b.snapshot())
    assert d.placements == []
    assert d.pending_reasons[1] == (
        "tenant quota: 8 GPUs in use + 1 asked = 9, more than 8 guaranteed + 0 borrowable = 8"
    )


def test_quota_reason_when_the_guarantee_is_all_in_use():
    b = cluster(nodes=4)
    b.tenant("a", {1: (32, 0)})
    b.run(9, {f"n{i}": list(range(8)) for i in range(1, 5)}, tenant="a")
    b.job(1, gpus=1, tenant="a")
    assert schedule(b.snapshot()).pending_reasons[1] == (
        "tenant quota: 32 GPUs in use + 1 asked = 33, more than 32 guaranteed + 0 borrowable = 32"
    )


def test_a_big_gang_refused_with_nothing_borrowed_says_the_sum_not_borrowing_limit_reached():
    # Issue 14: a 12 x 8 job of a tenant with 64 guaranteed + 32 borrowable and 16 GPUs in use (none borrowed) was
    # told "tenant quota 16/64 used, borrowing limit reached"; what refused it is 16 + 96 = 112 > 64 + 32 = 96.
    b = cluster(nodes=14)  # 112 GPUs: the pool could hold it
    b.tenant("a", {1: (64, 32)})
    b.run(9, {"n1": list(range(8)), "n2": list(range(8))}, tenant="a")
    b.job(1, gpus=96, nodes=12, gpus_per_node=8, tenant="a")
    d = schedule(b.snapshot())
    assert d.placements == []
    assert d.pending_reasons[1] == (
        "tenant quota: 16 GPUs in use + 96 asked = 112, more than 64 guaranteed + 32 borrowable = 96"
    )


def test_quota_reason_while_borrowing_part_of_the_limit():
    b = cluster()
    b.tenant("a", {1: (4, 4)})
    b.run(9, {"n1": [0, 1, 2, 3, 4, 5]}, tenant="a", borrowed=True)  # 6 in use: 2 of them borrowed
    b.job(1, gpus=3, tenant="a")
    assert schedule(b.snapshot()).pending_reasons[1] == (
        "tenant quota: 6 GPUs in use + 3 asked = 9, more than 4 guaranteed + 4 borrowable = 8"
    )


def test_the_same_job_fits_when_the_sum_does():
    # 6 + 2 = 8 <= 4 + 4: it borrows, so the sum above is what refused the 3-GPU job.
    b = cluster()
    b.tenant("a", {1: (4, 4)})
    b.run(9, {"n1": [0, 1, 2, 3, 4, 5]}, tenant="a", borrowed=True)
    b.job(1, gpus=2, tenant="a")
    (p,) = schedule(b.snapshot()).placements
    assert (p.job_id, p.borrowed) == (1, True)


def test_job_bigger_than_quota_plus_limit():
    b = cluster()
    b.tenant("a", {1: (4, 4)})
    b.job(1, gpus=16, tenant="a")
    assert schedule(b.snapshot()).pending_reasons[1] == (
        "needs 16 GPUs, more than the tenant quota allows at once: 4 guaranteed + 4 borrowable = 8"
    )


def test_non_preemptible_job_cannot_borrow():
    b = cluster()
    b.tenant("a", {1: (4, 8)})
    b.job(1, gpus=8, tenant="a", preemptible=False)
    assert schedule(b.snapshot()).pending_reasons[1] == (
        "tenant quota: 0 GPUs in use + 8 asked = 8, more than 4 guaranteed; a non-preemptible job cannot borrow"
    )


def test_quota_is_charged_as_jobs_are_placed_in_the_round():
    b = cluster()
    b.tenant("a", {1: (4, 0)})
    b.job(1, gpus=3, tenant="a")
    b.job(2, gpus=3, tenant="a")
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.placements] == [1]
    assert d.pending_reasons[2] == (  # job 1's 3 GPUs are charged as it is placed
        "tenant quota: 3 GPUs in use + 3 asked = 6, more than 4 guaranteed + 0 borrowable = 4"
    )


def test_tenant_without_quota_borrows_by_default():
    b = cluster()
    b.job(1, gpus=8, tenant="nobody")
    assert schedule(b.snapshot()).placements[0].borrowed is True


def test_tenant_without_quota_is_refused_when_configured():
    from tests.scheduler.core.builders import config

    b = cluster()
    b.job(1, gpus=8, tenant="nobody")
    d = schedule(b.snapshot(config(borrow_without_quota=False)))
    assert d.pending_reasons[1] == "tenant nobody has no quota in pool 'train'"


def test_shared_usage_counts_fractions_of_a_gpu():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=1)
    b.pool(1, "infer", sharing="mps")
    b.tenant("a", {1: (0.5, 0)})
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 30, 1000)], sharing="mps", tenant="a")
    b.job(1, tenant="a", sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    d = schedule(b.snapshot())
    assert d.pending_reasons[1] == (  # 30 % of one GPU is 0.3 GPU-equivalents
        "tenant quota: 0.3 GPUs in use + 0.3 asked = 0.6, more than 0.5 guaranteed + 0 borrowable = 0.5"
    )


def test_borrowed_gpus_are_reclaimed_for_the_owner():
    b = cluster(nodes=1)
    b.tenant("owner", {1: (8, 0)})
    b.tenant("borrower", {1: (0, 8)})
    b.run(9, {"n1": list(range(8))}, tenant="borrower", borrowed=True)
    b.job(1, gpus=8, tenant="owner")
    d = schedule(b.snapshot())
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(9, 1)]
    assert d.preemptions[0].reason == "preempted for job 1 (reclaiming GPUs tenant borrower borrowed)"
    assert d.pending_reasons[1] == "preempting job 9 to free 8 GPUs on n1; starts when they stop"


def test_in_quota_jobs_of_another_tenant_are_not_reclaimed():
    b = cluster(nodes=1)
    b.tenant("owner", {1: (8, 0)})
    b.tenant("other", {1: (8, 0)})
    b.run(9, {"n1": list(range(8))}, tenant="other", borrowed=False)
    b.job(1, gpus=8, tenant="owner")
    assert schedule(b.snapshot()).preemptions == []


def test_borrowing_job_cannot_take_guaranteed_capacity():
    b = cluster(nodes=1)
    b.tenant("a", {1: (0, 8)})
    b.tenant("b", {1: (8, 0)})
    b.run(9, {"n1": list(range(8))}, tenant="b", priority=10)
    b.job(1, gpus=8, tenant="a", priority=100)  # higher priority, but it would be borrowing
    assert schedule(b.snapshot()).preemptions == []


def test_non_preemptible_borrowed_job_is_not_reclaimed():
    b = cluster(nodes=1)
    b.tenant("owner", {1: (8, 0)})
    b.run(9, {"n1": list(range(8))}, tenant="x", borrowed=True, preemptible=False)
    b.job(1, gpus=8, tenant="owner")
    assert schedule(b.snapshot()).preemptions == []


def test_a_one_gpu_job_of_a_tenant_without_quota_is_borrowing():
    # No quota: 0 guaranteed, so even 0 + 1 = 1 GPU is more than the guarantee and is borrowed (reclaimable).
    b = cluster()
    b.job(1, gpus=1, tenant="nobody")
    (p,) = schedule(b.snapshot()).placements
    assert (p.job_id, p.borrowed) == (1, True)


def test_a_non_preemptible_job_of_a_tenant_without_quota_cannot_borrow():
    b = cluster()
    b.job(1, gpus=1, tenant="nobody", preemptible=False)
    d = schedule(b.snapshot())
    assert d.placements == []
    assert d.pending_reasons[1] == (
        "tenant quota: 0 GPUs in use + 1 asked = 1, more than 0 guaranteed; a non-preemptible job cannot borrow"
    )


# ------------------------------------------------------------------ the book itself: one verdict per case


def book(quota: Quota | None = None, **config) -> QuotaBook:
    tenants = [TenantState("a", {1: quota})] if quota is not None else []
    return QuotaBook(tenants, {1: PoolState(1, "train")}, Config(**config))


def verdict(v: QuotaVerdict) -> tuple:
    return (v.ok, v.borrowed, v.in_quota, v.reason)


def test_book_in_quota_starts_unborrowed_and_may_reclaim():
    b = book(Quota(4, 4))
    b.charge("a", 1, 3)
    assert verdict(b.check(JobRequest(1, "a", 1, gpus=1), 1)) == (True, False, True, None)  # 3 + 1 <= 4


def test_book_over_the_guarantee_borrows():
    b = book(Quota(4, 4))
    b.charge("a", 1, 3)
    assert verdict(b.check(JobRequest(1, "a", 1, gpus=2), 2)) == (True, True, False, None)  # 4 < 3 + 2 <= 8


def test_book_refuses_a_non_preemptible_job_over_the_guarantee_borrowing_nothing():
    b = book(Quota(4, 4))
    b.charge("a", 1, 3)
    assert verdict(b.check(JobRequest(1, "a", 1, gpus=2, preemptible=False), 2)) == (
        False,
        False,
        False,
        "tenant quota: 3 GPUs in use + 2 asked = 5, more than 4 guaranteed; a non-preemptible job cannot borrow",
    )


def test_book_refuses_beyond_guarantee_plus_limit_borrowing_nothing():
    b = book(Quota(4, 4))
    b.charge("a", 1, 7)
    assert verdict(b.check(JobRequest(1, "a", 1, gpus=2), 2)) == (
        False,
        False,
        False,
        "tenant quota: 7 GPUs in use + 2 asked = 9, more than 4 guaranteed + 4 borrowable = 8",
    )


def test_book_refuses_a_job_bigger_than_guarantee_plus_limit_borrowing_nothing():
    assert verdict(book(Quota(4, 4)).check(JobRequest(1, "a", 1, gpus=9), 9)) == (
        False,
        False,
        False,
        "needs 9 GPUs, more than the tenant quota allows at once: 4 guaranteed + 4 borrowable = 8",
    )


def test_book_refuses_a_tenant_without_quota_when_configured_borrowing_nothing():
    b = book(borrow_without_quota=False)
    assert verdict(b.check(JobRequest(1, "a", 1, gpus=1), 1)) == (
        False,
        False,
        False,
        "tenant a has no quota in pool 'train'",
    )


def test_book_names_an_unknown_pool_by_its_number():
    b = book(borrow_without_quota=False)
    assert b.check(JobRequest(1, "a", 7, gpus=1), 1).reason == "tenant a has no quota in pool '7'"


def test_book_usage_starts_at_zero_and_follows_charges_and_refunds():
    b = book(Quota(4, 4))
    assert b.usage("a", 1) == 0.0
    b.charge("a", 1, 3)
    b.refund("a", 1, 1)
    assert b.usage("a", 1) == 2.0
    b.refund("a", 1, 2)
    assert b.usage("a", 1) == 0.0


def test_book_usage_never_goes_below_zero():
    b = book(Quota(4, 4))
    b.charge("a", 1, 1)
    b.refund("a", 1, 3)
    assert b.usage("a", 1) == 0.0
    b.refund("b", 1, 0.5)  # never charged
    assert b.usage("b", 1) == 0.0


def test_book_a_refusal_says_the_sums_of_the_moment_after_usage_changes():
    b = book(Quota(4, 4))
    b.charge("a", 1, 7)
    first = b.check(JobRequest(1, "a", 1, gpus=2), 2).reason
    b.charge("a", 1, 1)
    later = b.check(JobRequest(2, "a", 1, gpus=2), 2).reason
    assert first == "tenant quota: 7 GPUs in use + 2 asked = 9, more than 4 guaranteed + 4 borrowable = 8"
    assert later == "tenant quota: 8 GPUs in use + 2 asked = 10, more than 4 guaranteed + 4 borrowable = 8"


def test_book_a_non_preemptible_refusal_is_not_taken_for_another_jobs_that_borrows():
    b = book(Quota(4, 4))
    b.charge("a", 1, 3)
    refused = b.check(JobRequest(1, "a", 1, gpus=2, preemptible=False), 2)
    borrows = b.check(JobRequest(2, "a", 1, gpus=2), 2)  # same sums, preemptible: borrows
    assert (refused.ok, verdict(borrows)) == (False, (True, True, False, None))
