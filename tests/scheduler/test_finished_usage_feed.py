"""Fair share's usage of finished jobs as a round's snapshot reads it on PostgreSQL: after its first read, from the
jobs written since (the change feed), not every job that finished in the last week. Transactional tests: each write
commits, as in production. The snapshot clock is frozen at 1,900,000,000 (tests/scheduler/conftest.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler import actions, enqueue, snapshot_from_db
from scheduler.choices import JobStatus
from scheduler.models import Job
from scheduler.snapshot_from_db import USAGE_HALF_LIFE_S, USAGE_WINDOW_S, build_snapshot, clear_caches

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("transaction ids and triggers are PostgreSQL's"),
    pytest.mark.usefixtures("frozen_snapshot_clock"),
]

NOW = 1_900_000_000.0


@pytest.fixture(autouse=True)
def _setup(transactional_db, monkeypatch):
    actions.ensure_priority_classes()  # a transactional test's flush removed the migration's classes
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: False)


def finish(job: Job, attained_gpu_s: float, age_s: float) -> None:
    """The job finished `age_s` before the snapshot clock's now, with that service (a bulk update: any writer)."""
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.COMPLETED,
        attained_gpu_s=attained_gpu_s,
        finished_at=datetime.fromtimestamp(NOW - age_s, tz=UTC),
    )


def window_reads(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if '"scheduler_job"."finished_at" >=' in q["sql"]]


def snapshot(cluster):
    return build_snapshot(cluster.pk)[0]


def usage(snap, tenant) -> float:
    return next(t.usage_decayed for t in snap.tenants if t.name == tenant.name)


def test_a_job_that_finishes_after_the_first_round_is_charged_next_round_without_reading_the_week(
    cluster, tenant, submit
):
    job = submit(2)
    assert usage(snapshot(cluster), tenant) == 0.0
    finish(job, 7200.0, USAGE_HALF_LIFE_S)  # 2 GPU-hours, a half-life ago: 1
    with CaptureQueriesContext(connection) as queries:
        kept = snapshot(cluster)
    assert usage(kept, tenant) == 1.0
    assert window_reads(queries) == []
    # The jobs written since are read once, for the queue and fair share alike.
    assert len([q for q in queries.captured_queries if '"scheduler_job"."change_xid" >=' in q["sql"]]) == 1
    clear_caches()
    assert usage(snapshot(cluster), tenant) == 1.0  # a whole read agrees


def test_the_first_round_reads_the_jobs_finished_within_the_week(cluster, tenant, submit):
    recent, old = submit(2, name="recent"), submit(2, name="old")
    finish(recent, 7200.0, 2 * USAGE_HALF_LIFE_S)  # a quarter of 2 GPU-hours
    finish(old, 7200.0, USAGE_WINDOW_S + 60)  # past the week: not charged
    with CaptureQueriesContext(connection) as queries:
        first = snapshot(cluster)
    assert usage(first, tenant) == 0.5
    assert len(window_reads(queries)) == 1


def test_a_deleted_finished_job_is_no_longer_charged(cluster, tenant, submit):
    job = submit(2)
    finish(job, 7200.0, USAGE_HALF_LIFE_S)
    assert usage(snapshot(cluster), tenant) == 1.0
    Job.objects.filter(pk=job.pk).delete()  # a deletion: the next round reads the jobs whole
    assert usage(snapshot(cluster), tenant) == 0.0


def test_a_finished_job_run_again_is_no_longer_charged_as_finished(cluster, tenant, submit):
    job = submit(2)
    finish(job, 7200.0, USAGE_HALF_LIFE_S)
    assert usage(snapshot(cluster), tenant) == 1.0
    Job.objects.filter(pk=job.pk).update(status=JobStatus.PENDING, finished_at=None)  # requeued by hand
    assert usage(snapshot(cluster), tenant) == 0.0


def test_the_jobs_whole_read_every_few_minutes_does_not_read_the_week_again(cluster, tenant, submit, monkeypatch):
    monkeypatch.setattr(snapshot_from_db, "FULL_READ_EVERY_S", 0.0)  # every build reads the live jobs whole
    job = submit(2)
    snapshot(cluster)
    finish(job, 7200.0, USAGE_HALF_LIFE_S)
    with CaptureQueriesContext(connection) as queries:
        kept = snapshot(cluster)
    assert usage(kept, tenant) == 1.0
    assert window_reads(queries) == []


def test_a_deletion_is_seen_when_the_jobs_are_read_whole(cluster, tenant, submit, monkeypatch):
    monkeypatch.setattr(snapshot_from_db, "FULL_READ_EVERY_S", 0.0)
    job = submit(2)
    finish(job, 7200.0, USAGE_HALF_LIFE_S)
    assert usage(snapshot(cluster), tenant) == 1.0
    Job.objects.filter(pk=job.pk).delete()
    assert usage(snapshot(cluster), tenant) == 0.0


def test_the_week_is_read_whole_again_after_its_own_interval(cluster, tenant, submit, monkeypatch):
    snapshot(cluster)
    monkeypatch.setattr(snapshot_from_db, "FINISHED_FULL_READ_EVERY_S", 0.0)
    with CaptureQueriesContext(connection) as queries:
        snapshot(cluster)
    assert len(window_reads(queries)) == 1
