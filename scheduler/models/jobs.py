from django.db import models

from scheduler.choices import ACTIVE_STATUSES, JobStatus, SharingMode, TopologyRequirement, Workload

# The jobs a scheduling round reads (scheduler.snapshot_from_db): waiting ones it may place, and those holding GPUs.
# A preempted job holds its GPUs until its nodes stopped it (scheduler.actions.lifecycle): it is passed as a stopping
# running job, so its preemptor waits for it instead of preempting more. Slurm's own jobs (observed,
# scheduler.actions.slurm_observed) wait in Slurm's queue, not ours; running, they hold their GPUs and are never
# preempted or moved (movable=False).
LIVE_JOB = models.Q(status=JobStatus.PENDING, held=False, observed_slurm_id__isnull=True) | models.Q(
    status__in=(*ACTIVE_STATUSES, JobStatus.PREEMPTED)
)


class Job(models.Model):
    """A tenant's request for GPUs and what became of it. Status changes only through scheduler.actions."""

    # No index of their own: the (pool, status) and (tenant, status) indexes below begin with them and serve every
    # lookup by either. A job row changes several times in its life and every index takes an entry each time.
    tenant = models.ForeignKey("scheduler.Tenant", on_delete=models.CASCADE, related_name="jobs", db_index=False)
    pool = models.ForeignKey("scheduler.Pool", on_delete=models.PROTECT, related_name="jobs", db_index=False)
    name = models.CharField(max_length=128)
    # Shape: `gpus` in total; for a gang, `nodes` x `gpus_per_node` (all-or-nothing).
    gpus = models.PositiveIntegerField()
    nodes = models.PositiveIntegerField(null=True, blank=True)
    gpus_per_node = models.PositiveIntegerField(null=True, blank=True)
    gpu_model = models.CharField(max_length=32, blank=True)
    gpu_memory_mib = models.PositiveIntegerField(null=True, blank=True, help_text="Minimum memory per GPU.")
    sharing = models.CharField(max_length=12, choices=SharingMode.choices, default=SharingMode.EXCLUSIVE)
    mps_compute_pct = models.PositiveSmallIntegerField(null=True, blank=True)
    mps_memory_mib = models.PositiveIntegerField(null=True, blank=True)
    mig_profile = models.CharField(max_length=16, blank=True)
    priority_class = models.ForeignKey("scheduler.PriorityClass", on_delete=models.PROTECT, related_name="jobs")
    preemptible = models.BooleanField(default=True)
    workload = models.CharField(max_length=16, choices=Workload.choices, default=Workload.TRAINING)
    dataset_node = models.ForeignKey(
        "fabric.Node", on_delete=models.SET_NULL, null=True, blank=True, related_name="datasets_for_jobs"
    )
    require = models.CharField(
        max_length=8, choices=TopologyRequirement.choices, blank=True, default="",
        help_text="Where all its GPUs must be: one node, leaf or pod; empty = anywhere, compact preferred.",
    )  # fmt: skip
    # The job's own profile, as the placement cost model prices it (docs/scheduler.md); unset = the workload's default.
    allreduce_mb = models.FloatField(null=True, blank=True, help_text="Gradient MB all-reduced per training step.")
    step_compute_ms = models.FloatField(null=True, blank=True, help_text="Compute ms per step on one GPU.")
    # Host CPU and memory on each node it runs on (scheduler.core JobRequest.host_*; Slurm's --mem is per node),
    # placed against the nodes' Node.cpu_milli / memory_mib; null: none asked. The API's `cpus` is this / 1000.
    host_cpu_milli = models.PositiveIntegerField(
        null=True, blank=True, help_text="Host CPU on each node, milli-CPUs (the API's cpus x 1000)."
    )
    host_memory_mib = models.PositiveIntegerField(null=True, blank=True, help_text="Host memory on each node, MiB.")
    est_runtime_s = models.PositiveIntegerField(null=True, blank=True)
    checkpoint_cost_s = models.PositiveIntegerField(default=60, help_text="Seconds to checkpoint and restart.")
    grace_period_s = models.PositiveIntegerField(default=30, help_text="Seconds between SIGTERM and SIGKILL.")
    requeue_opt_out = models.BooleanField(default=False, help_text="Fail instead of requeue when its GPUs fail.")
    command = models.TextField(blank=True)
    image = models.CharField(max_length=255, blank=True)
    env = models.JSONField(default=dict, blank=True)
    workdir = models.CharField(max_length=1024, blank=True, help_text="Working directory on the nodes (absolute).")
    # Bumped each time a placement of the job is applied: the key of its launches on the nodes, so a message
    # about an earlier launch is recognised and ignored (scheduler.actions.lifecycle).
    generation = models.PositiveIntegerField(default=0)

    status = models.CharField(max_length=12, choices=JobStatus.choices, default=JobStatus.PENDING)
    status_reason = models.CharField(max_length=500, blank=True)
    # Why an operator holds it. Why the scheduler leaves it waiting lives in ClusterScheduler.queue and queue_lines
    # (one row per round, not one UPDATE per waiting job); the API shows whichever applies as `pending_reason`.
    pending_reason = models.CharField(max_length=500, blank=True)
    held = models.BooleanField(default=False, help_text="Held by an operator: not scheduled until released.")
    queue_seq = models.BigIntegerField(default=0, help_text="Place in line; kept when the job is requeued.")
    borrowed = models.BooleanField(default=False, help_text="Runs on capacity borrowed beyond its quota.")
    attained_gpu_s = models.FloatField(default=0.0, help_text="GPU-seconds of service so far.")
    submitted_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_migrated_at = models.DateTimeField(null=True, blank=True)
    # Its last preemption (docs/scheduler.md, "No thrashing"): while the job it was preempted for waits, that job
    # has first call on the GPUs freed for it and this one is not placed back onto them.
    preempted_for = models.BigIntegerField(null=True, blank=True, help_text="The job it was last preempted for.")
    preempted_at = models.DateTimeField(null=True, blank=True)
    preempted_gpus = models.JSONField(default=list, blank=True, help_text="Ids of its GPUs that job takes.")
    version = models.PositiveIntegerField(default=0, help_text="Bumped on every change: stale decisions are refused.")
    # The transaction that last wrote the row (fabric.change_feed, migration 0018): a round reads only the jobs written
    # since its last read (scheduler.snapshot_from_db._read_jobs). Null on SQLite.
    change_xid = models.BigIntegerField(null=True, blank=True, editable=False)
    # The client's Idempotency-Key header of the submit, and a digest of its body: the same key sent again (a retry
    # after a timeout or a 503) answers with this job instead of queueing a second one (docs/api.md).
    observed_slurm_id = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Slurm's own job, observed read-only (SLURM_OBSERVE): its Slurm job id."
    )
    idempotency_key = models.CharField(max_length=64, blank=True, default="")
    request_digest = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["pool", "status"]),
            models.Index(fields=["tenant", "status"]),
            # Each round reads the jobs finished in the last week (fair share's decayed usage) and the shared-GPU
            # jobs (the request mix): without these, two scans of every job ever kept (16 and 12 ms at 50,000).
            models.Index(fields=["finished_at"], name="job_finished_at"),
            models.Index(fields=["pool"], condition=~models.Q(sharing="exclusive"), name="job_shared_by_pool"),
            # Each round reads every live job's version: with its own index it reads neither the jobs that ended
            # (all those ever kept) nor, once vacuum has seen their pages, the table.
            models.Index(fields=["pool", "id"], include=["version"], condition=LIVE_JOB, name="job_live_by_pool"),
            models.Index(fields=["change_xid"], name="job_change_xid"),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(gpus__gte=1), name="job_gpus_min_1"),
            models.CheckConstraint(
                condition=models.Q(mps_compute_pct__isnull=True) | models.Q(mps_compute_pct__range=(1, 100)),
                name="job_mps_pct_1_100",
            ),
            models.CheckConstraint(
                condition=models.Q(nodes__isnull=True, gpus_per_node__isnull=True)
                | models.Q(nodes__gte=1, gpus_per_node__gte=1),
                name="job_gang_shape_complete",
            ),
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="job_idempotency_key_per_tenant",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} {self.name}"


class JobEvent(models.Model):
    """Every state change of a job, with its reason."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    from_status = models.CharField(max_length=12, choices=JobStatus.choices, blank=True)
    to_status = models.CharField(max_length=12, choices=JobStatus.choices)
    reason = models.CharField(max_length=500)
    round = models.ForeignKey("scheduler.SchedulingRound", on_delete=models.SET_NULL, null=True, blank=True)
    actor = models.CharField(max_length=150, blank=True, help_text="User, or 'scheduler'.")

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_status} -> {self.to_status}"
