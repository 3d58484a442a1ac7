from django.apps import AppConfig

from fabric.collectors.registry import check_settings


class FabricConfig(AppConfig):
    name = "fabric"
    verbose_name = "Fabric inventory"

    def ready(self) -> None:
        check_settings()  # a misspelt TELEMETRY_COLLECTOR stops every process at start, naming the wrong name
        # Here, not at the top: these modules read models, which exist only once the app registry is ready.
        from fabric import events, reports

        events.subscribe(reports.fabric_changed)  # the report's inventory stamp, and its warm-up after a change
