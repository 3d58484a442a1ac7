"""The gpus topic: every GPU with its latest metrics and health."""

from __future__ import annotations

from dashboard.selectors.cluster import _Cluster, _r
from fabric.models import GPU
from fabric.topology.graph import natural_key

GPU_METRICS_UNITS = {"util": "%", "mem_used": "MiB", "temp": "°C", "power": "W"}


def gpus(c: _Cluster) -> dict:
    cab = c.cabling
    switch_name = {pk: name for pk, _, name in cab.switches}
    rows = GPU.objects.filter(node__cluster_id=c.id).values_list(
        "pk", "node__hostname", "index", "model", "health", "memory_mib"
    )
    metrics, jobs = c.gpu_metrics, c.gpu_jobs
    out = []
    leaf_of: dict[str, str] = {}
    order: dict[str, tuple] = {}
    for pk, host, index, model, health, memory in rows:
        leaf = leaf_of.get(host)
        if leaf is None:
            leaf = leaf_of[host] = switch_name.get(cab.leaf_id(host), "")
            order[host] = (natural_key(leaf), natural_key(host))
        util, mem_used, mem_total, temp, power = metrics.get(pk) or (None,) * 5
        out.append({
            "id": pk, "node": host, "leaf": leaf, "index": index, "model": model,
            "health": health, "util": _r(util, 1), "mem_used": _r(mem_used, 0),
            "mem_total": _r(mem_total, 0) if mem_total else memory or None, "temp": _r(temp, 0),
            "power": _r(power, 0), "jobs": jobs.get(pk, []),
        })  # fmt: skip
    out.sort(key=lambda g: (order[g["node"]], g["index"]))
    return {"gpus": out, "metrics": GPU_METRICS_UNITS}
