from django.urls import path
from rest_framework.routers import DefaultRouter

from fabric.api import views

router = DefaultRouter()
router.register("clusters", views.ClusterViewSet)
router.register("switches", views.SwitchViewSet)
router.register("nodes", views.NodeViewSet)
router.register("links", views.LinkViewSet)
router.register("gpus", views.GpuViewSet)

urlpatterns = [path("choices/", views.ChoicesView.as_view(), name="choices"), *router.urls]
