"""What tests compare of two rounds' Decisions: everything they decided and counted."""

from __future__ import annotations

from scheduler.core.types import Decisions


def everything(d: Decisions) -> tuple:
    """Placements, reasons, order, preemptions, migrations, reservations, requeues, failures and every stat but the
    timings and how many jobs were worked out afresh (what a carry saves)."""
    stats = {k: v for k, v in d.stats.items() if k not in ("ms", "jobs_worked_out")}
    return (
        d.placements,
        d.pending_reasons,
        d.queue_order,
        d.preemptions,
        d.migrations,
        d.reservations,
        d.requeues,
        d.failures,
        stats,
    )
