"""The overview topic: the cluster's headline figures and their trend."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from dashboard.selectors.cluster import _Cluster, _r, iso
from fabric.choices import AlertSeverity, GpuHealth, NodeState
from fabric.models import GPU
from fabric.telemetry.imbalance import IDLE_BELOW, spread
from scheduler.choices import ACTIVE_STATUSES, JobStatus
from scheduler.models import Allocation, Job, PriorityClass, SchedulingRound


def overview(c: _Cluster, trend: list[dict] | None = None) -> dict:
    gpus = (
        GPU.objects.filter(node__cluster_id=c.id, node__role="compute")
        .annotate(busy=Exists(Allocation.objects.filter(gpu_id=OuterRef("pk"), active=True)))
        .aggregate(
            total=Count("pk"),
            allocated=Count("pk", filter=Q(busy=True)),
            free=Count("pk", filter=Q(busy=False, health=GpuHealth.HEALTHY, node__state=NodeState.UP)),
            unhealthy=Count("pk", filter=~Q(health=GpuHealth.HEALTHY)),
        )
    )
    by_priority = dict.fromkeys(PriorityClass.objects.values_list("name", flat=True), 0)
    running = 0
    rows = (
        Job.objects.filter(pool__cluster_id=c.id, status__in=[JobStatus.PENDING, *ACTIVE_STATUSES])
        .values_list("status", "priority_class__name")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for status, priority, n in rows:
        if status == JobStatus.PENDING:
            by_priority[priority] = by_priority.get(priority, 0) + n
        else:
            running += n
    last = (
        SchedulingRound.objects.filter(cluster_id=c.id)
        .order_by("-started")
        .values("started", "placed", "duration_ms")
        .first()
    )
    severities = dict.fromkeys(AlertSeverity.values, 0)
    for _, severity, _, _ in c.open_alerts:
        severities[severity] = severities.get(severity, 0) + 1
    return {
        "cluster": {"id": c.row["id"], "name": c.row["name"]},
        "gpus": gpus,
        "utilisation": _utilisation(c),
        "queue": {"by_priority": by_priority, "running": running},
        "last_round": None
        if last is None
        else {"at": iso(last["started"]), "placed": last["placed"], "duration_ms": round(last["duration_ms"], 1)},
        "alerts": severities,
        "trend": list(trend or []),
    }


def overview_with_load(state: dict, c: _Cluster) -> dict:
    """`state` with the latest GPU utilisation (the only part telemetry changes): a new state."""
    return {**state, "utilisation": _utilisation(c)}


def _utilisation(c: _Cluster) -> dict:
    utilisation = spread([m[0] / 100 for m in c.gpu_metrics.values() if m and m[0] is not None])
    return {"mean": _r(utilisation.mean, 3), "cv": spread_cv(utilisation)}


def spread_cv(utilisation) -> float | None:
    """The overview's spread: the coefficient of variation of GPU utilisation (stddev / mean), or None when the mean is
    under IDLE_BELOW (5 %). Near a zero mean the ratio measures noise, not imbalance: one GPU at 1 % beside three
    idle ones has a mean of 0.25 % and a CV of sqrt(3) = 1.73, which would read as a badly balanced cluster."""
    if utilisation.mean is None or utilisation.cv is None or utilisation.mean < IDLE_BELOW:
        return None
    return _r(utilisation.cv, 3)


def trend_point(data: dict, at: datetime | None = None) -> dict:
    """The point the overview's trend gets from one overview state."""
    return {
        "at": iso(at or timezone.now()),
        "utilisation": data["utilisation"]["mean"],
        "allocated": data["gpus"]["allocated"],
        "pending": sum(data["queue"]["by_priority"].values()),
    }
