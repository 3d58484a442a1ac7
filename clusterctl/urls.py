from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from clusterctl.health import healthz
from clusterctl.metrics import metrics_view

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("", include("dashboard.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include("clusterctl.api_urls")),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The API docs under the site's Content-Security-Policy (settings.CONTENT_SECURITY_POLICY): Swagger UI's split
    # view serves its start-up script from our origin (no inline script); its page and Redoc (styled-components)
    # inject <style> elements, so these two paths alone also allow inline styles, and Redoc its blob: web worker.
    path(
        "api/v1/docs/",
        csp_update({"style-src": ["'unsafe-inline'"]})(SpectacularSwaggerSplitView.as_view(url_name="schema")),
        name="api-docs",
    ),
    path(
        "api/v1/redoc/",
        csp_update({"style-src": ["'unsafe-inline'"], "worker-src": ["'self'", "blob:"]})(
            SpectacularRedocView.as_view(url_name="schema")
        ),
        name="api-redoc",
    ),
    path("api/v1/auth/", include("rest_framework.urls")),
]

# An unmatched path under /api/ answers the API's JSON 404, not an HTML page (clusterctl/errors.py).
handler404 = "clusterctl.errors.not_found"
