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


class ShareKind(models.TextChoices):
    WHOLE = "whole", "Whole GPU"
    MPS = "mps", "MPS share"
    MIG = "mig", "MIG instance"
    TIMESLICE = "timeslice", "Time-slice replica"


ALL_CHOICES = {"job_status": JobStatus, "sharing_mode": SharingMode, "workload": Workload}


# Priority classes every installation starts with (operators add or change them in the admin).
DEFAULT_PRIORITY_CLASSES = [
    ("high", 100, False, "Production work; may preempt lower classes."),
    ("normal", 50, True, "The default class."),
    ("low", 10, True, "Runs when there is room; preempted first."),
    ("best-effort", 0, True, "Scavenges idle GPUs; always preemptible."),
]
