"""scheduler.actions.locking.atomic_retry: what PostgreSQL aborts for a lost race is run again whole; a bug is not;
past the last attempt the caller gets Contended and nothing was written."""

from __future__ import annotations

import logging
import threading

import psycopg
import pytest
from django.db import IntegrityError, OperationalError, connection, connections, transaction

from scheduler import actions, enqueue
from scheduler.actions.locking import ATTEMPTS, atomic_retry
from scheduler.models import GpuLedger, Job, JobEvent
from scheduler.rounds import run_round
from tests.processes import database_url, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("deadlocks, lock timeouts and SQLSTATEs are PostgreSQL's"),
]


@pytest.fixture(autouse=True)
def _setup(transactional_db, monkeypatch):
    actions.ensure_priority_classes()  # a transactional test's flush removed the migration's classes
    # Each commit would run a round inline (eager Celery in the tests); here the test runs the rounds it means.
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: False)


def _running(cluster, submit, gpus: int = 8) -> Job:
    job = submit(gpus)
    run_round(cluster.pk, "test")
    job.refresh_from_db()
    assert job.status == "running"
    return job


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def test_a_finish_that_postgresql_aborts_for_a_deadlock_runs_again_and_completes(cluster, submit, caplog):
    job = _running(cluster, submit)
    gpu = GpuLedger.objects.filter(gpu__allocations__job=job).order_by("gpu_id").last().gpu_id
    finished: list = []
    with psycopg.connect(database_url(), options="-c idle_in_transaction_session_timeout=20s") as other:
        # The other session waits 10 s before looking for a cycle, the finish 1 s (the default): PostgreSQL aborts
        # the finish, the session that finds the deadlock.
        other.execute("SET deadlock_timeout = '10s'")
        other.execute("SELECT 1 FROM scheduler_gpuledger WHERE gpu_id = %s FOR UPDATE", [gpu])

        def finish() -> None:
            try:
                finished.append(actions.finish_job(job, succeeded=True).status)
            finally:
                connections.close_all()

        with caplog.at_level(logging.INFO, logger="scheduler.actions.locking"):
            thread = threading.Thread(target=finish)
            thread.start()
            assert wait_for(_waiting_on_a_lock, timeout=10, every=0.05)  # the finish holds the job, waits for the GPU
            # The other session now wants the job: a cycle. It waits here until PostgreSQL aborted the finish.
            other.execute("SELECT 1 FROM scheduler_job WHERE id = %s FOR UPDATE", [job.pk])
            other.commit()
            thread.join(30)
    assert finished == ["completed"]
    assert [r.getMessage() for r in caplog.records if r.name == "scheduler.actions.locking"] == [
        f"finish_job: deadlock detected (attempt 1 of {ATTEMPTS}); running it again"
    ]
    assert JobEvent.objects.filter(job=job, to_status="completed").count() == 1  # the aborted attempt left nothing


def test_a_cancel_that_times_out_on_every_attempt_raises_contended_and_changes_nothing(cluster, submit):
    job = _running(cluster, submit)
    events = JobEvent.objects.filter(job=job).count()
    with psycopg.connect(database_url(), options="-c idle_in_transaction_session_timeout=20s") as other:
        other.execute("SELECT 1 FROM scheduler_job WHERE id = %s FOR UPDATE", [job.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '50ms'")
        try:
            with pytest.raises(actions.Contended, match=f"lock not available on all {ATTEMPTS} attempts"):
                actions.cancel_job(job, actor="t")
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
    job.refresh_from_db()
    assert job.status == "running"
    assert JobEvent.objects.filter(job=job).count() == events


def test_an_error_that_is_not_a_lost_race_is_raised_on_the_first_attempt(cluster, submit):
    job = submit(1)
    calls = []

    @atomic_retry
    def break_the_shape() -> None:
        calls.append(1)
        Job.objects.filter(pk=job.pk).update(gpus=0)  # CHECK job_gpus_min_1

    with pytest.raises(IntegrityError):
        break_the_shape()
    assert calls == [1]


def test_inside_another_transaction_an_aborted_block_runs_once_and_the_outer_one_sees_the_error():
    calls = []

    @atomic_retry
    def aborted() -> None:
        calls.append(1)
        with connection.cursor() as cursor:
            cursor.execute("DO $$ BEGIN RAISE EXCEPTION 'lost a race' USING ERRCODE = '40P01'; END $$")

    with pytest.raises(OperationalError, match="lost a race"), transaction.atomic():
        aborted()
    assert calls == [1]  # only the outermost transaction can be run again
