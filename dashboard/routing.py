"""WebSocket routes of the live views (docs/dashboard.md)."""

from django.urls import path

from dashboard.consumers import FabricConsumer, QueueConsumer

websocket_urlpatterns = [
    path("ws/clusters/<int:cluster_id>/fabric/", FabricConsumer.as_asgi()),
    path("ws/clusters/<int:cluster_id>/queue/", QueueConsumer.as_asgi()),
]
