from django.urls import path

from fabric.api import topology, views

routes = [
    ("clusters", views.ClusterViewSet, "cluster"),
    ("switches", views.SwitchViewSet, "switch"),
    ("nodes", views.NodeViewSet, "node"),
    ("links", views.LinkViewSet, "link"),
    ("gpus", views.GpuViewSet, "gpu"),
]
urlpatterns: list = [
    path("clusters/<int:pk>/topology/", topology.ClusterTopologyView.as_view(), name="cluster-topology"),
]
