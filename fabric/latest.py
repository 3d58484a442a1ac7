"""The latest state of telemetry: what each node's newest sample says now, kept in the cache (Redis in production).

One writer, `fabric.ingest` (`store`, after `read_previous`); the readers (the scheduler's snapshot, the live views,
/metrics, fabric.selectors, the liveness check) import this module, never the write path.

Cache keys per cluster: `telemetry:<id>:<node>` what the next poll's rates and health rules read of the previous
sample (`for_rates`: its time, collector and errors, each port's state and counters, each GPU's ECC total),
`telemetry:<id>:u:<node>` the node's current link and GPU load (raw and smoothed; what the scheduler and the heat
maps read), and `telemetry:<id>:seen` node -> time of its newest sample (liveness, poll lag). The fabric agent's
switch ports are the node FABRIC_SOURCE.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.core.cache import cache

from fabric.collectors.samples import FABRIC_SOURCE, GpuSample, NodeSample, PortSample
from fabric.models import Node

LATEST_TTL_S = 3600  # a node silent for an hour has no "latest" state worth showing


def latest_key(cluster_id: int, node: str) -> str:
    return f"telemetry:{cluster_id}:{node}"


def load_key(cluster_id: int, node: str) -> str:
    return f"telemetry:{cluster_id}:u:{node}"


def seen_key(cluster_id: int) -> str:
    return f"telemetry:{cluster_id}:seen"


#
# The writer's side (fabric.ingest)
#


@dataclass
class Previous:
    """What the latest state held for a batch's nodes before it: one cache read."""

    samples: dict[str, NodeSample]  # node -> its previous sample (rates come from it)
    loads: dict[str, dict]  # node -> its previous load (the EWMA goes on from it)
    seen: dict[str, float]  # node -> time of its newest sample, every node of the cluster


# What this process stored last per node: cluster -> node -> (sample time, sample, load). The poll after it is
# usually ingested by the same worker, which then needs no read of the samples (4 MB to unpickle at 10,000 GPUs):
# an entry counts only while the seen map still holds its time, i.e. no other writer stored a newer sample.
_MEMO: dict[int, dict[str, tuple[float, NodeSample, dict]]] = {}
_MEMO_LOCK = threading.Lock()


def read_previous(cluster_id: int, nodes: list[str]) -> Previous:
    seen = cache.get(seen_key(cluster_id)) or {}
    memo = _MEMO.get(cluster_id, {})
    samples, loads = {}, {}
    missing = []
    for n in nodes:
        mine = memo.get(n)
        if mine is not None and seen.get(n) == mine[0]:
            samples[n], loads[n] = mine[1], mine[2]
        else:
            missing.append(n)
    if missing:
        keys = [*(latest_key(cluster_id, n) for n in missing), *(load_key(cluster_id, n) for n in missing)]
        stored = cache.get_many(keys)
        for n in missing:
            state = stored.get(latest_key(cluster_id, n))
            if state and "ports" in state:  # (a state of an older version is read as none: rates start again)
                samples[n] = from_rates(n, state)
            load = stored.get(load_key(cluster_id, n))
            if load:
                loads[n] = load
    return Previous(samples, loads, seen)


def for_rates(sample: NodeSample) -> dict:
    """What the next poll's rates and health rules read of a sample (fabric.telemetry), as plain values: a whole
    sample pickled field by field was a quarter of a 10,000-GPU poll, and only this worker's memo needs all of it."""
    return {
        "at": sample.collected_at,
        "collector": sample.collector,
        "errors": sample.errors,  # what the collector could not read (an operator reads them here)
        "ports": [(p.device, p.port, p.state, p.counters) for p in sample.ports],
        "gpus": [(g.index, g.ecc_uncorrected) for g in sample.gpus],
    }


def from_rates(node: str, state: dict) -> NodeSample:
    """The sample `for_rates` kept, with only those fields."""
    return NodeSample(
        node=node,
        collected_at=state["at"],
        collector=state["collector"],
        errors=list(state["errors"]),
        ports=[PortSample(device, port, state=st, counters=counters) for device, port, st, counters in state["ports"]],
        gpus=[GpuSample(index, ecc_uncorrected=ecc) for index, ecc in state["gpus"]],
    )


def store(cluster_id: int, states: dict[str, tuple[NodeSample, dict]]) -> None:
    """Write each node's (sample, load) as its latest state and mark it seen. Only the newest wins even against a
    concurrent batch: the (small) sample-time map is re-read just before writing and what became stale meanwhile
    is dropped."""
    current = cache.get(seen_key(cluster_id)) or {}
    out: dict[str, object] = {}
    for node, (sample, load) in states.items():
        if current.get(node, 0.0) >= sample.collected_at:
            continue
        out[latest_key(cluster_id, node)] = for_rates(sample)
        out[load_key(cluster_id, node)] = load
    cache.set_many(out, LATEST_TTL_S)
    with _MEMO_LOCK:
        memo = _MEMO.setdefault(cluster_id, {})
        for node, (sample, load) in states.items():
            if current.get(node, 0.0) < sample.collected_at:
                memo[node] = (sample.collected_at, sample, load)
    # Read-modify-write of one small key: a concurrent batch can lose an update, which the next poll repairs;
    # taking the max keeps a stale writer from moving a node's time backwards.
    for node, (sample, _) in states.items():
        if sample.collected_at > current.get(node, 0.0):
            current[node] = sample.collected_at
    cache.set(seen_key(cluster_id), current, None)


def forget_node(cluster_id: int, node: str) -> None:
    """Drop a node's latest sample and load (a test's cleanup); its time in the seen map stays."""
    cache.delete_many([latest_key(cluster_id, node), load_key(cluster_id, node)])
    with _MEMO_LOCK:
        _MEMO.get(cluster_id, {}).pop(node, None)
    with _READ_LOCK:
        _READ.get(cluster_id, {}).pop(node, None)


#
# Readers
#


def last_seen(cluster_id: int) -> dict[str, float]:
    """Hostname (or FABRIC_SOURCE) -> epoch seconds of its newest stored sample; nodes never seen are absent."""
    return dict(cache.get(seen_key(cluster_id)) or {})


# What this process read last of each node's load: cluster -> node -> (sample time in the seen map, load or None).
# A round reads 1,250 nodes' loads (megabytes to unpickle at 10,000 GPUs) where a poll wrote only some since: it reads
# the small seen map, then only the loads whose time moved. The writer sets a load before its time (`store`), so a
# time read means a load at least that new. Read again a while before it may expire, so that an expired load reads
# as none, as it would from the cache.
_READ: dict[int, dict[str, tuple[float, dict | None]]] = {}
_READ_LOCK = threading.Lock()
REREAD_BEFORE_EXPIRY_S = 300


def node_loads(cluster_id: int, nodes: list[str] | None = None) -> dict[str, dict]:
    """Node -> {"links": {link id: raw util}, "smoothed": {...}, "gpus": {GPU id: util 0..1}, "gpu_metrics":
    {GPU id: GPU_METRIC_FIELDS values}, "at": epoch}: the seen map, then the loads that changed since this process
    read them, in one cache read. Without `nodes`, every node of the cluster; the fabric agent's switch ports always.
    The loads are shared with later calls: read them, never change them."""
    if nodes is None:
        nodes = list(Node.objects.filter(cluster_id=cluster_id).values_list("hostname", flat=True))
    names = [*nodes, FABRIC_SOURCE]
    seen = cache.get(seen_key(cluster_id)) or {}
    fresh_after = time.time() - (LATEST_TTL_S - REREAD_BEFORE_EXPIRY_S)
    with _READ_LOCK:
        memo = _READ.setdefault(cluster_id, {})
        known = {n: memo.get(n) for n in names}
    ask = [
        n
        for n in names
        if n in seen and (known[n] is None or known[n][0] != seen[n] or seen[n] < fresh_after)  # type: ignore[index]
    ]
    if ask:
        found = cache.get_many([load_key(cluster_id, n) for n in ask])
        read = {n: (seen[n], found.get(load_key(cluster_id, n))) for n in ask}
        known.update(read)
        with _READ_LOCK:
            memo.update(read)
    out = {}
    for n in names:
        if n in seen:
            load = known[n][1]  # type: ignore[index]
            if load:
                out[n] = load
    return out


def latest_utilisation(
    cluster_id: int, nodes: list[str], *, smoothed: bool = True
) -> tuple[dict[str, float], dict[int, float]]:
    """(link id as str -> utilisation, GPU id -> utilisation) from the latest state of every node (and the
    switch ports), in one cache read. Smoothed (EWMA) link load for placement; raw for the heat map."""
    links: dict[str, float] = {}
    gpus: dict[int, float] = {}
    for load in node_loads(cluster_id, nodes).values():
        for link_id, util in load["smoothed" if smoothed else "links"].items():
            key = str(link_id)
            links[key] = max(util, links.get(key, 0.0))
        gpus.update(load["gpus"])
    return links, gpus
