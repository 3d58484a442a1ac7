from django.apps import AppConfig

from fabric.collectors.registry import check_settings


class FabricConfig(AppConfig):
    name = "fabric"
    verbose_name = "Fabric inventory"

    def ready(self) -> None:
        check_settings()  # a misspelt TELEMETRY_COLLECTOR stops every process at start, naming the wrong name
