from django.apps import AppConfig


class ClusterctlConfig(AppConfig):
    name = "clusterctl"
    verbose_name = "clusterctl"

    def ready(self) -> None:
        from clusterctl import metrics

        metrics.register()  # the cluster-state collector behind /metrics (and its settings check)
