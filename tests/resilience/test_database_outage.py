"""The database out of reach (PostgreSQL restarting, a connection terminated mid-request): the answer is 503 with
Retry-After and the schema's `{"detail": ...}`, from a view, from the token lookup before it, and from a page outside
the API, logged once as a warning with its cause rather than as a 500 with a traceback."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import OperationalError, connection

from tests.processes import database_url
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db
DETAIL = "the database cannot be reached right now; send the request again in 5 seconds"


@contextmanager
def queries_on(table: str, fail_with: str) -> Iterator[None]:
    """Every query on `table` fails as a lost connection does in Django (OperationalError from the driver)."""

    def refuse(execute, sql, params, many, context):
        if f'"{table}"' in sql:
            raise OperationalError(fail_with)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(refuse):
        yield


def test_a_database_error_in_a_view_answers_503_with_retry_after(site):
    with queries_on("scheduler_job", "server closed the connection unexpectedly"):
        answer = site.api.get(JOBS)
    assert (answer.status_code, answer["Retry-After"], answer.json()) == (503, "5", {"detail": DETAIL})


def test_a_database_error_while_looking_up_the_token_answers_503(site):
    with queries_on("knox_authtoken", "terminating connection due to administrator command"):
        answer = site.api.get(JOBS)
    assert (answer.status_code, answer["Retry-After"], answer.json()) == (503, "5", {"detail": DETAIL})


def test_the_browsable_api_answers_503_too_when_the_token_lookup_failed(site):
    # Its renderer asks who the user is: that must not look the token up again (and raise again).
    with queries_on("knox_authtoken", "terminating connection due to administrator command"):
        answer = site.api.get(JOBS, HTTP_ACCEPT="text/html")
    assert (answer.status_code, answer["Content-Type"]) == (503, "text/html; charset=utf-8")
    assert DETAIL in answer.content.decode()


def test_a_database_outage_is_one_warning_with_its_cause_not_a_500_per_request(site, caplog):
    with caplog.at_level(logging.INFO), queries_on("scheduler_job", "server closed the connection unexpectedly"):
        assert [site.api.get(JOBS).status_code for _ in range(3)] == [503, 503, 503]
    logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
    assert logged == [
        ("WARNING", "the database cannot be reached (OperationalError: server closed the connection unexpectedly); "
         "GET /api/v1/jobs/ and the requests after it answer 503 until it is back. Further errors of this outage "
         "are not logged."),
    ]  # fmt: skip


def test_a_page_outside_the_api_answers_503_when_the_database_is_down(client, operator):
    client.force_login(operator)
    with queries_on("django_session", "server closed the connection unexpectedly"):
        answer = client.get("/")
    assert (answer.status_code, answer["Retry-After"], answer["Content-Type"]) == (
        503, "5", "text/plain; charset=utf-8"
    )  # fmt: skip
    assert answer.content.decode() == f"Service unavailable: {DETAIL}.\n"


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres("terminates the request's own backend from a second connection")
def test_a_request_whose_postgresql_backend_is_terminated_answers_503(site):
    """For real: the backend serving the request is killed just before its job query, as pg_terminate_backend (or a
    PostgreSQL restart) does; psycopg's error reaches the API as OperationalError."""
    killed = []

    def terminate_first(execute, sql, params, many, context):
        if '"scheduler_job"' in sql and not killed:
            pid = connection.connection.info.backend_pid
            with psycopg.connect(database_url(), autocommit=True) as other:
                killed.append(other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(terminate_first):
        answer = site.api.get(JOBS)
    connection.close()
    assert killed == [True]
    assert (answer.status_code, answer["Retry-After"], answer.json()) == (503, "5", {"detail": DETAIL})
    assert site.api.get(JOBS).status_code == 200  # the next request has a new connection


def test_a_submit_whose_database_goes_away_after_the_commit_answers_201(site, monkeypatch):
    # The chaos run's PostgreSQL fault stored a job and answered 503 ("send it again"): its answer read the job's
    # place in the queue and its pool's cluster after the commit. Now nothing is read once the job is stored.
    from scheduler.api import views

    submit_job = views.actions.submit_job

    def then_the_database_goes(*args, **kwargs):
        job = submit_job(*args, **kwargs)
        connection.execute_wrappers.append(_refuse_everything)
        return job

    monkeypatch.setattr(views.actions, "submit_job", then_the_database_goes)
    try:
        answer = site.api.post(JOBS, {"name": "late", "gpus": 2, "command": "x"}, format="json")
    finally:
        if _refuse_everything in connection.execute_wrappers:
            connection.execute_wrappers.remove(_refuse_everything)
    assert answer.status_code == 201, answer.content
    assert (answer.json()["name"], answer.json()["cluster"], answer.json()["queue_position"]) == (
        "late", "resilience", None,
    )  # fmt: skip


def _refuse_everything(execute, sql, params, many, context):
    raise OperationalError("server closed the connection unexpectedly")
