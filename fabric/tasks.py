"""Telemetry tasks: thin, they take names and ids (paperless-ngx style).

poll_all (beat) -> poll_cluster (central: the poller's own pace, liveness, fan-out) -> poll_node on queue
"node.<hostname>" (the node agent: reads hardware only, needs the broker and no database) -> ingest (central: into
the inbox) -> ingest_batch (central: the whole poll at once: rates, latest state, time series, alerts).
A collector that reads every node from one place (the twin) with node queues off is read by poll_nodes instead: a
few central tasks of CENTRAL_CHUNK nodes each, straight into the inbox.
Run a node agent with:  celery -A clusterctl worker -Q node.$(hostname) --concurrency 1  (docs/node-agent.md)
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from celery import shared_task, signals, signature
from django.conf import settings
from django.core.cache import cache
from django.db import OperationalError

from clusterctl.celery import app
from clusterctl.locks import TaskLock
from fabric import actions, inbox, reports
from fabric import ingest as telemetry
from fabric.actions import TELEMETRY_REASON
from fabric.choices import NodeState
from fabric.collectors.registry import agent_collector, get_collector, reads_centrally
from fabric.collectors.samples import FABRIC_SOURCE, sample_from_dict, sample_to_dict
from fabric.collectors.subnet_manager import SmReadError, read_subnet_managers
from fabric.ingest import (
    check_liveness,
    ingest_lock,
    ingest_samples,
    liveness_rules,
    record_answers,
    record_round,
)
from fabric.latest import last_seen
from fabric.models import Alert, Cluster, Node, Switch
from fabric.subnet_manager import record_sm_error, record_sm_view
from fabric.telemetry import liveness
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
    """Check the poller's own pace, judge liveness from the rounds ingest has caught up with (not while the poller is
    behind), then send the next round: one poll per node onto that node's own queue, or a few central reads of many
    nodes (poll_nodes), and one switch-port poll onto the fabric agent's; each answer goes to ingest with the round's
    send time. Returns the number of nodes polled; 0 while another poll of this cluster runs, or while the previous
    round is still being read."""

    lock = telemetry.poll_lock(cluster_id)
    if not lock.acquire():
        log.info("telemetry: poll of cluster %s skipped, another one is running", cluster_id)
        return 0
    try:
        return _poll_cluster(cluster_id, collector or settings.TELEMETRY_COLLECTOR)
    finally:
        lock.release()


CENTRAL_CHUNK = 250  # nodes one central read takes: 2,000 nodes are 8 tasks, and rounds and pages run between them
POLLER_KEPT = 8  # send times of the newest rounds the poller keeps (liveness.cadence reads the last few)


def _poller_key(cluster_id: int) -> str:
    return f"telemetry:{cluster_id}:poller"


def _read_key(cluster_id: int, at: float) -> str:
    """How many of the central reads of the round sent at `at` ran (or expired unsent)."""
    return f"telemetry:{cluster_id}:read:{at!r}"


def _load_poller(cluster_id: int) -> dict:
    """poll_cluster's own record (written under poll_lock): send times of the newest rounds, beat ticks skipped since
    the newest, the newest central round still being read ([send time, reads sent]), rounds sent. Plain values: one
    it cannot read is a fresh start."""
    found = cache.get(_poller_key(cluster_id))
    try:
        reading = found["reading"]
        return {
            "sent": [float(t) for t in found["sent"]],
            "skipped": int(found["skipped"]),
            "reading": None if reading is None else [float(reading[0]), int(reading[1])],
            "rounds": int(found["rounds"]),
        }
    except (TypeError, KeyError, ValueError, IndexError):
        return {"sent": [], "skipped": 0, "reading": None, "rounds": 0}


def _still_reading(cluster_id: int, poller: dict, now: float, rules: liveness.Rules) -> bool:
    """The newest central round has reads that neither ran nor expired yet (until they could have expired)."""
    reading = poller["reading"]
    if reading is None or now - reading[0] > rules.stall_after_s + rules.interval_s:
        return False
    done = cache.get(_read_key(cluster_id, reading[0]))
    return isinstance(done, int) and done < reading[1]


def _read_done(cluster_id: int, at: float) -> None:
    try:
        cache.incr(_read_key(cluster_id, at))
    except ValueError:  # the round's count is gone (expired): nobody waits on it any more
        pass


def poller_status(cluster_id: int, now: float | None = None) -> dict:
    """How the poller keeps its schedule: the interval set, the cadence of its newest rounds (liveness.cadence; None
    before the first), rounds sent, beat ticks skipped since the newest round (it was still being read)."""
    now = time.time() if now is None else now
    poller = _load_poller(cluster_id)
    rules = liveness_rules()
    return {
        "interval_s": rules.interval_s,
        "cadence_s": liveness.cadence(poller["sent"], now, rules.unreachable_polls),
        "rounds": poller["rounds"],
        "skipped": poller["skipped"],
    }


def _poll_cluster(cluster_id: int, name: str) -> int:
    now = time.time()
    rules = liveness_rules()
    interval = rules.interval_s
    poller = _load_poller(cluster_id)
    # An unnamed placeholder (the fabric named no host for its HCAs) has no agent: its host's agent reports those
    # HCAs under its own name and ingest attaches them (fabric.actions.claim_hcas). Polling it would only miss.
    # A node an operator took down is not asked; one telemetry took down is, to see it come back.
    nodes = [
        (host, state)
        for host, state, reason in Node.objects.filter(cluster_id=cluster_id, unnamed=False).values_list(
            "hostname", "state", "state_reason"
        )
        if state != NodeState.DOWN or reason.startswith(TELEMETRY_REASON)
    ]
    asked = [host for host, _ in nodes]
    seen = last_seen(cluster_id)
    central = not settings.TELEMETRY_NODE_QUEUES and reads_centrally(name)
    reading = central and _still_reading(cluster_id, poller, now, rules)
    # The poller's own lateness is one alert about the cluster, never the nodes': while it lasts no node is judged
    # (answers late for the same reason would look like silent nodes).
    polled = sum(1 for host in asked if now - seen.get(host, float("-inf")) <= interval)
    behind = liveness.poller_findings(
        poller["sent"], now=now, rules=rules, due=len(asked), polled=polled, skipped=poller["skipped"] + reading
    )
    if behind or Alert.objects.filter(cluster_id=cluster_id, rule=liveness.BEHIND, cleared_at__isnull=True).exists():
        hold = min(settings.TELEMETRY_HOLD_DOWN_S, rules.stall_after_s)
        when = datetime.fromtimestamp(now, tz=UTC)
        counts = actions.record_cluster_findings(
            cluster_id, behind, rules=(liveness.BEHIND,), now=when, hold_down_s=hold
        )
        if counts["raised"]:
            log.warning("telemetry: cluster %s: %s", cluster_id, behind[0].message)
    if reading:
        # The last round's reads still wait for the worker: a new round would only queue behind them, and judging
        # now would take the nodes not read yet for silent ones. This tick is skipped, and counted.
        poller["skipped"] += 1
        cache.set(_poller_key(cluster_id), poller, None)
        log.info("telemetry: poll of cluster %s skipped, the previous round is still being read", cluster_id)
        return 0
    if not behind:
        check_liveness(cluster_id, now)
    send, live = [], []
    for host, state in nodes:
        stale = now - seen.get(host, 0.0) > 2 * interval
        if stale and settings.TELEMETRY_NODE_QUEUES and _backlog(f"node.{host}"):
            # Its last poll still waits untaken in its queue: it is asked again by that one (its agent takes none
            # while the others' agents do), and a dead agent's queue does not pile up one poll per interval.
            continue
        if state == NodeState.UP:
            live.append(host)
        send.append(host)
    expires = max(interval, 5.0)  # a poll older than the next one is worthless
    agent = fabric_agent(cluster_id, live)
    if agent is not None:  # first: where polls share one queue, the switch ports must not wait behind every node
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
    reads = 0
    if central and send:
        # A different first node each round: if reads ever expire at the end of long rounds, not always the same.
        first = poller["rounds"] * CENTRAL_CHUNK % len(send)
        order = send[first:] + send[:first]
        chunks = [order[i : i + CENTRAL_CHUNK] for i in range(0, len(order), CENTRAL_CHUNK)]
        reads = len(chunks)
        cache.set(_read_key(cluster_id, now), 0, timeout=max(60.0, 4 * rules.stall_after_s))
        for chunk in chunks:  # they wait for one worker in turn: worthless only once a stall would be declared
            poll_nodes.apply_async((cluster_id, chunk, name, now), expires=rules.stall_after_s)
    else:
        for host in send:
            poll_node.apply_async((host, name), link=ingest.s(cluster_id, now), expires=expires, **_route(host))
    record_round(cluster_id, now, asked)
    poller.update(
        sent=[*poller["sent"], now][-POLLER_KEPT:],
        skipped=0,
        reading=[now, reads] if reads else None,
        rounds=poller["rounds"] + 1,
    )
    cache.set(_poller_key(cluster_id), poller, None)
    return len(send)


@shared_task(ignore_result=True)
def poll_nodes(cluster_id: int, hosts: list[str], collector: str, poll_at: float) -> int:
    """Central: read `hosts` with a collector that reads every node from here (the twin: it reads the database, so it
    never runs on a node) and queue each sample for the next batch, as its agent's answer to the round sent at
    `poll_at` would be: one task and one inbox push for many nodes. A node whose read raises gives no answer, as a
    poll_node that raised. Returns the number of nodes read."""

    reader = agent_collector(collector)
    items = []
    for host in hosts:
        try:
            sample = reader.collect(host)
        except Exception as exc:  # one node's failure must not cost the others their answers
            log.warning("telemetry: %s could not be read (%s): no answer this round", host, exc)
            continue
        items.append({**sample_to_dict(sample), POLL_AT: poll_at})
    inbox.push_many(cluster_id, items)
    if items:
        _schedule_drain(cluster_id)
    _read_done(cluster_id, poll_at)
    return len(items)


@shared_task(acks_late=False, ignore_result=False, soft_time_limit=20)
def poll_node(hostname: str, collector: str) -> dict:
    """On the node agent: read the hardware, return the sample as JSON. No database access here. `collector` may
    name several (nvml,sysfs-ib: one merged sample) or auto; the agent keeps the collector from poll to poll."""

    return sample_to_dict(agent_collector(collector).collect(hostname))


@shared_task(acks_late=False, ignore_result=False, soft_time_limit=30)
def poll_switches(hostname: str, collector: str, guids: list[str]) -> dict:
    """On the fabric agent: read every port of the given switches over the fabric. No database access here;
    the switch list comes with the task."""

    options = settings.COLLECTOR_OPTIONS.get(collector, {})
    sample = get_collector(collector, **options).collect_switches(hostname, guids)
    sample.node = FABRIC_SOURCE
    return sample_to_dict(sample)


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
    was dropped (the node agent, or the central worker when polls share the default queue); needs only the broker.
    A central read of many nodes (poll_nodes) that expired is told for each of its nodes, straight into the inbox."""
    if not expired or request is None or not request.args:
        return
    name = getattr(sender, "name", None)
    if name == poll_nodes.name:  # central: this worker can tell ingest itself, for every node of the read
        cluster_id, hosts, _, poll_at = request.args
        inbox.push_many(cluster_id, [{"node": h, POLL_EXPIRED: True, POLL_AT: poll_at} for h in hosts])
        _schedule_drain(cluster_id)
        _read_done(cluster_id, poll_at)
        return
    if name != poll_node.name:
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


@shared_task(ignore_result=True, autoretry_for=RETRYABLE, retry_backoff=True, max_retries=3)
def warm_report(cluster_id: int) -> bool:
    """After a change of the fabric: the cluster's report analysed into the cache ahead of the next visit, unless the
    cached one is current (fabric.reports, which sends this by name)."""

    return reports.warm(cluster_id)
