"""The live sockets of a cluster (docs/dashboard.md): snapshots on connect and on `resync`, then the group's deltas.

`clusterctl.asgi` checks the Origin (AllowedHostsOriginValidator) and loads the session user before a consumer
runs. A consumer accepts first and then closes with a code the page can read: 4401 anonymous, 4403 no access,
4404 no such cluster (a refusal before accepting reaches the browser as a bare 403, code 1006).

Frames from the broadcaster arrive encoded once per group (`dashboard.push`: text, or binary for the fabric and GPU
topics, `broadcast.wire`) and go out as they are.
Membership of a group is refreshed every GROUP_REFRESH_S, well inside channels-redis' `group_expiry`, so a page
left open for a day still receives; a `resync` refreshes it too (a layer that lost its groups in a Redis restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from dashboard import broadcast
from dashboard.selectors import cluster_exists
from dashboard.topics import FABRIC_TOPICS, QUEUE_TOPICS
from scheduler.api.access import tenant_of

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_SERVER_ERROR = 1011
GROUP_REFRESH_S = 600.0


class LiveConsumer(AsyncWebsocketConsumer):
    """Common part: access check, group membership, snapshots, resync, pushes."""

    topics: tuple[str, ...] = ()

    async def connect(self) -> None:
        self.cluster_id = int(self.scope["url_route"]["kwargs"]["cluster_id"])
        self.live_groups: list[str] = []
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
        if not await self._join():
            await self.close(code=CLOSE_SERVER_ERROR)
            return
        if await self.send_snapshots(self.topics):
            self._refresher = asyncio.ensure_future(self._keep_membership())

    def authorise(self, user) -> int | None:
        """Set `live_groups` (and `tenant`) for this user, or return the close code that refuses it."""
        raise NotImplementedError

    async def disconnect(self, code: int) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        for group in getattr(self, "live_groups", []):
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:  # the layer is down; its group expiry forgets us
                log.debug("could not leave %s", group, exc_info=True)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        try:
            message = json.loads(text_data) if text_data else None
        except ValueError:
            return  # clients only ask for resyncs; anything else is ignored
        if isinstance(message, dict) and message.get("type") == "resync":
            asked = message.get("topics")
            topics = [t for t in asked if t in self.topics] if isinstance(asked, list) else self.topics
            await self._join()
            await self.send_snapshots(topics or self.topics)

    async def dashboard_push(self, event) -> None:
        for message in event["frames"]:  # text, or bytes for the compact topics (broadcast.wire)
            if isinstance(message, bytes):
                await self.send(bytes_data=message)
            else:
                await self.send(text_data=message)

    async def send_snapshots(self, topics) -> bool:
        group = self.live_groups[0]
        frames = await database_sync_to_async(broadcast.snapshot_frames)(
            self.cluster_id, topics, group, tenant=self.tenant
        )
        if frames is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return False
        for frame in frames:
            message = broadcast.wire(frame)
            if isinstance(message, bytes):
                await self.send(bytes_data=message)
            else:
                await self.send(text_data=message)
        return True

    async def _join(self) -> bool:
        try:
            for group in self.live_groups:
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:
            log.warning("live socket of cluster %s: could not join %s: %s", self.cluster_id, self.live_groups, exc)
            return False
        return True

    async def _keep_membership(self) -> None:
        while True:
            await asyncio.sleep(GROUP_REFRESH_S)
            await self._join()


class FabricConsumer(LiveConsumer):
    """`/ws/clusters/<id>/fabric/`: operators only; overview, fabric, GPUs, alerts."""

    topics = FABRIC_TOPICS

    def authorise(self, user) -> int | None:
        if not user.is_staff:
            return CLOSE_FORBIDDEN
        if not cluster_exists(self.cluster_id):
            return CLOSE_NOT_FOUND
        self.live_groups = [broadcast.fabric_group(self.cluster_id)]
        return None


class QueueConsumer(LiveConsumer):
    """`/ws/clusters/<id>/queue/`: operators see every job, a tenant member its tenant's jobs only."""

    topics = QUEUE_TOPICS

    def authorise(self, user) -> int | None:
        tenant = None if user.is_staff else tenant_of(user)
        if not user.is_staff and tenant is None:
            return CLOSE_FORBIDDEN
        if not cluster_exists(self.cluster_id):
            return CLOSE_NOT_FOUND
        if tenant is None:
            self.live_groups = [broadcast.queue_group(self.cluster_id)]
        else:
            self.tenant = tenant.name
            self.live_groups = [broadcast.queue_group(self.cluster_id, tenant.pk)]
        return None
