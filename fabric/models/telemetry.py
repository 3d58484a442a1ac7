from django.db import models


class GpuMetric(models.Model):
    """One GPU's reading at one poll (the time series; the latest state lives in the cache)."""

    gpu = models.ForeignKey("fabric.GPU", on_delete=models.CASCADE, related_name="metrics")
    at = models.DateTimeField()
    utilisation_pct = models.FloatField(null=True)
    memory_used_mib = models.FloatField(null=True)
    temperature_c = models.FloatField(null=True)
    power_w = models.FloatField(null=True)

    class Meta:
        indexes = [models.Index(fields=["gpu", "at"])]
        constraints = [models.UniqueConstraint(fields=["gpu", "at"], name="one_gpu_metric_per_instant")]

    def __str__(self) -> str:
        return f"gpu {self.gpu_id} at {self.at:%H:%M:%S}"


class PortMetric(models.Model):
    """One port's rates over one poll interval, ending at `at`."""

    port = models.ForeignKey("fabric.Port", on_delete=models.CASCADE, related_name="metrics")
    at = models.DateTimeField()
    tx_bytes_per_s = models.FloatField(null=True)
    rx_bytes_per_s = models.FloatField(null=True)
    xmit_wait_per_s = models.FloatField(null=True)
    utilisation = models.FloatField(null=True, help_text="0..1 of the link's capacity, busiest direction")
    errors = models.JSONField(default=dict, blank=True, help_text="error counter growth in the interval")

    class Meta:
        indexes = [models.Index(fields=["port", "at"])]
        constraints = [models.UniqueConstraint(fields=["port", "at"], name="one_port_metric_per_instant")]

    def __str__(self) -> str:
        return f"port {self.port_id} at {self.at:%H:%M:%S}"
