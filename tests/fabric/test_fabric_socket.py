"""The fabric WebSocket: operators only, allowed origins only, snapshot first, events after commit."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings

from clusterctl.asgi import application
from fabric import actions
from tests.factories import ClusterFactory, NodeFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def session_cookie(client, user) -> bytes:
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def connect(cluster_id: int, cookie: bytes = b"", origin: bytes = b"http://127.0.0.1") -> WebsocketCommunicator:
    headers = [(b"origin", origin), (b"host", b"127.0.0.1")]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, f"/ws/fabric/{cluster_id}/", headers=headers)


async def test_anonymous_refused():
    cluster = await sync_to_async(ClusterFactory)()
    ws = connect(cluster.pk)
    connected, _ = await ws.connect()
    assert not connected


async def test_foreign_origin_refused(client, operator):
    cluster = await sync_to_async(ClusterFactory)()
    cookie = await sync_to_async(session_cookie)(client, operator)
    ws = connect(cluster.pk, cookie, origin=b"https://evil.example.com")
    connected, _ = await ws.connect()
    assert not connected


async def test_non_staff_refused(client, tenant_user):
    cluster = await sync_to_async(ClusterFactory)()
    cookie = await sync_to_async(session_cookie)(client, tenant_user)
    connected, _ = await connect(cluster.pk, cookie).connect()
    assert not connected


async def test_snapshot_then_event_after_commit(client, operator):
    node = await sync_to_async(NodeFactory)()
    cookie = await sync_to_async(session_cookie)(client, operator)
    ws = connect(node.cluster_id, cookie)
    connected, _ = await ws.connect()
    assert connected
    first = await ws.receive_json_from(timeout=5)
    assert first["type"] == "snapshot" and first["cluster"]["nodes"]["total"] == 1
    await sync_to_async(actions.set_node_state)([node], "drain", reason="test")
    event = await ws.receive_json_from(timeout=5)
    assert event == {"type": "event", "kind": "nodes_changed", "state": "drain"}
    await ws.disconnect()
