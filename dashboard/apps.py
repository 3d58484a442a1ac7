from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The operator dashboard and tenant view: pages, live sockets, the broadcaster (docs/dashboard.md)."""

    name = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"
