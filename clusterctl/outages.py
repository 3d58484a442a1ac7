"""A dependency out of reach: which errors mean PostgreSQL, Redis (cache, channel layer) or the broker is down, and a
log that says so once per outage instead of once per request.

A restart of Redis or of PostgreSQL is routine (an upgrade, a failover, a crashed container brought back): for
its few seconds every request that touches it fails. What fails is the dependency, not the request, so the API
answers 503 with Retry-After (clusterctl/errors.py), the rate limits let requests through (clusterctl/throttles.py),
and work that follows a commit is left to what follows from state (the periodic round, the launch sweep). The log
gets one warning when an outage begins, with its cause, not a traceback per request.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

DATABASE = "database"
REDIS = "cache"
BROKER = "message broker"
# Django's database errors for a lost or refused connection (psycopg's and SQLite's, wrapped by Django), redis-py's
# for the cache and the channel layer, kombu's for a publish that found no broker.
DATABASE_ERRORS = (OperationalError, InterfaceError)
REDIS_ERRORS = (RedisConnectionError, RedisTimeoutError)
OUTAGE_ERRORS = (*DATABASE_ERRORS, *REDIS_ERRORS, BrokerError)
# Seconds a client is told to wait: a Redis or PostgreSQL restart takes a few.
RETRY_AFTER_S = 5
# An error this long after the previous one of the same dependency starts a new outage, logged again.
QUIET_S = 30.0
# For this long after an error of a dependency, work that can wait for what follows from state (a round request, a
# node message) is not tried: a Redis that hangs instead of refusing costs one socket timeout per process in this
# window, not one per request.
SKIP_S = 2.0

_last_error: dict[str, float] = {}  # by log key: when an outage was last noted
_last_failure: dict[str, float] = {}  # by dependency: when it last failed
_lock = threading.Lock()


# PostgreSQL's SQLSTATE classes and codes that say the server, not the statement, is the trouble: 08 connection
# exceptions, 53 insufficient resources (too many connections), 57 operator intervention (admin shutdown, a
# terminated backend, the server starting up), 55P03 a lock timeout. An error without a SQLSTATE came from the client
# library: the connection was lost before the server answered.
_PG_OUTAGE_CLASSES = ("08", "53", "57")
_PG_OUTAGE_CODES = ("55P03",)
# SQLite (the embedded mode): a writer holding the file past the busy timeout.
_SQLITE_OUTAGE = ("database is locked", "unable to open database")


def _sqlstate(exc: BaseException | None) -> str | None:
    while exc is not None:
        state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
        if state:
            return state
        exc = exc.__cause__
    return None


def database_outage(exc: BaseException) -> bool:
    """Whether a database error means the database is out of reach, rather than that the statement is wrong (a
    missing table, a bad column: a bug, which must stay a 500 and be seen)."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    if cause is not None and type(cause).__module__.startswith("sqlite3"):
        return any(text in str(exc) for text in _SQLITE_OUTAGE)
    state = _sqlstate(exc)
    return state is None or state[:2] in _PG_OUTAGE_CLASSES or state in _PG_OUTAGE_CODES


def dependency(exc: BaseException) -> str | None:
    """Which dependency the error says is out of reach (DATABASE, REDIS, BROKER), or None for any other error."""
    if isinstance(exc, BrokerError):
        return BROKER
    if isinstance(exc, DATABASE_ERRORS):
        return DATABASE if database_outage(exc) else None
    if isinstance(exc, REDIS_ERRORS):
        return REDIS
    return None


def note(exc: BaseException, consequence: str, *, key: str | None = None) -> bool:
    """Record an outage error; log a warning with its cause and `consequence` if it begins an outage in this process:
    no error with the same `key` (by default the dependency's name; one per consequence where several are worth
    telling) for QUIET_S. Returns whether it was logged."""
    name = dependency(exc) or "dependency"
    key = key or name
    now = time.monotonic()
    with _lock:
        last = _last_error.get(key)
        _last_error[key] = now
        _last_failure[name] = now
    if last is not None and now - last <= QUIET_S:
        return False
    log.warning(
        "the %s cannot be reached (%s: %s); %s. Further errors of this outage are not logged.",
        name,
        type(exc).__name__,
        str(exc).strip().splitlines()[0] if str(exc).strip() else "no message",
        consequence,
    )
    return True


def recent(*names: str, within_s: float = SKIP_S) -> bool:
    """Whether any of these dependencies (DATABASE, REDIS, BROKER) failed in this process within the last within_s."""
    now = time.monotonic()
    with _lock:
        return any(name in _last_failure and now - _last_failure[name] <= within_s for name in names)


def forget() -> None:
    """Start with no outage in progress (tests)."""
    with _lock:
        _last_error.clear()
        _last_failure.clear()
