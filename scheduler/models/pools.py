from django.db import models

from scheduler.choices import SharingMode


class Pool(models.Model):
    """GPUs of a cluster shared one way. Nodes not assigned to any pool belong to the cluster's default pool."""

    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="pools")
    name = models.SlugField(max_length=64)
    sharing = models.CharField(max_length=12, choices=SharingMode.choices, default=SharingMode.EXCLUSIVE)
    timeslice_replicas = models.PositiveSmallIntegerField(default=4, help_text="Replicas per GPU (time-slicing).")
    is_default = models.BooleanField(default=False)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="pool_name_unique_per_cluster"),
            models.UniqueConstraint(fields=["cluster"], condition=models.Q(is_default=True), name="one_default_pool"),
            models.CheckConstraint(condition=models.Q(timeslice_replicas__gte=1), name="timeslice_replicas_min_1"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


class PoolNode(models.Model):
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="members")
    node = models.OneToOneField("fabric.Node", on_delete=models.CASCADE, related_name="pool_member")

    def __str__(self) -> str:
        return f"{self.node} in {self.pool}"
