from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The operator dashboard and tenant view: pages, live sockets, the broadcaster (docs/dashboard.md)."""

    name = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from dashboard import broadcast
        from fabric import events

        # Committed fabric and job changes mark the topics that show them (the broadcaster pushes them).
        events.subscribe(broadcast.on_fabric_event, "fabric")
        events.subscribe(broadcast.on_job_event, "queue")
        events.subscribe(broadcast.on_live_event, "live")
