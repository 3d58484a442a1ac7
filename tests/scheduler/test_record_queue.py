"""What a round records of its queue (scheduler.actions.apply._record_queue): the waiting jobs in order, each with
the number of its reason, and the reasons' texts numbered by the first job with each."""

from __future__ import annotations

import pytest

from scheduler import queue_lines
from scheduler.actions.apply import _record_queue
from scheduler.core.types import Decisions, Placement, Reservation
from scheduler.models import ClusterScheduler

pytestmark = pytest.mark.django_db


def test_the_queue_is_recorded_in_order_with_its_reasons_numbered_by_first_use(pool):
    long_a, long_b = "x" * 500 + "a", "x" * 500 + "b"  # alike in their first 500 characters: one text
    decisions = Decisions(
        queue_order=[3, 1, 2, 4, 5, 6, 7, 9],
        placements=[Placement(2, (), ("n1",), 0.0, {}, "")],
        pending_reasons={3: "b", 1: "a", 4: "b", 5: long_a, 6: long_b, 9: "gone"},
    )
    jobs = {1: None, 2: None, 3: None, 4: None, 5: None, 6: None, 7: None}  # 9 is no longer in the snapshot
    _record_queue(pool.cluster_id, decisions, jobs)
    row = ClusterScheduler.objects.get(cluster_id=pool.cluster_id)
    assert row.queue["texts"] == ["b", "a", "x" * 500, ""]  # 7 has no reason
    assert queue_lines.unpack(row.queue_lines) == ([3, 1, 4, 5, 6, 7], [0, 1, 0, 2, 2, 3])


def test_the_earliest_reserved_start_is_recorded_only_for_jobs_still_waiting(pool):
    decisions = Decisions(
        queue_order=[1, 2, 3],
        placements=[Placement(2, (), ("n1",), 0.0, {}, "")],
        pending_reasons={1: "reserved", 3: "reserved"},
        reservations=[
            Reservation(1, 2000.0, (10,), ("n1",)),
            Reservation(1, 1500.25, (11,), ("n2",), "stopping"),  # its earlier start wins
            Reservation(2, 1000.0, (12,), ("n1",)),  # placed this round: nothing to estimate
            Reservation(3, 3000.0, (13,), ("n3",)),  # no longer in the snapshot
        ],
    )
    _record_queue(pool.cluster_id, decisions, {1: None, 2: None})
    row = ClusterScheduler.objects.get(cluster_id=pool.cluster_id)
    assert row.queue["starts"] == {"1": [1500.25, "stopping"]}


def test_the_engines_reasons_in_queue_order_are_recorded_as_they_stand(pool):
    # The engine's reasons beside its order (Decisions.queue_reasons): None for job 2, placed. The dict is left
    # empty here to show it is not read: it would give every job "".
    decisions = Decisions(
        queue_order=[3, 1, 2, 4],
        placements=[Placement(2, (), ("n1",), 0.0, {}, "")],
        queue_reasons=["b", "a", None, "b"],
    )
    _record_queue(pool.cluster_id, decisions, {1: None, 2: None, 3: None, 4: None})
    row = ClusterScheduler.objects.get(cluster_id=pool.cluster_id)
    assert row.queue["texts"] == ["b", "a"]
    assert queue_lines.unpack(row.queue_lines) == ([3, 1, 4], [0, 1, 0])


def test_a_job_gone_from_the_snapshot_is_left_out_of_the_engines_reasons_too(pool):
    decisions = Decisions(queue_order=[3, 9, 1], queue_reasons=["b", "gone", "a"])
    _record_queue(pool.cluster_id, decisions, {1: None, 3: None})
    row = ClusterScheduler.objects.get(cluster_id=pool.cluster_id)
    assert row.queue["texts"] == ["b", "a"]
    assert queue_lines.unpack(row.queue_lines) == ([3, 1], [0, 1])
