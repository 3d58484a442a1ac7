from django.db import models
from django.db.models import Q

from fabric.choices import AlertSeverity


class Alert(models.Model):
    """A health rule that fired on an object (a GPU, a port, a node), open until it clears after its hold-down.

    One open alert per (cluster, rule, object): a rule that keeps firing updates `last_seen`, it does not
    pile up rows. `removes_capacity` alerts take their GPU or link out of placement while open.
    """

    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="alerts")
    rule = models.CharField(max_length=64)
    severity = models.CharField(max_length=8, choices=AlertSeverity.choices)
    object_kind = models.CharField(max_length=8)  # "gpu", "port", "node"
    object_key = models.CharField(max_length=200, help_text="node/gpu-uuid, node/mlx5_0/1, ...")
    message = models.CharField(max_length=500)
    removes_capacity = models.BooleanField(default=False)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=150, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "rule", "object_key"], condition=Q(cleared_at__isnull=True), name="one_open_alert"
            )
        ]
        indexes = [models.Index(fields=["cluster", "cleared_at"])]

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"
