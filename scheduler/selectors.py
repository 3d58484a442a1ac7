"""Read-only queries of the scheduler (bounded query counts)."""

from __future__ import annotations

from collections import Counter, defaultdict

from django.db.models import Count, Q, QuerySet, Sum

from fabric.choices import GpuHealth, NodeState
from fabric.models import GPU, Node
from scheduler.choices import ACTIVE_STATUSES, JobStatus
from scheduler.models import Allocation, Job, Pool, PoolNode


def pool_nodes(pool: Pool) -> QuerySet[Node]:
    """Nodes of a pool; the default pool holds every node of the cluster that no other pool claims."""
    if pool.is_default:
        claimed = PoolNode.objects.filter(pool__cluster_id=pool.cluster_id).values("node_id")
        return Node.objects.filter(cluster_id=pool.cluster_id).exclude(pk__in=claimed)
    return Node.objects.filter(pool_member__pool=pool)


def pool_gpus(pool: Pool) -> QuerySet[GPU]:
    return GPU.objects.filter(node__in=pool_nodes(pool), node__role="compute")


def pool_capacity(pool: Pool) -> dict:
    """Capacity and free GPUs by model, and free blocks by shape (GPUs free together on one node)."""
    rows = pool_gpus(pool).values("pk", "node_id", "model", "memory_mib", "health", "node__state")
    busy = set(Allocation.objects.filter(active=True, gpu__in=pool_gpus(pool)).values_list("gpu_id", flat=True))
    models: dict[str, dict] = defaultdict(lambda: {"total": 0, "usable": 0, "free": 0, "memory_mib": 0})
    free_per_node: Counter[int] = Counter()
    per_node_total: Counter[int] = Counter()
    for r in rows:
        m = models[r["model"]]
        m["total"] += 1
        m["memory_mib"] = max(m["memory_mib"], r["memory_mib"])
        per_node_total[r["node_id"]] += 1
        usable = r["health"] == GpuHealth.HEALTHY and r["node__state"] == NodeState.UP
        if usable:
            m["usable"] += 1
            if r["pk"] not in busy:
                m["free"] += 1
                free_per_node[r["node_id"]] += 1
    shapes = {}
    for k in (1, 2, 4, 8):
        shapes[str(k)] = sum(free // k for free in free_per_node.values())
    return {
        "models": dict(models),
        "gpus_per_node_max": max(per_node_total.values(), default=0),
        "free_blocks": shapes,
        "nodes_fully_free": sum(1 for n, f in free_per_node.items() if f == per_node_total[n]),
    }


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
