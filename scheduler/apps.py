from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        from fabric import events

        events.subscribe(_fabric_changed)


def _fabric_changed(cluster_id: int, payload: dict) -> None:
    """Node drained or down, GPU health or inventory changed: capacity moved, so schedule again."""
    from scheduler.models import ClusterScheduler
    from scheduler.tasks import request_round

    if ClusterScheduler.objects.filter(cluster_id=cluster_id).exists():
        request_round(cluster_id, f"fabric: {payload.get('kind', 'changed')}")
