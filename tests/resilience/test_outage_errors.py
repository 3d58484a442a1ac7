"""Which database errors are an outage (503, retry later) and which are a bug (500, seen): clusterctl.outages."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from django.db import InterfaceError, OperationalError, ProgrammingError

from clusterctl import outages


def _wrapped(driver_error: Exception, django_error: type = OperationalError) -> Exception:
    """As Django raises it: its own class, the driver's error as the cause."""
    exc = django_error(str(driver_error))
    exc.__cause__ = driver_error
    return exc


@pytest.mark.parametrize(
    ("message", "state"),
    [
        ("terminating connection due to administrator command", "57P01"),  # pg_terminate_backend
        ("the database system is starting up", "57P03"),
        ("sorry, too many clients already", "53300"),
        ("connection failure", "08006"),
        ("canceling statement due to lock timeout", "55P03"),
    ],
)
def test_postgresql_errors_about_the_server_are_an_outage(message, state):
    assert outages.dependency(_wrapped(psycopg.errors.lookup(state)(message))) == outages.DATABASE


def test_a_connection_lost_before_the_server_answered_is_an_outage():
    # libpq gives no SQLSTATE when the socket closed under it.
    assert outages.dependency(_wrapped(psycopg.OperationalError("server closed the connection unexpectedly")))


def test_a_closed_connection_is_an_outage():
    assert outages.dependency(InterfaceError("connection already closed")) == outages.DATABASE


def test_a_locked_sqlite_database_is_an_outage():
    assert outages.dependency(_wrapped(sqlite3.OperationalError("database is locked"))) == outages.DATABASE


def test_a_missing_sqlite_table_is_a_bug_not_an_outage():
    assert outages.dependency(_wrapped(sqlite3.OperationalError("no such table: scheduler_job"))) is None


def test_other_database_errors_are_not_an_outage():
    assert outages.dependency(ProgrammingError("column j.nope does not exist")) is None
