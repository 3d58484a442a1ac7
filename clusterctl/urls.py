from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from clusterctl.health import healthz
from clusterctl.metrics import metrics_view
from clusterctl.views import overview
from fabric.views import cluster_report

urlpatterns = [
    path("", overview, name="overview"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("clusters/<int:cluster_id>/report/", cluster_report, name="cluster-report"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("clusterctl.api_urls")),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("api/v1/auth/", include("rest_framework.urls")),
]
