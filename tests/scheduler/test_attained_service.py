"""Attained service (Job.attained_gpu_s, GPU-seconds) in production rounds: least-attained-service ordering
and preemption rank jobs by it (docs/scheduler.md), and fair share charges finished jobs with it.

Before, nothing wrote it: every job told the engine 0, so a job that had run an hour ranked with one that had
not started, and the replay (which counts it) and real rounds decided differently (test_replay_parity.py).
Now release_allocations adds a share's held seconds when the share is given back, and the adapter adds the
current run's seconds for a running job.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.utils import timezone

import scheduler.snapshot_from_db
from fabric import actions as fabric_actions
from scheduler import actions
from scheduler.models import Allocation, Job
from scheduler.rounds import run_round
from scheduler.snapshot_from_db import build_snapshot

pytestmark = pytest.mark.django_db

EPOCH = datetime(2025, 1, 6, tzinfo=UTC).timestamp()


@pytest.fixture
def at(monkeypatch):
    """at(t): the clock of the actions and the adapter reads EPOCH + t seconds from now on."""
    clock = {"t": 0.0}
    monkeypatch.setattr(timezone, "now", lambda: datetime.fromtimestamp(EPOCH + clock["t"], UTC))
    monkeypatch.setattr(scheduler.snapshot_from_db, "time", SimpleNamespace(time=lambda: EPOCH + clock["t"]))

    def set_time(t: float) -> None:
        clock["t"] = t

    return set_time


def running_attained(cluster, job) -> float:
    """The job's service as the round's engine reads it: its earlier runs and its current one, at the round's now."""
    snapshot, _ = build_snapshot(cluster.pk)
    (rj,) = [rj for rj in snapshot.running if rj.request.id == job.pk]
    return rj.attained_at(snapshot.now)


def test_a_running_job_has_the_service_of_its_current_run(cluster, submit, at):
    job = submit(2)
    at(0)
    run_round(cluster.pk, "test")
    at(30)
    # 2 GPUs x 30 s = 60 GPU-s, none stored yet.
    assert running_attained(cluster, job) == 60.0
    job.refresh_from_db()
    assert job.attained_gpu_s == 0.0


def test_a_finished_job_keeps_its_service(cluster, submit, at):
    job = submit(4)
    at(0)
    run_round(cluster.pk, "test")
    at(100)
    actions.finish_job(Job.objects.get(pk=job.pk), succeeded=True)
    job.refresh_from_db()
    assert job.attained_gpu_s == 400.0  # 4 GPUs x 100 s


def test_service_adds_up_over_a_requeue(cluster, submit, at):
    job = submit(2)
    at(0)
    run_round(cluster.pk, "test")
    gpu = Allocation.objects.filter(job=job, active=True).first().gpu
    at(40)
    fabric_actions.update_inventory_object(gpu, {"health": "failed"})
    run_round(cluster.pk, "gpu failed")  # requeued: 2 GPUs x 40 s = 80 GPU-s stored
    job.refresh_from_db()
    assert (job.status, job.attained_gpu_s) == ("pending", 80.0)
    run_round(cluster.pk, "requeued")  # placed again at 40 s
    job.refresh_from_db()
    assert job.status == "running"
    at(100)
    # 80 stored + 2 GPUs x 60 s of the new run = 200.
    assert running_attained(cluster, job) == 200.0


def test_fair_share_charges_a_finished_job(cluster, submit, at):
    job = submit(2)
    at(0)
    run_round(cluster.pk, "test")
    at(1800)
    actions.finish_job(Job.objects.get(pk=job.pk), succeeded=True)
    snapshot, _ = build_snapshot(cluster.pk)
    (tenant,) = [t for t in snapshot.tenants if t.name == "acme"]
    # 2 GPUs x 1800 s = 1 GPU-hour, finished just now (no decay).
    assert tenant.usage_decayed == pytest.approx(1.0)
