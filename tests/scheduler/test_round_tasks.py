"""scheduler.tasks: which failures of a round are retried, and rounds that follow from state, not from messages."""

from __future__ import annotations

import time

import pytest
from celery import signals
from django.core.cache import cache
from django.db import InterfaceError, OperationalError
from django.test import override_settings
from redis.exceptions import ConnectionError as RedisConnectionError

from fabric.models import Cluster
from scheduler import actions, enqueue, rounds, tasks
from scheduler.models import Job, PriorityClass, SchedulingRound
from scheduler.selectors import queue_info

pytestmark = pytest.mark.django_db


@pytest.fixture
def retries():
    """What caused every retry a task asked for (Celery's task_retry signal), in order."""
    seen: list[str] = []

    def count(sender=None, reason=None, **kwargs) -> None:
        seen.append(type(getattr(reason, "exc", None) or reason).__name__)

    signals.task_retry.connect(count, weak=False)
    yield seen
    signals.task_retry.disconnect(count)


def test_a_round_that_hits_a_bug_fails_once(retries):
    result = tasks.run_round.apply((987_654_321, "test"))  # no such cluster: a caller's mistake, not an outage
    assert result.failed() and isinstance(result.result, Cluster.DoesNotExist)
    assert retries == []


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("server closed the connection unexpectedly"),
        InterfaceError("connection already closed"),
        actions.Contended("deadlock detected on all 5 attempts; nothing was changed"),
        RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
    ],
    ids=["database gone", "connection closed", "lock races", "cache gone"],
)
def test_a_round_that_meets_a_passing_outage_is_retried_until_it_runs(cluster, submit, monkeypatch, retries, error):
    job = submit(1)
    real, calls = rounds.run_round, []

    def flaky(cluster_id: int, trigger: str):
        calls.append(trigger)
        if len(calls) <= 2:
            raise error
        return real(cluster_id, trigger)

    monkeypatch.setattr(rounds, "run_round", flaky)
    result = tasks.run_round.apply((cluster.pk, "test"))
    assert result.successful()
    assert retries == [type(error).__name__] * 2
    job.refresh_from_db()
    assert job.status == "running"


def test_periodic_rounds_place_a_job_whose_requested_round_was_lost(cluster, submit):
    job = submit(1)
    # Its request is outstanding: the round it enqueued was taken by a worker that was then killed.
    cache.set(tasks._key(cluster.pk), f"job {job.pk} submitted", timeout=30)
    tasks.periodic_rounds()
    job.refresh_from_db()
    assert job.status == "running"


def test_periodic_rounds_leave_a_cluster_without_work_alone(cluster, submit):
    actions.hold_job(submit(1), actor="ops")  # a held job waits for its operator, not for a round
    tasks.periodic_rounds()
    assert not SchedulingRound.objects.filter(cluster=cluster).exists()


def test_ticks_that_queued_up_while_no_worker_ran_make_one_round(cluster, submit):
    submit(1)
    for _ in range(3):  # a worker back after three intervals finds three ticks
        tasks.periodic_rounds()
    assert SchedulingRound.objects.filter(cluster=cluster).count() == 1


@override_settings(ROUND_INTERVAL_S=1.0)
def test_a_request_whose_round_was_lost_holds_back_new_ones_for_one_interval_at_most(cluster, monkeypatch):
    lost = []  # the broker took each message; the worker that took it died before it started the round
    monkeypatch.setattr(tasks.run_round, "apply_async", lambda args, **options: lost.append(args))
    enqueue.request_round(cluster.pk, "job 1 submitted")
    enqueue.request_round(cluster.pk, "job 2 submitted")  # debounced: one round for a burst
    time.sleep(1.1)
    enqueue.request_round(cluster.pk, "job 3 submitted")
    assert lost == [(cluster.pk, "job 1 submitted"), (cluster.pk, "job 3 submitted")]


@override_settings(SCHEDULER_MAX_PLACEMENTS_PER_ROUND=2)
def test_a_round_that_starts_its_limit_sends_the_next_round_at_once(
    cluster, submit, monkeypatch, django_capture_on_commit_callbacks
):
    jobs = [submit(1) for _ in range(5)]  # 5 one-GPU jobs, 32 free GPUs: only the limit of 2 stops the round
    sent = []
    monkeypatch.setattr(tasks.run_round, "apply_async", lambda args, **options: sent.append((args, options)))
    with django_capture_on_commit_callbacks(execute=True):
        record = rounds.run_round(cluster.pk, "test")
    assert record.placed == 2 and record.stats["left_for_next_round"] == 3
    assert sent == [((cluster.pk, f"3 jobs left by round {record.pk}"), {"countdown": 0})]
    waiting = queue_info([cluster.pk])
    assert [waiting[j.pk] for j in jobs[2:]] == [
        (1, "waiting for the next round: this round started its limit of 2 jobs"),
        (2, "waiting for the next round: this round started its limit of 2 jobs"),
        (3, "waiting for the next round: this round started its limit of 2 jobs"),
    ]


@override_settings(SCHEDULER_MAX_PLACEMENTS_PER_ROUND=2)
def test_rounds_at_their_limit_follow_each_other_until_the_line_is_placed(
    cluster, submit, django_capture_on_commit_callbacks
):
    # 5 jobs, 2 starts a round: rounds of 2, 2 and 1; the last leaves nobody and asks for no further round.
    jobs = [submit(1) for _ in range(5)]
    with django_capture_on_commit_callbacks(execute=True):
        record = rounds.run_round(cluster.pk, "test")
    assert SchedulingRound.objects.filter(cluster=cluster).count() == 3
    assert [r.placed for r in SchedulingRound.objects.filter(cluster=cluster).order_by("pk")] == [2, 2, 1]
    assert record.placed == 2
    assert {j.status for j in Job.objects.filter(pk__in=[j.pk for j in jobs])} == {"running"}


@override_settings(SCHEDULER_MAX_PLACEMENTS_PER_ROUND=2)
def test_a_round_below_its_limit_sends_no_next_round(cluster, submit, monkeypatch, django_capture_on_commit_callbacks):
    submit(1)
    submit(1)
    sent = []
    monkeypatch.setattr(tasks.run_round, "apply_async", lambda args, **options: sent.append((args, options)))
    with django_capture_on_commit_callbacks(execute=True):
        record = rounds.run_round(cluster.pk, "test")
    assert record.placed == 2 and record.stats["left_for_next_round"] == 0
    assert sent == []


@pytest.mark.django_db(transaction=True)
@override_settings(SCHEDULER_MAX_PLACEMENTS_PER_ROUND=1)
def test_eager_rounds_at_their_limit_run_one_after_another_not_one_inside_another(committing, monkeypatch):
    # Committed as in production (a test's own transaction would hold every request until it ends), tasks eager as in
    # embedded set-up: 6 jobs, 1 start a round, so 6 rounds run from the first call; the 5 that follow run inside the
    # first's call, none inside another follower's.
    from tests.factories import fat_tree

    cluster = fat_tree("eager", nodes=1, gpus_per_node=8, leaf_ports=16)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme")
    normal = PriorityClass.objects.get(name="normal")
    for n in range(6):  # `committing` keeps the submits from asking for rounds: the test runs the first
        actions.submit_job(tenant, pool, normal, gpus=1, name=f"job-{n}")
    monkeypatch.undo()  # the rounds' own requests go through
    real, depth, deepest = rounds.run_round, [0], [0]

    def counted(cluster_id: int, trigger: str):
        depth[0] += 1
        deepest[0] = max(deepest[0], depth[0])
        try:
            return real(cluster_id, trigger)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(rounds, "run_round", counted)  # the task calls it by this name
    counted(cluster.pk, "test")
    assert [r.placed for r in SchedulingRound.objects.filter(cluster=cluster).order_by("pk")] == [1] * 6
    assert deepest[0] == 2
