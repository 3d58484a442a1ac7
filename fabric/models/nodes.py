from django.core.validators import RegexValidator
from django.db import models

from fabric.choices import CaKind, NodeRole, NodeState

# A name that is also a Kubernetes label value and a Slurm block name (docs/integrations.md).
NVLINK_DOMAIN_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"


class Node(models.Model):
    """A server: compute (GPUs), storage or login."""

    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="nodes")
    hostname = models.CharField(max_length=128)
    role = models.CharField(max_length=8, choices=NodeRole.choices, default=NodeRole.COMPUTE)
    rack = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=8, choices=NodeState.choices, default=NodeState.UP)
    state_reason = models.CharField(max_length=255, blank=True)
    gpu_model = models.CharField(max_length=32, blank=True)
    unnamed = models.BooleanField(
        default=False,
        help_text="The fabric named no host for its HCAs (firmware-default node description): the hostname is a "
        "placeholder from their system image GUID. Rename it, or let a later import or the node agent name it.",
    )
    system_guid = models.CharField(
        max_length=16, blank=True, help_text="System image GUID of an unnamed host's HCAs (else an HCA's node GUID)."
    )
    nvlink_domain = models.CharField(
        max_length=63,
        blank=True,
        validators=[
            RegexValidator(
                NVLINK_DOMAIN_PATTERN,
                "letters, digits, '-', '_' and '.', starting and ending with a letter or digit (at most 63)",
            )
        ],
        help_text="The multi-node NVLink domain this server's GPUs are in, shared with the other servers of one "
        "NVLink system (a GB200 NVL72 rack; nvidia-smi -q names it by its Fabric ClusterUUID and CliqueId). Blank: "
        "NVLink stays inside the server. Exported as Slurm blocks and a Kueue level (docs/integrations.md).",
    )
    # Host resources jobs may ask for (scheduler.core NodeState.cpu_milli / memory_mib; Kubernetes' allocatable,
    # Slurm's CPUs / RealMemory). The node agent reports what the host has (reported_*); what jobs may take follows
    # it unless an operator set it (*_manual), e.g. to keep cores for the system. 0 = not tracked: never a constraint.
    cpu_milli = models.PositiveIntegerField(
        default=0,
        help_text="Host CPU jobs may take, in milli-CPUs (64 CPUs: 64000); 0 = not tracked, never a constraint.",
    )
    memory_mib = models.PositiveIntegerField(
        default=0, help_text="Host memory jobs may take, in MiB; 0 = not tracked, never a constraint."
    )
    cpu_milli_manual = models.BooleanField(
        default=False,
        help_text="Set by an operator: the agent's reports leave cpu_milli alone; cleared, it follows them again.",
    )
    memory_mib_manual = models.BooleanField(
        default=False,
        help_text="Set by an operator: the agent's reports leave memory_mib alone; cleared, it follows them again.",
    )
    reported_cpu_milli = models.PositiveIntegerField(
        default=0, help_text="The host's CPUs as its node agent last reported them, milli-CPUs (0: never reported)."
    )
    reported_memory_mib = models.PositiveIntegerField(
        default=0, help_text="The host's MemTotal as its node agent last reported it, MiB (0: never reported)."
    )

    # The transaction that last wrote the row (fabric.change_feed): fabric_version recounts only after a write.
    change_xid = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["cluster", "hostname"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hostname"], name="node_hostname_unique_per_cluster")]
        indexes = [
            models.Index(fields=["cluster", "state"]),
            models.Index(fields=["change_xid"], name="node_change_xid"),
        ]

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
    system_guid = models.CharField(
        max_length=16, blank=True, help_text="System image GUID: shared by the HCAs (functions) of one system."
    )

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
        if self.node_id:
            return f"{self.node.hostname} {self.device}".strip()
        return self.description or self.guid

    @property
    def unnamed(self) -> bool:
        """A host's adapter the fabric named no host for (its node is an unnamed placeholder)."""
        return self.kind == CaKind.HOST and self.node_id is not None and self.node.unnamed
