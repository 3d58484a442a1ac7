"""Scheduler states, each with its colour, defined once (read by admin, API and the queue page)."""

from django.db import models

from fabric.choices import ColouredChoices, coloured


@coloured({
    "pending": "sky", "admitted": "blue", "running": "green", "completed": "grey", "failed": "vermillion",
    "cancelled": "black", "preempted": "orange", "migrating": "purple",
})  # fmt: skip
class JobStatus(ColouredChoices):
    PENDING = "pending", "Pending"
    ADMITTED = "admitted", "Admitted"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"
    MIGRATING = "migrating", "Migrating"


ACTIVE_STATUSES = (JobStatus.ADMITTED, JobStatus.RUNNING, JobStatus.MIGRATING)
FINAL_STATUSES = (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED)


@coloured({"exclusive": "blue", "mps": "green", "mig": "purple", "timeslice": "orange"})
class SharingMode(ColouredChoices):
    EXCLUSIVE = "exclusive", "Exclusive (whole GPU, full isolation)"
    MPS = "mps", "MPS (compute % and memory limit; shared fault domain)"
    MIG = "mig", "MIG (hardware partition; memory and fault isolation)"
    TIMESLICE = "timeslice", "Time-slicing (replicas; no memory isolation)"


@coloured({"training": "blue", "inference": "green", "data-intensive": "orange"})
class Workload(ColouredChoices):
    TRAINING = "training", "Training"
    INFERENCE = "inference", "Inference"
    DATA_INTENSIVE = "data-intensive", "Data-intensive"


@coloured({
    "sent": "sky", "prepared": "blue", "starting": "yellow", "running": "green", "stopping": "orange",
    "stopped": "grey", "exited": "black", "refused": "vermillion", "timed_out": "purple", "lost": "vermillion",
})  # fmt: skip
class LaunchState(ColouredChoices):
    """One node's part of one launch (scheduler.models.Launch); docs/running-jobs.md draws the states."""

    SENT = "sent", "Prepare sent"
    PREPARED = "prepared", "Prepared (node acknowledged)"
    STARTING = "starting", "Start sent"
    RUNNING = "running", "Running"
    STOPPING = "stopping", "Stopping (SIGTERM sent)"
    STOPPED = "stopped", "Stopped"
    EXITED = "exited", "Exited"
    REFUSED = "refused", "Refused by the node"
    TIMED_OUT = "timed_out", "No answer in time"
    LOST = "lost", "Lost"


OPEN_LAUNCH_STATES = (
    LaunchState.SENT, LaunchState.PREPARED, LaunchState.STARTING, LaunchState.RUNNING, LaunchState.STOPPING,
)  # fmt: skip
# A node may be running the job's process in these (a start was sent): stopping them needs the node.
STARTED_LAUNCH_STATES = (LaunchState.STARTING, LaunchState.RUNNING, LaunchState.STOPPING)


class ShareKind(models.TextChoices):
    WHOLE = "whole", "Whole GPU"
    MPS = "mps", "MPS share"
    MIG = "mig", "MIG instance"
    TIMESLICE = "timeslice", "Time-slice replica"


class TopologyRequirement(models.TextChoices):
    """Where a job's GPUs must be (Slurm's `--switches=1`, Kueue's required topology): the engine's `require`.
    Without one the engine still prefers the most compact placement, and weighs waiting for it against starting
    spread out."""

    ANY = "", "Anywhere (compact preferred)"
    NODE = "node", "One node"
    LEAF = "leaf", "One leaf switch"
    POD = "pod", "One pod (spine group)"


class StartEstimate(models.TextChoices):
    """What a pending job's estimated start rests on, i.e. how sure it is (the engine's Reservation.basis)."""

    PREEMPTING = "preempting", "Jobs it preempted are stopping: it starts when they have (within their grace period)"
    STOPPING = "stopping", "It waits for jobs already stopping (within their grace period)"
    BACKFILL = "backfill", "GPUs reserved for it as running jobs end, by their estimated run times"
    LEAF = "leaf", "Waiting for one leaf as running jobs end, by their estimated run times"
    NONE = "none", "No estimate: nothing is reserved for it yet (quota, behind another job, or not yet seen)"


ALL_CHOICES = {
    "job_status": JobStatus,
    "launch_state": LaunchState,
    "sharing_mode": SharingMode,
    "workload": Workload,
}


# Priority classes every installation starts with (operators add or change them in the admin).
DEFAULT_PRIORITY_CLASSES = [
    ("high", 100, False, "Production work; may preempt lower classes."),
    ("normal", 50, True, "The default class."),
    ("low", 10, True, "Runs when there is room; preempted first."),
    ("best-effort", 0, True, "Scavenges idle GPUs; always preemptible."),
]
# Their jobs are always preemptible (PriorityClass.always_preemptible): a request for preemptible=false is refused.
ALWAYS_PREEMPTIBLE = frozenset({"low", "best-effort"})
