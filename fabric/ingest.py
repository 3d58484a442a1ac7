"""Ingest: one node's sample -> rates, latest state (cache), time series (database), health alerts.

Samples arrive from node agents in any order (a retried poll, a slow node): a sample not newer than the one
already stored for that node is ignored, so state never moves backwards. Rates come from the previous sample
of the same node kept in the latest state. This module is the ingest action: the Celery tasks call it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.core.cache import cache
from django.db import transaction

from fabric import actions
from fabric.collectors.samples import NodeSample
from fabric.models import GPU, GpuMetric, Port, PortMetric
from fabric.telemetry.health import Thresholds, evaluate_gpu, evaluate_port, gpu_key, port_key
from fabric.telemetry.rates import PortRates, link_utilisation, port_rates

LATEST_TTL_S = 3600  # a node silent for an hour has no "latest" state worth showing


def latest_key(cluster_id: int, node: str) -> str:
    return f"telemetry:{cluster_id}:{node}"


@dataclass
class IngestResult:
    node: str
    stored: bool
    reason: str = ""
    gpu_rows: int = 0
    port_rows: int = 0
    link_utilisation: dict[int, float] = field(default_factory=dict)
    alerts: dict[str, int] = field(default_factory=dict)


def ingest_sample(
    cluster_id: int, sample: NodeSample, *, thresholds: Thresholds | None = None, hold_down_s: float = 300.0
) -> IngestResult:
    key = latest_key(cluster_id, sample.node)
    latest = cache.get(key)
    prev: NodeSample | None = latest["sample"] if latest else None
    if prev is not None and sample.collected_at <= prev.collected_at:
        return IngestResult(sample.node, stored=False, reason="not newer than the stored sample")
    at = datetime.fromtimestamp(sample.collected_at, tz=UTC)

    prev_ports = {(p.device, p.port): p for p in prev.ports} if prev else {}
    prev_gpus = {g.index: g for g in prev.gpus} if prev else {}
    ports = {
        (p.hca.device, p.number): p
        for p in Port.objects.filter(cluster_id=cluster_id, hca__node__hostname=sample.node).select_related(
            "hca", "link"
        )
    }
    gpus = {g.index: g for g in GPU.objects.filter(node__cluster_id=cluster_id, node__hostname=sample.node)}

    result = IngestResult(sample.node, stored=True)
    findings, port_rows, gpu_rows = [], [], []
    for cur in sample.ports:
        before = prev_ports.get((cur.device, cur.port))
        rates: PortRates | None = (
            port_rates(before, prev.collected_at, cur, sample.collected_at) if before and prev else None
        )
        findings += evaluate_port(before, cur, rates, thresholds, key=f"{sample.node}/{port_key(cur)}")
        row = ports.get((cur.device, cur.port))
        if row is None or rates is None or rates.tx_bytes_per_s is None:
            continue
        util = link_utilisation(rates, None, row.link.capacity_gbps) if row.link_id else None
        if util is not None:
            result.link_utilisation[row.link_id] = util
        port_rows.append(
            PortMetric(port=row, at=at, tx_bytes_per_s=rates.tx_bytes_per_s, rx_bytes_per_s=rates.rx_bytes_per_s,
                       xmit_wait_per_s=rates.xmit_wait_per_s, utilisation=util,
                       errors={k: v for k, v in rates.error_deltas.items() if v})
        )  # fmt: skip
    for cur in sample.gpus:
        findings += evaluate_gpu(prev_gpus.get(cur.index), cur, key=f"{sample.node}/{gpu_key(cur)}")
        row = gpus.get(cur.index)
        if row is not None:
            gpu_rows.append(
                GpuMetric(gpu=row, at=at, utilisation_pct=cur.utilisation_gpu_pct, memory_used_mib=cur.memory_used_mib,
                          temperature_c=cur.temperature_c, power_w=cur.power_w)
            )  # fmt: skip

    with transaction.atomic():
        PortMetric.objects.bulk_create(port_rows, ignore_conflicts=True)
        GpuMetric.objects.bulk_create(gpu_rows, ignore_conflicts=True)
        result.alerts = actions.record_findings(cluster_id, sample.node, findings, now=at, hold_down_s=hold_down_s)
    result.gpu_rows, result.port_rows = len(gpu_rows), len(port_rows)
    gpu_util = {
        gpus[g.index].pk: (g.utilisation_gpu_pct or 0.0) / 100 for g in sample.gpus if g.index in gpus
    }  # fmt: skip
    # The latest state is written last, and only if still newest: a slower, older ingest must not overwrite it.
    current = cache.get(key)
    if current is None or current["sample"].collected_at < sample.collected_at:
        cache.set(key, {"sample": sample, "links": result.link_utilisation, "gpus": gpu_util}, LATEST_TTL_S)
    return result


def latest_utilisation(cluster_id: int, nodes: list[str]) -> tuple[dict[str, float], dict[int, float]]:
    """(link key -> utilisation, GPU id -> utilisation) from the latest state of every node, in one cache read."""
    links: dict[str, float] = {}
    gpus: dict[int, float] = {}
    for state in cache.get_many([latest_key(cluster_id, n) for n in nodes]).values():
        for link_id, util in state["links"].items():
            links[str(link_id)] = max(util, links.get(str(link_id), 0.0))
        gpus.update(state["gpus"])
    return links, gpus
