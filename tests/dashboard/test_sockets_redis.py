"""On the real Redis channel layer: a GPU fault ingested after commit reaches an open socket as an alerts delta, and
a socket that asked for the overview only gets the overview's delta of it and nothing else."""

from __future__ import annotations

import copy
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings as django_settings

from dashboard import broadcast
from fabric.collectors.samples import GpuSample, NodeSample
from fabric.ingest import ingest_samples
from fabric.latest import forget_node
from fabric.models import GPU
from tests.dashboard.conftest import communicator, receive_frames, session_cookie

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.asyncio,
    pytest.mark.skipif(not django_settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
]


@pytest.fixture
def redis_layer(settings):
    layer = copy.deepcopy(django_settings.CHANNEL_LAYERS["default"])  # production's layer, as settings.py sets it
    layer["CONFIG"]["prefix"] = f"test-{uuid.uuid4().hex[:12]}"
    settings.CHANNEL_LAYERS = {"default": layer}


async def test_an_xid_fault_arrives_as_an_alerts_delta(site, client, operator, redis_layer):
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisPubSubChannelLayer"
    cookie = await sync_to_async(session_cookie)(client, operator)
    ws = communicator(f"/ws/clusters/{site.cluster.pk}/fabric/", cookie)
    assert (await ws.connect())[0]
    snapshots = await receive_frames(ws)
    assert [f["topic"] for f in snapshots] == ["overview", "fabric", "gpus", "alerts"]
    gpu = await sync_to_async(lambda: GPU.objects.select_related("node").filter(node__cluster=site.cluster).first())()
    host = gpu.node.hostname
    sample = NodeSample(node=host, collected_at=5000.0, collector="test",
                        gpus=[GpuSample(index=gpu.index, utilisation_gpu_pct=0.0, xid_events=[79])])  # fmt: skip
    try:
        await sync_to_async(ingest_samples)(site.cluster.pk, [sample])
        frames = await receive_frames(ws, timeout=1.0)
    finally:
        await sync_to_async(forget_node)(site.cluster.pk, host)
        await ws.disconnect()
        await layer.flush()
    alerts = [f for f in frames if f["topic"] == "alerts"]
    assert alerts and alerts[0]["type"] == "delta"
    (raised,) = alerts[0]["data"]["upsert"]
    assert raised["rule"] == "gpu_xid_critical" and raised["severity"] == "critical"
    assert raised["object_key"].startswith(f"{host}/") and "XID 79" in raised["message"]
    failed = [f["data"]["gpus"][str(gpu.pk)] for f in frames if f["topic"] == "gpus"]
    assert failed and failed[0]["health"] == "failed"  # the GPU left capacity, and the heat map shows it
    for snapshot in snapshots:  # each topic's deltas continue its own seq, with no gap
        seqs = [f["seq"] for f in frames if f["topic"] == snapshot["topic"]]
        assert seqs == list(range(snapshot["seq"] + 1, snapshot["seq"] + 1 + len(seqs))), snapshot["topic"]


async def test_an_overview_socket_gets_the_faults_overview_delta_and_nothing_else(site, client, operator, redis_layer):
    layer = get_channel_layer()
    cookie = await sync_to_async(session_cookie)(client, operator)
    every = communicator(f"/ws/clusters/{site.cluster.pk}/fabric/", cookie)
    ws = communicator(f"/ws/clusters/{site.cluster.pk}/fabric/?topics=overview", cookie)
    assert (await every.connect())[0] and (await ws.connect())[0]
    await receive_frames(every)
    (snapshot,) = await receive_frames(ws)
    assert snapshot["topic"] == "overview" and snapshot["data"]["gpus"]["unhealthy"] == 0
    gpu = await sync_to_async(lambda: GPU.objects.select_related("node").filter(node__cluster=site.cluster).first())()
    host = gpu.node.hostname
    sample = NodeSample(node=host, collected_at=5000.0, collector="test",
                        gpus=[GpuSample(index=gpu.index, utilisation_gpu_pct=0.0, xid_events=[79])])  # fmt: skip
    try:
        await sync_to_async(ingest_samples)(site.cluster.pk, [sample])
        everything = await receive_frames(every, timeout=1.0)
        frames = await receive_frames(ws, timeout=1.0)
    finally:
        await sync_to_async(forget_node)(site.cluster.pk, host)
        await every.disconnect()
        await ws.disconnect()
        await layer.flush()
    assert {"alerts", "gpus"} <= {f["topic"] for f in everything}  # they were sent, to the other socket
    # One overview delta per broadcast the fault set off (the ingest, the round it requests), and only those.
    assert frames and {(f["type"], f["topic"]) for f in frames} == {("delta", "overview")}
    assert [f["seq"] for f in frames] == list(range(snapshot["seq"] + 1, snapshot["seq"] + 1 + len(frames)))
    assert frames[-1]["data"]["gpus"]["unhealthy"] == 1 and frames[-1]["data"]["alerts"]["critical"] == 1


async def test_a_socket_keeps_receiving_after_redis_dropped_the_layers_connections(site, client, operator, redis_layer):
    """Redis restarting (here: this process's subscriber connection killed): the web process subscribes again and the
    open socket gets the next frame without reconnecting."""
    import redis.asyncio

    layer = get_channel_layer()
    cookie = await sync_to_async(session_cookie)(client, operator)
    ws = communicator(f"/ws/clusters/{site.cluster.pk}/fabric/?topics=alerts", cookie)
    assert (await ws.connect())[0]
    await receive_frames(ws)
    admin = redis.asyncio.Redis.from_url(django_settings.REDIS_URL)
    try:
        shard = layer._get_layer()._shards[0]  # the connection this process subscribes on (channels-redis internals)
        host, port = shard._pubsub.connection._writer.get_extra_info("sockname")[:2]
        assert await admin.execute_command("CLIENT", "KILL", "ADDR", f"{host}:{port}")
        group = broadcast.fabric_group(site.cluster.pk, "alerts")
        frame = broadcast.wire({"type": "delta", "topic": "alerts", "seq": 7, "data": {"upsert": [], "remove": []}})
        got = []
        for _ in range(40):  # published every 0.1 s until the subscription is back (it retries after 1 s)
            await layer.group_send(group, {"type": broadcast.MESSAGE_TYPE, "frames": [frame]})
            got = await receive_frames(ws, timeout=0.1)
            if got:
                break
    finally:
        await admin.aclose()
        await ws.disconnect()
        await layer.flush()
    assert got and got[0]["seq"] == 7
