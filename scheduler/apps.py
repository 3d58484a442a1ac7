from django.apps import AppConfig

from fabric import events, providers


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        # Here, not at the top: both modules read models, which exist only once the app registry is ready.
        from scheduler import fabric_feed
        from scheduler import tasks as _tasks  # noqa: F401  registers the tasks by name for scheduler.enqueue

        events.subscribe(fabric_feed.on_fabric_changed)
        # The fabric shows jobs (the twin runs them) and pools (a cluster's load) without importing the scheduler.
        providers.register_job_demand(fabric_feed.twin_jobs)
        providers.register_load_section("pools", fabric_feed.pools_load)
