"""The round's own rows: the cluster's ClusterScheduler lock, the SchedulingRound record of what a round did and how
long it took. scheduler/rounds.py runs the round and calls these; nothing else writes either table."""

from __future__ import annotations

from django.db import DatabaseError, connection
from django.utils import timezone

from scheduler.actions.apply import Applied
from scheduler.actions.errors import RoundBusy
from scheduler.core.types import Decisions
from scheduler.models import ClusterScheduler, SchedulingRound


def lock_cluster(cluster_id: int) -> ClusterScheduler:
    """Step 1 of the lock order (scheduler.actions): the cluster's row, NOWAIT; a second round is RoundBusy."""
    rows = ClusterScheduler.objects.select_for_update(nowait=connection.features.has_select_for_update_nowait)
    try:
        return rows.get(cluster_id=cluster_id)
    except DatabaseError as exc:  # PostgreSQL: "could not obtain lock on row"
        raise RoundBusy(f"cluster {cluster_id}: a round is already running") from exc


def open_round(
    cluster_id: int, *, started, trigger: str, pending: int, running: int, engine_ms: float
) -> SchedulingRound:
    """The round's record, created before its decisions are applied so that their job events can name it."""
    return SchedulingRound.objects.create(
        cluster_id=cluster_id,
        started=started,
        trigger=trigger[:64],
        pending=pending,
        running=running,
        engine_ms=engine_ms,
    )


def close_round(record: SchedulingRound, applied: Applied, decisions: Decisions, timings_ms: dict[str, float]) -> None:
    """What the round did (counts, the first 2,000 decisions, the engine's stats and the phase timings), and the
    cluster's last round time; inside the round's transaction."""
    record.placed, record.preempted, record.migrated = applied.placed, applied.preempted, applied.migrated
    record.requeued, record.rejected_stale = applied.requeued, applied.rejected_stale
    record.decisions = applied.log[:2000]
    record.stats = {k: v for k, v in decisions.stats.items() if isinstance(v, int | float | str)}
    # The engine's phases beside the round's own (docs/scheduler.md "One round"): where its time went.
    record.stats["engine_phases_ms"] = {k: round(v, 1) for k, v in decisions.stats.get("ms", {}).items()}
    record.stats.update(
        {k: round(v, 1) if isinstance(v, int | float) else v for k, v in timings_ms.items() if k != "duration_ms"}
    )
    record.duration_ms = timings_ms["duration_ms"]
    record.save()
    ClusterScheduler.objects.filter(cluster_id=record.cluster_id).update(last_round_at=timezone.now())


def record_round_commit(record: SchedulingRound, total_ms: float) -> None:
    """A round lasts until its decisions are committed and visible: duration_ms is set again after the COMMIT (a
    retried round counts its retries), and stats.commit_ms holds the part after the engine's work was saved. One
    UPDATE, outside the round's transaction; inside a caller's transaction (tests) nothing is committed yet, so
    nothing is rewritten."""
    if connection.in_atomic_block:
        return
    record.stats["commit_ms"] = round(max(0.0, total_ms - record.duration_ms), 1)
    record.duration_ms = total_ms
    SchedulingRound.objects.filter(pk=record.pk).update(duration_ms=total_ms, stats=record.stats)
