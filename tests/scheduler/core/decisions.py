"""What tests compare of two rounds' Decisions: everything they decided and counted."""

from __future__ import annotations

from scheduler.core.types import Decisions

WORK = ("ms", "jobs_worked_out", "searches", "evaluations")


def everything(d: Decisions) -> tuple:
    """Placements, reasons, order, preemptions, migrations, reservations, requeues, failures and every stat but the
    timings and the work: how many jobs were worked out afresh (what a carry saves) and how many searches and
    placement evaluations ran (what the memo of turns saves: a job alike to one that waits behind the first of its
    shape for one leaf gets its reason without searching again)."""
    stats = {k: v for k, v in d.stats.items() if k not in WORK}
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
