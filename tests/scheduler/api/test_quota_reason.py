"""A quota refusal read through the API after a real round states the sum that refused it (issue 14)."""

from __future__ import annotations

import pytest

from scheduler.rounds import run_round
from tests.scheduler.api.helpers import JOBS, start

pytestmark = pytest.mark.django_db


def test_the_pending_reason_states_use_plus_ask_against_guarantee_plus_borrowing(api_a, site, submit):
    # tenant-a in the default pool: 8 guaranteed + 4 borrowable; 2 GPUs in use, none borrowed; 12 asked.
    start(submit(site.tenant_a, site.default, "small", gpus=2))
    job_id = api_a.post(JOBS, {"name": "big", "pool": site.default.pk, "gpus": 12}, format="json").json()["id"]
    run_round(site.cluster.pk, "test")
    body = api_a.get(f"{JOBS}{job_id}/").json()
    assert (body["status"], body["pending_reason"]) == (
        "pending", "tenant quota: 2 GPUs in use + 12 asked = 14, more than 8 guaranteed + 4 borrowable = 12"
    )  # fmt: skip
    quota = next(q for q in api_a.get("/api/v1/quotas/").json()["results"] if q["pool"] == "default")
    assert (quota["used_gpus"], quota["borrowed_gpus"]) == (2, 0)  # the same state, as the tenant reads it
