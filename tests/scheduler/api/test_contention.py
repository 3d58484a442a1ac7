"""A request whose transaction PostgreSQL keeps aborting answers 503 with Retry-After, never 500."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from scheduler import enqueue
from scheduler.actions.locking import ATTEMPTS
from tests.processes import database_url
from tests.scheduler.api.helpers import JOBS

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("lock timeouts are PostgreSQL's, seen from a second connection"),
]


def _short_lock_timeout(sender, connection, **kwargs) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '50ms'")


def test_a_cancel_that_times_out_on_every_attempt_answers_503_with_retry_after(site, api_a, submit, monkeypatch):
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: False)
    job = submit(site.tenant_a, site.default, "held-elsewhere")
    with psycopg.connect(database_url(), options="-c idle_in_transaction_session_timeout=20s") as other:
        other.execute("SELECT 1 FROM scheduler_job WHERE id = %s FOR UPDATE", [job.pk])
        connection_created.connect(_short_lock_timeout)
        connection.close()  # the request's connection is a new one, with the short lock timeout
        try:
            answer = api_a.post(f"{JOBS}{job.pk}/cancel/", {}, format="json")
        finally:
            connection_created.disconnect(_short_lock_timeout)
            connection.close()
    assert answer.status_code == 503
    assert answer["Retry-After"] == "1"
    assert answer.json() == {
        "detail": f"the scheduler is busy (lock not available on all {ATTEMPTS} attempts; nothing was changed); "
        "send the request again"
    }
    again = api_a.post(f"{JOBS}{job.pk}/cancel/", {}, format="json")  # the lock is gone: the same request works
    assert (again.status_code, again.json()["status"]) == (200, "cancelled")
