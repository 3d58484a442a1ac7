import math
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import models


class GpuMetric(models.Model):
    """One GPU's reading at one poll (the time series; the latest state lives in the cache)."""

    SERIES_FIELDS = ("utilisation_pct", "memory_used_mib", "temperature_c", "power_w")  # rolled up: avg and max

    # No index of its own: the unique (gpu, at) serves lookups by GPU. Every index is one more insert per row, and a
    # full poll writes 10,000 rows a second at 10,000 GPUs. No foreign-key constraint in the database either: its
    # check of every row at COMMIT was a fifth of a whole poll's ingest. Deleting a GPU still deletes its rows
    # (Django's CASCADE); a row written for a GPU deleted in the same second is read by no query that joins the
    # GPU and goes with the retention pruning.
    gpu = models.ForeignKey(
        "fabric.GPU", on_delete=models.CASCADE, related_name="metrics", db_index=False, db_constraint=False
    )
    at = models.DateTimeField()
    utilisation_pct = models.FloatField(null=True)
    memory_used_mib = models.FloatField(null=True)
    temperature_c = models.FloatField(null=True)
    power_w = models.FloatField(null=True)

    class Meta:
        # (at): rollups and pruning scan a time range across every gpu; (gpu, at) is the unique constraint's index.
        indexes = [models.Index(fields=["at"], name="fabric_gpumetric_at_idx")]
        constraints = [models.UniqueConstraint(fields=["gpu", "at"], name="one_gpu_metric_per_instant")]

    def __str__(self) -> str:
        return f"gpu {self.gpu_id} at {self.at:%H:%M:%S}"


class PortMetric(models.Model):
    """One port's rates over one poll interval, ending at `at`."""

    SERIES_FIELDS = ("tx_bytes_per_s", "rx_bytes_per_s", "xmit_wait_per_s", "utilisation")  # rolled up: avg and max

    port = models.ForeignKey(  # no index nor constraint of its own, as GpuMetric.gpu
        "fabric.Port", on_delete=models.CASCADE, related_name="metrics", db_index=False, db_constraint=False
    )
    at = models.DateTimeField()
    tx_bytes_per_s = models.FloatField(null=True)
    rx_bytes_per_s = models.FloatField(null=True)
    xmit_wait_per_s = models.FloatField(null=True)
    utilisation = models.FloatField(null=True, help_text="0..1 of the link's capacity, busiest direction")
    errors = models.JSONField(default=dict, blank=True, help_text="error counter growth in the interval")

    class Meta:
        # (at): rollups and pruning scan a time range across every port; (port, at) is the unique constraint's index.
        indexes = [models.Index(fields=["at"], name="fabric_portmetric_at_idx")]
        constraints = [models.UniqueConstraint(fields=["port", "at"], name="one_port_metric_per_instant")]

    def __str__(self) -> str:
        return f"port {self.port_id} at {self.at:%H:%M:%S}"


class Resolution(models.IntegerChoices):
    MINUTE = 60, "1 min"
    HOUR = 3600, "1 h"


def bucket_start(at: datetime, resolution_s: int) -> datetime:
    """Start (UTC) of the bucket of `resolution_s` seconds that holds `at`."""
    ts = math.floor(at.timestamp())
    return datetime.fromtimestamp(ts - ts % resolution_s, UTC)


def retention(tier: int) -> timedelta:
    """How long a tier is kept (TELEMETRY_RETENTION_*): 0 = raw samples, else a rollup resolution in seconds."""
    if tier == Resolution.MINUTE:
        return timedelta(days=settings.TELEMETRY_RETENTION_MINUTE_D)
    if tier == Resolution.HOUR:
        return timedelta(days=settings.TELEMETRY_RETENTION_HOUR_D)
    return timedelta(hours=settings.TELEMETRY_RETENTION_RAW_H)


class GpuMetricRollup(models.Model):
    """One GPU's readings over one bucket [at, at + resolution_s): count, averages and maxima.

    1-minute buckets come from the raw GpuMetric rows, 1-hour buckets from the 1-minute ones (averages weighted
    by sample count); fabric.actions.rollup_metrics writes them, prune_metrics ages them out.
    """

    gpu = models.ForeignKey("fabric.GPU", on_delete=models.CASCADE, related_name="metric_rollups")
    resolution_s = models.PositiveIntegerField(choices=Resolution.choices)
    at = models.DateTimeField(help_text="bucket start (UTC)")
    samples = models.PositiveIntegerField(help_text="raw readings in the bucket")
    utilisation_pct_avg = models.FloatField(null=True)
    utilisation_pct_max = models.FloatField(null=True)
    memory_used_mib_avg = models.FloatField(null=True)
    memory_used_mib_max = models.FloatField(null=True)
    temperature_c_avg = models.FloatField(null=True)
    temperature_c_max = models.FloatField(null=True)
    power_w_avg = models.FloatField(null=True)
    power_w_max = models.FloatField(null=True)

    class Meta:
        indexes = [models.Index(fields=["resolution_s", "at"])]
        constraints = [
            models.UniqueConstraint(fields=["gpu", "resolution_s", "at"], name="one_gpu_rollup_per_bucket"),
            models.CheckConstraint(condition=models.Q(resolution_s__in=[60, 3600]), name="gpu_rollup_resolution"),
        ]

    def __str__(self) -> str:
        return f"gpu {self.gpu_id} {self.resolution_s}s at {self.at:%Y-%m-%d %H:%M}"


class PortMetricRollup(models.Model):
    """One port's rates over one bucket [at, at + resolution_s), like GpuMetricRollup; error growth summed."""

    port = models.ForeignKey("fabric.Port", on_delete=models.CASCADE, related_name="metric_rollups")
    resolution_s = models.PositiveIntegerField(choices=Resolution.choices)
    at = models.DateTimeField(help_text="bucket start (UTC)")
    samples = models.PositiveIntegerField(help_text="raw readings in the bucket")
    tx_bytes_per_s_avg = models.FloatField(null=True)
    tx_bytes_per_s_max = models.FloatField(null=True)
    rx_bytes_per_s_avg = models.FloatField(null=True)
    rx_bytes_per_s_max = models.FloatField(null=True)
    xmit_wait_per_s_avg = models.FloatField(null=True)
    xmit_wait_per_s_max = models.FloatField(null=True)
    utilisation_avg = models.FloatField(null=True)
    utilisation_max = models.FloatField(null=True)
    errors_total = models.BigIntegerField(default=0, help_text="all error counters' growth in the bucket")
    errors = models.JSONField(default=dict, blank=True, help_text="growth per error counter in the bucket")

    class Meta:
        indexes = [models.Index(fields=["resolution_s", "at"])]
        constraints = [
            models.UniqueConstraint(fields=["port", "resolution_s", "at"], name="one_port_rollup_per_bucket"),
            models.CheckConstraint(condition=models.Q(resolution_s__in=[60, 3600]), name="port_rollup_resolution"),
        ]

    def __str__(self) -> str:
        return f"port {self.port_id} {self.resolution_s}s at {self.at:%Y-%m-%d %H:%M}"
