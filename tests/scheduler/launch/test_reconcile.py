"""plan_reconcile: what a restarted agent keeps, kills, reports, forgets and misses."""

from __future__ import annotations

from scheduler.launch.process import ProcessStatus
from scheduler.launch.reconcile import plan_reconcile


def found(job: int, gen: int, state: str, code: int | None = None) -> ProcessStatus:
    return ProcessStatus(job, gen, 1000 + job, state, code, "")


def test_each_found_job_lands_in_one_list():
    plan = plan_reconcile(
        [
            found(1, 3, "running"),  # wanted: adopt
            found(2, 1, "running"),  # the database moved it on (generation 2): stale copy, kill
            found(3, 1, "running"),  # the database does not know it here: orphan, kill
            found(4, 1, "exited", 0),  # ended while no agent watched: report with its code
            found(5, 1, "lost"),  # ended without a code: report as lost
            found(6, 1, "exited", 1),  # ended, and not wanted any more: drop its files
        ],
        {1: 3, 2: 2, 4: 1, 5: 1, 7: 1},
    )
    assert plan.keep == [(1, 3)]
    assert plan.kill == [(2, 1), (3, 1)]
    assert plan.report == [(4, 1, 0), (5, 1, None)]
    assert plan.forget == [(6, 1)]
    assert plan.missing == [(2, 2), (7, 1)]  # wanted here, not found: the centre relaunches or fails them


def test_nothing_found_nothing_expected():
    plan = plan_reconcile([], {})
    assert (plan.keep, plan.kill, plan.report, plan.forget, plan.missing) == ([], [], [], [], [])
