from django.apps import AppConfig


class ClusterctlConfig(AppConfig):
    name = "clusterctl"
    verbose_name = "clusterctl"

    def ready(self) -> None:
        from clusterctl import lookups, metrics, throttles  # noqa: F401  (throttles: counts failed sign-ins, a signal receiver)

        lookups.register()  # field__any_of: one array parameter for a long list of ids

        metrics.register()  # the cluster-state collector behind /metrics (and its settings check)
