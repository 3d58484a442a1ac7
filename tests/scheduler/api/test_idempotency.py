"""POST /api/v1/jobs/ with an Idempotency-Key: a retry after a timeout or a 503 queues no second job."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from scheduler.models import Job
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db

BODY = {"name": "train", "gpus": 2, "command": "python train.py"}


@pytest.fixture(autouse=True)
def _pool(site):
    BODY["pool"] = site.default.pk  # the tenants hold quotas in several pools


def _submit(api, key: str | None, body: dict | None = None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return api.post(JOBS, body or BODY, format="json", **headers)


def test_the_same_key_sent_again_answers_with_the_stored_job(site, api_a):
    first = _submit(api_a, "3f2b6c1e-retry")
    again = _submit(api_a, "3f2b6c1e-retry")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    assert Job.objects.filter(name="train").count() == 1


def test_the_first_answer_is_not_marked_as_replayed(site, api_a):
    assert "Idempotent-Replayed" not in _submit(api_a, "k-1")


def test_a_different_key_queues_another_job(site, api_a):
    assert _submit(api_a, "k-1").json()["id"] != _submit(api_a, "k-2").json()["id"]


def test_without_a_key_every_submit_queues_a_job(site, api_a):
    _submit(api_a, None), _submit(api_a, None)
    assert Job.objects.filter(name="train").count() == 2


def test_the_same_key_with_a_different_body_is_refused_and_queues_nothing(site, api_a):
    first = _submit(api_a, "k-1").json()["id"]
    resp = _submit(api_a, "k-1", {**BODY, "gpus": 4})
    assert resp.status_code == 422
    assert resp.json() == {
        "detail": "The Idempotency-Key was used before for a different request (the body differs); nothing was "
        f"queued: it names job {first}"
    }
    assert Job.objects.filter(name="train").count() == 1


def test_keys_are_per_tenant(site, api_a, api_b):
    # Tenant b's key names nothing of tenant a's: the same text queues b's own job (and tells b nothing of a's).
    a = _submit(api_a, "shared-key").json()["id"]
    b = _submit(api_b, "shared-key")
    assert b.status_code == 201 and b.json()["id"] != a and "Idempotent-Replayed" not in b


@pytest.mark.parametrize("key", ["", "has space", "x" * 65, "semi;colon"])
def test_a_malformed_key_is_refused_naming_the_header(site, api_a, key):
    resp = _submit(api_a, key)
    assert resp.status_code == 400
    assert resp.json() == {"Idempotency-Key": ["must be 1-64 letters, digits and . _ : - (for example a UUID)"]}
    assert not Job.objects.exists()


def test_the_schema_declares_the_header(site, api_a):
    schema = api_a.get("/api/v1/schema/?format=json").json()
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/jobs/"]["post"]["parameters"]}
    assert parameters["Idempotency-Key"]["in"] == "header"
    assert parameters["Idempotency-Key"]["schema"]["pattern"] == "^[A-Za-z0-9._:-]{1,64}$"
    assert "422" in schema["paths"]["/api/v1/jobs/"]["post"]["responses"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres("two requests at once need row locks and a unique index that PostgreSQL enforces across them")
def test_the_same_key_sent_twice_at_once_stores_one_job(site, user_a):
    from tests.scheduler.api.helpers import token_client

    answers, start = [], threading.Barrier(4)

    def send():
        api = token_client(user_a)
        start.wait()
        try:
            answers.append(_submit(api, "at-once"))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(4)]
    [t.start() for t in threads]
    [t.join(30) for t in threads]
    assert sorted(a.status_code for a in answers) == [201, 201, 201, 201]
    assert len({a.json()["id"] for a in answers}) == 1
    assert Job.objects.filter(name="train").count() == 1
