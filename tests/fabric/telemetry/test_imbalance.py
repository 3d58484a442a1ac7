"""Imbalance: spread of GPU utilisation, hottest links."""

from __future__ import annotations

import dataclasses

import pytest

from fabric.telemetry.imbalance import Spread, hottest, spread


def test_even_load_has_no_spread():
    s = spread([0.5] * 8)
    assert s.mean == pytest.approx(0.5) and s.cv == pytest.approx(0.0)


def test_half_busy_half_idle_has_a_spread_of_one():
    s = spread([1.0] * 4 + [0.0] * 4)
    assert s.cv == pytest.approx(1.0) and (s.idle, s.busy) == (4, 4)


def test_idle_pool_has_no_spread_to_speak_of():
    assert spread([0.0, 0.0]).cv is None


def test_no_gpus_reporting_gives_an_empty_spread():
    assert spread([]).count == 0 and spread([]).mean is None


def test_hottest_links_busiest_first_ties_by_id():
    assert hottest({3: 0.9, 1: 0.9, 2: 0.1, 4: 0.5}, n=3) == [(1, 0.9), (3, 0.9), (4, 0.5)]


def test_hottest_among_a_subset():
    assert hottest({1: 0.9, 2: 0.2}, among={2}) == [(2, 0.2)]


def test_no_gpus_reporting_counts_none_idle_and_none_busy():
    assert spread([]) == Spread(0, None, None, None, None, None, 0, 0)


def test_values_outside_zero_to_one_are_clamped():
    # -0.5 counts as 0 and 1.5 as 1: mean 0.5, stddev 0.5, cv 1.
    assert spread([-0.5, 1.5]) == Spread(2, 0.5, 0.5, 1.0, 0.0, 1.0, 1, 1)


def test_idle_and_busy_edges():
    # 0.04 is idle, 0.05 is not; 0.8 is busy, 0.79 is not. 0.5 is neither. (Exact sums: compare the counts.)
    s = spread([0.04, 0.05, 0.5, 0.79, 0.8])
    assert (s.count, s.idle, s.busy, s.minimum, s.maximum) == (5, 1, 1, 0.04, 0.8)


def test_a_mean_at_the_tolerance_is_an_idle_pool():
    # A pool whose mean is 1e-9 is noise: no coefficient of variation.
    assert spread([1e-9]).cv is None
    assert spread([2e-9]).cv == 0.0


def test_hottest_gives_ten_links_unless_told():
    util = {i: i / 100 for i in range(1, 13)}  # 12 links, link 12 busiest
    assert [k for k, _ in hottest(util)] == [12, 11, 10, 9, 8, 7, 6, 5, 4, 3]


def test_a_spread_cannot_be_changed_once_made():
    with pytest.raises(dataclasses.FrozenInstanceError):
        spread([0.5]).mean = 0.1
