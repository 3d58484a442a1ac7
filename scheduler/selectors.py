"""Read-only queries of the scheduler (bounded query counts)."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import NamedTuple

from django.db.models import Count, Q, QuerySet, Sum

from fabric.choices import GpuHealth, NodeState
from fabric.latest import node_loads
from fabric.models import GPU, Node, Port
from fabric.selectors import link_labels
from fabric.telemetry.imbalance import hottest, spread
from scheduler import queue_lines
from scheduler.choices import ACTIVE_STATUSES, JobStatus, StartEstimate
from scheduler.models import Allocation, ClusterScheduler, Job, Pool, PoolNode, PriorityClass, Tenant

log = logging.getLogger(__name__)


def pool_nodes(pool: Pool) -> QuerySet[Node]:
    """Nodes of a pool; the default pool holds every node of the cluster that no other pool claims."""
    if pool.is_default:
        claimed = PoolNode.objects.filter(pool__cluster_id=pool.cluster_id).values("node_id")
        return Node.objects.filter(cluster_id=pool.cluster_id).exclude(pk__in=claimed)
    return Node.objects.filter(pool_member__pool=pool)


def pool_gpus(pool: Pool) -> QuerySet[GPU]:
    return GPU.objects.filter(node__in=pool_nodes(pool), node__role="compute")


def pool_capacity(pool: Pool) -> dict:
    return pool_capacities([pool])[pool.pk]


def pool_capacities(pools: list[Pool]) -> dict[int, dict]:
    """Capacity and free GPUs by model, and free blocks by shape (GPUs free together on one node), per pool.

    Three queries whatever the number of pools: GPUs of their clusters, pool membership, busy GPUs.
    """
    clusters = {p.cluster_id for p in pools}
    member_of = dict(PoolNode.objects.filter(pool__cluster_id__in=clusters).values_list("node_id", "pool_id"))
    default_of = {p.cluster_id: p.pk for p in Pool.objects.filter(cluster_id__in=clusters, is_default=True)}
    busy = set(
        Allocation.objects.filter(active=True, gpu__node__cluster_id__in=clusters).values_list("gpu_id", flat=True)
    )
    per_pool: dict[int, dict] = {
        p.pk: {"models": defaultdict(lambda: {"total": 0, "usable": 0, "free": 0, "memory_mib": 0}),
               "free": Counter(), "total": Counter()}
        for p in pools
    }  # fmt: skip
    rows = GPU.objects.filter(node__cluster_id__in=clusters, node__role="compute").values_list(
        "pk", "node_id", "node__cluster_id", "model", "memory_mib", "health", "node__state"
    )
    for gpu_id, node_id, cluster_id, model, memory, health, node_state in rows:
        acc = per_pool.get(member_of.get(node_id, default_of.get(cluster_id)))
        if acc is None:
            continue
        m = acc["models"][model]
        m["total"] += 1
        m["memory_mib"] = max(m["memory_mib"], memory)
        acc["total"][node_id] += 1
        if health == GpuHealth.HEALTHY and node_state == NodeState.UP:
            m["usable"] += 1
            if gpu_id not in busy:
                m["free"] += 1
                acc["free"][node_id] += 1
    result = {}
    for pool_id, acc in per_pool.items():
        free, total = acc["free"], acc["total"]
        result[pool_id] = {
            "models": {k: dict(v) for k, v in acc["models"].items()},
            "gpus_per_node_max": max(total.values(), default=0),
            "free_blocks": {str(k): sum(f // k for f in free.values()) for k in (1, 2, 4, 8)},
            "nodes_fully_free": sum(1 for n, f in free.items() if f == total[n]),
        }
    return result


class QueueEntry(NamedTuple):
    """A pending job as the last round left it."""

    position: int  # 1-based place in its cluster's queue
    reason: str  # why it waits
    estimated_start: datetime | None  # when the round expects it to start: None when it holds no GPUs for it
    start_estimate: str  # what that rests on: a StartEstimate value ("none" without an estimate)


def queue_entries(cluster_ids: list[int]) -> dict[int, QueueEntry]:
    """job id -> its QueueEntry, from the last round of each cluster (one query). A cluster whose stored lines
    cannot be read shows no queue (logged) until its next round writes them again."""
    info: dict[int, QueueEntry] = {}
    rows = ClusterScheduler.objects.filter(cluster_id__in=cluster_ids).values_list("cluster_id", "queue", "queue_lines")
    for cluster_id, queue, packed in rows:
        texts = queue.get("texts", [])
        starts = queue.get("starts", {})
        try:
            order, reasons = queue_lines.unpack(bytes(packed))
        except queue_lines.QueueLinesError as exc:
            log.warning("cluster %s: %s", cluster_id, exc)
            continue
        for i, (job_id, reason) in enumerate(zip(order, reasons, strict=True), 1):
            start = starts.get(str(job_id))
            if start is None:
                info[job_id] = QueueEntry(i, texts[reason], None, StartEstimate.NONE)
            else:
                info[job_id] = QueueEntry(i, texts[reason], datetime.fromtimestamp(start[0], tz=UTC), start[1])
    return info


def queue_info(cluster_ids: list[int]) -> dict[int, tuple[int, str]]:
    """job id -> (1-based place in its cluster's queue, why it waits), from the last round."""
    return {job_id: (e.position, e.reason) for job_id, e in queue_entries(cluster_ids).items()}


class LazyQueue:
    """Queue positions, reasons and start estimates, loaded once per request per cluster, only if a pending job is
    shown."""

    def __init__(self) -> None:
        self._by_cluster: dict[int, dict[int, QueueEntry]] = {}

    def get(self, cluster_id: int, job_id: int) -> QueueEntry | None:
        if cluster_id not in self._by_cluster:
            self._by_cluster[cluster_id] = queue_entries([cluster_id])
        return self._by_cluster[cluster_id].get(job_id)


def priority_limit(tenant: Tenant) -> int:
    """The highest priority value a tenant's jobs may ask for: its max_priority, else the default class's."""
    if tenant.max_priority_id is not None:
        return tenant.max_priority.value
    default = PriorityClass.objects.filter(name="normal").first() or PriorityClass.objects.order_by("value").first()
    return default.value if default is not None else 0


def priority_class_names(classes: list[PriorityClass]) -> str:
    """'high (100), normal (50), low (10), best-effort (0)': highest first, each with its value."""
    return ", ".join(f"{c.name} ({c.value})" for c in sorted(classes, key=lambda c: -c.value)) or "none"


def priority_class_choices(tenant: Tenant | None) -> list[dict]:
    """Every priority class, highest first, for /api/v1/choices/: and whether `tenant` may ask for it (None for a
    caller who belongs to no tenant)."""
    limit = priority_limit(tenant) if tenant is not None else None
    return [
        {
            "value": c.name,
            "label": c.description,
            "priority": c.value,
            "preemptible_default": c.preemptible_default,
            "always_preemptible": c.always_preemptible,
            "allowed": None if limit is None else c.value <= limit,
        }
        for c in PriorityClass.objects.order_by("-value")
    ]


def tenant_usage(tenant_id: int) -> dict[int, int]:
    """GPUs (whole or shared, counted once per GPU) each pool's active jobs of a tenant hold."""
    rows = (
        Allocation.objects.filter(active=True, job__tenant_id=tenant_id)
        .values("job__pool_id")
        .annotate(gpus=Count("gpu", distinct=True))
    )
    return {r["job__pool_id"]: r["gpus"] for r in rows}


def queue_counts(pool_ids: list[int]) -> dict[int, dict[str, int]]:
    rows = (
        Job.objects.filter(pool_id__in=pool_ids)
        .values("pool_id")
        .annotate(
            pending=Count("pk", filter=Q(status=JobStatus.PENDING)),
            running=Count("pk", filter=Q(status__in=ACTIVE_STATUSES)),
            gpus_pending=Sum("gpus", filter=Q(status=JobStatus.PENDING)),
        )
    )
    return {r["pool_id"]: r for r in rows}


def pool_load(pools: list[Pool], hottest_n: int = 5) -> dict[int, dict]:
    """Per pool, from telemetry's latest state: spread of GPU utilisation (imbalance) and its hottest host links.

    Three queries whatever the number of pools (membership, GPUs, host ports) plus one cache read per cluster.
    """

    clusters = {p.cluster_id for p in pools}
    member_of = dict(PoolNode.objects.filter(pool__cluster_id__in=clusters).values_list("node_id", "pool_id"))
    default_of = {p.cluster_id: p.pk for p in pools if p.is_default}
    util: dict[int, float] = {}
    links: dict[int, float] = {}
    hosts: dict[int, list[str]] = defaultdict(list)
    gpu_rows = list(
        GPU.objects.filter(node__cluster_id__in=clusters, node__role="compute").values_list(
            "pk", "node_id", "node__cluster_id", "node__hostname"
        )
    )
    for _, _, cluster_id, host in gpu_rows:
        hosts[cluster_id].append(host)
    for cluster_id in clusters:
        for load in node_loads(cluster_id, sorted(set(hosts[cluster_id]))).values():
            util.update(load["gpus"])
            for link_id, u in load["links"].items():
                links[link_id] = max(u, links.get(link_id, 0.0))
    values: dict[int, list[float]] = defaultdict(list)
    for gpu_id, node_id, cluster_id, _ in gpu_rows:
        pool_id = member_of.get(node_id, default_of.get(cluster_id))
        if pool_id is not None and gpu_id in util:
            values[pool_id].append(util[gpu_id])
    pool_links: dict[int, set[int]] = defaultdict(set)
    for node_id, cluster_id, link_id in Port.objects.filter(
        hca__node__cluster_id__in=clusters, link__isnull=False
    ).values_list("hca__node_id", "cluster_id", "link_id"):
        pool_id = member_of.get(node_id, default_of.get(cluster_id))
        if pool_id is not None:
            pool_links[pool_id].add(link_id)
    tops = {p.pk: hottest(links, hottest_n, among=pool_links[p.pk]) for p in pools}
    labels = link_labels(sorted({k for top in tops.values() for k, _ in top}))
    out = {}
    for p in pools:
        s = spread(values[p.pk])
        out[p.pk] = {
            "gpus_reporting": s.count,
            "mean_utilisation": s.mean,
            "stddev": s.stddev,
            "cv": s.cv,
            "min": s.minimum,
            "max": s.maximum,
            "idle_gpus": s.idle,
            "busy_gpus": s.busy,
            "hottest_links": [
                {"link": k, "utilisation": round(v, 4), "label": labels.get(k, "")} for k, v in tops[p.pk]
            ],
        }
    return out
