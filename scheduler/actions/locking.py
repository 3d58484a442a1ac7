"""Row locks in the one order every action takes them (scheduler.actions explains the order), and the retry of a
whole transaction that PostgreSQL still aborts.

Every lock here is FOR NO KEY UPDATE of the row itself: strong enough against every other writer of the row, and
still compatible with the FOR KEY SHARE that PostgreSQL takes on a parent row when a child row referencing it is
inserted (Django's foreign keys are checked at COMMIT). A plain FOR UPDATE, or one that also locks the rows of a
join (a select_related, or a model's default ordering on a foreign key), blocks those COMMITs: that was the cycle
through the pool row that every job insert touches.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeVar

from django.db import DatabaseError, connection, transaction

from scheduler.actions.errors import Contended
from scheduler.models import GpuLedger, Job

log = logging.getLogger(__name__)

# What PostgreSQL aborts a transaction with when it lost a race rather than because it was wrong: running it again
# from the start is the documented remedy. 55P03 comes from a lock_timeout or NOWAIT; the round's NOWAIT on its
# cluster is caught before this (RoundBusy), so here it can only be a lock_timeout a site set.
TRANSIENT_SQLSTATES = {
    "40P01": "deadlock detected",
    "40001": "serialization failure",
    "55P03": "lock not available",
}
ATTEMPTS = 5
BACKOFF_S = 0.05  # the first wait is up to this; each next one up to twice the previous, at most BACKOFF_MAX_S
BACKOFF_MAX_S = 1.0

P = ParamSpec("P")
R = TypeVar("R")


def sqlstate(exc: BaseException | None) -> str | None:
    """The SQLSTATE behind a Django database error (the driver's error is its cause), or None."""
    while exc is not None:
        state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
        if state:
            return state
        exc = exc.__cause__
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether the database aborted the transaction for a lost race that a rerun resolves."""
    return isinstance(exc, DatabaseError) and sqlstate(exc) in TRANSIENT_SQLSTATES


def atomic_retry(fn: Callable[P, R]) -> Callable[P, R]:
    """`transaction.atomic`, rerun from the start (up to ATTEMPTS, jittered exponential backoff) when PostgreSQL
    aborts it for a deadlock, a serialization failure or a lock timeout; raises Contended when every attempt was.

    Only the outermost transaction is rerun: called inside another atomic block (one action inside another, a
    round's decisions, a test's transaction) it runs once as a savepoint, and the error reaches the outer block,
    whose own retry reruns all of it. A rerun starts from nothing: every row it read is read again, and the
    on-commit callbacks of an aborted attempt are dropped with it.
    """

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if connection.in_atomic_block:
            with transaction.atomic():
                return fn(*args, **kwargs)
        cap = BACKOFF_S
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    return fn(*args, **kwargs)
            except DatabaseError as exc:
                if not is_transient(exc):
                    raise
                what = TRANSIENT_SQLSTATES[sqlstate(exc)]
                if attempt == ATTEMPTS:
                    log.warning("%s: %s on all %d attempts; giving up", fn.__qualname__, what, ATTEMPTS)
                    raise Contended(f"{what} on all {ATTEMPTS} attempts; nothing was changed") from exc
                log.info("%s: %s (attempt %d of %d); running it again", fn.__qualname__, what, attempt, ATTEMPTS)
            time.sleep(random.uniform(0, cap))
            cap = min(cap * 2, BACKOFF_MAX_S)
        raise AssertionError("unreachable")  # the loop returns or raises

    return run


def jobs_for_update():
    """Job rows to lock, the job's row only (never its pool, tenant or class, which a select_related would add)."""
    return Job.objects.select_for_update(no_key=True, of=("self",))


def lock_job(pk: int) -> Job | None:
    """One job, locked, with its pool read (not locked) for the cluster id its events and round requests need."""
    return jobs_for_update().select_related("pool").filter(pk=pk).order_by().first()


def lock_jobs(ids: Iterable[int]) -> list[int]:
    """Several jobs in one statement, in id order (the order two transactions must agree on). Returns the ids found."""
    wanted = sorted(set(ids))
    if not wanted:
        return []
    return list(jobs_for_update().filter(pk__any_of=wanted).order_by("pk").values_list("pk", flat=True))


def lock_ledgers(gpu_ids: Iterable[int]) -> list[int]:
    """GPU ledger rows in one statement, in gpu_id order (several jobs share a GPU under MPS, MIG, time-slicing)."""
    wanted = sorted(set(gpu_ids))
    if not wanted:
        return []
    rows = GpuLedger.objects.select_for_update(no_key=True).filter(gpu_id__any_of=wanted).order_by("gpu_id")
    return list(rows.values_list("gpu_id", flat=True))
