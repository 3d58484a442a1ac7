"""Live fabric socket: operators only, one group per cluster; a snapshot on connect, events after."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from fabric.events import group_name


class FabricConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        self.cluster_id = int(self.scope["url_route"]["kwargs"]["cluster_id"])
        if not (user and user.is_authenticated and user.is_staff):
            await self.close(code=4403)
            return
        snapshot = await self._snapshot()
        if snapshot is None:
            await self.close(code=4404)
            return
        await self.channel_layer.group_add(group_name(self.cluster_id), self.channel_name)
        await self.accept()
        await self.send_json({"type": "snapshot", "cluster": snapshot})

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "cluster_id"):
            await self.channel_layer.group_discard(group_name(self.cluster_id), self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        # Clients only listen; a resync request gets a fresh snapshot.
        if isinstance(content, dict) and content.get("type") == "resync":
            await self.send_json({"type": "snapshot", "cluster": await self._snapshot()})

    async def fabric_event(self, event) -> None:
        await self.send_json({"type": "event", **event["payload"]})

    @database_sync_to_async
    def _snapshot(self):
        from fabric.selectors import cluster_summary

        return cluster_summary(self.cluster_id)
