"""WebSocket routes of every app, stitched together."""

from dashboard.routing import websocket_urlpatterns as dashboard_ws

websocket_urlpatterns = [*dashboard_ws]
