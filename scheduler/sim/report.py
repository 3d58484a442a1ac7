"""Text tables and JSON of replay results. PURE (strings and dicts out)."""

from __future__ import annotations

import math
from typing import Any

from scheduler.sim.metrics import ReplayResult
from scheduler.sim.traces.base import Trace

COLUMNS = (  # header, ReplayResult attribute, width, format
    ("avg JCT s", "avg_jct", 10, ".1f"),
    ("median", "median_jct", 9, ".1f"),
    ("p95", "p95_jct", 9, ".1f"),
    ("makespan", "makespan", 10, ".0f"),
    ("queueing", "avg_queueing", 9, ".1f"),
    ("GPU util", "utilisation", 9, ".1%"),
    ("1 island", "island_share", 9, ".0%"),
    ("1 leaf", "leaf_share", 8, ".0%"),
    ("preempt", "preemptions", 8, "d"),
    ("migrate", "migrations", 8, "d"),
)


def _cell(value: Any, width: int, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return f"{'-':>{width}}"
    return f"{value:>{width}{fmt}}"


def leaf_count(r: ReplayResult) -> str:
    """`inside one leaf / ran on several nodes`, e.g. `75/115`; `-` when no job ran on several nodes."""
    return f"{r.multi_node_one_leaf}/{r.multi_node_jobs}" if r.multi_node_jobs else "-"


def ratios(results: list[ReplayResult], base: str = "default") -> dict[str, float]:
    """avg JCT of each other policy / avg JCT of `base` (> 1: `base` is that many times faster)."""
    by = {r.policy: r for r in results}
    b = by.get(base)
    if b is None or not b.avg_jct or math.isnan(b.avg_jct):
        return {}
    out = {}
    for r in results:
        if r.policy != base and r.avg_jct and not math.isnan(r.avg_jct) and not r.unfinished:
            out[r.policy] = round(r.avg_jct / b.avg_jct, 3)
    return out


def format_table(trace: Trace, results: list[ReplayResult]) -> str:
    if not results:
        return "no results"
    r0 = results[0]
    lines = [
        f"trace {trace.kind} {trace.source}: {len(trace.jobs)} jobs, {trace.gpu_seconds / 3600:.1f} GPU-hours; "
        f"cluster {r0.cluster} ({r0.n_gpus} GPUs); network model {'on' if r0.network else 'off'}",
        f"{'policy':<16}" + "".join(f"{h:>{w}}" for h, _k, w, _f in COLUMNS) + f"{'multi-node 1 leaf':>18}",
    ]
    for r in results:
        row = f"{r.policy:<16}"
        for _h, key, w, fmt in COLUMNS:
            row += _cell(getattr(r, key), w, fmt)
        row += f"{leaf_count(r):>18}"
        if r.unfinished:
            row += f"  ({len(r.unfinished)} never finished)"
        lines.append(row)
    rat = ratios(results)
    if rat:
        lines.append(
            "average JCT relative to default (x = policy / default; > 1 means default is faster): "
            + ", ".join(f"{k} {v:.2f}x" for k, v in rat.items())
        )
    if "default-blind" in rat:
        lines.append(
            f"topology-blind placement / our placement, average JCT: {rat['default-blind']:.3f} "
            f"({'ours faster' if rat['default-blind'] > 1 else 'ours not faster'})"
        )
    for note in dict.fromkeys(n for r in results for n in r.notes):
        lines.append(f"note: {note}")
    return "\n".join(lines)


def as_json(trace: Trace, results: list[ReplayResult], with_jobs: bool = False, **extra: Any) -> dict[str, Any]:
    return {
        "trace": {
            "kind": trace.kind,
            "source": trace.source,
            "jobs": len(trace.jobs),
            "gpu_hours": round(trace.gpu_seconds / 3600, 3),
            "notes": list(trace.notes),
        },
        "results": [r.as_dict(with_jobs=with_jobs) for r in results],
        "avg_jct_ratio_to_default": ratios(results),
        **extra,
    }
