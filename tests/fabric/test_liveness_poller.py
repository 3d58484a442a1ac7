"""The poller's own pace (issue 16): a poller that falls behind its schedule is one `telemetry_behind` alert for the
cluster and blames no node; a node that stops answering while the poller keeps its cadence is still found.

Through the real poll -> ingest path (eager tasks) with a collector that reads every node from one place, as the
twin does: with node queues off a round is a few central reads (fabric.tasks.poll_nodes) of CENTRAL_CHUNK nodes, here
4, so 10 nodes are read as 4 + 4 + 2. A fake clock moves time on by hand; polls every 10 s, unreachable after 3 missed
polls, down after 10, behind when rounds come on average more than 15 s apart (the last three), a stall after 30 s.
"""

from __future__ import annotations

import time

import pytest
from celery import signals
from celery.app.task import Context
from django.core.cache import cache

from fabric import inbox, tasks
from fabric.collectors.registry import reads_centrally
from fabric.ingest import forget_liveness
from fabric.latest import seen_key
from fabric.models import Alert, Node
from fabric.telemetry.liveness import BEHIND, DOWN, STALLED, UNREACHABLE
from tests.fabric import static_collector
from tests.fabric.static_collector import StaticCollector
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

SILENT: set[str] = set()
COLLECTOR = "central-flaky"


class CentralCollector(StaticCollector):
    """Reads any node from wherever it runs (as the twin), except SILENT ones, which never answer."""

    central = True

    def collect(self, node: str):
        if node in SILENT:
            raise ConnectionError(f"{node}: no answer")
        return super().collect(node)


@pytest.fixture
def clock(monkeypatch):
    """time.time, stopped and moved on by hand only: the cadences below are exact. It starts after every sample the
    static collector stamped before (its stamps never go back: an earlier test's clock may have run ahead)."""
    start = max(time.time(), static_collector._last[0]) + 1.0
    offset = [0.0]
    monkeypatch.setattr(time, "time", lambda: start + offset[0])

    class Clock:
        def advance(self, seconds: float) -> None:
            offset[0] += seconds

    return Clock()


@pytest.fixture
def cluster(settings, clock, monkeypatch):
    settings.TELEMETRY_INTERVAL_S = 10.0
    settings.TELEMETRY_UNREACHABLE_POLLS = 3
    settings.TELEMETRY_DOWN_POLLS = 10
    settings.TELEMETRY_HOLD_DOWN_S = 300.0
    settings.TELEMETRY_STALLED_FRACTION = 0.5
    settings.TELEMETRY_NODE_QUEUES = False
    settings.TELEMETRY_FABRIC_AGENTS = []
    settings.COLLECTORS = {**settings.COLLECTORS, COLLECTOR: f"{__name__}.CentralCollector"}
    monkeypatch.setattr(tasks, "CENTRAL_CHUNK", 4)
    SILENT.clear()
    c = fat_tree("poller", nodes=10, gpus_per_node=8, leaf_ports=16)
    forget_liveness(c.pk)
    yield c
    SILENT.clear()
    inbox.drain(c.pk)
    forget_liveness(c.pk)
    cache.delete_many([seen_key(c.pk), tasks._poller_key(c.pk)])


def poll(cluster, clock, times: int = 1, every: float = 10.0) -> list[int]:
    """poll_cluster, as beat calls it every `every` seconds; the nodes each call polled."""
    sent = []
    for _ in range(times):
        sent.append(tasks.poll_cluster(cluster.pk, COLLECTOR))
        clock.advance(every)
    return sent


def hosts(cluster) -> list[str]:
    return list(Node.objects.filter(cluster=cluster).order_by("hostname").values_list("hostname", flat=True))


def open_rules() -> list[str]:
    return sorted(Alert.objects.filter(cleared_at__isnull=True).values_list("rule", flat=True))


def node_alerts() -> list[tuple[str, str]]:
    return sorted(Alert.objects.filter(rule__in=(UNREACHABLE, DOWN)).values_list("object_key", "rule"))


class SlowWorker:
    """From `start()`, the read of each round that holds node `last` waits in the queue (never runs) until
    `release()`: the tail of a round that a worker has not got round to yet."""

    def __init__(self, monkeypatch, last: str) -> None:
        self.monkeypatch = monkeypatch
        self.last = last
        self.send = tasks.poll_nodes.apply_async
        self.waiting: list[tuple] = []

    def start(self) -> None:
        def apply_async(args, **options):
            if self.last in args[1]:
                self.waiting.append(args)
                return None
            return self.send(args, **options)

        self.monkeypatch.setattr(tasks.poll_nodes, "apply_async", apply_async)

    def release(self) -> None:
        self.monkeypatch.setattr(tasks.poll_nodes, "apply_async", self.send)
        while self.waiting:
            tasks.poll_nodes(*self.waiting.pop(0))


def test_only_collectors_that_read_every_node_from_one_place_are_read_centrally(settings):
    settings.COLLECTORS = {**settings.COLLECTORS, COLLECTOR: f"{__name__}.CentralCollector"}
    assert reads_centrally("twin") and reads_centrally(COLLECTOR)
    assert not reads_centrally("static")  # a node agent's collector: each node reads its own
    assert not reads_centrally(f"twin,{COLLECTOR},static") and reads_centrally(f"twin,{COLLECTOR}")
    assert not reads_centrally("auto") and not reads_centrally("no-such-collector")


def test_a_round_of_a_central_collector_is_a_few_reads_of_many_nodes(cluster, clock, monkeypatch):
    reads = []
    send = tasks.poll_nodes.apply_async
    monkeypatch.setattr(tasks.poll_nodes, "apply_async", lambda args, **o: reads.append(args[1]) or send(args, **o))
    assert poll(cluster, clock) == [10]
    assert [len(chunk) for chunk in reads] == [4, 4, 2]
    assert sorted(h for chunk in reads for h in chunk) == hosts(cluster)
    assert poll(cluster, clock, 3) == [10, 10, 10] and open_rules() == []


def test_a_poller_that_falls_behind_opens_no_node_alert_and_says_it_is_behind(cluster, clock, monkeypatch):
    worker = SlowWorker(monkeypatch, last=hosts(cluster)[-1])
    assert poll(cluster, clock, 2) == [10, 10]  # T+0, T+10: every node answers
    # T+20: round 3 is sent; its read that holds the last node (up to 4 nodes: under the stalled fraction) waits for a
    # worker that is behind. Judging now would take those nodes for silent, and the last node again at every later
    # round: unreachable by T+50 (as it is when poll_cluster does not wait for the reads).
    worker.start()
    assert poll(cluster, clock) == [10]
    # T+30, T+40, T+50: beat ticks, the round is still being read: nothing is sent and nobody is judged. The cadence
    # is (T+30 - T+0) / 3 = 10 s, then 13.3 s, then (T+50 - T+0) / 3 = 16.7 s: more than 15, behind.
    assert poll(cluster, clock, 2) == [0, 0]
    assert open_rules() == []
    assert poll(cluster, clock) == [0]
    (alert,) = Alert.objects.filter(cleared_at__isnull=True)
    assert (alert.rule, alert.object_kind, alert.object_key, alert.removes_capacity) == (
        BEHIND, "cluster", "cluster", False,
    )  # fmt: skip
    # The newest samples are 30 s old at T+50: none was polled in the last 10 s.
    assert alert.message.startswith(
        "telemetry polling is behind: 0 of 10 nodes polled in the last 10 s; poll cadence 16.7 s instead of 10 s; "
        "3 polls waited for the previous round to be read."
    )
    worker.release()  # the worker catches up: the waiting read runs, its answers (to round 3) are ingested
    # From T+60 every round is read at once. No poll was sent for 40 s by then (telemetry_stalled says so, and the
    # cadence stays over 15 s until T+90); nobody is blamed for it.
    assert poll(cluster, clock, 12) == [10] * 12
    assert node_alerts() == []
    assert open_rules() == []  # both cleared 30 s after they last fired


def test_a_poller_whose_rounds_come_late_judges_nobody_meanwhile_then_finds_a_silent_node(cluster, clock):
    SILENT.add(hosts(cluster)[0])
    # Beat's polls come every 20 s (a busy worker or broker): from T+20 the cadence is 20 s, behind. The silent node
    # misses every round the 9 others answer, but no node is judged while the poller is behind.
    poll(cluster, clock, 5, every=20.0)  # rounds at T+0, 20, 40, 60, 80
    assert open_rules() == [BEHIND]
    assert "poll cadence 20.0 s instead of 10 s" in Alert.objects.get(rule=BEHIND).message
    # Back on cadence: at T+100 the cadence is (T+100 - T+40) / 3 = 20 s, at T+110 (T+110 - T+60) / 3 = 16.7 s: still
    # behind; at T+120 (T+120 - T+80) / 3 = 13.3 s: judged again. Rounds T+0 ... T+110 were answered by the others
    # and ingested: 7 misses, unreachable (not yet down: that takes 10).
    poll(cluster, clock, 2)
    assert node_alerts() == []
    poll(cluster, clock)
    assert node_alerts() == [(f"{hosts(cluster)[0]}/node", UNREACHABLE)]
    assert "no answer to the last 7 polls the other nodes answered" in Alert.objects.get(rule=UNREACHABLE).message


def test_a_node_that_stops_answering_while_the_poller_keeps_its_cadence_is_unreachable_then_down(cluster, clock):
    gone = hosts(cluster)[0]
    SILENT.add(gone)
    # Poll 1 sends round 1; polls 2, 3, 4 judge rounds 1, 2, 3: three misses, unreachable.
    poll(cluster, clock, 3)
    assert open_rules() == []
    poll(cluster, clock)
    assert open_rules() == [UNREACHABLE]
    poll(cluster, clock, 7)  # the 10th miss is judged at poll 11
    assert node_alerts() == [(f"{gone}/node", DOWN), (f"{gone}/node", UNREACHABLE)]
    assert Node.objects.get(hostname=gone).state == "down"
    assert BEHIND not in open_rules() and STALLED not in open_rules()


def test_a_central_read_that_expired_unsent_is_nobodys_miss_and_ends_its_round(cluster, clock, monkeypatch):
    send = tasks.poll_nodes.apply_async

    def apply_async(args, **options):
        if len(args[1]) == 2:  # the short read of each round: a worker drops it, expired, and signals
            request = Context({"args": list(args)})
            signals.task_revoked.send(
                sender=tasks.poll_nodes, request=request, terminated=False, signum=None, expired=True
            )
            return None
        return send(args, **options)

    monkeypatch.setattr(tasks.poll_nodes, "apply_async", apply_async)
    assert poll(cluster, clock, 12) == [10] * 12  # never "still being read": the expired read counts as done
    assert node_alerts() == [] and open_rules() == []
