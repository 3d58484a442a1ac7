from django.urls import path

from fabric.consumers import FabricConsumer

websocket_urlpatterns = [path("ws/fabric/<int:cluster_id>/", FabricConsumer.as_asgi())]
