"""One scheduling round of one cluster: lock, snapshot, decide (pure engine), apply, record."""

from __future__ import annotations

import time

from django.db import DatabaseError, connection
from django.utils import timezone

from fabric import events
from fabric.models import Cluster
from scheduler import actions
from scheduler.actions.errors import RoundBusy
from scheduler.actions.locking import atomic_retry
from scheduler.adapters import build_snapshot
from scheduler.core import schedule
from scheduler.models import ClusterScheduler, SchedulingRound

__all__ = ["RoundBusy", "run_round"]


def _lock(cluster_id: int) -> ClusterScheduler:
    rows = ClusterScheduler.objects.select_for_update(nowait=connection.features.has_select_for_update_nowait)
    try:
        return rows.get(cluster_id=cluster_id)
    except DatabaseError as exc:  # PostgreSQL: "could not obtain lock on row"
        raise RoundBusy(f"cluster {cluster_id}: a round is already running") from exc


def run_round(cluster_id: int, trigger: str = "manual") -> SchedulingRound:
    """Run one round; raise RoundBusy when another one holds the cluster (the task retries). A round that
    PostgreSQL aborts for a deadlock runs again from a new snapshot (atomic_retry)."""
    cluster = Cluster.objects.get(pk=cluster_id)
    actions.ensure_scheduler(cluster)
    t0 = time.perf_counter()
    record = _round(cluster_id, trigger)
    _record_commit(record, t0)
    # Queue order and reasons, the last round on the overview (placements also mark through job events).
    events.live_changed(cluster_id, ("queue", "overview"))
    return record


def _record_commit(record: SchedulingRound, t0: float) -> None:
    """A round lasts until its decisions are committed and visible: duration_ms is set again after the
    COMMIT (a retried round counts its retries), and stats.commit_ms holds the part after the engine's work
    was saved. One UPDATE, outside the round's transaction."""
    if connection.in_atomic_block:  # inside a caller's transaction (tests): nothing is committed yet
        return
    total = (time.perf_counter() - t0) * 1000
    record.stats["commit_ms"] = round(max(0.0, total - record.duration_ms), 1)
    record.duration_ms = total
    SchedulingRound.objects.filter(pk=record.pk).update(duration_ms=total, stats=record.stats)


@atomic_retry
def _round(cluster_id: int, trigger: str) -> SchedulingRound:
    started_at, t0 = timezone.now(), time.perf_counter()
    _lock(cluster_id)
    snapshot, index = build_snapshot(cluster_id)
    t1 = time.perf_counter()
    decisions = schedule(snapshot)
    engine_ms = (time.perf_counter() - t1) * 1000
    record = SchedulingRound.objects.create(
        cluster_id=cluster_id,
        started=started_at,
        trigger=trigger[:64],
        pending=len(snapshot.pending),
        running=len(snapshot.running),
        engine_ms=engine_ms,
    )
    t2 = time.perf_counter()
    applied = actions.apply_decisions(record.pk, decisions, index)
    t3 = time.perf_counter()
    record.placed, record.preempted, record.migrated = applied.placed, applied.preempted, applied.migrated
    record.requeued, record.rejected_stale = applied.requeued, applied.rejected_stale
    record.decisions = applied.log[:2000]
    record.stats = {k: v for k, v in decisions.stats.items() if isinstance(v, int | float | str)}
    record.stats["load_ms"] = round((t1 - t0) * 1000, 1)
    record.stats["apply_ms"] = round((t3 - t2) * 1000, 1)
    record.stats["queue_ms"] = round(applied.queue_ms, 1)
    record.duration_ms = (time.perf_counter() - t0) * 1000
    record.save()
    ClusterScheduler.objects.filter(cluster_id=cluster_id).update(last_round_at=timezone.now())
    return record
