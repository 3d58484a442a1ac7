"""Read-only queries shared by views, the API and sockets (bounded query counts)."""

from __future__ import annotations

from django.db.models import Count, Q, Sum

from fabric.choices import GpuHealth, LinkState, NodeState
from fabric.models import GPU, Cluster, Link, Node, Switch


def cluster_summary(cluster_id: int) -> dict | None:
    cluster = Cluster.objects.filter(pk=cluster_id).values("id", "name", "description").first()
    if cluster is None:
        return None
    switches = Switch.objects.filter(cluster_id=cluster_id).values("role").annotate(n=Count("id"))
    nodes = Node.objects.filter(cluster_id=cluster_id).aggregate(
        total=Count("id"),
        up=Count("id", filter=Q(state=NodeState.UP)),
        drain=Count("id", filter=Q(state=NodeState.DRAIN)),
        down=Count("id", filter=Q(state=NodeState.DOWN)),
    )
    links = Link.objects.filter(cluster_id=cluster_id).aggregate(
        total=Count("id"),
        up=Count("id", filter=Q(state=LinkState.UP)),
        degraded=Count("id", filter=Q(state=LinkState.DEGRADED)),
        down=Count("id", filter=Q(state=LinkState.DOWN)),
        capacity_gbps=Sum("capacity_gbps"),
    )
    gpus = GPU.objects.filter(node__cluster_id=cluster_id).aggregate(
        total=Count("id"),
        healthy=Count("id", filter=Q(health=GpuHealth.HEALTHY)),
        unhealthy=Count("id", filter=Q(health__in=[GpuHealth.DEGRADED, GpuHealth.FAILED])),
    )
    return {
        **cluster,
        "switches": {(row["role"] or "unknown"): row["n"] for row in switches},
        "nodes": nodes,
        "links": {**links, "capacity_gbps": links["capacity_gbps"] or 0.0},
        "gpus": gpus,
    }
