from django.db import models


class ClusterScheduler(models.Model):
    """Per-cluster scheduling state; its row lock makes rounds of one cluster run one at a time."""

    cluster = models.OneToOneField("fabric.Cluster", on_delete=models.CASCADE, related_name="scheduler")
    next_queue_seq = models.BigIntegerField(default=1)
    last_round_at = models.DateTimeField(null=True, blank=True)
    # The queue as the last round left it, written once per round however long the queue:
    # queue: {"texts": [distinct reasons], "starts": {job id: [estimated start, epoch seconds, basis]} for the jobs
    # the round reserved GPUs for}; queue_lines: the job ids in order and each one's index into texts, packed
    # (scheduler.queue_lines: 50,000 jobs as JSON cost PostgreSQL 30-40 ms a round to parse).
    queue = models.JSONField(default=dict, blank=True)
    queue_lines = models.BinaryField(default=b"", blank=True)

    def __str__(self) -> str:
        return f"scheduler of {self.cluster}"


class SchedulingRound(models.Model):
    cluster = models.ForeignKey("fabric.Cluster", on_delete=models.CASCADE, related_name="rounds")
    started = models.DateTimeField()
    duration_ms = models.FloatField(default=0.0)
    engine_ms = models.FloatField(default=0.0)
    trigger = models.CharField(max_length=64, blank=True)
    pending = models.PositiveIntegerField(default=0)
    running = models.PositiveIntegerField(default=0)
    placed = models.PositiveIntegerField(default=0)
    preempted = models.PositiveIntegerField(default=0)
    migrated = models.PositiveIntegerField(default=0)
    requeued = models.PositiveIntegerField(default=0)
    rejected_stale = models.PositiveIntegerField(default=0)
    stats = models.JSONField(default=dict)
    decisions = models.JSONField(default=list, help_text="What was decided, and why (compact).")

    class Meta:
        ordering = ["-started"]

    def __str__(self) -> str:
        return f"round {self.pk} of {self.cluster} at {self.started:%H:%M:%S}"
