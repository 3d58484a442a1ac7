"""Tenants, pools, quotas and the per-cluster scheduling state."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from fabric.actions import delete_cluster as delete_inventory
from fabric.models import Cluster, Node
from scheduler.actions.allocations import ensure_cluster_ledgers
from scheduler.actions.errors import ActionError
from scheduler.actions.jobs import request_round_on_commit
from scheduler.choices import ALWAYS_PREEMPTIBLE, DEFAULT_PRIORITY_CLASSES
from scheduler.models import (
    ClusterScheduler,
    Job,
    MigSliceClaim,
    Pool,
    PoolNode,
    PriorityClass,
    Quota,
    Tenant,
    TenantMember,
)


@transaction.atomic
def create_tenant(name: str, *, description: str = "", max_priority: str | None = None) -> Tenant:
    max_class = PriorityClass.objects.get(name=max_priority) if max_priority else None
    tenant, _ = Tenant.objects.update_or_create(
        name=name, defaults={"description": description, "max_priority": max_class}
    )
    return tenant


@transaction.atomic
def add_member(tenant: Tenant, user) -> TenantMember:
    if user.is_staff:
        raise ActionError(f"{user} is an operator; operators see every tenant and need no membership")
    member, _ = TenantMember.objects.update_or_create(user=user, defaults={"tenant": tenant})
    return member


def ensure_priority_classes() -> None:
    """The default classes, if an operator (or a test's flush) removed them all."""
    if not PriorityClass.objects.exists():
        for name, value, preemptible, description in DEFAULT_PRIORITY_CLASSES:
            PriorityClass.objects.get_or_create(
                name=name,
                defaults={
                    "value": value,
                    "preemptible_default": preemptible,
                    "always_preemptible": name in ALWAYS_PREEMPTIBLE,
                    "description": description,
                },
            )


def ensure_scheduler(cluster: Cluster) -> Pool:
    """The cluster's scheduling state, its GPUs' ledgers and its default pool (created on first use)."""
    ensure_priority_classes()
    _, created = ClusterScheduler.objects.get_or_create(cluster=cluster)
    if created:
        ensure_cluster_ledgers(cluster.pk)
    pool, _ = Pool.objects.get_or_create(cluster=cluster, is_default=True, defaults={"name": "default"})
    return pool


@transaction.atomic
def create_pool(cluster: Cluster, name: str, *, sharing: str, timeslice_replicas: int = 4) -> Pool:
    ensure_scheduler(cluster)
    return Pool.objects.create(cluster=cluster, name=name, sharing=sharing, timeslice_replicas=timeslice_replicas)


@transaction.atomic
def assign_nodes(pool: Pool, nodes: Iterable[Node]) -> int:
    """Move nodes into `pool` (out of any other pool). Nodes with held GPUs may move: their jobs keep running."""
    nodes = list(nodes)
    foreign = [n.hostname for n in nodes if n.cluster_id != pool.cluster_id]
    if foreign:
        raise ActionError(f"nodes {', '.join(foreign[:5])} are not in cluster {pool.cluster}")
    PoolNode.objects.filter(node__in=nodes).delete()
    if not pool.is_default:
        PoolNode.objects.bulk_create([PoolNode(pool=pool, node=n) for n in nodes])
    request_round_on_commit(pool.cluster_id, "pool membership changed")
    return len(nodes)


@transaction.atomic
def set_quota(tenant: Tenant, pool: Pool, *, guaranteed_gpus: int, borrow_limit: int) -> Quota:
    if guaranteed_gpus < 0 or borrow_limit < 0:
        raise ActionError("quotas cannot be negative")
    quota, _ = Quota.objects.update_or_create(
        tenant=tenant, pool=pool, defaults={"guaranteed_gpus": guaranteed_gpus, "borrow_limit": borrow_limit}
    )
    request_round_on_commit(pool.cluster_id, f"quota of {tenant} changed")
    return quota


@transaction.atomic
def delete_cluster(cluster: Cluster) -> None:
    """Remove a cluster with its scheduling history (jobs, allocations, pools), then its inventory."""
    MigSliceClaim.objects.filter(gpu__node__cluster=cluster).delete()
    Job.objects.filter(pool__cluster=cluster).delete()
    Pool.objects.filter(cluster=cluster).delete()
    delete_inventory(cluster)
