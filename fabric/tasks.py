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

from celery import shared_task, signals, signature
from django.conf import settings
from django.core.cache import cache
from django.db import OperationalError

from clusterctl.celery import app
from clusterctl.locks import TaskLock
from fabric import actions, inbox
from fabric import ingest as telemetry
from fabric.actions import TELEMETRY_REASON
from fabric.choices import NodeState
from fabric.collectors.registry import agent_collector, get_collector
from fabric.collectors.samples import FABRIC_SOURCE, sample_from_dict
from fabric.collectors.subnet_manager import SmReadError, read_subnet_managers
from fabric.ingest import check_liveness, ingest_lock, ingest_samples, record_answers, record_round
from fabric.latest import last_seen
from fabric.models import Cluster, Node, Switch
from fabric.subnet_manager import record_sm_error, record_sm_view
from fabric.telemetry.subnet_manager import view_from_dict, view_to_dict

log = logging.getLogger(__name__)
RETRYABLE = (OperationalError, ConnectionError, TimeoutError)


@shared_task(ignore_result=True)
def poll_all() -> None:
    """Beat: poll every cluster's nodes with the configured collector (TELEMETRY_COLLECTOR; empty = off)."""

    if not settings.TELEMETRY_COLLECTOR:
        return
    expires = max(settings.TELEMETRY_INTERVAL_S, 5.0)  # one that waited past the next poll is worthless
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        poll_cluster.apply_async((cluster_id,), expires=expires)


def _route(host: str) -> dict:
    return {"queue": f"node.{host}"} if settings.TELEMETRY_NODE_QUEUES else {}


def _backlog(queue: str) -> int:
    """Messages waiting in a node queue (a dead agent's queue must not pile up one poll per interval)."""

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
    """Judge liveness from the rounds ingest has caught up with, then send the next round: one poll per node onto
    that node's own queue (and one switch-port poll onto the fabric agent's); each answer goes to ingest with the
    round's send time. Returns the number of node polls sent; 0 while another poll of this cluster runs."""

    lock = telemetry.poll_lock(cluster_id)
    if not lock.acquire():
        log.info("telemetry: poll of cluster %s skipped, another one is running", cluster_id)
        return 0
    try:
        return _poll_cluster(cluster_id, collector or settings.TELEMETRY_COLLECTOR)
    finally:
        lock.release()


def _poll_cluster(cluster_id: int, name: str) -> int:
    now = time.time()
    check_liveness(cluster_id, now)
    seen = last_seen(cluster_id)
    interval = settings.TELEMETRY_INTERVAL_S
    expires = max(interval, 5.0)  # a poll older than the next one is worthless
    asked, live, sent = [], [], 0
    # An unnamed placeholder (the fabric named no host for its HCAs) has no agent: its host's agent reports those
    # HCAs under its own name and ingest attaches them (fabric.actions.claim_hcas). Polling it would only miss.
    nodes = Node.objects.filter(cluster_id=cluster_id, unnamed=False).values_list("hostname", "state", "state_reason")
    for host, state, reason in nodes:
        if state == NodeState.DOWN and not reason.startswith(TELEMETRY_REASON):
            continue  # an operator took it down; a node telemetry took down is still asked, to see it come back
        asked.append(host)
        stale = now - seen.get(host, 0.0) > 2 * interval
        if stale and settings.TELEMETRY_NODE_QUEUES and _backlog(f"node.{host}"):
            # Its last poll still waits untaken in its queue: it is asked again by that one (its agent takes none
            # while the others' agents do), and a dead agent's queue does not pile up one poll per interval.
            continue
        if state == NodeState.UP:
            live.append(host)
        poll_node.apply_async((host, name), link=ingest.s(cluster_id, now), expires=expires, **_route(host))
        sent += 1
    record_round(cluster_id, now, asked)
    agent = fabric_agent(cluster_id, live)
    if agent is not None:
        guids = ["0x" + g for g in Switch.objects.filter(cluster_id=cluster_id).values_list("guid", flat=True)]
        switch_collector = settings.TELEMETRY_SWITCH_COLLECTOR
        poll_switches.apply_async(
            (agent, switch_collector, guids), link=ingest.s(cluster_id), expires=expires, **_route(agent)
        )
        sm_every = settings.TELEMETRY_SM_INTERVAL_S
        if sm_every > 0 and cache.add(f"fabric:sm-poll:{cluster_id}", 1, timeout=max(1, int(sm_every))):
            poll_subnet_managers.apply_async(
                (agent,), link=ingest_subnet_managers.s(cluster_id), expires=expires, **_route(agent)
            )
    return sent


@shared_task(acks_late=False, ignore_result=False, soft_time_limit=20)
def poll_node(hostname: str, collector: str) -> dict:
    """On the node agent: read the hardware, return the sample as JSON. No database access here. `collector` may
    name several (nvml,sysfs-ib: one merged sample) or auto; the agent keeps the collector from poll to poll."""

    return dataclasses.asdict(agent_collector(collector).collect(hostname))


@shared_task(acks_late=False, ignore_result=False, soft_time_limit=30)
def poll_switches(hostname: str, collector: str, guids: list[str]) -> dict:
    """On the fabric agent: read every port of the given switches over the fabric. No database access here;
    the switch list comes with the task."""

    options = settings.COLLECTOR_OPTIONS.get(collector, {})
    sample = get_collector(collector, **options).collect_switches(hostname, guids)
    sample.node = FABRIC_SOURCE
    return dataclasses.asdict(sample)


@shared_task(acks_late=False, ignore_result=False, soft_time_limit=40)
def poll_subnet_managers(hostname: str) -> dict:
    """On the fabric agent: `saquery SMIR` (and opensm.conf's routing engine), as {"view": ...} or {"error": ...}.
    No database access here."""
    try:
        view = read_subnet_managers(
            settings.TELEMETRY_SM_CA, settings.TELEMETRY_OPENSM_CONF, settings.TELEMETRY_OPENSM_LOG
        )
    except SmReadError as exc:
        return {"host": hostname, "error": str(exc)}
    return {"host": hostname, "view": view_to_dict(view)}


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=5)
def ingest_subnet_managers(result: dict, cluster_id: int) -> dict:
    """Central: the fabric agent's reading judged against the last (failover, hung SM) and recorded as alerts; a
    reading that failed is kept for the fabric page and the report, and judges nothing."""
    if "view" not in result:
        record_sm_error(cluster_id, f"{result.get('host', '?')}: {result.get('error', 'no reading')}")
        log.warning("subnet managers of cluster %s not read: %s", cluster_id, result.get("error"))
        return {"error": result.get("error")}
    return record_sm_view(cluster_id, view_from_dict(result["view"]))


# Keys that ingest adds to a result in the inbox: the send time of the poll it answers, and "the poll expired on the
# broker before an agent took it" (a report, not a sample).
POLL_AT = "poll_at"
POLL_EXPIRED = "poll_expired"


@signals.task_revoked.connect(dispatch_uid="fabric.tasks.report_expired_poll")
def report_expired_poll(sender=None, request=None, expired: bool = False, **_) -> None:
    """A worker dropped a node poll that expired before anyone took it (the agent's queue or the broker was behind):
    tell ingest through the poll's own link, so that round does not count against the node. Runs wherever the poll
    was dropped (the node agent, or the central worker when polls share the default queue); needs only the broker."""
    if not expired or getattr(sender, "name", None) != poll_node.name or request is None or not request.args:
        return
    for callback in request.callbacks or ():
        link = signature(callback, app=sender.app)
        if link.task == ingest.name:
            link.apply_async(({"node": request.args[0], POLL_EXPIRED: True},))


def _drain_flag(cluster_id: int) -> str:
    return f"telemetry:{cluster_id}:drain"


def _schedule_drain(cluster_id: int, *, again: bool = False) -> None:
    """The first result of a window schedules the batch; `again`: results arrived while a batch ran."""
    window = settings.TELEMETRY_BATCH_WINDOW_S
    timeout = max(5.0, 4 * window)
    if again:
        cache.set(_drain_flag(cluster_id), 1, timeout=timeout)
    elif not cache.add(_drain_flag(cluster_id), 1, timeout=timeout):
        return
    ingest_batch.apply_async((cluster_id,), countdown=window)


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=5)
def ingest(sample: dict, cluster_id: int, poll_at: float | None = None) -> None:
    """Central: queue one node's result (or the report that its poll expired unsent) for the next batch, with the send
    time of the poll it answers; the first of a window schedules the drain."""

    inbox.push(cluster_id, sample if poll_at is None else {**sample, POLL_AT: poll_at})
    _schedule_drain(cluster_id)


def _parse(cluster_id: int, raw: list[dict]) -> tuple[list, list[tuple[str, float]], list[tuple[str, float]]]:
    """Samples, (node, poll sent at) answered, (node, poll sent at) expired unsent."""

    samples, answered, expired = [], [], []
    for item in raw:
        poll_at = item.get(POLL_AT)
        if item.get(POLL_EXPIRED):
            if isinstance(poll_at, int | float) and isinstance(item.get("node"), str):
                expired.append((item["node"], float(poll_at)))
            continue
        try:
            sample = sample_from_dict(item)
        except (KeyError, TypeError, ValueError) as exc:  # one malformed result must not block the others
            log.error("telemetry: dropped a malformed sample for cluster %s (%s): %r", cluster_id, exc, item)
            continue
        samples.append(sample)
        if isinstance(poll_at, int | float):
            answered.append((sample.node, float(poll_at)))
    return samples, answered, expired


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=5)
def ingest_batch(cluster_id: int) -> int:
    """Central: ingest everything waiting in the cluster's inbox as one batch, then record the answers and how far
    ingest got (fabric.ingest.record_answers). One batch at a time per cluster. Idempotent (older or already stored
    samples are ignored); on a database or cache outage the batch goes back to the inbox and retries."""

    lock = ingest_lock(cluster_id)
    if not lock.acquire():
        if not ingest_batch.request.is_eager:  # (inline, the retry would find the same holder: the next result retries)
            _schedule_drain(cluster_id, again=True)  # after the batch running now, which may have drained before these
        return 0
    try:
        started = time.time()
        cache.delete(_drain_flag(cluster_id))  # results arriving from now on schedule the next batch
        raw = inbox.drain(cluster_id)
        samples, answered, expired = _parse(cluster_id, raw)
        if samples:
            try:
                ingest_samples(cluster_id, samples)
            except RETRYABLE:
                inbox.push_front(cluster_id, raw)
                raise
        # A batch whose lock lapsed may have run beside a later one: it cannot say that ingest caught up to its start.
        record_answers(cluster_id, answered, expired, ingested_until=started if lock.owned() else None)
    finally:
        lock.release()
    return len(samples)


#
# Time series upkeep (beat: rollup every minute, prune every hour). Both idempotent; a run that finds the
# previous one still going skips, so two never write the same buckets at once.
#

SERIES_LOCK_S = 15 * 60


def _exclusive(name: str, action) -> dict | None:
    lock = TaskLock(f"fabric:series-lock:{name}", SERIES_LOCK_S)
    if not lock.acquire():
        log.info("telemetry: %s skipped, the previous run still holds its lock", name)
        return None
    try:
        return action()
    finally:
        if not lock.release():  # ran past its lock: another run may have started meanwhile (and keeps its lock)
            log.warning("telemetry: %s ran longer than its %s s lock", name, SERIES_LOCK_S)


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=3)
def rollup_metrics() -> dict | None:
    """Beat: roll raw samples into 1-minute buckets and those into 1-hour buckets (fabric.actions)."""

    return _exclusive("rollup", actions.rollup_metrics)


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=3)
def prune_metrics() -> dict | None:
    """Beat: delete samples and rollups past TELEMETRY_RETENTION_*, in short batches (fabric.actions)."""

    return _exclusive("prune", actions.prune_metrics)
