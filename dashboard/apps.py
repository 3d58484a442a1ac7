from django.apps import AppConfig

from fabric import events


class DashboardConfig(AppConfig):
    """The operator dashboard and tenant view: pages, live sockets, the broadcaster (docs/dashboard.md)."""

    name = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Here, not at the top: these modules read models, which exist only once the app registry is ready.
        from dashboard import broadcast, tasks  # noqa: F401  tasks: registers dashboard.tasks.broadcast by name

        # Committed fabric and job changes mark the topics that show them (the broadcaster pushes them).
        events.subscribe(broadcast.on_fabric_event, "fabric")
        events.subscribe(broadcast.on_job_event, "queue")
        events.subscribe(broadcast.on_live_event, "live")
