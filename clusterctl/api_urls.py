"""/api/v1/: one router over every app's viewsets, so the API root lists them all."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from clusterctl.legend import ChoicesView
from fabric.api import urls as fabric_urls
from scheduler.api import urls as scheduler_urls

router = DefaultRouter()
for app in (fabric_urls, scheduler_urls):
    for prefix, viewset, basename in app.routes:
        router.register(prefix, viewset, basename=basename)

urlpatterns = [
    path("choices/", ChoicesView.as_view(), name="choices"),
    *fabric_urls.urlpatterns,
    *scheduler_urls.urlpatterns,
    *router.urls,
]
