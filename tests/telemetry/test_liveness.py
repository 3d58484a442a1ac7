"""Liveness rule: polls missed -> unreachable -> down, judged from the newest sample time."""

from __future__ import annotations

import pytest

from fabric.telemetry.liveness import DOWN, UNREACHABLE, liveness_findings


def judge(seen, now=1000.0, since=0.0):
    return liveness_findings(seen, now=now, interval_s=10.0, unreachable_polls=3, down_polls=10, watching_since=since)


def test_recent_node_is_live_with_no_findings():
    assert judge({"a": 985.0}) == {"a": []}


def test_three_missed_polls_make_a_node_unreachable_without_removing_capacity():
    (f,) = judge({"a": 965.0})["a"]
    assert f.rule == UNREACHABLE and f.severity == "warning" and not f.removes_capacity
    assert f.object_key == "a/node" and "3 polls missed" in f.message


def test_ten_missed_polls_take_a_node_down():
    (f,) = judge({"a": 900.0})["a"]
    assert f.rule == DOWN and f.severity == "critical" and f.removes_capacity


def test_never_seen_node_is_judged_from_when_watching_started():
    assert judge({"a": None}, since=995.0) == {"a": []}
    assert judge({"a": None}, since=900.0)["a"][0].rule == DOWN


@pytest.mark.parametrize(("unreachable", "down"), [(0, 3), (4, 3)])
def test_thresholds_must_be_ordered(unreachable, down):
    with pytest.raises(ValueError, match="unreachable_polls"):
        liveness_findings({}, now=0, interval_s=1, unreachable_polls=unreachable, down_polls=down, watching_since=0)
