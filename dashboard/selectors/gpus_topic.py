"""The gpus topic: every GPU with its latest metrics and health."""

from __future__ import annotations

from dashboard.selectors.cluster import _Cluster, _r
from fabric.models import GPU
from fabric.topology.graph import natural_key

GPU_METRICS_UNITS = {"util": "%", "mem_used": "MiB", "temp": "°C", "power": "W"}

# Where the latest load goes in a built gpus state (`gpus_with_load`): per GPU, in the state's order, its id and the
# memory its row states (shown when telemetry gives no total).
GpusLoad = tuple[tuple[int, int | None], ...]


def _metrics(values: tuple | None, memory: int | None) -> dict:
    util, mem_used, mem_total, temp, power = values or (None,) * 5
    total = _r(mem_total, 0) if mem_total else memory or None
    return {
        "util": _r(util, 1),
        "mem_used": _r(mem_used, 0),
        "mem_total": total,
        "temp": _r(temp, 0),
        "power": _r(power, 0),
    }


def gpus(c: _Cluster) -> dict:
    return gpus_and_load(c)[0]


def gpus_and_load(c: _Cluster) -> tuple[dict, GpusLoad]:
    """The topic's state, and where telemetry's load goes in it."""
    cab = c.cabling
    switch_name = {pk: name for pk, _, name in cab.switches}
    rows = GPU.objects.filter(node__cluster_id=c.id).values_list(
        "pk", "node__hostname", "index", "model", "health", "memory_mib"
    )
    metrics, jobs = c.gpu_metrics, c.gpu_jobs
    out = []
    memory_of: dict[int, int | None] = {}
    leaf_of: dict[str, str] = {}
    order: dict[str, tuple] = {}
    for pk, host, index, model, health, memory in rows:
        leaf = leaf_of.get(host)
        if leaf is None:
            leaf = leaf_of[host] = switch_name.get(cab.leaf_id(host), "")
            order[host] = (natural_key(leaf), natural_key(host))
        memory_of[pk] = memory
        out.append({
            "id": pk, "node": host, "leaf": leaf, "index": index, "model": model, "health": health,
            **_metrics(metrics.get(pk), memory), "jobs": jobs.get(pk, []),
        })  # fmt: skip
    out.sort(key=lambda g: (order[g["node"]], g["index"]))
    return {"gpus": out, "metrics": GPU_METRICS_UNITS}, tuple((g["id"], memory_of[g["id"]]) for g in out)


def gpus_with_load(state: dict, where: GpusLoad, c: _Cluster) -> dict:
    """`state` (built with `where`) with the latest metrics: a new state, `state` is not changed."""
    metrics = c.gpu_metrics
    items = zip(state["gpus"], where, strict=True)
    return {**state, "gpus": [{**item, **_metrics(metrics.get(pk), memory)} for item, (pk, memory) in items]}
