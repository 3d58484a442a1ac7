"""WebSocket routes of every app, stitched together, and a last route for every other path.

Without the last route, Channels' URLRouter raises ValueError("No route found") for an unknown path: the server
logs a traceback and the client gets a 500 to its upgrade. Here such a socket is accepted and closed at once with
4404, the code the live pages already read as "no such thing" (dashboard/consumers.py). The origin check and the
session still run first (clusterctl/asgi.py wraps the whole router).
"""

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import re_path

from dashboard.consumers import CLOSE_NOT_FOUND
from dashboard.routing import websocket_urlpatterns as dashboard_ws


class NoSuchSocket(AsyncWebsocketConsumer):
    """Every path no app routes: accepted, then closed with 4404 (a refusal before accepting reaches a browser
    as a bare 403 with code 1006, which says nothing)."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)


websocket_urlpatterns = [*dashboard_ws, re_path(r"", NoSuchSocket.as_asgi())]
