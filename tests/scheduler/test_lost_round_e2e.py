"""A worker killed with -9 loses no round: real Redis, a real `celery worker` and a real `celery beat`.

The worker acknowledges a round's message only once the round ran (acks late), so a worker killed while it holds
one leaves it unacknowledged in Redis until the broker's visibility timeout. Rounds follow from state instead:
every ROUND_INTERVAL_S, periodic_rounds sends a round for each cluster with work, whatever became of the rounds
events requested. Each test kills the worker while it holds a round, starts another, and measures how long after
the new worker was ready the waiting job was placed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection
from django.test import override_settings

from clusterctl.celery import app
from scheduler import actions, tasks
from scheduler.models import Job, PriorityClass
from tests.factories import fat_tree
from tests.processes import child_env, database_url, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("the worker and beat need a database the test shares"),
]
ROOT = Path(__file__).resolve().parents[2]
INTERVAL_S = 3.0  # ROUND_INTERVAL_S of this run: the longest a job may wait after a worker restart
ROUND_S = 1.0  # what a round of the test's small cluster may take on top of that, on a loaded machine


class Celery:
    """The worker (solo pool) and beat of this test, as real processes on this run's own queue."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.queue = f"lost-round-{uuid.uuid4().hex[:8]}"
        self.worker: subprocess.Popen | None = None
        self.beat: subprocess.Popen | None = None
        self.started = 0

    def env(self) -> dict[str, str]:
        return child_env(
            CELERY_TASK_ALWAYS_EAGER="0", CELERY_TASK_DEFAULT_QUEUE=self.queue, ROUND_INTERVAL_S=str(INTERVAL_S)
        )

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen:
        with open(log, "a") as out:  # the child writes it until it ends
            return subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "clusterctl", *argv],
                cwd=ROOT, env=self.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def start_beat(self) -> None:
        # Celery's own file scheduler: this run's beat must not share a lock in Redis with other runs' beats.
        self.beat = self._spawn(
            ["beat", "-S", "celery.beat:PersistentScheduler", "-s", str(self.root / "beat-schedule"), "-l", "INFO"],
            self.root / "beat.log",
        )

    def start_worker(self) -> float:
        """Start a worker; returns the monotonic time it said it was ready."""
        self.started += 1
        log = self.root / f"worker-{self.started}.log"
        self.worker = self._spawn(
            ["worker", "-Q", self.queue, "--pool", "solo", "-n", f"w{self.started}-{self.queue}@%h",
             "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "INFO"],
            log,
        )  # fmt: skip
        if not wait_for(lambda: " ready." in log.read_text(), timeout=60, every=0.05):
            pytest.fail(f"worker {self.started} did not start:\n{log.read_text()[-3000:]}")
        return time.monotonic()

    def kill_worker(self) -> None:
        assert self.worker is not None
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(timeout=10)

    def said(self) -> str:
        logs = sorted(self.root.glob("*.log"))
        return "\n".join(f"--- {p.name}:\n{p.read_text()[-3000:]}" for p in logs)

    def held_rounds(self) -> list[str]:
        """The trigger of every round message of this queue that a worker took and did not acknowledge."""
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        found = []
        for raw in client.hvals("unacked"):
            message, _exchange, routing_key = json.loads(raw)
            headers = message.get("headers", {})
            if routing_key == self.queue and headers.get("task") == "scheduler.tasks.run_round":
                found.append(headers.get("argsrepr", ""))
        return found

    def close(self) -> None:
        for proc in (self.worker, self.beat):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
        # What the killed workers held, and whatever is left queued: nobody will consume this queue again.
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        for tag, raw in client.hgetall("unacked").items():
            if json.loads(raw)[2] == self.queue:
                client.hdel("unacked", tag)
                client.zrem("unacked_index", tag)
        client.delete(self.queue, *client.keys(f"{self.queue}\x06\x16*"))


@pytest.fixture(scope="module")
def celery(django_db_setup, tmp_path_factory):
    procs = Celery(tmp_path_factory.mktemp("lost-round"))
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, procs.queue
    try:
        with override_settings(ROUND_INTERVAL_S=INTERVAL_S):
            procs.start_beat()
            procs.start_worker()
            yield procs
    finally:
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        procs.close()


@pytest.fixture
def submit(celery):
    cluster = fat_tree(f"lost-{uuid.uuid4().hex[:6]}", nodes=2, gpus_per_node=8, leaf_ports=8)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme")
    normal = PriorityClass.objects.get(name="normal")

    def make(name: str, gpus: int) -> Job:
        return actions.submit_job(tenant, pool, normal, name=name, gpus=gpus)

    make.cluster = cluster
    return make


def status(job: Job) -> str:
    job.refresh_from_db()
    return job.status


def must(predicate, what: str, celery: Celery, timeout: float = 30.0) -> None:
    if not wait_for(predicate, timeout=timeout, every=0.05):
        pytest.fail(f"timed out waiting for {what}\n{celery.said()}")


def waited_after_restart(job: Job, celery: Celery, ready: float) -> float:
    """Seconds from the new worker's ready to the job's placement (what the user waited for the restart)."""
    must(lambda: status(job) == "running", "the job to be placed after the restart", celery, timeout=60)
    return time.monotonic() - ready


def test_a_round_taken_by_a_worker_killed_before_it_ran_is_made_up_within_one_interval(celery, submit, monkeypatch):
    # The round a submit requests waits DEBOUNCE_S in the worker that took it (a countdown): long here, so the
    # worker is surely killed holding it. Beat is paused meanwhile, so no periodic round places the job first.
    monkeypatch.setattr(tasks, "DEBOUNCE_S", 30.0)
    os.kill(celery.beat.pid, signal.SIGSTOP)
    try:
        job = submit("held-by-the-dead", 1)
        must(lambda: f"job {job.pk} submitted" in "".join(celery.held_rounds()), "the worker to take the round", celery)
        celery.kill_worker()
        assert status(job) == "pending"
    finally:
        os.kill(celery.beat.pid, signal.SIGCONT)
    ready = celery.start_worker()
    waited = waited_after_restart(job, celery, ready)
    print(f"killed holding the requested round: placed {waited:.2f} s after the new worker was ready")
    assert waited <= INTERVAL_S + ROUND_S


def test_a_worker_killed_in_the_middle_of_a_round_loses_no_round(celery, submit):
    ledgers = """SELECT l.gpu_id FROM scheduler_gpuledger l JOIN fabric_gpu g ON g.id = l.gpu_id
                 JOIN fabric_node n ON n.id = g.node_id WHERE n.cluster_id = %s FOR UPDATE OF l"""
    with psycopg.connect(database_url(), options="-c idle_in_transaction_session_timeout=60s") as other:
        other.execute(ledgers, [submit.cluster.pk])  # the round that places the job blocks on them, mid-round
        job = submit("mid-round", 1)

        def round_blocked() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE %s",
                    ["%scheduler_gpuledger%"],
                )
                return cursor.fetchone()[0] > 0

        must(round_blocked, "a round to block on the GPU ledgers", celery)
        celery.kill_worker()
    # The locks are gone with the session: the dead worker's backend finishes its statement, finds its client gone
    # and rolls the round back, which frees the cluster's round lock.
    assert status(job) == "pending"
    ready = celery.start_worker()
    waited = waited_after_restart(job, celery, ready)
    print(f"killed mid-round: placed {waited:.2f} s after the new worker was ready")
    assert waited <= INTERVAL_S + ROUND_S
