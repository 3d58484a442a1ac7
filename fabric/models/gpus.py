from django.db import models

from fabric.choices import GpuHealth


class GPU(models.Model):
    node = models.ForeignKey("fabric.Node", on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(help_text="NVML index inside the node.")
    uuid = models.CharField(max_length=64, blank=True, help_text="GPU-xxxxxxxx-... as NVML reports it.")
    model = models.CharField(max_length=32)
    memory_mib = models.PositiveIntegerField(default=0)
    nvlink_generation = models.PositiveSmallIntegerField(default=0)
    nvlink_gbps = models.FloatField(default=0.0, help_text="NVLink bandwidth per GPU, GB/s bidirectional.")
    mig_capable = models.BooleanField(default=False)
    mig_enabled = models.BooleanField(default=False)
    health = models.CharField(max_length=8, choices=GpuHealth.choices, default=GpuHealth.HEALTHY)
    numa_node = models.SmallIntegerField(null=True, blank=True)
    cpu_affinity = models.CharField(max_length=128, blank=True)
    # The transaction that last wrote the row (fabric.change_feed): a round reads only the GPUs written since.
    change_xid = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["node", "index"]
        verbose_name = "GPU"
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_index_unique_per_node"),
            models.UniqueConstraint(fields=["uuid"], condition=~models.Q(uuid=""), name="gpu_uuid_unique"),
            models.CheckConstraint(
                condition=models.Q(mig_enabled=False) | models.Q(mig_capable=True), name="mig_enabled_needs_capable"
            ),
        ]
        indexes = [
            models.Index(fields=["health"]),
            models.Index(fields=["model"]),
            models.Index(fields=["change_xid"], name="gpu_change_xid"),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname}/gpu{self.index}"


class NodeTopology(models.Model):
    """The `nvidia-smi topo -m` matrix of one server, as reported.

    gpu_links: {"i-j": code} for GPU index pairs i < j ("NV12", "PIX", "SYS", ...);
    nic_affinity: {"i": {"mlx5_0": "PXB", ...}}. Kept whole because every consumer
    (placement inside a node, NCCL_IB_HCA) reads the whole matrix of a node at once.
    """

    node = models.OneToOneField("fabric.Node", on_delete=models.CASCADE, related_name="topology")
    gpu_links = models.JSONField(default=dict)
    nic_affinity = models.JSONField(default=dict)
    nics = models.JSONField(default=list)
    updated = models.DateTimeField(auto_now=True)
    # The transaction that last wrote the row (fabric.change_feed): a round reads only the matrices written since.
    change_xid = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name_plural = "node topologies"
        indexes = [models.Index(fields=["change_xid"], name="nodetopology_change_xid")]

    def __str__(self) -> str:
        return f"topology of {self.node}"

    def code(self, gpu_a: int, gpu_b: int) -> str:
        if gpu_a == gpu_b:
            return "X"
        a, b = sorted((gpu_a, gpu_b))
        return self.gpu_links.get(f"{a}-{b}", "")

    def closest_nics(self, gpu: int) -> list[str]:
        order = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}
        codes = self.nic_affinity.get(str(gpu), {})
        if not codes:
            return []
        best = min(order.get(c, 9) for c in codes.values())
        return sorted(n for n, c in codes.items() if order.get(c, 9) == best)
