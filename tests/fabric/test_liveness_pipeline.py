"""Liveness through the real poll -> ingest path (eager tasks), with the control plane stalled on purpose.

A fake clock moves time on by one poll interval (10 s) per poll; polls are poll_cluster itself. "Silent" nodes have
an agent whose collector fails (no answer ever comes); "expired" nodes have polls that a worker drops because they
expired before an agent took them, reported through the same signal a worker sends.
"""

from __future__ import annotations

import re
import time

import pytest
from celery import signals
from celery.app.task import Context
from django.core.cache import cache

from fabric import inbox, tasks
from fabric.actions import TELEMETRY_REASON, set_node_state
from fabric.choices import GpuHealth, NodeState
from fabric.ingest import forget_liveness, ingest_lock, ingest_progress
from fabric.latest import last_seen, seen_key
from fabric.models import GPU, Alert, Node
from fabric.telemetry.liveness import DOWN, STALLED, UNREACHABLE
from tests.fabric.static_collector import StaticCollector
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

SILENT: set[str] = set()
COLLECTOR = "flaky"


class FlakyCollector(StaticCollector):
    """The static collector, except that the agents of SILENT nodes never answer."""

    def collect(self, node: str):
        if node in SILENT:
            raise ConnectionError(f"{node}: agent gone")
        return super().collect(node)


@pytest.fixture
def clock(monkeypatch):
    """time.time, moved on by hand (everything that reads the wall clock sees the same time)."""
    real = time.time
    offset = [0.0]
    monkeypatch.setattr(time, "time", lambda: real() + offset[0])

    class Clock:
        def advance(self, seconds: float) -> None:
            offset[0] += seconds

    return Clock()


@pytest.fixture
def cluster(settings, clock):
    from clusterctl.beat import HEARTBEAT_KEY

    settings.TELEMETRY_INTERVAL_S = 10.0
    settings.TELEMETRY_UNREACHABLE_POLLS = 3
    settings.TELEMETRY_DOWN_POLLS = 10
    settings.TELEMETRY_HOLD_DOWN_S = 300.0
    settings.TELEMETRY_STALLED_FRACTION = 0.5
    settings.TELEMETRY_NODE_QUEUES = False
    settings.TELEMETRY_FABRIC_AGENTS = []
    settings.COLLECTORS = {**settings.COLLECTORS, COLLECTOR: f"{__name__}.FlakyCollector"}
    SILENT.clear()
    c = fat_tree("live", nodes=10, gpus_per_node=8, leaf_ports=16)
    forget_liveness(c.pk)
    yield c
    SILENT.clear()
    inbox.drain(c.pk)
    forget_liveness(c.pk)
    cache.delete_many([seen_key(c.pk), HEARTBEAT_KEY])


def poll(cluster, clock, times: int = 1) -> None:
    for _ in range(times):
        tasks.poll_cluster(cluster.pk, COLLECTOR)
        clock.advance(10.0)


def hosts(cluster) -> list[str]:
    return list(Node.objects.filter(cluster=cluster).order_by("hostname").values_list("hostname", flat=True))


def open_alerts(rule: str | None = None) -> list[Alert]:
    alerts = Alert.objects.filter(cleared_at__isnull=True)
    return list(alerts.filter(rule=rule) if rule else alerts)


def node_alerts() -> list[tuple[str, str]]:
    return sorted(Alert.objects.filter(rule__in=(UNREACHABLE, DOWN)).values_list("object_key", "rule"))


def capacity(cluster) -> tuple[int, int]:
    """(nodes up, healthy GPUs on them): what the scheduler may place on."""
    up = Node.objects.filter(cluster=cluster, state=NodeState.UP)
    return up.count(), GPU.objects.filter(node__in=up, health=GpuHealth.HEALTHY).count()


#
# A real failure still counts
#


def test_a_node_silent_while_the_others_answer_goes_unreachable_then_down(cluster, clock):
    gone = hosts(cluster)[0]
    SILENT.add(gone)
    # Poll 1 sends round 1; poll 2 judges it (1 miss), poll 3 (2), poll 4 (3 misses): unreachable.
    poll(cluster, clock, 3)
    assert open_alerts() == []
    poll(cluster, clock)
    (alert,) = open_alerts()
    assert (alert.rule, alert.object_key) == (UNREACHABLE, f"{gone}/node")
    assert "no answer to the last 3 polls the other nodes answered" in alert.message
    # Polls 5..10 count misses 4..9; poll 11 counts the 10th: down, its GPUs leave capacity.
    poll(cluster, clock, 6)
    assert Node.objects.get(hostname=gone).state == NodeState.UP
    poll(cluster, clock)
    node = Node.objects.get(hostname=gone)
    assert node.state == NodeState.DOWN and node.state_reason.startswith(TELEMETRY_REASON)
    assert {a.rule for a in open_alerts()} == {UNREACHABLE, DOWN}
    assert capacity(cluster) == (9, 72)
    assert open_alerts(STALLED) == []


def test_a_down_node_leaves_schedulable_capacity(cluster, clock):
    from scheduler.snapshot_from_db import build_snapshot

    gone = hosts(cluster)[0]
    SILENT.add(gone)
    poll(cluster, clock, 11)
    snapshot, _ = build_snapshot(cluster.pk)
    state = next(n for n in snapshot.nodes if n.hostname == gone)
    assert not state.up and not state.schedulable


def test_a_node_taken_down_comes_back_once_it_answers_and_the_hold_down_passed(cluster, clock):
    gone = hosts(cluster)[0]
    SILENT.add(gone)
    poll(cluster, clock, 11)
    assert Node.objects.get(hostname=gone).state == NodeState.DOWN
    SILENT.clear()
    # Poll 12 still finds the 10 misses (and refreshes the alert) and asks it; it answers. Poll 13 sees the answer,
    # but the alert last fired 10 s before: held 30 s (three intervals) against flapping, so it clears at poll 15.
    poll(cluster, clock, 3)
    assert Node.objects.get(hostname=gone).state == NodeState.DOWN
    poll(cluster, clock)
    node = Node.objects.get(hostname=gone)
    assert (node.state, node.state_reason) == (NodeState.UP, "")
    assert open_alerts() == []


def test_liveness_never_brings_up_a_node_an_operator_took_down(cluster, clock):
    node = Node.objects.get(hostname=hosts(cluster)[0])
    set_node_state([node], NodeState.DOWN, "RMA: bad DIMM")
    poll(cluster, clock, 12)
    node.refresh_from_db()
    assert (node.state, node.state_reason) == (NodeState.DOWN, "RMA: bad DIMM")
    assert node_alerts() == []  # never polled, so never judged


#
# A slow control plane blames nobody
#


def test_stalled_ingest_raises_one_pipeline_alert_and_no_node_alert(cluster, clock, monkeypatch):
    poll(cluster, clock, 2)  # all answered and ingested
    before = capacity(cluster)
    monkeypatch.setattr(tasks.ingest_batch, "apply_async", lambda *a, **k: None)  # results wait in the inbox
    # Ingest last caught up at the second poll (T+10). Checked before each poll's own fan-out: at T+20 nothing waits
    # yet, at T+30 it is 20 s behind, at T+40 just over 30 s (three intervals: the limit), at T+50 40 s behind.
    poll(cluster, clock, 2)
    assert open_alerts() == []
    poll(cluster, clock, 2)
    (alert,) = open_alerts()
    assert (alert.rule, alert.object_kind, alert.object_key, alert.removes_capacity) == (
        STALLED, "cluster", "cluster", False,
    )  # fmt: skip
    assert re.search(r"ingest: 4\d s behind \(30 results wait in the inbox\)", alert.message)  # 40 s and the test's own
    poll(cluster, clock, 10)
    assert [a.rule for a in open_alerts()] == [STALLED]  # one alert, refreshed
    assert node_alerts() == [] and capacity(cluster) == before
    assert inbox.waiting(cluster.pk) == 140


def test_when_stalled_ingest_catches_up_the_waiting_answers_count_and_nobody_is_down(cluster, clock, monkeypatch):
    poll(cluster, clock, 2)
    with monkeypatch.context() as stalled:
        stalled.setattr(tasks.ingest_batch, "apply_async", lambda *a, **k: None)
        poll(cluster, clock, 12)
    assert tasks.ingest_batch(cluster.pk) == 120  # every answer was there, only late
    poll(cluster, clock, 5)
    assert node_alerts() == []
    assert open_alerts() == []  # the pipeline alert cleared three intervals after ingest caught up


def test_polls_not_sent_for_a_long_time_blame_no_node_at_the_first_late_poll(cluster, clock):
    from clusterctl.beat import record_heartbeat

    record_heartbeat()
    poll(cluster, clock, 2)
    clock.advance(300.0)  # beat (or the broker) stalled: no poll_cluster ran for five minutes
    poll(cluster, clock)
    (alert,) = open_alerts()
    assert alert.rule == STALLED
    # 310 s since the last poll, 320 s since the heartbeat (give or take the real time the test itself takes)
    assert re.search(r"beat/polls: no poll was sent for 31\d s, beat's last tick was 32\d s ago", alert.message)
    poll(cluster, clock, 12)
    assert node_alerts() == []


def test_polls_that_expired_unsent_are_not_the_nodes_fault(cluster, clock, monkeypatch):
    late = set(hosts(cluster)[:2])
    send = tasks.poll_node.apply_async

    def apply_async(args, **options):
        if args[0] not in late:
            return send(args, **options)
        # What a worker does with a poll whose `expires` passed before an agent took it: drop it and signal.
        request = Context({"args": list(args), "callbacks": [options["link"]]})
        signals.task_revoked.send(sender=tasks.poll_node, request=request, terminated=False, signum=None, expired=True)
        return None

    monkeypatch.setattr(tasks.poll_node, "apply_async", apply_async)
    poll(cluster, clock, 12)
    assert node_alerts() == [] and open_alerts() == []


def test_most_nodes_silent_is_one_pipeline_alert_and_no_node_down(cluster, clock):
    SILENT.update(hosts(cluster)[:6])  # 60 %
    before = capacity(cluster)
    poll(cluster, clock, 15)
    (alert,) = open_alerts()
    assert alert.rule == STALLED
    assert "answers: 6 of 10 nodes (60%) missed the newest poll" in alert.message
    assert node_alerts() == [] and capacity(cluster) == before


def test_a_running_batch_is_not_taken_for_caught_up(cluster, clock):
    now = time.time()
    assert ingest_progress(cluster.pk, now).ingested_until == now  # nothing waits, nothing runs
    lock = ingest_lock(cluster.pk)
    assert lock.acquire()  # a batch drained the inbox and is still ingesting
    try:
        progress = ingest_progress(cluster.pk, now)
    finally:
        lock.release()
    assert progress.ingest_running and progress.ingested_until is None


def test_answers_carry_the_round_they_answer(cluster, clock):
    poll(cluster, clock)
    assert set(last_seen(cluster.pk)) == set(hosts(cluster))
    from fabric.ingest import _load_answers

    answers = _load_answers(cluster.pk)
    (at,) = answers["counts"]
    assert answers["counts"][at] == 10 and set(answers["newest"].values()) == {at}
