"""manage.py check_invariants: a clean database passes; each kind of breach is found and named, with its ids.

The breaches are written behind the actions' back (queryset updates), as a bug or a hand edit would."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler import actions
from scheduler.actions import ShareSpec
from scheduler.models import GpuLedger, Job

pytestmark = pytest.mark.django_db


def _run() -> str:
    out = StringIO()
    call_command("check_invariants", stdout=out)
    return out.getvalue()


def _held(job, gpu):
    actions.allocate(job, [ShareSpec(gpu.pk, "whole", memory_mib=gpu.memory_mib)])
    Job.objects.filter(pk=job.pk).update(status="running")


def test_a_consistent_database_passes(submit, gpus):
    _held(submit(1), gpus[0])
    submit(2)  # pending, holding nothing
    report = _run()
    assert report.count("ok  ") == 5 and "FAIL" not in report


def test_a_ledger_out_of_step_is_named_with_its_gpu(submit, gpus):
    _held(submit(1), gpus[0])
    GpuLedger.objects.filter(gpu_id=gpus[1].pk).update(compute_pct=50)
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 5 invariants broken"):
        call_command("check_invariants", stdout=out)
    assert f"FAIL  ledger differs from allocations: 1 ({gpus[1].pk})" in out.getvalue()


def test_a_running_job_that_holds_nothing_is_found(submit):
    job = submit(1)
    Job.objects.filter(pk=job.pk).update(status="running")
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("check_invariants", stdout=out)
    assert f"FAIL  running job without allocation: 1 ({job.pk})" in out.getvalue()


def test_a_finished_job_still_holding_its_gpu_is_found(submit, gpus):
    job = submit(1)
    _held(job, gpus[0])
    Job.objects.filter(pk=job.pk).update(status="completed")
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("check_invariants", stdout=out)
    assert f"FAIL  finished job still holding: 1 ({job.pk})" in out.getvalue()
