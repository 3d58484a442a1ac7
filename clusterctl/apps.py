from django.apps import AppConfig


class ClusterctlConfig(AppConfig):
    name = "clusterctl"
    verbose_name = "clusterctl"
