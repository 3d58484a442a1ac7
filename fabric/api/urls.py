from fabric.api import views

routes = [
    ("clusters", views.ClusterViewSet, "cluster"),
    ("switches", views.SwitchViewSet, "switch"),
    ("nodes", views.NodeViewSet, "node"),
    ("links", views.LinkViewSet, "link"),
    ("gpus", views.GpuViewSet, "gpu"),
]
urlpatterns: list = []
