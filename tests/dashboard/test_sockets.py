"""The live sockets through the real ASGI stack on the in-memory channel layer: who may connect, snapshots on
connect and on resync, deltas after commit, and a tenant that never sees another tenant's jobs."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from dashboard import broadcast
from dashboard.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from dashboard.topics import FABRIC_TOPICS
from fabric.models import Alert
from scheduler.rounds import run_round
from tests.dashboard.conftest import close_code, communicator, receive_frames, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio, pytest.mark.usefixtures("memory_layer")]


def fabric_path(cluster_id: int) -> str:
    return f"/ws/clusters/{cluster_id}/fabric/"


def queue_path(cluster_id: int) -> str:
    return f"/ws/clusters/{cluster_id}/queue/"


async def cookie_of(client, user) -> bytes:
    return await sync_to_async(session_cookie)(client, user)


async def test_anonymous_is_refused_with_4401(site):
    for path in (fabric_path(site.cluster.pk), queue_path(site.cluster.pk)):
        ws = communicator(path)
        assert await close_code(ws) == CLOSE_UNAUTHENTICATED
        await ws.disconnect()


async def test_foreign_origin_is_refused_before_the_consumer(site, client, operator):
    ws = communicator(fabric_path(site.cluster.pk), await cookie_of(client, operator), origin=b"https://evil.example")
    connected, _ = await ws.connect()
    assert not connected
    await ws.disconnect()


async def test_users_without_access_get_4403(site, client, tenant_user, user_a):
    outsider = await cookie_of(client, tenant_user)  # signed in, neither operator nor tenant member
    assert await close_code(communicator(fabric_path(site.cluster.pk), outsider)) == CLOSE_FORBIDDEN
    assert await close_code(communicator(queue_path(site.cluster.pk), outsider)) == CLOSE_FORBIDDEN
    member = await cookie_of(client, user_a)  # a tenant sees its queue, never the fabric
    assert await close_code(communicator(fabric_path(site.cluster.pk), member)) == CLOSE_FORBIDDEN


async def test_unknown_cluster_gets_4404(site, client, operator):
    cookie = await cookie_of(client, operator)
    assert await close_code(communicator(fabric_path(10**9), cookie)) == CLOSE_NOT_FOUND
    assert await close_code(communicator(queue_path(10**9), cookie)) == CLOSE_NOT_FOUND


async def test_an_unknown_path_is_closed_with_4404_without_an_error(site, client, operator, caplog):
    # Channels' router raised ValueError("No route found") here: a traceback in the log and a 500 to the upgrade.
    cookie = await cookie_of(client, operator)
    for path in ("/ws/nope/", "/ws/clusters/1/fabric/extra/", "/", "/ws/clusters/x/queue/"):
        assert await close_code(communicator(path, cookie)) == CLOSE_NOT_FOUND, path
    assert await close_code(communicator("/ws/nope/")) == CLOSE_NOT_FOUND  # anonymous: the same answer
    assert [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")] == []


async def test_an_unknown_path_from_a_foreign_origin_is_still_refused_before_any_consumer(site, client, operator):
    ws = communicator("/ws/nope/", await cookie_of(client, operator), origin=b"https://evil.example")
    connected, _ = await ws.connect()
    assert not connected
    await ws.disconnect()


async def test_fabric_socket_sends_a_snapshot_per_topic_and_resyncs(site, client, operator):
    ws = communicator(fabric_path(site.cluster.pk), await cookie_of(client, operator))
    connected, _ = await ws.connect()
    assert connected
    frames = await receive_frames(ws)
    assert [(f["type"], f["topic"]) for f in frames] == [
        ("snapshot", "overview"), ("snapshot", "fabric"), ("snapshot", "gpus"), ("snapshot", "alerts"),
    ]  # fmt: skip
    overview, fabric, gpus, alerts = (f["data"] for f in frames)
    assert overview["cluster"]["name"] == "dash" and overview["gpus"]["total"] == 32
    assert len(fabric["nodes"]) == 4 and len(gpus["gpus"]) == 32 and alerts == {"alerts": [], "groups": []}
    assert {f["topic"]: f["seq"] for f in frames} == await sync_to_async(group_seqs)(site.cluster.pk)
    await ws.send_json_to({"type": "resync", "topics": ["alerts"]})
    assert [f["topic"] for f in await receive_frames(ws)] == ["alerts"]
    await ws.send_to(text_data="not json")  # ignored, the socket stays
    await ws.send_json_to({"type": "resync"})
    assert [f["topic"] for f in await receive_frames(ws)] == ["overview", "fabric", "gpus", "alerts"]
    await ws.disconnect()


def group_seqs(cluster_id: int) -> dict[str, int]:
    """The last seq sent to each fabric topic's group: each topic counts its own (the setup sent some of them)."""
    return {t: cache.get(broadcast.seq_key(broadcast.fabric_group(cluster_id, t))) or 0 for t in FABRIC_TOPICS}


async def test_a_submitted_job_appears_in_the_queue_after_the_round(site, client, operator):
    ws = communicator(queue_path(site.cluster.pk), await cookie_of(client, operator))
    assert (await ws.connect())[0]
    (snapshot,) = await receive_frames(ws)
    assert snapshot["data"] == {"pending": [], "running": [], "recent": []}
    job = await sync_to_async(site.submit)(site.tenant_a, 8, name="llm-pretrain")  # a round follows on commit
    frames = await receive_frames(ws)
    assert frames and all(f["type"] == "delta" and f["topic"] == "queue" for f in frames)
    assert [f["seq"] for f in frames] == list(range(snapshot["seq"] + 1, snapshot["seq"] + 1 + len(frames)))
    running = [j for f in frames for j in f["data"].get("upsert", {}).get("running", [])]
    assert running[-1]["id"] == job.pk and running[-1]["name"] == "llm-pretrain" and running[-1]["nodes"]
    assert running[-1]["links"]
    await ws.disconnect()


async def test_a_tenant_never_receives_another_tenants_job(site, client, operator, user_a, user_b):
    sockets = {}
    for who, user in (("ops", operator), ("a", user_a), ("b", user_b)):
        ws = communicator(queue_path(site.cluster.pk), await cookie_of(client, user))
        assert (await ws.connect())[0]
        (snapshot,) = await receive_frames(ws)
        assert snapshot["type"] == "snapshot"
        sockets[who] = ws

    def submit_both():
        jobs = [
            site.submit(site.tenant_a, 8, name="a-1"),
            site.submit(site.tenant_b, 8, name="b-1"),
            site.submit(site.tenant_a, 64, name="a-too-big"),
            site.submit(site.tenant_b, 64, name="b-too-big"),
        ]
        run_round(site.cluster.pk, "test")
        return jobs

    jobs = await sync_to_async(submit_both)()
    seen = {}
    for who, ws in sockets.items():
        frames = await receive_frames(ws)
        assert frames, who
        seen[who] = {
            (j["id"], j["tenant"])
            for f in frames
            for part in ("pending", "running")
            for j in f["data"].get("upsert", {}).get(part, [])
        }
        await ws.disconnect()
    assert {i for i, _ in seen["ops"]} == {j.pk for j in jobs}
    assert seen["a"] == {(j.pk, "tenant-a") for j in jobs if j.tenant_id == site.tenant_a.pk}
    assert seen["b"] == {(j.pk, "tenant-b") for j in jobs if j.tenant_id == site.tenant_b.pk}


async def test_a_tenant_snapshot_holds_only_its_jobs(site, client, user_a):
    await sync_to_async(site.submit)(site.tenant_b, 64, name="theirs")
    await sync_to_async(site.submit)(site.tenant_a, 64, name="mine")
    ws = communicator(queue_path(site.cluster.pk), await cookie_of(client, user_a))
    assert (await ws.connect())[0]
    (snapshot,) = await receive_frames(ws)
    assert [j["name"] for j in snapshot["data"]["pending"]] == ["mine"]
    assert snapshot["data"]["pending"][0]["position"] == 2  # the global place in line
    await ws.disconnect()


async def test_a_broadcast_from_a_worker_thread_reaches_the_socket(site, client, operator):
    """The embedded worker broadcasts from its own thread: the frame still reaches the socket's loop."""
    ws = communicator(fabric_path(site.cluster.pk), await cookie_of(client, operator))
    assert (await ws.connect())[0]
    await receive_frames(ws)

    def worker_thread():
        try:
            Alert.objects.create(cluster=site.cluster, rule="gpu_hot", severity="warning", object_kind="gpu",
                                 object_key="gpu0001/gpu0", message="hot", first_seen=timezone.now(),
                                 last_seen=timezone.now())  # fmt: skip
            broadcast.mark_dirty(site.cluster.pk, "alerts")
        finally:
            connection.close()

    await asyncio.get_running_loop().run_in_executor(None, worker_thread)
    (frame,) = await receive_frames(ws)
    assert frame["topic"] == "alerts" and frame["data"]["upsert"][0]["rule"] == "gpu_hot"
    await ws.disconnect()


async def test_the_embedded_worker_pushes_live_load_to_an_open_socket(site, client, operator):
    """Embedded mode: the twin is polled by the in-process worker, whose broadcast task (a countdown, not eager)
    reaches the socket as gpus deltas, at most one frame per topic per second."""
    from clusterctl.embedded import EmbeddedCelery
    from fabric import stored_twin

    stored_twin.forget_twins()
    ws = communicator(fabric_path(site.cluster.pk), await cookie_of(client, operator))
    assert (await ws.connect())[0]
    await receive_frames(ws)
    runner = EmbeddedCelery(poll_interval_s=1.0, round_interval_s=60.0, beat=True)
    await sync_to_async(runner.start, thread_sensitive=False)()
    frames: list[dict] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while loop.time() < deadline and not any(_gpu_load_in(f) for f in frames):
            frames += await receive_frames(ws, timeout=0.3)
    finally:
        await sync_to_async(runner.stop, thread_sensitive=False)()
        await ws.disconnect()
    # A delta carries the changed GPUs by id; a snapshot (sent when the set of GPUs changed shape) lists them all.
    assert any(_gpu_load_in(f) for f in frames), [(f["type"], f["topic"]) for f in frames]
    assert runner.counts["dashboard.tasks.broadcast"] >= 1


def _gpu_load_in(frame: dict) -> bool:
    if frame["topic"] != "gpus":
        return False
    gpus = frame["data"].get("gpus", {})
    return any(g.get("util") is not None for g in (gpus.values() if isinstance(gpus, dict) else gpus))


async def test_a_push_reaches_the_socket_without_a_trip_to_the_database_thread(site, client, operator, monkeypatch):
    """Channels closes old database connections (in the shared sync thread) before every handler; a push writes
    frames only, so it goes straight to the socket."""
    import channels.consumer
    from channels.layers import get_channel_layer

    ws = communicator(fabric_path(site.cluster.pk) + "?topics=alerts", await cookie_of(client, operator))
    assert (await ws.connect())[0]
    await receive_frames(ws)
    trips = []
    real = channels.consumer.aclose_old_connections
    monkeypatch.setattr(channels.consumer, "aclose_old_connections", lambda: trips.append(1) or real())
    frame = broadcast.wire({"type": "delta", "topic": "alerts", "seq": 10**6, "data": {"upsert": [], "remove": []}})
    group = broadcast.fabric_group(site.cluster.pk, "alerts")
    await get_channel_layer().group_send(group, {"type": broadcast.MESSAGE_TYPE, "frames": [frame]})
    (got,) = await receive_frames(ws)
    assert got["seq"] == 10**6 and trips == []
    await ws.send_json_to({"type": "resync", "topics": ["alerts"]})  # any other message still takes the trip
    await receive_frames(ws)
    assert trips == [1]
    await ws.disconnect()


async def test_a_client_that_stops_reading_is_dropped_not_buffered(site, client, operator, monkeypatch):
    from channels.layers import get_channel_layer

    from dashboard import consumers

    ws = communicator(fabric_path(site.cluster.pk) + "?topics=alerts", await cookie_of(client, operator))
    assert (await ws.connect())[0]
    await receive_frames(ws)
    stuck = asyncio.Event()

    async def never_written(self, text_data=None, bytes_data=None, close=False):
        stuck.set()
        await asyncio.sleep(3600)  # the server's write buffer for this client stays full

    monkeypatch.setattr(consumers, "SLOW_CLIENT_S", 0.05)
    monkeypatch.setattr(consumers.LiveConsumer, "send", never_written)
    layer = get_channel_layer()
    group = broadcast.fabric_group(site.cluster.pk, "alerts")
    frame = broadcast.wire({"type": "delta", "topic": "alerts", "seq": 1, "data": {"upsert": [], "remove": []}})
    await layer.group_send(group, {"type": broadcast.MESSAGE_TYPE, "frames": [frame]})
    await asyncio.wait_for(stuck.wait(), 1)
    await asyncio.wait_for(ws.future, 1)  # the consumer stopped
    assert not layer.groups.get(group)  # and left its group: later frames are not kept for it
