"""One scheduling round of one cluster: lock, snapshot, decide (pure engine), apply, record."""

from __future__ import annotations

import logging
import threading
import time

from django.db import connection, transaction
from django.utils import timezone

from clusterctl.gcpause import gc_paused
from fabric import events
from fabric.models import Cluster
from scheduler import actions, snapshot_from_db
from scheduler.actions import rounds as round_actions
from scheduler.actions.errors import RoundBusy
from scheduler.actions.locking import atomic_retry
from scheduler.core import schedule
from scheduler.core.carry import RoundCarry
from scheduler.models import SchedulingRound
from scheduler.snapshot_from_db import build_snapshot

__all__ = ["RoundBusy", "run_round", "warm_up"]

log = logging.getLogger(__name__)

# Per cluster: what the engine worked out per waiting job in this process's earlier rounds (scheduler.core.carry).
# It is keyed on the snapshot's job objects, which the adapter keeps while their rows are unchanged, so it is right
# whatever happened in between (another worker's rounds, a round rolled back); a round decides the same without it.
_CARRIES: dict[int, RoundCarry] = {}
# A carry is one round's at a time: it holds the cluster index the round changes in place (ClusterState.advance).
# The cluster's row lock already keeps two rounds apart on PostgreSQL; this also does where that lock is a no-op
# (SQLite) and a worker runs rounds in threads.
_CARRY_LOCKS: dict[int, threading.Lock] = {}
# Per thread: the follow-up rounds asked for while one is being sent (`_follow`).
_FOLLOWING = threading.local()


def run_round(cluster_id: int, trigger: str = "manual") -> SchedulingRound:
    """Run one round; raise RoundBusy when another one holds the cluster (the task retries). A round that
    PostgreSQL aborts for a deadlock runs again from a new snapshot (atomic_retry)."""
    cluster = Cluster.objects.get(pk=cluster_id)
    actions.ensure_scheduler(cluster)
    warm_up(cluster_id)
    t0 = time.perf_counter()
    # The cyclic garbage collector waits for the round (as in the engine itself, scheduler.core.schedule): its
    # load and apply make hundreds of thousands of short-lived rows and objects at 50,000 waiting jobs, and the
    # collections they set off walk the worker's long-lived caches (the snapshot's job rows and requests).
    with gc_paused():
        record = _round(cluster_id, trigger)
        # The round ends here: its decisions are committed and their on-commit messages sent.
        round_actions.record_round_commit(record, (time.perf_counter() - t0) * 1000)
        # Queue order and reasons, the last round on the overview (placements also mark through job events).
        events.live_changed(cluster_id, ("queue", "overview"))
    # The collector starts again only now, after everything the round shows: the collection it owes (at 50,000
    # waiting jobs 30-50 ms over what a filling round left, and now and then a full one of the worker's heap, about
    # 230 ms) held up the pages' news of the queue, and counted as the round's commit, when it ran first.
    left = record.stats.get("left_for_next_round", 0)
    if left:  # the round started its limit of jobs (Config.max_placements_per_round): the next one follows at once
        _follow(cluster_id, f"{left} jobs left by round {record.pk}")
    return record


def warm_up(cluster_id: int) -> float | None:
    """Ready this process for the cluster's rounds before its first one takes the cluster's lock: read the cluster
    (the snapshot adapter keeps its rows, scheduler.snapshot_from_db) and work out the engine's carry for it, its
    waiting jobs' lines and the cluster index, by deciding a round whose decisions are dropped. Each worker process
    keeps its own: without this, its first round of a cluster held the lock while it read 50,000 jobs (2 s) and
    ordered them (0.2 s) from nothing. The round that follows decides from its own snapshot, exactly as it would
    without the warm-up (the carry's rule). Returns the milliseconds it took, or None where the process had the
    carry already. Reads only: on PostgreSQL in one read-only transaction that sees one moment of the database."""
    if cluster_id in _CARRIES:
        return None
    t = time.perf_counter()
    with gc_paused(), _CARRY_LOCKS.setdefault(cluster_id, threading.Lock()):
        if cluster_id in _CARRIES:  # another thread of this process warmed it meanwhile
            return None
        carry = RoundCarry()
        try:
            nested = connection.in_atomic_block  # a test's transaction, where the isolation is already set
            with transaction.atomic():
                if connection.vendor == "postgresql" and not nested:
                    with connection.cursor() as cursor:
                        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                snapshot, _ = snapshot_from_db.build_snapshot(cluster_id)
            schedule(snapshot, carry=carry)
        except Exception:
            # The round itself reads and decides from nothing, as before, and meets the trouble if it lasts.
            log.exception("cluster %s: the warm-up before its first round failed", cluster_id)
            return None
        _CARRIES[cluster_id] = carry
    ms = (time.perf_counter() - t) * 1000
    log.info("cluster %s: warmed up for its rounds in %.0f ms, without its lock", cluster_id, ms)
    return ms


def _follow(cluster_id: int, trigger: str) -> None:
    """Send the round that follows one at its limit of starts. Where tasks run eagerly (embedded set-up, management
    commands, tests) the round runs inside this call and may itself ask for the next: those requests wait in this
    thread's queue and run one after another here, not each inside the last (a fill of 50 rounds would nest 50)."""
    queue = getattr(_FOLLOWING, "queue", None)
    if queue is not None:
        queue.append((cluster_id, trigger))
        return
    _FOLLOWING.queue = queue = [(cluster_id, trigger)]
    try:
        while queue:
            actions.request_round_on_commit(*queue.pop(0), countdown=0)
    finally:
        _FOLLOWING.queue = None


@atomic_retry
def _round(cluster_id: int, trigger: str) -> SchedulingRound:
    started_at, t0 = timezone.now(), time.perf_counter()
    round_actions.lock_cluster(cluster_id)
    snapshot, index = build_snapshot(cluster_id)
    t1 = time.perf_counter()
    with _CARRY_LOCKS.setdefault(cluster_id, threading.Lock()):
        decisions = schedule(snapshot, carry=_CARRIES.setdefault(cluster_id, RoundCarry()))
    engine_ms = (time.perf_counter() - t1) * 1000
    record = round_actions.open_round(
        cluster_id,
        started=started_at,
        trigger=trigger,
        pending=len(snapshot.pending),
        running=len(snapshot.running),
        engine_ms=engine_ms,
    )
    t2 = time.perf_counter()
    applied = actions.apply_decisions(record.pk, decisions, index)
    t3 = time.perf_counter()
    timings = {
        "load_ms": (t1 - t0) * 1000,
        "load_steps_ms": index.load_ms,
        "apply_ms": (t3 - t2) * 1000,
        "queue_ms": applied.queue_ms,
    }
    timings["duration_ms"] = (time.perf_counter() - t0) * 1000
    round_actions.close_round(record, applied, decisions, timings)
    return record
