"""The live sockets of a cluster (docs/dashboard.md): snapshots on connect and on `resync`, then the groups' deltas.

`clusterctl.asgi` checks the Origin (AllowedHostsOriginValidator) and loads the session user before a consumer
runs. A consumer accepts first and then closes with a code the page can read: 4401 anonymous, 4403 no access,
4404 no such cluster, 4400 a topic the socket does not carry (a refusal before accepting reaches the browser as a
bare 403, code 1006).

A page names the topics it shows (`?topics=overview`, or later `{"type": "subscribe", "topics": [...]}`) and joins
only their groups, one per topic: the overview's cards never download the fabric's and GPUs' snapshots and deltas.
Naming none means all of the socket's topics.

Frames from the broadcaster arrive encoded once per group (`dashboard.push`: text, or binary for the fabric and GPU
topics, `broadcast.wire`; a big one in parts, `broadcast.parts`) and go out as they are.
Membership of a group is refreshed every GROUP_REFRESH_S (and on `resync`), so a layer that lost it comes back.
A client that stops reading is dropped, not buffered: once a push could not be written for SLOW_CLIENT_S (the
server's write buffer for it full), the consumer leaves its groups and stops; the page reconnects with backoff and
starts again from snapshots.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer

from dashboard import broadcast
from dashboard.selectors import cluster_exists
from dashboard.topics import FABRIC_TOPICS, QUEUE_TOPICS
from scheduler.api.access import tenant_of

log = logging.getLogger(__name__)

CLOSE_UNKNOWN_TOPIC = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_SERVER_ERROR = 1011
CLOSE_SLOW_CLIENT = 1008  # policy violation: it stopped reading
GROUP_REFRESH_S = 600.0
SLOW_CLIENT_S = 10.0  # a push not written within this long drops the socket (its frames would pile up here)


class LiveConsumer(AsyncWebsocketConsumer):
    """Common part: access check, topics asked, group membership, snapshots, resync, pushes."""

    topics: tuple[str, ...] = ()  # what the socket carries; a page asks for some or all of them

    async def connect(self) -> None:
        self.cluster_id = int(self.scope["url_route"]["kwargs"]["cluster_id"])
        self.groups: dict[str, str] = {}  # topic -> its group, for the topics this socket receives
        self.tenant: str | None = None
        self._refresher: asyncio.Task | None = None
        broadcast.sockets_run_in(asyncio.get_running_loop())
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        refused = await database_sync_to_async(self.authorise)(user)
        if refused:
            await self.close(code=refused)
            return
        named = self._query_topics()
        asked = self.known(named) if named else self.topics
        if asked is None:
            await self.close(code=CLOSE_UNKNOWN_TOPIC)
            return
        self.groups = {t: self.group_of(t) for t in asked}
        if not await self._join():
            await self.close(code=CLOSE_SERVER_ERROR)
            return
        if await self.send_snapshots(asked):
            self._refresher = asyncio.ensure_future(self._keep_membership())

    def authorise(self, user) -> int | None:
        """Note what `group_of` needs for this user (its tenant), or return the close code that refuses it."""
        raise NotImplementedError

    def group_of(self, topic: str) -> str:
        """The Channels group whose frames of `topic` this socket receives."""
        raise NotImplementedError

    def known(self, names) -> tuple[str, ...] | None:
        """The socket's topics among `names`, in its order; None when one is not a topic of this socket: a page
        that misspells one is told (4400) rather than left waiting for a snapshot that never comes."""
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or set(names) - set(self.topics):
            return None
        return tuple(t for t in self.topics if t in names)

    def _query_topics(self) -> list[str]:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        return [name for value in query.get("topics", []) for name in value.split(",") if name]

    async def disconnect(self, code: int) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        for group in set(getattr(self, "groups", {}).values()):
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:  # the layer is down: the membership goes with this process's subscription
                log.debug("could not leave %s", group, exc_info=True)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        try:
            message = json.loads(text_data) if text_data else None
        except ValueError:
            return  # clients only ask for resyncs and topics; anything else is ignored
        if not isinstance(message, dict):
            return
        if message.get("type") == "resync":
            asked = message.get("topics")
            topics = [t for t in self.groups if isinstance(asked, list) and t in asked]
            await self._join()
            await self.send_snapshots(topics or list(self.groups))
        elif message.get("type") == "subscribe":
            await self._subscribe(message.get("topics"))

    async def _subscribe(self, names) -> None:
        """More topics on an open socket: a part of the page that starts later (the job page's fabric view)."""
        topics = self.known(names)
        if topics is None:
            await self.close(code=CLOSE_UNKNOWN_TOPIC)
            return
        new = [t for t in topics if t not in self.groups]
        if not new:
            return
        self.groups.update({t: self.group_of(t) for t in new})
        if not await self._join():  # the page reconnects, asking for every topic in its URL
            await self.close(code=CLOSE_SERVER_ERROR)
            return
        await self.send_snapshots(new)  # after joining: a delta sent in between has a seq the snapshot covers

    async def dispatch(self, message) -> None:
        # A push only writes frames to the socket, so it skips what Channels does before every handler: closing old
        # database connections, in the one thread all of this process's sockets share for sync code. For each frame
        # of each socket, that hop took 27 % of a web process's time at 1,000 sockets (bench_push_load), and it
        # queued every socket's frame behind the others'.
        if message.get("type") == broadcast.MESSAGE_TYPE:
            await self.dashboard_push(message)
        else:
            await super().dispatch(message)

    async def dashboard_push(self, event) -> None:
        try:
            async with asyncio.timeout(SLOW_CLIENT_S):
                for message in event["frames"]:  # text, or bytes for the compact topics (broadcast.wire)
                    if isinstance(message, bytes):
                        await self.send(bytes_data=message)
                    else:
                        await self.send(text_data=message)
        except TimeoutError:
            # Meanwhile every later push waits in this process's queue for the socket: leave, and let the page
            # reconnect (backoff) and start from snapshots.
            log.info("live socket of cluster %s: not read for %s s, dropped", self.cluster_id, SLOW_CLIENT_S)
            await self.disconnect(CLOSE_SLOW_CLIENT)
            raise StopConsumer() from None

    async def send_snapshots(self, topics) -> bool:
        # Read and encoded in a worker thread, not on the event loop the other sockets share (broadcast.wire took a
        # second for the fabric at 10,000 servers), and once for the sockets that open between two broadcasts.
        messages = await database_sync_to_async(broadcast.snapshot_messages)(
            self.cluster_id, topics, {t: self.groups[t] for t in topics}, tenant=self.tenant
        )
        if messages is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return False
        for message in messages:
            if isinstance(message, bytes):
                await self.send(bytes_data=message)
            else:
                await self.send(text_data=message)
        return True

    async def _join(self) -> bool:
        groups = sorted(set(self.groups.values()))
        try:
            for group in groups:
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:
            log.warning("live socket of cluster %s: could not join %s: %s", self.cluster_id, groups, exc)
            return False
        return True

    async def _keep_membership(self) -> None:
        while True:
            await asyncio.sleep(GROUP_REFRESH_S)
            await self._join()


class FabricConsumer(LiveConsumer):
    """`/ws/clusters/<id>/fabric/`: operators only; overview, fabric, GPUs, alerts, each in a group of its own."""

    topics = FABRIC_TOPICS

    def authorise(self, user) -> int | None:
        if not user.is_staff:
            return CLOSE_FORBIDDEN
        if not cluster_exists(self.cluster_id):
            return CLOSE_NOT_FOUND
        return None

    def group_of(self, topic: str) -> str:
        return broadcast.fabric_group(self.cluster_id, topic)


class QueueConsumer(LiveConsumer):
    """`/ws/clusters/<id>/queue/`: operators see every job, a tenant member its tenant's jobs only."""

    topics = QUEUE_TOPICS

    def authorise(self, user) -> int | None:
        tenant = None if user.is_staff else tenant_of(user)
        if not user.is_staff and tenant is None:
            return CLOSE_FORBIDDEN
        if not cluster_exists(self.cluster_id):
            return CLOSE_NOT_FOUND
        self.tenant_id = None if tenant is None else tenant.pk
        self.tenant = None if tenant is None else tenant.name
        return None

    def group_of(self, topic: str) -> str:
        return broadcast.queue_group(self.cluster_id, self.tenant_id)
