from django.db import models

from fabric.choices import CaKind, NodeRole, NodeState


class Node(models.Model):
    """A server: compute (GPUs), storage or login."""

    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="nodes")
    hostname = models.CharField(max_length=128)
    role = models.CharField(max_length=8, choices=NodeRole.choices, default=NodeRole.COMPUTE)
    rack = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=8, choices=NodeState.choices, default=NodeState.UP)
    state_reason = models.CharField(max_length=255, blank=True)
    gpu_model = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["cluster", "hostname"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hostname"], name="node_hostname_unique_per_cluster")]
        indexes = [models.Index(fields=["cluster", "state"])]

    def __str__(self) -> str:
        return self.hostname


class HCA(models.Model):
    """A channel adapter: an HCA in a server, or a SHARP aggregation node / router (no server)."""

    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="hcas")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="hcas", null=True, blank=True)
    guid = models.CharField(max_length=16, help_text="Node GUID, 16 lowercase hex digits.")
    device = models.CharField(max_length=32, blank=True, help_text="e.g. mlx5_0")
    description = models.CharField(max_length=255, blank=True)
    kind = models.CharField(max_length=12, choices=CaKind.choices, default=CaKind.HOST)

    class Meta:
        ordering = ["cluster", "node__hostname", "device"]
        verbose_name = "HCA"
        verbose_name_plural = "HCAs"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "guid"], name="hca_guid_unique_per_cluster"),
            models.CheckConstraint(condition=models.Q(guid__regex=r"^[0-9a-f]{16}$"), name="hca_guid_hex16"),
            models.CheckConstraint(
                condition=~models.Q(kind=CaKind.HOST) | models.Q(node__isnull=False), name="host_hca_has_node"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname} {self.device}" if self.node_id else self.description or self.guid
