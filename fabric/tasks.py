"""Telemetry tasks: thin, they take names and ids (paperless-ngx style).

poll_all (beat) -> poll_cluster (central: liveness, fan-out) -> poll_node on queue "node.<hostname>" (the node
agent: reads hardware only, needs the broker and no database) -> ingest (central: into the inbox) ->
ingest_batch (central: the whole poll at once: rates, latest state, time series, alerts).
Run a node agent with:  celery -A clusterctl worker -Q node.$(hostname) --concurrency 1  (docs/node-agent.md)
"""

from __future__ import annotations

import dataclasses
import logging
import time

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import OperationalError

log = logging.getLogger(__name__)
RETRYABLE = (OperationalError, ConnectionError, TimeoutError)


@shared_task(ignore_result=True)
def poll_all() -> None:
    """Beat: poll every cluster's nodes with the configured collector (TELEMETRY_COLLECTOR; empty = off)."""
    from fabric.models import Cluster

    if not settings.TELEMETRY_COLLECTOR:
        return
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        poll_cluster.delay(cluster_id)


def _route(host: str) -> dict:
    return {"queue": f"node.{host}"} if settings.TELEMETRY_NODE_QUEUES else {}


def _backlog(queue: str) -> int:
    """Messages waiting in a node queue (a dead agent's queue must not pile up one poll per interval)."""
    from clusterctl.celery import app

    try:
        with app.connection_for_write() as conn:
            return conn.default_channel.queue_declare(queue=queue, passive=True).message_count
    except Exception:  # no such queue yet, or a transport that cannot say: poll anyway
        return 0


def fabric_agent(cluster_id: int, hosts: list[str]) -> str | None:
    """The node of this cluster that reads the switch ports (TELEMETRY_FABRIC_AGENTS), if any."""
    agents = settings.TELEMETRY_FABRIC_AGENTS
    if "auto" in agents:
        return hosts[0] if hosts else None
    return next((a for a in agents if a in set(hosts)), None)


@shared_task(ignore_result=True)
def poll_cluster(cluster_id: int, collector: str = "") -> int:
    """Check liveness, then fan out one poll per node onto that node's own queue (and one switch-port poll onto
    the fabric agent's); each result goes to ingest. Returns the number of node polls sent."""
    from fabric.actions import TELEMETRY_REASON
    from fabric.choices import NodeState
    from fabric.ingest import check_liveness, last_seen
    from fabric.models import Node, Switch

    name = collector or settings.TELEMETRY_COLLECTOR
    now = time.time()
    seen = last_seen(cluster_id)
    check_liveness(cluster_id, now, seen)
    interval = settings.TELEMETRY_INTERVAL_S
    expires = max(interval, 5.0)  # a poll older than the next one is worthless
    sent, live = 0, []
    nodes = Node.objects.filter(cluster_id=cluster_id).values_list("hostname", "state", "state_reason")
    for host, state, reason in nodes:
        if state == NodeState.DOWN and not reason.startswith(TELEMETRY_REASON):
            continue  # an operator took it down; a node telemetry took down is still asked, to see it come back
        stale = now - seen.get(host, 0.0) > 2 * interval
        if stale and settings.TELEMETRY_NODE_QUEUES and _backlog(f"node.{host}"):
            continue
        if state == NodeState.UP:
            live.append(host)
        poll_node.apply_async((host, name), link=ingest.s(cluster_id), expires=expires, **_route(host))
        sent += 1
    agent = fabric_agent(cluster_id, live)
    if agent is not None:
        guids = ["0x" + g for g in Switch.objects.filter(cluster_id=cluster_id).values_list("guid", flat=True)]
        switch_collector = settings.TELEMETRY_SWITCH_COLLECTOR
        poll_switches.apply_async(
            (agent, switch_collector, guids), link=ingest.s(cluster_id), expires=expires, **_route(agent)
        )
    return sent


@shared_task(acks_late=False, ignore_result=False, soft_time_limit=20)
def poll_node(hostname: str, collector: str) -> dict:
    """On the node agent: read the hardware, return the sample as JSON. No database access here."""
    from fabric.collectors.registry import get_collector

    options = settings.COLLECTOR_OPTIONS.get(collector, {})
    return dataclasses.asdict(get_collector(collector, **options).collect(hostname))


@shared_task(acks_late=False, ignore_result=False, soft_time_limit=30)
def poll_switches(hostname: str, collector: str, guids: list[str]) -> dict:
    """On the fabric agent: read every port of the given switches over the fabric. No database access here;
    the switch list comes with the task."""
    from fabric.collectors.registry import get_collector
    from fabric.collectors.samples import FABRIC_SOURCE

    options = settings.COLLECTOR_OPTIONS.get(collector, {})
    sample = get_collector(collector, **options).collect_switches(hostname, guids)
    sample.node = FABRIC_SOURCE
    return dataclasses.asdict(sample)


def _drain_flag(cluster_id: int) -> str:
    return f"telemetry:{cluster_id}:drain"


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=5)
def ingest(sample: dict, cluster_id: int) -> None:
    """Central: queue one node's result for the next batch; the first of a window schedules the drain."""
    from fabric import inbox

    inbox.push(cluster_id, sample)
    window = settings.TELEMETRY_BATCH_WINDOW_S
    if cache.add(_drain_flag(cluster_id), 1, timeout=max(5.0, 4 * window)):
        ingest_batch.apply_async((cluster_id,), countdown=window)


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=5)
def ingest_batch(cluster_id: int) -> int:
    """Central: ingest everything waiting in the cluster's inbox as one batch. Idempotent (older or already
    stored samples are ignored); on a database or cache outage the batch goes back to the inbox and retries."""
    from fabric import inbox
    from fabric.collectors.samples import sample_from_dict
    from fabric.ingest import ingest_samples

    cache.delete(_drain_flag(cluster_id))  # results arriving from now on schedule the next batch
    raw = inbox.drain(cluster_id)
    samples = []
    for item in raw:
        try:
            samples.append(sample_from_dict(item))
        except (KeyError, TypeError, ValueError) as exc:  # one malformed result must not block the others
            log.error("telemetry: dropped a malformed sample for cluster %s (%s): %r", cluster_id, exc, item)
    if not samples:
        return 0
    try:
        ingest_samples(cluster_id, samples)
    except RETRYABLE:
        inbox.push_front(cluster_id, raw)
        raise
    return len(samples)


#
# Time series upkeep (beat: rollup every minute, prune every hour). Both idempotent; a run that finds the
# previous one still going skips, so two never write the same buckets at once.
#

SERIES_LOCK_S = 15 * 60


def _exclusive(name: str, action) -> dict | None:
    key = f"fabric:series-lock:{name}"
    if not cache.add(key, 1, timeout=SERIES_LOCK_S):
        log.info("telemetry: %s skipped, the previous run still holds its lock", name)
        return None
    try:
        return action()
    finally:
        cache.delete(key)


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=3)
def rollup_metrics() -> dict | None:
    """Beat: roll raw samples into 1-minute buckets and those into 1-hour buckets (fabric.actions)."""
    from fabric import actions

    return _exclusive("rollup", actions.rollup_metrics)


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=3)
def prune_metrics() -> dict | None:
    """Beat: delete samples and rollups past TELEMETRY_RETENTION_*, in short batches (fabric.actions)."""
    from fabric import actions

    return _exclusive("prune", actions.prune_metrics)
