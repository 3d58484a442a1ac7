"""What the fabric's action modules share: batch size, the cluster lock and the host-map change mark."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone

from fabric.models import Cluster, Node

BATCH = 2000


def remove_empty_placeholders(cluster: Cluster) -> int:
    """Delete unnamed placeholder nodes left with no HCA and no GPU (their HCAs were named elsewhere)."""
    empty = Node.objects.filter(cluster=cluster, unnamed=True, hcas__isnull=True, gpus__isnull=True)
    return Node.objects.filter(pk__in=list(empty.values_list("pk", flat=True))).delete()[1].get("fabric.Node", 0)


def lock_cluster(cluster_id: int) -> None:
    """The cluster row before any node or HCA row, in import_fabric's order: an import and an attach or rename
    running at once wait for each other instead of deadlocking on each other's rows."""
    Cluster.objects.select_for_update(no_key=True).filter(pk=cluster_id).first()


def hosts_moved(cluster_id: int) -> None:
    """HCAs changed hosts or a host its name: caches keyed by host name (ingest's port map, the scheduler's
    topology, the dashboard's) must rebuild. fabric.selectors.fabric_version reads Cluster.updated."""
    Cluster.objects.filter(pk=cluster_id).update(updated=timezone.now())


def batches(items: list, size: int = BATCH) -> Iterable[list]:
    """`items` in lists of at most `size` (bounded IN lists and statements)."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
