"""actions.record_finished_bulk: jobs that already ran (a site's history, a benchmark's week), recorded as completed
in bulk; fair share charges their tenants as it does any finished job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler import actions, enqueue
from scheduler.actions import ActionError
from scheduler.choices import JobStatus
from scheduler.models import Job, JobEvent
from scheduler.snapshot_from_db import USAGE_HALF_LIFE_S, build_snapshot

pytestmark = pytest.mark.django_db

NOW = 1_900_000_000.0  # the snapshot clock of `frozen_snapshot_clock`


def at(seconds_before_now: float) -> datetime:
    return datetime.fromtimestamp(NOW - seconds_before_now, tz=UTC)


def test_jobs_are_recorded_completed_with_their_end_and_service(
    tenant, pool, normal, monkeypatch, django_capture_on_commit_callbacks
):
    asked = []
    monkeypatch.setattr(enqueue, "request_round", lambda *a, **k: asked.append(a))
    with django_capture_on_commit_callbacks(execute=True):  # what would run once it commits
        requests = [{"name": "a", "gpus": 4}, {"name": "b", "gpus": 1}]
        n = actions.record_finished_bulk(tenant, pool, normal, requests, [(at(100), 7200.0), (at(50), 0.0)])
    assert n == 2
    a, b = Job.objects.filter(name__in=["a", "b"]).order_by("name")
    assert (a.status, a.finished_at, a.attained_gpu_s) == (JobStatus.COMPLETED, at(100), 7200.0)
    assert a.started_at == at(100) - timedelta(seconds=1800)  # 7,200 GPU-seconds on 4 GPUs: half an hour
    assert b.started_at == b.finished_at == at(50)
    events = list(JobEvent.objects.filter(job__in=[a, b]).values_list("job_id", "to_status", "reason"))
    assert sorted(events) == [(j.pk, JobStatus.COMPLETED, "recorded as finished") for j in (a, b)]
    assert asked == []  # nothing waits or runs: no round


def test_fair_share_charges_recorded_jobs(tenant, pool, normal, frozen_snapshot_clock):
    actions.record_finished_bulk(tenant, pool, normal, [{"name": "a", "gpus": 2}], [(at(USAGE_HALF_LIFE_S), 7200.0)])
    snapshot = build_snapshot(pool.cluster_id)[0]
    assert next(t.usage_decayed for t in snapshot.tenants if t.name == tenant.name) == 1.0  # 2 GPU-hours, halved


@pytest.mark.parametrize(
    ("requests", "ends", "says"),
    [
        ([{"name": "a"}, {"name": "b"}], [(at(0), 1.0)], "2 jobs but 1 ends"),
        ([{"name": "a"}, {"name": "b"}], [(at(0), 1.0), (at(0), -5.0)], "job 'b': -5.0 GPU-seconds received"),
    ],
)
def test_bad_history_is_refused_and_nothing_is_stored(tenant, pool, normal, requests, ends, says):
    with pytest.raises(ActionError, match=says):
        actions.record_finished_bulk(tenant, pool, normal, requests, ends)
    assert not Job.objects.filter(name__in=["a", "b"]).exists()
