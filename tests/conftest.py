"""Shared fixtures: real tool outputs, users with the two kinds of access, API clients."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


#
# One behaviour on both databases
#


def pytest_runtest_setup(item: pytest.Item) -> None:
    """`@pytest.mark.postgres("why")`: the test needs PostgreSQL (scripts/with_services.py); skipped on SQLite."""
    marker = item.get_closest_marker("postgres")
    if marker is None:
        return
    from django.db import connection  # here: the pure-core tests run without Django (pytest -p no:django)

    if connection.vendor != "postgresql":
        why = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
        pytest.skip(f"needs PostgreSQL: {why}" if why else "needs PostgreSQL")


# Highest id handed out so far in this run (SQLite only, see _fresh_ids_on_sqlite).
_last_id = 0


@pytest.fixture(autouse=True)
def _fresh_ids_on_sqlite(request: pytest.FixtureRequest):
    """Ids never restart within a run, on SQLite as on PostgreSQL.

    A test's transaction is rolled back at its end. PostgreSQL's sequences are not transactional, so the next
    test's rows get new ids; SQLite keeps its AUTOINCREMENT counters in a table (sqlite_sequence) that the rollback
    rewinds, so every test numbered its rows from 1 again. State the product keeps outside the database - the
    Django cache (a process-local LocMemCache without Redis) and the per-process caches of the scheduler, telemetry
    and the twin - is keyed by ids that production never reuses (committed ids are never reused on either database),
    so on SQLite one test's cached state landed on the next test's rows (a 2-GPU job placed with the 4-GPU request
    of the test before). Each database test here starts its counters above every id of the run so far.
    """
    if request.node.get_closest_marker("django_db") is None and "_django_db_helper" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("_django_db_helper")
    from django.db import connection

    if connection.vendor != "sqlite":
        yield
        return
    global _last_id
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence")
        base = max(_last_id, cursor.fetchone()[0])
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%AUTOINCREMENT%'")
        tables = [name for (name,) in cursor.fetchall()]
        cursor.execute("DELETE FROM sqlite_sequence")
        cursor.executemany("INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [(t, base) for t in tables])
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence")
        _last_id = max(_last_id, cursor.fetchone()[0])


@pytest.fixture
def fixture_text():
    def read(name: str) -> str:
        return (FIXTURES / name).read_text()

    return read


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_user("operator", "op@example.org", "pw-operator", is_staff=True)


@pytest.fixture
def tenant_user(django_user_model):
    return django_user_model.objects.create_user("tenant", "t@example.org", "pw-tenant")


def _token_client(user):
    # Imported here so the pure-core tests can run without Django (pytest -p no:django).
    from rest_framework.test import APIClient

    from clusterctl.tokens import issue_token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user)[1]}")
    return client


@pytest.fixture
def operator_api(operator):
    return _token_client(operator)


@pytest.fixture
def tenant_api(tenant_user):
    return _token_client(tenant_user)


@pytest.fixture
def analyses(monkeypatch) -> list[int]:
    """The links of each fabric analysed from now on (fabric.reports calls fabric.topology.analyse): the fabric
    report's cache tests count analyses with it."""
    from fabric import reports

    calls: list[int] = []
    real = reports.analyse

    def counted(fabric):
        calls.append(len(fabric.links))
        return real(fabric)

    monkeypatch.setattr(reports, "analyse", counted)
    return calls
