"""Ingest: node samples -> rates, latest state (cache), time series (database), health alerts.

A whole poll is ingested as one batch (`ingest_samples`): one cache read of the previous state of every node in
it, rates and health rules in plain Python, one cache write, one COPY per time-series table and one pass over the
open alerts. Per node that is no query at all, which is what makes 1-second GPU sampling of 10,000 GPUs
affordable (bench/bench_ingest.py).

Samples arrive in any order (a retried poll, a slow node): a sample not newer than the one already stored for
its node is ignored, so state never moves backwards. Rates come from the previous sample of the same node kept in
the latest state.

A node agent that runs on its host (nvml, sysfs-ib) reports the host's CPUs and MemTotal (NodeSample.host): they are
stored on the Node only when they differ from its last report (one query and write then, none per poll), and become
what jobs may take of it unless an operator set that (fabric.actions.record_host_resources).

A node agent that reads sysfs also reports its RDMA devices' node GUIDs (NodeSample.hcas). An HCA of the imported
fabric that had no host name (on an unnamed placeholder node) is attached to the reporting node, and the kernel's
device name is stored on the node's own HCAs so its port samples find their ports (fabric.actions.claim_hcas); one
that the inventory has on another named host is never moved: the reporting node gets an `hca_elsewhere` warning.

Switch ports, read over the fabric by the fabric agent (perfquery, or the twin), arrive as one sample whose node is
FABRIC_SOURCE and whose ports' `device` is the switch GUID; they are matched to the switch's Port rows.

The latest state (the previous sample of each node, its load, when it was seen) is fabric.latest: this module is its
one writer; readers import fabric.latest.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, transaction

from clusterctl.beat import heartbeat_age
from clusterctl.bulk import copy_rows
from clusterctl.gcpause import gc_paused
from clusterctl.locks import TaskLock
from fabric import actions, events, inbox, latest
from fabric.choices import CaKind
from fabric.collectors.samples import FABRIC_SOURCE, NodeSample
from fabric.importers.types import normalise_guid
from fabric.models import GPU, HCA, GpuMetric, Node, Port, PortMetric
from fabric.selectors import fabric_version
from fabric.telemetry import liveness
from fabric.telemetry.health import Finding, Thresholds, evaluate_gpu, evaluate_port
from fabric.telemetry.rates import port_rates

log = logging.getLogger(__name__)
LIVENESS_RULES = (liveness.UNREACHABLE, liveness.DOWN)
HCA_ELSEWHERE = "hca_elsewhere"  # a node's agent reports an HCA the inventory has on another named host


@dataclass
class IngestResult:
    stored: list[str] = field(default_factory=list)  # nodes whose sample was taken
    ignored: dict[str, str] = field(default_factory=dict)  # node -> why not
    gpu_rows: int = 0
    port_rows: int = 0
    link_utilisation: dict[int, float] = field(default_factory=dict)  # raw, busiest end of each link
    alerts: dict[str, int] = field(default_factory=dict)
    hcas_attached: dict[str, list[str]] = field(default_factory=dict)  # node -> HCA GUIDs put on it (claim_hcas)
    host_recorded: list[str] = field(default_factory=list)  # nodes whose agent's CPU / memory figures changed
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds (bench)


@dataclass(frozen=True, slots=True)
class _PortRef:
    port_id: int
    link_id: int | None
    capacity_gbps: float


@dataclass
class _PortMap:
    """Where each sampled object lives in the database, for one fabric version (rebuilt when it changes)."""

    version: tuple
    hca_ports: dict[str, dict[tuple[str, int], _PortRef]]  # hostname -> (device, port) -> ref
    switch_ports: dict[tuple[str, int], _PortRef]  # (guid without 0x, port) -> ref
    gpus: dict[str, dict[int, int]]  # hostname -> GPU index -> GPU id
    hcas: dict[str, tuple[str, bool, str]]  # host's HCA node GUID -> (its node's hostname, node unnamed, device)
    nodes: frozenset[str]  # every hostname of the cluster
    # hostname -> (reported_cpu_milli, reported_memory_mib) as stored: a node agent's figures are recorded only when
    # they differ (kept up to date by _record_host; another worker's write costs this one a query, not a write)
    host_reported: dict[str, tuple[int, int]] = field(default_factory=dict)


_MAPS: dict[int, _PortMap] = {}
_MAPS_LOCK = threading.Lock()


def _port_map(cluster_id: int) -> _PortMap:
    version = fabric_version(cluster_id)
    cached = _MAPS.get(cluster_id)
    if cached is not None and cached.version == version:
        return cached
    hca: dict[str, dict[tuple[str, int], _PortRef]] = {}
    switch: dict[tuple[str, int], _PortRef] = {}
    rows = Port.objects.filter(cluster_id=cluster_id).values_list(
        "pk", "number", "link_id", "link__capacity_gbps", "hca__device", "hca__node__hostname", "switch__guid"
    )
    for pk, number, link_id, capacity, device, host, guid in rows:
        ref = _PortRef(pk, link_id, capacity or 0.0)
        if guid:
            switch[(guid, number)] = ref
        elif host:
            hca.setdefault(host, {})[(device, number)] = ref
    gpus: dict[str, dict[int, int]] = {}
    for pk, index, host in GPU.objects.filter(node__cluster_id=cluster_id).values_list("pk", "index", "node__hostname"):
        gpus.setdefault(host, {})[index] = pk
    hcas = {
        guid: (host, unnamed, device)
        for guid, host, unnamed, device in HCA.objects.filter(
            cluster_id=cluster_id, kind=CaKind.HOST, node__isnull=False
        ).values_list("guid", "node__hostname", "node__unnamed", "device")
    }
    host_reported = {
        host: (cpu, mem)
        for host, cpu, mem in Node.objects.filter(cluster_id=cluster_id).values_list(
            "hostname", "reported_cpu_milli", "reported_memory_mib"
        )
    }
    built = _PortMap(version, hca, switch, gpus, hcas, frozenset(host_reported), host_reported)
    with _MAPS_LOCK:
        _MAPS[cluster_id] = built
    return built


def _switch_guid(device: str) -> str:
    return device.lower().removeprefix("0x")


def ingest_samples(
    cluster_id: int,
    samples: list[NodeSample],
    *,
    thresholds: Thresholds | None = None,
    hold_down_s: float | None = None,
    alpha: float | None = None,
) -> IngestResult:
    """Store a batch of samples (typically one poll of a cluster). Idempotent: re-ingesting a batch changes
    nothing, and a sample older than its node's stored one is ignored.

    The cyclic garbage collector is paused for the batch (and restored after), as for a scheduling round: a
    10,000-GPU poll allocates some 100,000 short-lived objects, and the collections they set off walked the
    worker's long-lived ones (the port map, the samples it holds) at a cost of up to a third of the poll."""
    with gc_paused():
        return _ingest(cluster_id, samples, thresholds=thresholds, hold_down_s=hold_down_s, alpha=alpha)


def _ingest(
    cluster_id: int,
    samples: list[NodeSample],
    *,
    thresholds: Thresholds | None,
    hold_down_s: float | None,
    alpha: float | None,
) -> IngestResult:

    clock = time.perf_counter
    t0 = clock()
    hold_down = settings.TELEMETRY_HOLD_DOWN_S if hold_down_s is None else hold_down_s
    alpha = settings.TELEMETRY_EWMA_ALPHA if alpha is None else alpha
    result = IngestResult()
    newest: dict[str, NodeSample] = {}
    for s in samples:  # a batch may hold two polls of a slow node: keep the newer
        if s.node not in newest or s.collected_at > newest[s.node].collected_at:
            newest[s.node] = s
    if not newest:
        return result
    pmap = _port_map(cluster_id)
    previous = latest.read_previous(cluster_id, list(newest))
    t_read = clock()

    states: dict[str, tuple[NodeSample, dict]] = {}
    port_rows: list[tuple] = []
    gpu_rows: list[tuple] = []
    findings: dict[str, list[Finding]] = {}
    seen: dict[str, float] = {}
    for node, sample in newest.items():
        prev = previous.samples.get(node)
        if sample.collected_at <= max(previous.seen.get(node, 0.0), prev.collected_at if prev else 0.0):
            result.ignored[node] = "not newer than the stored sample"
            continue
        prev_load = previous.loads.get(node, {})
        at = datetime.fromtimestamp(sample.collected_at, tz=UTC)
        load = _node_rows(cluster_id, pmap, prev, sample, at, thresholds, port_rows, gpu_rows, findings, result)
        smoothed = prev_load.get("smoothed", {})
        load["smoothed"] = {
            lid: u if lid not in smoothed else alpha * u + (1 - alpha) * smoothed[lid]
            for lid, u in load["links"].items()
        }
        load["at"] = sample.collected_at
        states[node] = (sample, load)
        seen[node] = sample.collected_at
        result.stored.append(node)
    t_rates = clock()
    if not result.stored:
        return result

    # Latest state first: it is what the scheduler and the live views need within the second (only the newest
    # wins, even against a concurrent batch: fabric.latest.store).
    latest.store(cluster_id, states)
    t_latest = clock()
    _claim_hcas(cluster_id, pmap, [newest[n] for n in result.stored], findings, result)
    t_hcas = clock()

    now = max(seen.values())
    with transaction.atomic():
        # A batch ingested twice by two workers at the same moment finds its rows already there: skip them.
        copy_rows(GpuMetric, GPU_COLUMNS, gpu_rows, ignore_conflicts=True)
        copy_rows(PortMetric, PORT_COLUMNS, port_rows, ignore_conflicts=True)
        t_series = clock()
        result.alerts = actions.record_node_findings(
            cluster_id,
            {n: findings.get(n, []) for n in result.stored},
            now=datetime.fromtimestamp(now, tz=UTC),
            hold_down_s=hold_down,
            exclude_rules=LIVENESS_RULES,
        )
        t_alerts = clock()
    t_commit = clock()
    _record_host(cluster_id, pmap, [newest[n] for n in result.stored], result)
    t_host = clock()
    # The live views: new load for the heat maps, alerts refreshed (raised/cleared ones also mark through events).
    # Nothing raised or cleared: only the load changed, which the broadcaster can put into what it built last.
    alerted = any(result.alerts.values())
    live = ("overview", "fabric", "gpus", "alerts") if alerted else ("overview", "fabric", "gpus")
    events.live_changed(cluster_id, live, load_only=not alerted)
    result.gpu_rows, result.port_rows = len(gpu_rows), len(port_rows)
    result.timings = {  # every step, in order: they add up to the whole call (bench/bench_ingest.py)
        "read": t_read - t0,
        "rates_health": t_rates - t_read,
        "latest_write": t_latest - t_rates,
        "hcas": t_hcas - t_latest,
        "series": t_series - t_hcas,
        "alerts": t_alerts - t_series,
        "commit": t_commit - t_alerts,
        "host": t_host - t_commit,
        "events": clock() - t_host,
    }
    return result


GPU_METRIC_FIELDS = ("utilisation_pct", "memory_used_mib", "memory_total_mib", "temperature_c", "power_w")
GPU_COLUMNS = ["gpu_id", "at", "utilisation_pct", "memory_used_mib", "temperature_c", "power_w"]
PORT_COLUMNS = ["port_id", "at", "tx_bytes_per_s", "rx_bytes_per_s", "xmit_wait_per_s", "utilisation", "errors"]


def _node_rows(cluster_id, pmap, prev, sample, at, thresholds, port_rows, gpu_rows, findings, result) -> dict:
    """Rates, rows and findings of one node's sample; returns its load (raw link and GPU utilisation)."""
    node = sample.node
    fabric = node == FABRIC_SOURCE
    prev_gpus = {g.index: g for g in prev.gpus} if prev else {}
    hca_ports = pmap.hca_ports.get(node, {})
    switch_ports = pmap.switch_ports
    out: list[Finding] = []
    links: dict[int, float] = {}
    ports = sample.ports
    before_ports = _previous_ports(prev, ports)
    prev_t, cur_t = (prev.collected_at if prev else None), sample.collected_at
    for cur, before in zip(ports, before_ports, strict=True):
        rates = port_rates(before, prev_t, cur, cur_t) if before is not None else None
        if fabric:
            ref = switch_ports.get((_switch_guid(cur.device), cur.port))
        else:
            ref = hca_ports.get((cur.device, cur.port))
        cabled = ref is not None and ref.link_id is not None
        found = evaluate_port(before, cur, rates, thresholds, cabled=cabled, node=node)
        if found:
            out += found
        if ref is None or rates is None or rates.tx_bytes_per_s is None:
            continue
        util = None
        if ref.link_id is not None and ref.capacity_gbps > 0:
            tx, rx = rates.tx_bytes_per_s, rates.rx_bytes_per_s
            busiest = tx if rx is None or tx >= rx else rx
            util = min(1.0, max(0.0, busiest * 8 / (ref.capacity_gbps * 1e9)))
            links[ref.link_id] = max(util, links.get(ref.link_id, 0.0))
            result.link_utilisation[ref.link_id] = max(util, result.link_utilisation.get(ref.link_id, 0.0))
        errors = {k: v for k, v in rates.error_deltas.items() if v} if rates.error_deltas else {}
        port_rows.append(
            (ref.port_id, at, rates.tx_bytes_per_s, rates.rx_bytes_per_s, rates.xmit_wait_per_s, util, errors)
        )
    gpu_ids = pmap.gpus.get(node, {})
    gpus: dict[int, float] = {}
    gpu_metrics: dict[int, tuple] = {}
    for cur in sample.gpus:
        found = evaluate_gpu(prev_gpus.get(cur.index), cur, node=node)
        if found:
            out += found
        gpu_id = gpu_ids.get(cur.index)
        if gpu_id is None:
            continue
        gpus[gpu_id] = (cur.utilisation_gpu_pct or 0.0) / 100
        gpu_metrics[gpu_id] = (cur.utilisation_gpu_pct, cur.memory_used_mib, cur.memory_total_mib,
                               cur.temperature_c, cur.power_w)  # fmt: skip
        gpu_rows.append((gpu_id, at, cur.utilisation_gpu_pct, cur.memory_used_mib, cur.temperature_c, cur.power_w))
    if out:
        findings[node] = out
    return {"links": links, "gpus": gpus, "gpu_metrics": gpu_metrics}


def _previous_ports(prev: NodeSample | None, ports: list) -> list:
    """Each port's previous sample (None: none), in `ports` order. A collector reads a node's ports in the same order
    every poll, so pairing them in order is checked, not assumed; any difference falls back to a lookup."""
    if prev is None:
        return [None] * len(ports)
    before = prev.ports
    if len(before) == len(ports) and all(
        a.port == b.port and a.device == b.device for a, b in zip(before, ports, strict=True)
    ):
        return before
    by_key = {(p.device, p.port): p for p in before}
    return [by_key.get((p.device, p.port)) for p in ports]


def hca_claims(pmap: _PortMap, sample: NodeSample) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Of the HCAs a node's sample reports, per the port map (no query): (node GUID, device) pairs for claim_hcas (on
    an unnamed placeholder, or the node's own with another device name stored), and GUID -> the other named host
    the inventory has it on. GUIDs no host's HCA of the cluster has are nobody's business here."""
    todo: list[tuple[str, str]] = []
    elsewhere: dict[str, str] = {}
    for reported in sample.hcas:
        try:
            guid = normalise_guid(reported.node_guid)
        except (ValueError, AttributeError):
            continue
        known = pmap.hcas.get(guid)
        if known is None:
            continue
        host, unnamed, device = known
        if host == sample.node:
            if reported.device and reported.device != device:
                todo.append((guid, reported.device))
        elif unnamed:
            todo.append((guid, reported.device))
        else:
            elsewhere[guid] = host
    return todo, elsewhere


def _claim_hcas(cluster_id: int, pmap: _PortMap, samples: list[NodeSample], findings: dict, result) -> None:
    """Attach what the samples' agents report (fabric.actions.claim_hcas, one transaction per node) and warn, on the
    reporting node, of each HCA that stays on another named host (raised every batch it is reported, cleared after
    the hold-down once it is not)."""
    for sample in samples:
        if sample.node == FABRIC_SOURCE or not sample.hcas or sample.node not in pmap.nodes:
            continue
        todo, elsewhere = hca_claims(pmap, sample)
        if todo:
            try:
                claimed = actions.claim_hcas(cluster_id, sample.node, todo)
            except actions.ActionError as exc:  # the node went meanwhile: the next poll tries again
                log.warning("telemetry: HCAs of %s not attached: %s", sample.node, exc)
            else:
                elsewhere.update(claimed.elsewhere)
                if claimed.attached:
                    result.hcas_attached[sample.node] = claimed.attached
        devices = {}
        for h in sample.hcas:
            try:
                devices[normalise_guid(h.node_guid)] = h.device
            except (ValueError, AttributeError):
                continue
        for guid, host in sorted(elsewhere.items()):
            findings.setdefault(sample.node, []).append(
                Finding(
                    HCA_ELSEWHERE, "warning", "node", f"{sample.node}/hca/{guid}",
                    f"{sample.node}'s agent reports HCA {guid} ({devices.get(guid) or 'device ?'}), which the "
                    f"inventory has on {host}: not moved. If the card moved to {sample.node}, attach it (admin, or "
                    f"fabric.actions.attach_hca(..., force=True)); else two hosts report one GUID",
                )
            )  # fmt: skip


def _host_figure(value) -> int | None:
    """A CPU or memory figure from an agent's sample (JSON from the broker): a whole number the Node can hold."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= actions.HOST_MAX:
        return None
    return value


def host_reports(pmap: _PortMap, samples: list[NodeSample]) -> dict[str, tuple[int | None, int | None]]:
    """Of the samples' host figures (NodeSample.host), per the port map (no query): hostname -> (milli-CPUs, MiB) for
    the nodes whose figures differ from those stored; None for a figure not read (or not a plausible number)."""
    out: dict[str, tuple[int | None, int | None]] = {}
    for sample in samples:
        if sample.node == FABRIC_SOURCE or sample.host is None or sample.node not in pmap.nodes:
            continue
        cpu, mem = _host_figure(sample.host.cpu_milli), _host_figure(sample.host.memory_mib)
        known_cpu, known_mem = pmap.host_reported.get(sample.node, (0, 0))
        if (cpu is not None and cpu != known_cpu) or (mem is not None and mem != known_mem):
            out[sample.node] = (cpu, mem)
    return out


def _record_host(cluster_id: int, pmap: _PortMap, samples: list[NodeSample], result: IngestResult) -> None:
    """Store the node agents' CPU and memory figures that changed (fabric.actions.record_host_resources: the node's
    allocatable amounts follow unless an operator set them). Nothing is written while they stay the same; a write
    that fails is tried again with the next batch (the map is updated only once it is stored)."""
    reports = host_reports(pmap, samples)
    if not reports:
        return
    try:
        result.host_recorded = actions.record_host_resources(cluster_id, reports)
    except DatabaseError as exc:
        log.warning("telemetry: host figures of %d nodes not recorded: %s", len(reports), exc)
        return
    for node, (cpu, mem) in reports.items():
        known_cpu, known_mem = pmap.host_reported.get(node, (0, 0))
        pmap.host_reported[node] = (known_cpu if cpu is None else cpu, known_mem if mem is None else mem)


def ingest_sample(cluster_id: int, sample: NodeSample, **options) -> IngestResult:
    """One node's sample (a batch of one)."""
    return ingest_samples(cluster_id, [sample], **options)


#
# Liveness against the control plane's own progress (fabric/telemetry/liveness.py is the rule). Three writers, each
# under its own lock, so no two write the same key: poll_cluster (the rounds sent and the judge's state,
# `liveness_key`), ingest_batch (the answers it ingested and how far it got, `answers_key`), and nobody else.
#

# Both locks are renewed while their holder lives (TaskLock keepalive): the timeout is how long a worker killed
# mid-run holds telemetry back, not a bound on a run (a batch takes about a second at 10,000 GPUs, longer on a slow
# database). Before, a 30 s ingest lock left by a killed worker stopped ingest for 28.5 s in the chaos run.
LIVENESS_LOCK_S = 10.0
INGEST_LOCK_S = 6.0


def liveness_key(cluster_id: int) -> str:
    return f"telemetry:{cluster_id}:liveness"


def answers_key(cluster_id: int) -> str:
    return f"telemetry:{cluster_id}:answers"


def poll_lock(cluster_id: int) -> TaskLock:
    """Held by poll_cluster while it judges and sends a round: one at a time per cluster."""
    return TaskLock(f"telemetry:{cluster_id}:poll", LIVENESS_LOCK_S, keepalive=True)


def ingest_lock(cluster_id: int) -> TaskLock:
    """Held by ingest_batch from its drain until its answers are recorded: while it is held, what was drained is not
    ingested yet, so the liveness check does not take the empty inbox for "ingest has caught up"."""
    return TaskLock(f"telemetry:{cluster_id}:ingest", INGEST_LOCK_S, keepalive=True)


def liveness_rules() -> liveness.Rules:
    interval = settings.TELEMETRY_INTERVAL_S
    return liveness.Rules(
        interval_s=interval,
        unreachable_polls=settings.TELEMETRY_UNREACHABLE_POLLS,
        down_polls=settings.TELEMETRY_DOWN_POLLS,
        # A live agent answers within a second; half an interval (and at least two batch windows) is the time after
        # which ingest must have its answer if ingest has caught up. Later answers still count, retroactively.
        answer_s=max(interval / 2, 2 * settings.TELEMETRY_BATCH_WINDOW_S),
        stalled_fraction=settings.TELEMETRY_STALLED_FRACTION,
    )


def _keep_rounds(rules: liveness.Rules) -> int:
    return rules.down_polls + rules.unreachable_polls + 2


# Both keys hold plain dicts, lists and numbers (not the rule's dataclasses): what a running version wrote, the next
# one reads, and a value it cannot read is a fresh start, never an error in the poll.


def _load_state(cluster_id: int) -> liveness.State:
    found = cache.get(liveness_key(cluster_id))
    try:
        return liveness.State(
            pending=tuple(liveness.Round(float(at), tuple(asked)) for at, asked in found["pending"]),
            judged=tuple((float(at), int(n)) for at, n in found["judged"]),
            misses={node: tuple(map(float, ts)) for node, ts in found["misses"].items()},
            last_sent=found["last_sent"],
        )
    except (TypeError, KeyError, ValueError, AttributeError):
        return liveness.State()


def _store_state(cluster_id: int, state: liveness.State) -> None:
    body = {
        "pending": [[r.at, list(r.asked)] for r in state.pending],
        "judged": [list(j) for j in state.judged],
        "misses": {node: list(ts) for node, ts in state.misses.items()},
        "last_sent": state.last_sent,
    }
    cache.set(liveness_key(cluster_id), body, None)


def _load_answers(cluster_id: int) -> dict:
    found = cache.get(answers_key(cluster_id))
    if isinstance(found, dict) and {"newest", "counts", "expired"} <= set(found):
        return found
    return {"newest": {}, "counts": {}, "expired": {}, "ingested_until": None}


def record_round(cluster_id: int, at: float, asked: list[str]) -> None:
    """poll_cluster sent a round of polls at `at` to `asked` (it holds poll_lock)."""
    keep = _keep_rounds(liveness_rules())
    _store_state(cluster_id, liveness.sent(_load_state(cluster_id), liveness.Round(at, tuple(asked)), keep=keep))


def record_answers(
    cluster_id: int,
    answered: list[tuple[str, float]],
    expired: list[tuple[str, float]],
    *,
    ingested_until: float | None,
) -> None:
    """ingest_batch ingested answers (node, send time of the poll it answered) and was told of polls that expired on
    the broker unsent; everything that reached the inbox before `ingested_until` is ingested (None: a batch whose lock
    lapsed meanwhile, which cannot say so). Called under ingest_lock."""
    if not answered and not expired and ingested_until is None:
        return
    data = _load_answers(cluster_id)
    newest: dict[str, float] = data["newest"]
    counts: dict[float, int] = data["counts"]
    lapsed: dict[float, list[str]] = data["expired"]
    for node, at in sorted(answered, key=lambda a: a[1]):
        if at > newest.get(node, float("-inf")):  # once per node and round; a duplicate or an older answer adds none
            newest[node] = at
            counts[at] = counts.get(at, 0) + 1
    for node, at in expired:
        if node not in lapsed.setdefault(at, []):
            lapsed[at].append(node)
    keep = sorted({*counts, *lapsed})[-3 * _keep_rounds(liveness_rules()) :]
    data["counts"] = {at: counts[at] for at in keep if at in counts}
    data["expired"] = {at: lapsed[at] for at in keep if at in lapsed}
    if ingested_until is not None:
        data["ingested_until"] = max(ingested_until, data.get("ingested_until") or 0.0)
    cache.set(answers_key(cluster_id), data, None)


def ingest_progress(cluster_id: int, now: float) -> liveness.Progress:
    """How far ingest got. The inbox is read before the lock: a batch that drained it before the read holds the
    lock at the second read, and anything pushed after the read arrived after `now`. With nothing waiting and no
    batch running, ingest has caught up with everything that arrived: the answers still missing never came."""

    backlog = inbox.waiting(cluster_id)
    running = ingest_lock(cluster_id).locked()
    recorded = _load_answers(cluster_id).get("ingested_until")
    until = now if backlog == 0 and not running else recorded
    return liveness.Progress(
        now=now, ingested_until=until, inbox_backlog=backlog, ingest_running=running, beat_age_s=heartbeat_age(now)
    )


def check_liveness(cluster_id: int, now: float) -> dict:
    """Judge the rounds ingest has caught up with, then raise/clear every node's unreachable and down alerts (a down
    alert takes the node out of service: actions.record_node_findings) and the cluster's telemetry_stalled alert.
    Run by poll_cluster before it sends the next round, under poll_lock."""
    rules = liveness_rules()
    data = _load_answers(cluster_id)
    expired = {at: frozenset(nodes) for at, nodes in data["expired"].items()}
    answers = liveness.Answers(newest=data["newest"], counts=data["counts"], expired=expired)
    nodes = list(Node.objects.filter(cluster_id=cluster_id).values_list("hostname", flat=True))
    verdict = liveness.judge(_load_state(cluster_id), answers, ingest_progress(cluster_id, now), rules, nodes)
    _store_state(cluster_id, verdict.state)
    at = datetime.fromtimestamp(now, tz=UTC)
    # A node is back as soon as it answers again; hold-down only keeps a flapping node from bouncing.
    hold = min(settings.TELEMETRY_HOLD_DOWN_S, rules.stall_after_s)
    counts = actions.record_node_findings(
        cluster_id, verdict.nodes, now=at, hold_down_s=hold, only_rules=LIVENESS_RULES
    )
    stalled = actions.record_cluster_findings(
        cluster_id, verdict.cluster, rules=(liveness.STALLED,), now=at, hold_down_s=hold
    )
    return {k: counts[k] + stalled[k] for k in counts}


def pipeline_status(cluster_id: int, now: float) -> dict[str, float | int | None]:
    """For /metrics: seconds ingest is behind (0 when caught up; None before anything was ingested), results waiting
    in the inbox, seconds since the last round of polls was sent (None: none yet)."""
    progress = ingest_progress(cluster_id, now)
    last_sent = _load_state(cluster_id).last_sent
    until = progress.ingested_until
    return {
        "ingest_lag_s": None if until is None else max(0.0, now - until),
        "inbox": progress.inbox_backlog,
        "last_poll_age_s": None if last_sent is None else max(0.0, now - last_sent),
    }


def forget_liveness(cluster_id: int) -> None:
    """Drop the rounds, answers and judge's state of a cluster (a cluster deleted, a test's cleanup)."""
    cache.delete_many([liveness_key(cluster_id), answers_key(cluster_id)])
