"""The broker out of reach when a request commits: the request still answers (quickly, even when Redis hangs instead
of refusing), and what it could not send follows from state: the periodic round places the job, the launch sweep
sends an unpublished prepare or stop again."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from clusterctl import outages
from scheduler import enqueue, tasks
from scheduler.actions import lifecycle
from scheduler.choices import JobStatus, LaunchState
from scheduler.models import Launch
from scheduler.rounds import run_round
from tests.resilience.conftest import stored, submit
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db
# What follows a commit runs when the request's transaction really commits, inside the request, as in production.
REAL_COMMITS = pytest.mark.django_db(transaction=True)


@REAL_COMMITS
def test_a_submit_while_the_broker_hangs_answers_201_within_seconds(site, broker_at, silent_port, deadline):
    # The first publish after the commit (the live views' broadcast) gives up after two tries of the socket timeout
    # (REDIS_SOCKET_TIMEOUT_S, 2 s): 4 s. The round request right after it is not tried (the broker just failed in
    # this process); the periodic round takes the job up. Without a socket timeout kombu waits forever.
    with broker_at(f"redis://127.0.0.1:{silent_port}/0"), deadline(30):
        started = time.monotonic()
        answer = submit(site, "while-redis-hangs")
        took = time.monotonic() - started
    assert answer.status_code == 201, answer.content
    assert stored("while-redis-hangs").status == JobStatus.PENDING
    assert took < 6, f"the submit took {took:.1f} s"


@REAL_COMMITS
def test_a_job_submitted_while_the_broker_was_down_is_placed_by_the_next_periodic_round(site, broker_at, closed_port):
    with broker_at(f"redis://127.0.0.1:{closed_port}/0"):
        assert submit(site, "round-lost").status_code == 201
    job = stored("round-lost")
    assert job.status == JobStatus.PENDING  # its round was never sent
    assert tasks.periodic_rounds() == 1  # the broker is back: beat's tick sends (here: runs) the cluster's round
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING  # the twin plays it


@pytest.fixture
def node_messages(monkeypatch, settings):
    """Agents launch jobs (not the twin). Node messages are captured while the test run publishes eagerly, and
    published for real inside `broker_at` (where they find its dead broker)."""
    from clusterctl.celery import app

    settings.LAUNCHER = "process"
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: None)
    box: list[tuple[str, str, tuple, dict]] = []
    for name in ("node_prepare", "node_start", "node_stop", "node_forget"):
        task = getattr(tasks, name)

        def send(args, *, name=name, publish=task.apply_async, **options):
            if not app.conf.task_always_eager:
                return publish(args, **options)
            link = options.pop("link", None)  # the answer's task, by name
            box.append((name, options.pop("queue"), args, {**options, "link": link and link.task}))
            return None

        monkeypatch.setattr(task, "apply_async", send)
    return box


def _placed(site):
    response = submit(site, "placed", gpus=2)
    job = stored("placed")
    run_round(site.cluster.pk, "test")
    job.refresh_from_db()
    assert (response.status_code, job.status) == (201, JobStatus.ADMITTED)
    return job


def _answer(launch: Launch, **fields) -> dict:
    return {"job_id": launch.job_id, "generation": launch.generation, "host": launch.hostname, **fields}


def test_a_prepare_that_was_never_published_is_sent_again_by_the_sweep(
    site, node_messages, broker_at, closed_port, django_capture_on_commit_callbacks, settings
):
    job = _placed(site)
    with broker_at(f"redis://127.0.0.1:{closed_port}/0"), django_capture_on_commit_callbacks(execute=True):
        lifecycle.launch_job(job.pk)  # committed; its prepare found no broker
    launch = Launch.objects.get(job=job)
    assert (launch.state, node_messages) == (LaunchState.SENT, [])
    outages.forget()  # the broker is back, and its failure long past when the sweep runs
    later = launch.changed_at + timedelta(seconds=settings.LAUNCH_RESEND_S + 1)
    assert lifecycle.sweep(later)["resent"] == 1
    assert lifecycle.sweep(later + timedelta(seconds=10))["resent"] == 0  # once
    [(name, queue, args, options)] = node_messages
    assert (name, queue, args) == ("node_prepare", f"node.{launch.hostname}", (launch.payload,))
    # It expires when the launch would time out: 120 s after it was first sent, 31 s of which have passed.
    assert options == {"link": "scheduler.tasks.launch_ack", "expires": 89.0}
    job.refresh_from_db()
    assert job.status == JobStatus.ADMITTED  # not rolled back: the node can still answer


@REAL_COMMITS
def test_a_cancel_whose_stop_finds_no_broker_answers_200(
    site, node_messages, broker_at, closed_port, django_capture_on_commit_callbacks
):
    job = _running(site, node_messages, django_capture_on_commit_callbacks)
    with broker_at(f"redis://127.0.0.1:{closed_port}/0"):
        answer = site.api.post(f"{JOBS}{job.pk}/cancel/", {}, format="json")
    assert (answer.status_code, answer.json()["status"]) == (200, JobStatus.CANCELLED)
    assert (Launch.objects.get(job=job).state, node_messages) == (LaunchState.STOPPING, [])


@REAL_COMMITS
def test_a_stop_that_was_never_published_is_sent_again_by_the_sweep(
    site, node_messages, broker_at, closed_port, django_capture_on_commit_callbacks, settings
):
    job = _running(site, node_messages, django_capture_on_commit_callbacks)
    with broker_at(f"redis://127.0.0.1:{closed_port}/0"):
        site.api.post(f"{JOBS}{job.pk}/cancel/", {}, format="json")
    outages.forget()  # the broker is back, and its failure long past when the sweep runs
    launch = Launch.objects.get(job=job)
    later = launch.changed_at + timedelta(seconds=settings.LAUNCH_RESEND_S + 1)
    assert [lifecycle.sweep(later)["resent"], lifecycle.sweep(later)["resent"]] == [1, 0]
    assert node_messages == [
        (
            "node_stop",
            f"node.{launch.hostname}",
            (launch.hostname, job.pk, 1, job.grace_period_s, "cancel"),
            {"link": "scheduler.tasks.stop_ack"},
        )
    ]
    assert Launch.objects.get(job=job).state == LaunchState.STOPPING  # until the node confirms


def _running(site, node_messages, capture):
    """A job its node prepared and started (the messages captured), then nothing captured yet."""
    job = _placed(site)
    with capture(execute=True):
        lifecycle.launch_job(job.pk)
    launch = Launch.objects.get(job=job)
    with capture(execute=True):
        lifecycle.record_prepared(_answer(launch, ok=True, reason=""))
        lifecycle.record_started(_answer(launch, ok=True, pid=4242, reason=""))
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    node_messages.clear()
    return job
