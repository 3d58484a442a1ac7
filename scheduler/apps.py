from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        # Here, not at the top: these modules read models, which exist only once the app registry is ready.
        from fabric import events, providers
        from scheduler import fabric_feed
        from scheduler import tasks as _tasks  # noqa: F401  registers the tasks by name for scheduler.enqueue

        events.subscribe(_fabric_changed)
        # The fabric shows jobs (the twin runs them) and pools (a cluster's load) without importing the scheduler.
        providers.register_job_demand(fabric_feed.twin_jobs)
        providers.register_load_section("pools", fabric_feed.pools_load)


def _fabric_changed(cluster_id: int, payload: dict) -> None:
    """Node drained or down, GPU health or inventory changed: capacity moved, so schedule again."""
    # Here, not at the top: apps.py is imported before the models exist. `request_round` is looked up at each call,
    # so a test that replaces scheduler.enqueue.request_round (tests/scheduler/test_lock_order.py) is obeyed.
    from scheduler.enqueue import request_round
    from scheduler.models import ClusterScheduler

    if ClusterScheduler.objects.filter(cluster_id=cluster_id).exists():
        request_round(cluster_id, f"fabric: {payload.get('kind', 'changed')}")
