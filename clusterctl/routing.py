"""WebSocket routes of every app, stitched together."""

from fabric.routing import websocket_urlpatterns as fabric_ws

websocket_urlpatterns = [*fabric_ws]
