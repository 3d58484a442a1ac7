"""Imbalance: spread of GPU utilisation, hottest links."""

from __future__ import annotations

import pytest

from fabric.telemetry.imbalance import hottest, spread


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
