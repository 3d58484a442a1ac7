"""scheduler.finished_usage: fair share's decayed usage of finished jobs, kept between rounds. Half-life 100 s and
a window of 700 s here; a job of 7,200 GPU-seconds is 2 GPU-hours, halved per 100 s of age."""

from __future__ import annotations

import random

import pytest

from scheduler.finished_usage import FinishedUsage


def kept(rows, now=1000.0) -> FinishedUsage:
    usage = FinishedUsage(half_life_s=100.0, window_s=700.0)
    usage.reset(rows, now)
    return usage


def test_a_job_one_half_life_old_counts_half():
    assert kept([(1, 10, 7200.0, 900.0)]).usage(1000.0) == {10: 1.0}


def test_usage_decays_as_time_goes_on():
    usage = kept([(1, 10, 7200.0, 900.0)])
    assert usage.usage(1100.0) == {10: 0.5}  # 200 s old: a quarter of 2


def test_jobs_older_than_the_window_are_left_out_and_leave_once_they_age_out():
    usage = kept([(1, 10, 7200.0, 900.0), (2, 10, 7200.0, 250.0)])  # job 2 finished 750 s before: out
    assert len(usage) == 1
    assert usage.usage(1600.0) == {10: 2 * 0.5**7}  # 700 s old: the window's edge, still in
    assert usage.usage(1601.0) == {}  # out: no tenant entry left, not a rounding residue


def test_jobs_written_since_are_added_changed_or_dropped():
    usage = kept([(1, 10, 7200.0, 900.0), (2, 20, 3600.0, 1000.0)])
    usage.update([(3, 10, 3600.0, 1000.0), (1, 10, 14400.0, 900.0), (2, 20, 3600.0, None)], 1000.0)
    # Job 1 now 4 GPU-hours at one half-life (2), job 3 one GPU-hour new; job 2 is no longer finished (requeued).
    assert usage.usage(1000.0) == {10: 3.0}


def test_an_unfinished_job_written_since_is_not_counted():
    usage = kept([])
    usage.update([(1, 10, 7200.0, None)], 1000.0)
    assert usage.usage(1000.0) == {}


def test_the_reference_time_moves_after_a_half_life_and_the_figures_stay():
    usage = kept([(1, 10, 7200.0, 900.0), (2, 20, 3600.0, 950.0)])
    got = usage.usage(1250.0)  # 1.5 half-lives since the reference: it moves to 1250
    assert usage.ref == 1250.0
    assert got == {10: pytest.approx(2 * 0.5**3.5, rel=1e-12), 20: pytest.approx(0.5**3, rel=1e-12)}


def test_the_sums_do_not_depend_on_the_order_rows_come_in():
    rng = random.Random(7)
    rows = [(i, i % 3, rng.uniform(0, 1e6), rng.uniform(400, 1000)) for i in range(500)]
    want = {t: sum(a / 3600 * 0.5 ** ((1000 - f) / 100) for _, tt, a, f in rows if tt == t) for t in range(3)}
    for _ in range(3):
        rng.shuffle(rows)
        got = kept(rows).usage(1000.0)
        assert got == {t: pytest.approx(v, rel=1e-12) for t, v in want.items()}


def test_a_job_written_again_with_the_same_end_leaves_once():
    usage = kept([(1, 10, 7200.0, 900.0)])
    usage.update([(1, 10, 7200.0, 900.0)], 1000.0)  # its row written again (an event), nothing changed
    assert usage.usage(1000.0) == {10: 1.0}
    assert usage.usage(1601.0) == {}


def test_a_job_that_finished_again_later_stays_when_its_first_end_ages_out():
    usage = kept([(1, 10, 7200.0, 900.0)])
    usage.update([(1, 10, 7200.0, 1500.0)], 1500.0)  # run again and finished at 1500
    assert usage.usage(1601.0) == {10: pytest.approx(2 * 0.5**1.01, rel=1e-12)}  # 101 s old, its first end gone
