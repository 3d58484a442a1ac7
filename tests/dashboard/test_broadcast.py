"""The broadcaster: marks collapse into one task per window, one message per group per second at most, a group per
fabric topic with its own seq, deltas with only what changed, tenant groups with only their jobs, failures of the
layer logged and not raised."""

from __future__ import annotations

import itertools
from unittest import mock

import pytest
from django.core.cache import cache

from dashboard import broadcast, parts, tasks
from fabric.collectors.samples import GpuSample, NodeSample
from fabric.ingest import ingest_samples
from fabric.latest import forget_node
from fabric.models import GPU, Node
from scheduler.rounds import run_round

pytestmark = pytest.mark.django_db


class FakeLayer:
    """Records every group_send with the (fake) time it was made."""

    def __init__(self, clock, fail: bool = False) -> None:
        self.sent: list[tuple[float, str, dict]] = []
        self.clock = clock
        self.fail = fail

    async def group_send(self, group: str, message: dict) -> None:
        if self.fail:
            raise ConnectionError("Redis is restarting")
        self.sent.append((self.clock(), group, message))

    def frames(self, group: str) -> list[dict]:
        joiner = parts.Joiner()  # (a frame over broadcast.PART_BYTES comes in parts)
        whole = [joiner.feed(t) for _, g, m in self.sent if g == group for t in m["frames"]]
        return [broadcast.decode(w) for w in whole if w is not None]


@pytest.fixture
def rig(site, monkeypatch):
    """A fake clock, a recording layer, and apply_async recorded instead of run (the test runs the task)."""
    now = [1000.0]
    layer = FakeLayer(lambda: now[0])
    enqueued: list[float] = []
    monkeypatch.setattr(broadcast, "clock", lambda: now[0])
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(tasks.broadcast, "apply_async", lambda args, countdown: enqueued.append(countdown))

    class Rig:
        cluster_id = site.cluster.pk
        clock = now
        sent = layer.sent
        frames = layer.frames

        @staticmethod
        def mark(*topics: str) -> None:
            broadcast._mark(site.cluster.pk, topics)

        @staticmethod
        def flush(at: float | None = None, eager: bool = False) -> dict:
            if at is not None:
                now[0] = at
            return broadcast.flush(site.cluster.pk, eager=eager)

    Rig.enqueued = enqueued
    Rig.layer = layer
    return Rig


def test_marks_in_a_window_enqueue_one_task(rig):
    rig.mark("gpus")
    rig.mark("fabric", "overview")
    rig.mark("gpus")
    assert rig.enqueued == [0.0]  # idle before: at once
    result = rig.flush()
    assert result["topics"] == ("overview", "fabric", "gpus")
    # ONE message per group, each topic's group its own: a page that shows the overview only gets no other frame
    c = rig.cluster_id
    assert [g for _, g, _ in rig.sent] == [f"fabric.{c}.overview", f"fabric.{c}.fabric", f"fabric.{c}.gpus"]
    assert [f["topic"] for f in rig.frames(f"fabric.{c}.gpus")] == ["gpus"]


def test_one_message_per_group_a_second_on_average_and_never_two_within_half_a_second(rig):
    rig.mark("gpus", "queue")
    rig.flush(1000.0)
    rig.clock[0] = 1000.3
    rig.mark("gpus", "queue")
    rig.mark("alerts")
    assert rig.enqueued == [0.0, pytest.approx(0.2)]  # half a second after the last send at the earliest
    assert rig.flush(1000.4)["deferred_s"] == pytest.approx(0.1)  # a task that runs early waits for its window
    assert rig.enqueued[-1] == pytest.approx(0.1)
    sends = [1000.0]
    assert "topics" in rig.flush(1000.5)
    sends.append(1000.5)
    # Then marks keep coming faster than once a second: each run goes when its window opens.
    for _ in range(8):
        rig.clock[0] = sends[-1] + 0.1
        rig.mark("gpus")
        at = rig.clock[0] + rig.enqueued[-1]
        assert "topics" in rig.flush(at)
        sends.append(at)
    assert sends[2:] == pytest.approx([1001.5 + k for k in range(8)])  # one a second, after the half second of slack
    assert all(b - a >= broadcast.INTERVAL_S - broadcast.SLACK_S - 1e-9 for a, b in itertools.pairwise(sends))


def test_eager_collapses_to_immediate(rig):
    rig.mark("gpus")
    rig.flush(1000.0, eager=True)
    rig.clock[0] = 1000.1
    rig.mark("alerts")
    assert rig.flush(eager=True)["topics"] == ("alerts",)


def test_first_broadcast_is_a_snapshot_then_deltas_carry_only_what_changed(rig, site):
    group = broadcast.fabric_group(rig.cluster_id, "gpus")
    rig.mark("gpus", "fabric")
    rig.flush(1000.0)
    first = rig.frames(group)
    assert [(f["type"], f["topic"]) for f in first] == [("snapshot", "gpus")]
    assert [(f["type"], f["topic"]) for f in rig.frames(broadcast.fabric_group(rig.cluster_id, "fabric"))] == [
        ("snapshot", "fabric")
    ]
    node = Node.objects.filter(cluster=site.cluster).order_by("hostname").first()
    sample = NodeSample(node=node.hostname, collected_at=2000.0, collector="test",
                        gpus=[GpuSample(index=3, utilisation_gpu_pct=91.0, temperature_c=62)])  # fmt: skip
    ingest_samples(rig.cluster_id, [sample])
    try:
        rig.mark("gpus", "fabric")
        rig.flush(1002.0)
        (delta,) = rig.frames(group)[1:]
        assert len(rig.frames(broadcast.fabric_group(rig.cluster_id, "fabric"))) == 1  # no change: no frame
        gpu = GPU.objects.get(node=node, index=3)
        assert delta["type"] == "delta" and delta["topic"] == "gpus" and delta["seq"] == first[-1]["seq"] + 1
        assert delta["data"] == {"gpus": {str(gpu.pk): {"util": 91.0, "temp": 62}}}
        rig.mark("gpus")
        rig.flush(1004.0)
        assert len(rig.frames(group)) == 2  # nothing changed: nothing sent
    finally:
        forget_node(rig.cluster_id, node.hostname)


def test_a_change_of_shape_sends_a_snapshot(rig, site):
    rig.mark("gpus")
    rig.flush(1000.0)
    node = Node.objects.filter(cluster=site.cluster).first()
    GPU.objects.filter(node=node, index=7).delete()
    rig.mark("gpus")
    rig.flush(1002.0)
    last = rig.frames(broadcast.fabric_group(rig.cluster_id, "gpus"))[-1]
    assert last["type"] == "snapshot" and len(last["data"]["gpus"]) == 31


def test_tenant_groups_get_only_their_jobs(rig, site):
    rig.mark("queue")
    rig.flush(1000.0)
    job_a, job_b = site.submit(site.tenant_a, 8, name="a-job"), site.submit(site.tenant_b, 8, name="b-job")
    run_round(rig.cluster_id, "test")
    rig.mark("queue")
    rig.flush(1002.0)
    everyone = rig.frames(broadcast.queue_group(rig.cluster_id))
    only_a = rig.frames(broadcast.queue_group(rig.cluster_id, site.tenant_a.pk))
    only_b = rig.frames(broadcast.queue_group(rig.cluster_id, site.tenant_b.pk))

    def job_ids(frames):
        ids = set()
        for f in frames:
            data = f["data"]
            parts = data.get("upsert", data)
            ids |= {j["id"] for part in ("pending", "running") for j in parts.get(part, [])}
        return ids

    assert job_ids(everyone) == {job_a.pk, job_b.pk}
    assert job_ids(only_a) == {job_a.pk} and job_ids(only_b) == {job_b.pk}
    assert all(j["tenant"] == "tenant-a" for f in only_a for j in f["data"]["upsert"].get("running", []))
    # A change of tenant B's job only: tenant A's group gets nothing.
    from scheduler import actions

    actions.cancel_job(job_b, actor="bob")
    rig.mark("queue")
    rig.flush(1004.0)
    assert len(rig.frames(broadcast.queue_group(rig.cluster_id, site.tenant_a.pk))) == len(only_a)
    last_b = rig.frames(broadcast.queue_group(rig.cluster_id, site.tenant_b.pk))[-1]
    assert last_b["type"] == "delta" and last_b["data"]["remove"] == [job_b.pk]


def test_alert_delta_upserts_and_removes():
    a1 = {"id": 1, "last_seen": "t1"}
    a2 = {"id": 2, "last_seen": "t1"}
    kind, data = broadcast.diff("alerts", {"alerts": [a1, a2]}, {"alerts": [{"id": 3}, {**a1, "last_seen": "t2"}]})
    assert kind == "delta" and data == {"upsert": [{"id": 3}, {"id": 1, "last_seen": "t2"}], "remove": [2]}
    assert broadcast.diff("alerts", {"alerts": [a1]}, {"alerts": [a1]}) == (None, None)


def test_queue_delta_ignores_the_waiting_clock():
    job = {"id": 1, "tenant": "t", "position": 1, "wait_s": 5}
    before = {"pending": [job], "running": [], "recent": []}
    assert broadcast.diff("queue", before, {**before, "pending": [{**job, "wait_s": 9}]}) == (None, None)
    moved = {"pending": [], "running": [{"id": 1, "tenant": "t", "nodes": ["n1"]}], "recent": []}
    kind, data = broadcast.diff("queue", before, moved)
    assert kind == "delta" and data == {
        "upsert": {"running": moved["running"]},
        "order": [],
    }  # left pending for running


def test_layer_failure_is_logged_not_raised(rig):
    rig.layer.fail = True
    rig.mark("alerts")
    with mock.patch.object(broadcast, "log") as log:
        result = rig.flush(1000.0)
    assert result["sent"] == {f"fabric.{rig.cluster_id}.alerts": 0}
    assert log.warning.called and "Redis is restarting" in str(log.warning.call_args)


def test_mark_never_raises_when_the_cache_is_down(site, monkeypatch):
    monkeypatch.setattr(broadcast.cache, "set_many", mock.Mock(side_effect=ConnectionError("down")))
    with mock.patch.object(broadcast, "log") as log:
        broadcast._mark(site.cluster.pk, ("gpus",))
    assert log.exception.called


def test_mark_dirty_waits_for_commit(site, django_capture_on_commit_callbacks, monkeypatch):
    monkeypatch.setattr(tasks.broadcast, "apply_async", mock.Mock())
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        broadcast.mark_dirty(site.cluster.pk, ["alerts"])
    assert cache.get(broadcast.dirty_key(site.cluster.pk, "alerts")) is None
    for callback in callbacks:
        callback()
    assert cache.get(broadcast.dirty_key(site.cluster.pk, "alerts")) == 1
    tasks.broadcast.apply_async.assert_called_once()
    with pytest.raises(ValueError, match="unknown topics"):
        broadcast.mark_dirty(site.cluster.pk, ["weather"])


def test_events_mark_the_topics_they_change(site, monkeypatch):
    marked = []
    monkeypatch.setattr(broadcast, "_mark", lambda cid, topics: marked.append(set(topics)))
    broadcast.on_fabric_event(site.cluster.pk, {"kind": "health_changed"})
    broadcast.on_fabric_event(site.cluster.pk, {"kind": "nodes_changed"})
    broadcast.on_job_event(site.cluster.pk, {"kind": "job"})
    assert marked == [{"overview", "fabric", "gpus", "alerts"}, {"overview", "fabric", "gpus"},
                      {"queue", "overview", "gpus"}]  # fmt: skip


def test_trend_keeps_a_bounded_ring(rig):
    for i in range(broadcast.TREND_POINTS + 10):
        rig.mark("overview")
        rig.flush(1000.0 + i * broadcast.TREND_STEP_S)
    rig.mark("overview")
    rig.flush(1000.0 + (broadcast.TREND_POINTS + 9.5) * broadcast.TREND_STEP_S)  # inside the step: updates the last
    trend = cache.get(broadcast.state_key(rig.cluster_id, "overview"))["trend"]
    assert len(trend) == broadcast.TREND_POINTS
    assert set(trend[-1]) == {"at", "utilisation", "allocated", "pending"}


def test_snapshot_frames_start_from_the_baseline(rig, site):
    group = {"queue": broadcast.queue_group(rig.cluster_id, site.tenant_a.pk)}
    site.submit(site.tenant_a, 8, name="mine")
    site.submit(site.tenant_b, 8, name="theirs")
    (frame,) = broadcast.snapshot_frames(rig.cluster_id, ["queue"], group, tenant="tenant-a")
    assert frame["type"] == "snapshot" and frame["seq"] == 0
    assert [j["name"] for j in frame["data"]["pending"]] == ["mine"]
    stored = cache.get(broadcast.state_key(rig.cluster_id, "queue"))
    assert {j["name"] for j in stored["pending"]} == {"mine", "theirs"}  # the full state is the baseline
    rig.mark("queue")
    rig.flush(1000.0)  # nothing changed since the baseline: no frame, no seq used
    assert broadcast.snapshot_frames(rig.cluster_id, ["queue"], group, tenant="tenant-a")[0]["seq"] == 0
    assert broadcast.snapshot_frames(10**9, ["queue"], group) is None


def test_each_topics_group_counts_its_own_seq(rig):
    c = rig.cluster_id
    cache.delete_many([broadcast.seq_key(f"fabric.{c}.{t}") for t in ("overview", "gpus")])
    rig.mark("overview", "gpus")
    rig.flush(1000.0)
    rig.mark("gpus")
    rig.flush(1002.0)  # changed nothing: nothing sent, no seq used
    cache.set(broadcast.seq_key(f"fabric.{c}.gpus"), 41)
    broadcast.forget(c)  # baselines gone: both topics go as snapshots again
    rig.mark("overview", "gpus")
    rig.flush(1004.0)
    assert [f["seq"] for f in rig.frames(f"fabric.{c}.overview")] == [1, 2]
    assert [f["seq"] for f in rig.frames(f"fabric.{c}.gpus")] == [1, 42]


def test_snapshot_frames_carry_the_seq_of_each_topics_group(rig):
    c = rig.cluster_id
    cache.set(broadcast.seq_key(f"fabric.{c}.overview"), 7)
    cache.set(broadcast.seq_key(f"fabric.{c}.gpus"), 3)
    groups = {t: broadcast.fabric_group(c, t) for t in ("overview", "gpus")}
    frames = broadcast.snapshot_frames(c, ["gpus", "overview"], groups)
    assert [(f["topic"], f["seq"]) for f in frames] == [("overview", 7), ("gpus", 3)]


def test_sockets_opening_between_two_broadcasts_share_one_encoding_of_a_big_topic(rig, monkeypatch):
    c = rig.cluster_id
    cache.set(broadcast.seq_key(f"fabric.{c}.gpus"), 5)
    groups = {"gpus": broadcast.fabric_group(c, "gpus")}
    encoded: list[str] = []
    real = broadcast.wire
    monkeypatch.setattr(broadcast, "wire", lambda frame: encoded.append(frame["topic"]) or real(frame))

    first = broadcast.snapshot_messages(c, ["gpus"], groups)
    again = broadcast.snapshot_messages(c, ["gpus"], groups)

    assert encoded == ["gpus"] and again == first
    assert broadcast.decode(first[0])["seq"] == 5


def test_a_new_seq_or_a_forgotten_baseline_encodes_the_topic_again(rig, monkeypatch):
    c = rig.cluster_id
    groups = {"gpus": broadcast.fabric_group(c, "gpus")}
    encoded: list[int] = []
    real = broadcast.wire
    monkeypatch.setattr(broadcast, "wire", lambda frame: encoded.append(frame["seq"]) or real(frame))
    cache.set(broadcast.seq_key(f"fabric.{c}.gpus"), 5)
    broadcast.snapshot_messages(c, ["gpus"], groups)
    cache.set(broadcast.seq_key(f"fabric.{c}.gpus"), 6)  # a broadcast went out meanwhile
    broadcast.snapshot_messages(c, ["gpus"], groups)
    broadcast.forget(c)
    broadcast.snapshot_messages(c, ["gpus"], groups)
    assert encoded == [5, 6, 6]


def test_snapshot_messages_of_a_cluster_that_is_gone_are_none(rig):
    groups = {"gpus": broadcast.fabric_group(10**9, "gpus")}
    assert broadcast.snapshot_messages(10**9, ["gpus"], groups) is None


def test_a_text_topic_is_read_for_each_socket(rig, site, monkeypatch):
    group = {"queue": broadcast.queue_group(rig.cluster_id, site.tenant_a.pk)}
    (before,) = broadcast.snapshot_messages(rig.cluster_id, ["queue"], group, tenant="tenant-a")
    site.submit(site.tenant_a, 8, name="mine")
    cache.delete(broadcast.state_key(rig.cluster_id, "queue"))  # (the broadcaster would have updated it)
    (after,) = broadcast.snapshot_messages(rig.cluster_id, ["queue"], group, tenant="tenant-a")
    assert [j["name"] for j in broadcast.decode(after)["data"]["pending"]] == ["mine"] != before


def test_a_worker_that_runs_tasks_late_does_not_delay_each_poll_more_than_the_last(rig):
    # Polls mark at 1000, 1001, 1002, ...; the worker runs each task 0.2 s after it was due.
    results = []
    for k in range(5):
        rig.clock[0] = 1000.0 + k
        rig.mark("gpus")
        due = rig.clock[0] + rig.enqueued[-1]
        results.append(rig.flush(due + 0.2))
    # Every poll waited 0 s for its window: the window follows when the runs were due, not when they ran.
    assert rig.enqueued == [0.0] * 5
    assert [r.get("topics") for r in results] == [("gpus",)] * 5  # each run broadcast, none deferred


def test_a_late_run_still_keeps_half_a_window_from_the_next_send(rig):
    rig.mark("gpus")
    rig.flush(1000.8)  # due at 1000.0, ran 0.8 s late
    rig.clock[0] = 1000.9
    rig.mark("gpus")
    assert rig.enqueued[-1] == pytest.approx(0.4)  # 1000.8 + 0.5, not 1000.0 + 1.0 (already past)


def test_one_slow_poll_does_not_make_the_faster_ones_after_it_wait(rig):
    # 1 Hz polls whose ingest takes 0.2 s, once 0.4 s: the marks come at 1000.2, 1001.4, 1002.2, 1003.2.
    waits = []
    for mark_at in (1000.2, 1001.4, 1002.2, 1003.2):
        rig.clock[0] = mark_at
        rig.mark("gpus")
        waits.append(rig.enqueued[-1])
        rig.flush(mark_at + waits[-1])
    assert waits == [0.0, 0.0, 0.0, 0.0]  # with a strict second, 1002.2 and 1003.2 waited 0.2 s each


def gpu_poll(cluster_id: int, host: str, at: float, util: float, xid: list[int] | None = None) -> None:
    sample = NodeSample(node=host, collected_at=at, collector="test",
                        gpus=[GpuSample(index=2, utilisation_gpu_pct=util, xid_events=xid or [])])  # fmt: skip
    ingest_samples(cluster_id, [sample])


@pytest.fixture
def polled_host(site):
    node = Node.objects.filter(cluster=site.cluster).order_by("hostname").first()
    yield node
    forget_node(site.cluster.pk, node.hostname)


def test_a_poll_that_changed_only_the_load_is_sent_without_building_again(rig, polled_host):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    rig.mark("gpus")
    assert rig.flush(1000.0)["rebuilt"] == ("gpus",)
    gpu_poll(rig.cluster_id, polled_host.hostname, 2000.0, 55.0)
    broadcast._mark(rig.cluster_id, ("gpus",), load_only=True)
    with CaptureQueriesContext(connection) as queries:
        result = rig.flush(1002.0)
    assert result["rebuilt"] == () and len(queries) == 0
    delta = rig.frames(broadcast.fabric_group(rig.cluster_id, "gpus"))[-1]
    gpu = GPU.objects.get(node=polled_host, index=2)
    assert delta["type"] == "delta" and delta["data"] == {"gpus": {str(gpu.pk): {"util": 55.0}}}


def test_any_other_change_builds_the_topic_again(rig, polled_host):
    rig.mark("gpus")
    rig.flush(1000.0)
    gpu = GPU.objects.get(node=polled_host, index=2)
    GPU.objects.filter(pk=gpu.pk).update(health="failed")
    rig.mark("gpus")  # what the health action's event marks
    assert rig.flush(1002.0)["rebuilt"] == ("gpus",)
    delta = rig.frames(broadcast.fabric_group(rig.cluster_id, "gpus"))[-1]
    assert delta["data"] == {"gpus": {str(gpu.pk): {"health": "failed"}}}


def test_a_change_that_sent_no_event_is_sent_by_the_check_after_an_old_build(rig, polled_host, monkeypatch):
    rig.mark("gpus")
    rig.flush(1000.0)
    gpu = GPU.objects.get(node=polled_host, index=2)
    GPU.objects.filter(pk=gpu.pk).update(health="failed")  # bypasses the actions: no event, no new generation
    gpu_poll(rig.cluster_id, polled_host.hostname, 2000.0, 55.0)
    monkeypatch.setattr(broadcast, "FULL_BUILD_EVERY_S", 0.0)  # the kept build is old
    broadcast._mark(rig.cluster_id, ("gpus",), load_only=True)
    result = rig.flush(1002.0)
    assert result["rebuilt"] == () and result["checked"] == ("gpus",)
    load, health = rig.frames(broadcast.fabric_group(rig.cluster_id, "gpus"))[-2:]
    assert load["data"] == {"gpus": {str(gpu.pk): {"util": 55.0}}}  # first, without waiting for the check
    assert health["data"] == {"gpus": {str(gpu.pk): {"health": "failed"}}} and health["seq"] == load["seq"] + 1


def test_an_alerts_change_makes_the_fabric_and_the_overview_build_again(rig):
    rig.mark("overview", "fabric", "gpus")
    rig.flush(1000.0)
    broadcast._mark(rig.cluster_id, ("alerts",))
    broadcast._mark(rig.cluster_id, ("overview", "fabric", "gpus"), load_only=True)
    assert rig.flush(1002.0)["rebuilt"] == ("overview", "fabric", "alerts")


def test_an_ingest_says_load_only_unless_it_raised_or_cleared_an_alert(site, polled_host, monkeypatch,
                                                                      django_capture_on_commit_callbacks):  # fmt: skip
    marked = []
    monkeypatch.setattr(broadcast, "_mark", lambda cid, topics, load_only=False: marked.append((topics, load_only)))
    with django_capture_on_commit_callbacks(execute=True):
        gpu_poll(site.cluster.pk, polled_host.hostname, 2000.0, 40.0)
    assert marked == [(("overview", "fabric", "gpus"), True)]
    marked.clear()
    with django_capture_on_commit_callbacks(execute=True):
        gpu_poll(site.cluster.pk, polled_host.hostname, 2010.0, 40.0, xid=[79])
    assert (("overview", "fabric", "gpus", "alerts"), False) in marked


def test_a_load_only_mark_leaves_the_generation_and_others_move_it_and_their_dependents(site):
    cid = site.cluster.pk
    gens = lambda: {t: cache.get(broadcast.generation_key(cid, t)) for t in ("overview", "fabric", "alerts")}  # noqa: E731
    before = gens()
    broadcast._mark(cid, ("overview", "fabric"), load_only=True)
    assert gens() == before
    broadcast._mark(cid, ("alerts",))
    after = gens()
    assert all(after[t] != before[t] for t in ("overview", "fabric", "alerts"))
