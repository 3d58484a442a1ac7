"""When will my job run (issue 14): the start the last round estimated, and what it rests on, as fields of the job
beside its queue position, not only inside the reason's words."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler import actions
from scheduler.choices import StartEstimate
from scheduler.core.types import RESERVATION_BASES
from scheduler.rounds import run_round
from tests.scheduler.api.helpers import JOBS, start

pytestmark = pytest.mark.django_db


def _fields(api, job_id: int) -> tuple:
    body = api.get(f"{JOBS}{job_id}/").json()
    at = datetime.fromisoformat(body["estimated_start"]) if body["estimated_start"] else None
    return body["queue_position"], at, body["start_estimate"], body["pending_reason"]


@pytest.fixture
def busy(site, submit):
    """Tenant B runs 16 GPUs, the whole default pool, for an hour (estimate)."""
    return start(submit(site.tenant_b, site.default, "long", gpus=16, est_runtime_s=3600))


def test_a_reserved_job_has_its_estimated_start_as_a_field(api_a, site, submit, busy):
    waiting = submit(site.tenant_a, site.default, "next", gpus=8)
    run_round(site.cluster.pk, "test")
    position, at, basis, reason = _fields(api_a, waiting.pk)
    # Reserved at the end of the running job: its start + its 3600 s estimate.
    assert (position, basis) == (1, "backfill")
    assert abs((at - (busy.started_at + timedelta(seconds=3600))).total_seconds()) < 0.002
    assert "reserved to start in about 60 min" in reason


def test_the_list_carries_the_estimate_too(api_a, site, submit, busy):
    waiting = submit(site.tenant_a, site.default, "next", gpus=8)
    run_round(site.cluster.pk, "test")
    (row,) = [r for r in api_a.get(f"{JOBS}?status=pending").json()["results"] if r["id"] == waiting.pk]
    assert row["start_estimate"] == "backfill" and row["estimated_start"] is not None


def test_a_job_behind_the_reserved_one_has_no_estimate(api_a, site, submit, busy):
    submit(site.tenant_a, site.default, "next", gpus=8)
    second = submit(site.tenant_a, site.default, "after", gpus=8)
    run_round(site.cluster.pk, "test")
    position, at, basis, _ = _fields(api_a, second.pk)
    assert (position, at, basis) == (2, None, "none")


def test_a_job_no_round_has_seen_has_no_estimate(api_a, site, submit):
    job = submit(site.tenant_a, site.default, "fresh", gpus=1)
    assert _fields(api_a, job.pk) == (None, None, "none", "")


def test_a_held_job_has_no_estimate(api_a, site, submit, busy):
    waiting = submit(site.tenant_a, site.default, "next", gpus=8)
    run_round(site.cluster.pk, "test")
    actions.hold_job(waiting, actor="ops")
    assert _fields(api_a, waiting.pk)[1:3] == (None, "none")


def test_a_running_job_has_no_estimate(api_b, busy):
    assert _fields(api_b, busy.pk)[:3] == (None, None, "none")


def test_the_api_names_every_basis_the_engine_gives():
    assert set(StartEstimate.values) == {*RESERVATION_BASES, "none"}


def test_the_schema_declares_both_fields():
    from drf_spectacular.generators import SchemaGenerator

    schemas = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    job = schemas["Job"]["properties"]
    assert (job["estimated_start"]["format"], job["estimated_start"]["nullable"]) == ("date-time", True)
    assert job["start_estimate"]["allOf"] == [{"$ref": "#/components/schemas/StartEstimateEnum"}]
    assert schemas["StartEstimateEnum"]["enum"] == ["preempting", "stopping", "backfill", "leaf", "none"]
