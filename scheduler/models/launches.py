"""One node's part of one launch of a job: what the central side sent, what the node answered.

A job's placement makes one `Launch` per allocated node, keyed by the job's `generation` (bumped on every
placement), so every message about it names (job, generation, host) and a stale one is recognised. The
rows move only through scheduler.actions.lifecycle; docs/running-jobs.md draws the states.
"""

from django.db import models

from scheduler.choices import OPEN_LAUNCH_STATES, LaunchState


class Launch(models.Model):
    job = models.ForeignKey("scheduler.Job", on_delete=models.CASCADE, related_name="launches")
    generation = models.PositiveIntegerField()
    node = models.ForeignKey("fabric.Node", on_delete=models.CASCADE, related_name="launches")
    hostname = models.CharField(max_length=255, help_text="The node's queue is node.<hostname>.")
    state = models.CharField(max_length=12, choices=LaunchState.choices, default=LaunchState.SENT)
    gpu_ids = models.JSONField(default=list, blank=True, help_text="fabric GPU ids this launch holds on the node.")
    payload = models.JSONField(default=dict, blank=True, help_text="What the node was sent (prepare and start).")
    master_port = models.PositiveIntegerField(
        null=True, blank=True, help_text="On the job's master node only: the MASTER_PORT it listens on."
    )
    slurm_job_id = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="LAUNCHER=slurm: the Slurm job this generation was submitted as."
    )
    stop_why = models.CharField(max_length=16, blank=True, help_text="preemption, migration, cancel, failure, ...")
    pid = models.IntegerField(null=True, blank=True)
    returncode = models.IntegerField(null=True, blank=True, help_text="Negative: killed by that signal.")
    exited_within_grace = models.BooleanField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    changed_at = models.DateTimeField(help_text="Last change of state: the ack and stop timeouts count from it.")
    acked_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    stop_sent_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "generation", "hostname"]
        constraints = [
            models.UniqueConstraint(fields=["job", "generation", "node"], name="one_launch_per_job_generation_node"),
            # Two jobs whose rank 0 runs on one node never listen on the same port while either may run.
            models.UniqueConstraint(
                fields=["node", "master_port"],
                condition=models.Q(state__in=OPEN_LAUNCH_STATES, master_port__isnull=False),
                name="one_open_launch_per_master_port",
            ),
        ]
        indexes = [models.Index(fields=["state", "changed_at"]), models.Index(fields=["hostname", "state"])]

    def __str__(self) -> str:
        return f"job {self.job_id} generation {self.generation} on {self.hostname}: {self.state}"
