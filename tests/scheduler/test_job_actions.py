"""Job state moves only through the actions, each with an event and a reason."""

from __future__ import annotations

import pytest

from scheduler import actions
from scheduler.actions import ShareSpec
from scheduler.models import GpuLedger, Job

pytestmark = pytest.mark.django_db


def test_submit_records_event_and_queue_seq(submit):
    job = submit(4)
    assert job.status == "pending" and job.queue_seq == job.pk
    assert list(job.events.values_list("from_status", "to_status", "reason")) == [("", "pending", "submitted")]


def test_cancel_pending(submit):
    job = actions.cancel_job(submit(1), actor="me")
    assert job.status == "cancelled" and job.finished_at is not None
    assert job.events.last().actor == "me"


def test_cancel_twice_refused(submit):
    job = actions.cancel_job(submit(1), actor="me")
    with pytest.raises(actions.ActionError, match="already cancelled"):
        actions.cancel_job(job, actor="me")


def _running(job, gpu):
    actions.allocate(job, [ShareSpec(gpu.pk, "whole", memory_mib=gpu.memory_mib)])
    Job.objects.filter(pk=job.pk).update(status="running")
    job.refresh_from_db()
    return job


def test_cancel_running_frees_gpus(submit, gpus):
    job = _running(submit(1), gpus[0])
    actions.cancel_job(job, actor="me")
    assert GpuLedger.objects.get(gpu=gpus[0]).compute_pct == 0


def test_requeue_keeps_place_in_line(submit, gpus):
    job = _running(submit(1), gpus[0])
    seq = job.queue_seq
    job = actions.requeue_job(job, actor="op")
    assert (job.status, job.queue_seq) == ("pending", seq)
    assert not job.allocations.filter(active=True).exists()


def test_hold_and_release(submit):
    job = actions.hold_job(submit(1), actor="op")
    assert job.held and job.pending_reason == "held by an operator"
    job = actions.release_job(job, actor="op")
    assert not job.held


def test_hold_running_refused(submit, gpus):
    job = _running(submit(1), gpus[0])
    with pytest.raises(actions.ActionError, match="only pending"):
        actions.hold_job(job, actor="op")


def test_finish_records_outcome(submit, gpus):
    job = actions.finish_job(_running(submit(1), gpus[0]), succeeded=False, reason="exit 3")
    assert (job.status, job.status_reason) == ("failed", "exit 3")


def test_stale_version_refused(submit):
    job = submit(1)
    Job.objects.filter(pk=job.pk).update(version=job.version + 1)
    with pytest.raises(actions.StaleDecision):
        actions.move_job(job, "running", "x", actor="t", expect=["pending"])
