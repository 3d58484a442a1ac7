"""What a job holds, backed by the database so double allocation cannot be stored.

- Allocation: one row per (job, GPU) with the share held; `active` while held.
- GpuLedger: one row per GPU with the sums of what is held, guarded by CHECK constraints
  (compute <= 100 %, memory <= the GPU's, replicas <= the pool's, one sharing kind at a time).
  Actions change it only by conditional UPDATEs, so a stale decision changes no row.
- MigSliceClaim: one row per occupied MIG memory slot (0-7), unique per (GPU, slot): two MIG
  instances can never overlap, whatever their profiles.
Exclusive GPUs and time-slice replicas are also unique among active allocations.
"""

from django.db import models
from django.db.models import Q

from scheduler.choices import ShareKind


class Allocation(models.Model):
    job = models.ForeignKey("scheduler.Job", on_delete=models.CASCADE, related_name="allocations")
    # Its lookups use the (gpu, active) index below, which begins with it.
    gpu = models.ForeignKey("fabric.GPU", on_delete=models.CASCADE, related_name="allocations", db_index=False)
    kind = models.CharField(max_length=12, choices=ShareKind.choices)
    compute_pct = models.PositiveSmallIntegerField(default=100)
    memory_mib = models.PositiveIntegerField(default=0)
    mig_profile = models.CharField(max_length=16, blank=True)
    mig_start = models.PositiveSmallIntegerField(null=True, blank=True)
    mig_slices = models.PositiveSmallIntegerField(default=0)
    replica = models.PositiveSmallIntegerField(null=True, blank=True)
    active = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "gpu"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu"], condition=Q(active=True, kind=ShareKind.WHOLE), name="one_active_whole_gpu"
            ),
            models.UniqueConstraint(
                fields=["gpu", "replica"], condition=Q(active=True, kind=ShareKind.TIMESLICE), name="one_replica_holder"
            ),
            models.UniqueConstraint(fields=["job", "gpu"], condition=Q(active=True), name="one_share_per_job_gpu"),
            models.CheckConstraint(condition=Q(compute_pct__range=(0, 100)), name="allocation_pct_0_100"),
            models.CheckConstraint(
                condition=~Q(kind=ShareKind.MIG) | Q(mig_start__isnull=False, mig_slices__gte=1), name="mig_has_slot"
            ),
        ]
        indexes = [models.Index(fields=["gpu", "active"])]

    def __str__(self) -> str:
        return f"job {self.job_id} on gpu {self.gpu_id} ({self.kind})"


class GpuLedger(models.Model):
    gpu = models.OneToOneField("fabric.GPU", on_delete=models.CASCADE, primary_key=True, related_name="ledger")
    compute_pct = models.PositiveSmallIntegerField(default=0)
    memory_mib = models.PositiveIntegerField(default=0)
    memory_total_mib = models.PositiveIntegerField(default=0)
    mig_slices = models.PositiveSmallIntegerField(default=0)
    replicas = models.PositiveSmallIntegerField(default=0)
    replicas_max = models.PositiveSmallIntegerField(default=1)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(compute_pct__lte=100), name="ledger_compute_le_100"),
            models.CheckConstraint(
                condition=Q(memory_mib__lte=models.F("memory_total_mib")), name="ledger_memory_le_total"
            ),
            models.CheckConstraint(condition=Q(mig_slices__lte=8), name="ledger_mig_slots_le_8"),
            models.CheckConstraint(condition=Q(replicas__lte=models.F("replicas_max")), name="ledger_replicas_le_max"),
            # One way of sharing at a time: whole/MPS (compute), MIG (slices) or time-slicing (replicas).
            models.CheckConstraint(
                condition=(Q(compute_pct=0) | Q(mig_slices=0, replicas=0)) & (Q(mig_slices=0) | Q(replicas=0)),
                name="ledger_one_sharing_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"ledger of gpu {self.gpu_id}"


class MigSliceClaim(models.Model):
    gpu = models.ForeignKey("fabric.GPU", on_delete=models.CASCADE, related_name="mig_claims")
    slice = models.PositiveSmallIntegerField()
    allocation = models.ForeignKey(Allocation, on_delete=models.CASCADE, related_name="slice_claims")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["gpu", "slice"], name="one_holder_per_mig_slice"),
            models.CheckConstraint(condition=Q(slice__lte=7), name="mig_slot_0_7"),
        ]

    def __str__(self) -> str:
        return f"gpu {self.gpu_id} slice {self.slice}"
