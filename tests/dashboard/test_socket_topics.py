"""A page asks its socket for the topics it shows (`?topics=`, or a `subscribe` message later) and receives only
those: their snapshots on connect and their deltas after, each topic with its own seq (issue 16: the overview's cards
downloaded the fabric's and GPUs' snapshots and every delta). In-memory channel layer, the real ASGI stack."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from dashboard import broadcast
from dashboard.consumers import CLOSE_UNKNOWN_TOPIC
from dashboard.topics import FABRIC_TOPICS
from fabric.choices import GpuHealth, NodeState
from fabric.models import GPU, Alert, Node
from tests.dashboard.conftest import close_code, communicator, receive_frames, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio, pytest.mark.usefixtures("memory_layer")]


def fabric_path(cluster_id: int, query: str = "") -> str:
    return f"/ws/clusters/{cluster_id}/fabric/{query}"


async def operator_socket(site, client, operator, query: str = ""):
    """An operator's fabric socket, connected, with the frames it sent on connect."""
    cookie = await sync_to_async(session_cookie)(client, operator)
    ws = communicator(fabric_path(site.cluster.pk, query), cookie)
    assert (await ws.connect())[0]
    return ws, await receive_frames(ws)


def change_every_topic(cluster) -> None:
    """A node drained, one of its GPUs failed, an alert raised: a frame for each of the fabric socket's topics
    (the overview counts the failed GPU and the alert)."""
    node = Node.objects.filter(cluster=cluster, role="compute").order_by("hostname").first()
    Node.objects.filter(pk=node.pk).update(state=NodeState.DRAIN)
    GPU.objects.filter(node=node, index=0).update(health=GpuHealth.FAILED)
    Alert.objects.create(cluster=cluster, rule="gpu_hot", severity="warning", object_kind="gpu",
                         object_key=f"{node.hostname}/gpu0", message="hot", first_seen=timezone.now(),
                         last_seen=timezone.now())  # fmt: skip
    broadcast.mark_dirty(cluster.pk, FABRIC_TOPICS)


def kinds(frames: list[dict]) -> list[tuple[str, str]]:
    return [(f["type"], f["topic"]) for f in frames]


async def test_a_socket_asking_for_the_overview_gets_only_its_snapshot(site, client, operator):
    ws, frames = await operator_socket(site, client, operator, "?topics=overview")
    assert kinds(frames) == [("snapshot", "overview")]
    assert frames[0]["data"]["gpus"]["total"] == 32  # 4 nodes of 8
    await ws.disconnect()


async def test_a_socket_asking_for_the_overview_gets_only_its_deltas(site, client, operator):
    every, _ = await operator_socket(site, client, operator)  # the control: every topic's frames were sent
    ws, (snapshot,) = await operator_socket(site, client, operator, "?topics=overview")
    await sync_to_async(change_every_topic)(site.cluster)
    assert {f["topic"] for f in await receive_frames(every)} == {"overview", "fabric", "gpus", "alerts"}
    frames = await receive_frames(ws)
    assert kinds(frames) == [("delta", "overview")]
    assert frames[0]["seq"] == snapshot["seq"] + 1  # the overview's own seq: no gap for the other topics' frames
    assert frames[0]["data"]["gpus"]["unhealthy"] == 1 and frames[0]["data"]["alerts"]["warning"] == 1
    await every.disconnect()
    await ws.disconnect()


async def test_a_socket_naming_every_topic_gets_them_all_in_the_sockets_order(site, client, operator):
    ws, frames = await operator_socket(site, client, operator, "?topics=alerts,gpus&topics=fabric,overview")
    assert kinds(frames) == [("snapshot", "overview"), ("snapshot", "fabric"), ("snapshot", "gpus"),
                             ("snapshot", "alerts")]  # fmt: skip
    await sync_to_async(change_every_topic)(site.cluster)
    assert {f["topic"] for f in await receive_frames(ws)} == {"overview", "fabric", "gpus", "alerts"}
    await ws.disconnect()


async def test_an_unknown_topic_is_refused_with_4400(site, client, operator):
    cookie = await sync_to_async(session_cookie)(client, operator)
    assert await close_code(communicator(fabric_path(site.cluster.pk, "?topics=overview,weather"), cookie)) == 4400


async def test_a_topic_of_the_other_socket_is_refused_with_4400(site, client, operator):
    cookie = await sync_to_async(session_cookie)(client, operator)
    queue = f"/ws/clusters/{site.cluster.pk}/queue/?topics=overview"
    assert await close_code(communicator(queue, cookie)) == CLOSE_UNKNOWN_TOPIC


async def test_an_anonymous_user_is_refused_before_the_topics_are_looked_at(site):
    assert await close_code(communicator(fabric_path(site.cluster.pk, "?topics=weather"))) == 4401


async def test_a_topic_subscribed_later_arrives_with_its_snapshot_then_its_deltas(site, client, operator):
    ws, frames = await operator_socket(site, client, operator, "?topics=gpus")
    assert kinds(frames) == [("snapshot", "gpus")]
    await ws.send_json_to({"type": "subscribe", "topics": ["fabric", "gpus"]})  # gpus it has already
    (fabric,) = await receive_frames(ws)
    assert kinds([fabric]) == [("snapshot", "fabric")] and len(fabric["data"]["nodes"]) == 4
    await sync_to_async(change_every_topic)(site.cluster)
    assert sorted(kinds(await receive_frames(ws))) == [("delta", "fabric"), ("delta", "gpus")]
    await ws.disconnect()


async def test_subscribing_to_an_unknown_topic_closes_with_4400(site, client, operator):
    ws, _ = await operator_socket(site, client, operator, "?topics=overview")
    await ws.send_json_to({"type": "subscribe", "topics": ["weather"]})
    message = await ws.receive_output(timeout=3)
    assert (message["type"], message["code"]) == ("websocket.close", CLOSE_UNKNOWN_TOPIC)
    await ws.disconnect()


async def test_resync_sends_only_the_topics_the_socket_asked_for(site, client, operator):
    ws, _ = await operator_socket(site, client, operator, "?topics=overview,alerts")
    await ws.send_json_to({"type": "resync"})
    assert kinds(await receive_frames(ws)) == [("snapshot", "overview"), ("snapshot", "alerts")]
    await ws.send_json_to({"type": "resync", "topics": ["alerts", "gpus"]})  # gpus it never asked for
    assert kinds(await receive_frames(ws)) == [("snapshot", "alerts")]
    await ws.disconnect()


async def test_a_tenant_asking_for_the_queue_still_sees_only_its_jobs(site, client, user_a):
    await sync_to_async(site.submit)(site.tenant_b, 64, name="theirs")
    await sync_to_async(site.submit)(site.tenant_a, 64, name="mine")
    cookie = await sync_to_async(session_cookie)(client, user_a)
    ws = communicator(f"/ws/clusters/{site.cluster.pk}/queue/?topics=queue", cookie)
    assert (await ws.connect())[0]
    (snapshot,) = await receive_frames(ws)
    assert [j["name"] for j in snapshot["data"]["pending"]] == ["mine"]
    await ws.disconnect()
