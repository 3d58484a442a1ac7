"""Telemetry tasks: thin, they take names and ids (paperless-ngx style).

poll_cluster (beat, central) -> poll_node on queue "node.<hostname>" (the node agent: reads hardware only,
needs the broker and no database) -> ingest (central: rates, latest state, time series, alerts).
Run a node agent with:  celery -A clusterctl worker -Q node.$(hostname) --concurrency 1
"""

from __future__ import annotations

import dataclasses

from celery import shared_task
from django.conf import settings


@shared_task(ignore_result=True)
def poll_all() -> None:
    """Beat: poll every cluster's nodes with the configured collector (TELEMETRY_COLLECTOR; empty = off)."""
    from fabric.models import Cluster

    if not settings.TELEMETRY_COLLECTOR:
        return
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        poll_cluster.delay(cluster_id)


@shared_task(ignore_result=True)
def poll_cluster(cluster_id: int, collector: str = "") -> int:
    """Fan out one poll per node onto that node's own queue; each result goes to ingest."""
    from fabric.models import Node

    name = collector or settings.TELEMETRY_COLLECTOR
    hosts = list(Node.objects.filter(cluster_id=cluster_id).exclude(state="down").values_list("hostname", flat=True))
    for host in hosts:
        poll_node.apply_async((host, name), queue=f"node.{host}", link=ingest.s(cluster_id), expires=60)
    return len(hosts)


@shared_task(acks_late=False, ignore_result=False, soft_time_limit=20)
def poll_node(hostname: str, collector: str) -> dict:
    """On the node agent: read the hardware, return the sample as JSON. No database access here."""
    from fabric.collectors.registry import get_collector

    options = settings.COLLECTOR_OPTIONS.get(collector, {})
    return dataclasses.asdict(get_collector(collector, **options).collect(hostname))


@shared_task(bind=True, ignore_result=True, autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5)
def ingest(self, sample: dict, cluster_id: int) -> None:
    """Central: store one node's sample. Idempotent: a sample already stored (or older) is ignored."""
    from fabric.collectors.samples import sample_from_dict
    from fabric.ingest import ingest_sample

    ingest_sample(cluster_id, sample_from_dict(sample))
