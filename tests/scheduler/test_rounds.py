"""A round end to end: snapshot from the database, the engine decides, the decisions are stored."""

from __future__ import annotations

import pytest

from fabric import actions as fabric_actions
from fabric.models import GPU, Node
from scheduler.models import Allocation, GpuLedger, Job, SchedulingRound
from scheduler.rounds import run_round
from scheduler.selectors import queue_info

pytestmark = pytest.mark.django_db


def test_round_places_a_job_on_one_island(cluster, submit):
    job = submit(8)
    record = run_round(cluster.pk, "test")
    job.refresh_from_db()
    assert job.status == "running" and job.started_at is not None
    nodes = set(Allocation.objects.filter(job=job, active=True).values_list("gpu__node__hostname", flat=True))
    assert len(nodes) == 1  # 8 GPUs fit one NVLink island: never split
    assert (record.placed, record.pending) == (1, 1)
    assert "placed on" in job.events.last().reason


def test_round_records_pending_reason_and_position(cluster, submit):
    fits, too_big = submit(32), submit(8)
    run_round(cluster.pk, "test")
    fits.refresh_from_db()
    too_big.refresh_from_db()
    assert fits.status == "running"
    assert too_big.status == "pending"
    position, reason = queue_info([cluster.pk])[too_big.pk]
    assert (position, bool(reason)) == (1, True)  # a sentence a person understands


def test_ledger_matches_allocations_after_round(cluster, submit):
    for size in (1, 2, 4, 8):
        submit(size)
    run_round(cluster.pk, "test")
    for ledger in GpuLedger.objects.all():
        held = sum(a.compute_pct for a in Allocation.objects.filter(gpu_id=ledger.gpu_id, active=True))
        assert ledger.compute_pct == held


def test_failed_gpu_requeues_its_job(cluster, submit):
    job = submit(8)
    run_round(cluster.pk, "test")
    gpu = Allocation.objects.filter(job=job, active=True).first().gpu
    fabric_actions.update_inventory_object(gpu, {"health": "failed"})
    run_round(cluster.pk, "gpu failed")
    job.refresh_from_db()
    statuses = list(job.events.values_list("to_status", flat=True))
    assert "pending" in statuses[1:]  # requeued after running
    assert not Allocation.objects.filter(job=job, active=True, gpu=gpu).exists()


def test_drained_node_takes_no_new_jobs(cluster, submit):
    fabric_actions.set_node_state(Node.objects.filter(cluster=cluster), "drain", reason="maintenance")
    job = submit(1)
    run_round(cluster.pk, "test")
    job.refresh_from_db()
    assert job.status == "pending" and queue_info([cluster.pk])[job.pk][1]


def test_round_is_recorded(cluster, submit):
    submit(1)
    record = run_round(cluster.pk, "test")
    assert SchedulingRound.objects.get() == record
    assert record.engine_ms > 0 and record.duration_ms >= record.engine_ms
    assert record.decisions[0]["kind"] == "placement"


def test_stale_placement_is_rejected_not_applied(cluster, submit, monkeypatch):
    job = submit(1)
    from scheduler import rounds

    real = rounds.build_snapshot

    def snapshot_then_cancel(cluster_id):
        snap = real(cluster_id)
        Job.objects.filter(pk=job.pk).update(status="cancelled")  # someone cancels after the snapshot
        return snap

    monkeypatch.setattr(rounds, "build_snapshot", snapshot_then_cancel)
    record = run_round(cluster.pk, "test")
    assert (record.placed, record.rejected_stale) == (0, 1)
    assert not Allocation.objects.filter(active=True).exists()
    assert GPU.objects.count() == 32


def test_gpu_failure_triggers_a_round_after_commit(cluster, submit, django_capture_on_commit_callbacks):
    job = submit(8)
    run_round(cluster.pk, "test")
    gpu = Allocation.objects.filter(job=job, active=True).first().gpu
    before = SchedulingRound.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        fabric_actions.update_inventory_object(gpu, {"health": "failed"})
    assert SchedulingRound.objects.count() == before + 1  # the health change requested a round (eager in tests)
    assert not Allocation.objects.filter(job=job, active=True, gpu=gpu).exists()


def test_submit_requests_a_round_after_commit(cluster, submit, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        job = submit(2)
    job.refresh_from_db()
    assert job.status == "running"
