"""A small generated cluster with the scheduler set up, two tenants with a member each, and helpers to open the
live sockets through the real ASGI application (origin check, session auth, routing)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings

from dashboard import broadcast
from fabric.models import Cluster
from scheduler import actions
from scheduler.models import Job, Pool, PriorityClass, Tenant
from tests.factories import fat_tree

MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def memory_layer(settings):
    """The in-memory channel layer (the suite's settings use Redis when REDIS_URL is set)."""
    settings.CHANNEL_LAYERS = MEMORY_LAYER


@dataclass
class Site:
    cluster: Cluster
    pool: Pool
    tenant_a: Tenant
    tenant_b: Tenant

    def submit(self, tenant: Tenant, gpus: int = 8, name: str = "job", **request) -> Job:
        normal = PriorityClass.objects.get(name="normal")
        return actions.submit_job(tenant, self.pool, normal, gpus=gpus, name=name, **request)


@pytest.fixture
def site(db) -> Site:
    cluster = fat_tree("dash", nodes=4, gpus_per_node=8, leaf_ports=4, hcas_per_node=1)
    pool = actions.ensure_scheduler(cluster)
    a, b = actions.create_tenant("tenant-a"), actions.create_tenant("tenant-b")
    for t in (a, b):
        actions.set_quota(t, pool, guaranteed_gpus=16, borrow_limit=16)
    yield Site(cluster, pool, a, b)
    broadcast.forget(cluster.pk)


@pytest.fixture
def user_a(site, django_user_model):
    user = django_user_model.objects.create_user("alice", "alice@a.example.org", "pw-alice")
    actions.add_member(site.tenant_a, user)
    return user


@pytest.fixture
def user_b(site, django_user_model):
    user = django_user_model.objects.create_user("bob", "bob@b.example.org", "pw-bob")
    actions.add_member(site.tenant_b, user)
    return user


def session_cookie(client, user) -> bytes:
    """The session cookie of a signed-in user, as the browser sends it with the WebSocket upgrade."""
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def communicator(path: str, cookie: bytes = b"", origin: bytes = b"http://testserver") -> WebsocketCommunicator:
    from clusterctl.asgi import application

    headers = [(b"origin", origin), (b"host", b"testserver")]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, path, headers=headers)


async def receive_frames(ws: WebsocketCommunicator, timeout: float = 0.5) -> list[dict]:
    """Every frame that arrives until the socket has been quiet for `timeout` seconds."""
    frames = []
    while not await ws.receive_nothing(timeout=timeout, interval=0.02):  # a timeout in receive_from kills the app
        frames.append(broadcast.decode(await ws.receive_from(timeout=5)))  # text, or binary (fabric, gpus)
    return frames


async def close_code(ws: WebsocketCommunicator) -> int | None:
    """Connect and return the close code the consumer answers with (None: it stayed open)."""
    connected, code = await ws.connect()
    if not connected:
        return code
    message = await ws.receive_output(timeout=3)
    return message.get("code") if message["type"] == "websocket.close" else None
