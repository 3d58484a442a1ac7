"""The policy suite: every shipped trace under every policy, one table with ratios. PURE (no Django; it reads
the trace files through the loaders). `manage.py replay --suite` is the adapter.

    result = run_suite(locate=lambda name: find_in(name, dirs))    # a JSON-ready dict
    print(format_suite(result))

Each `Case` is one trace on one cluster with the network model on or off, the metrics that matter for it
and, per metric, the peer every figure is divided by:

* Tiresias 60-job trace on 2x4, 4x4 and 32x4, network model off (the Tiresias simulator's assumptions):
  avg JCT (peer tiresias-l);
* Pollux workload-6 on 16x4/4:2, network model on: avg JCT (tiresias-l);
* Gavel's physical-cluster trace on 12x4/4:2 (48 GPUs, its testbed's count), on: avg JCT (tiresias-l);
* the Slurm-style churn (500 jobs) on 32x8/8:2, its harness's cluster, on: avg JCT (default-blind),
  makespan (the lower bound), multi-node jobs inside one leaf;
* Alibaba 2023 OpenB on the trace's own 1,213 nodes: unallocated GPUs at 100 % arrived (fgd), the
  arrival level of the first failed pod (best-fit).

Besides the policies, JCT cases get a `bound` column: no policy can do better. Average JCT >= the mean
duration (every job starts when it is submitted, on an ideal placement); makespan >= max(GPU-seconds /
GPUs, the latest submission + duration, counted from the first submission).

For each metric the result also names the best baseline *without an oracle* (fifo, fjf, tiresias-l,
tiresias-g; srtf knows every remaining time, default-blind is our own engine; best-fit and fgd for
Alibaba) and default's ratio to it: where the default policy stands.

`VARIATIONS` are churn tables drawn with the harness's rules (`churn_table`: seeds 2 and 3, 4:1 uplinks, 2,000
jobs on 128 nodes in 8 leaves); they are not shipped files and run only when asked (`variations`).

Every policy is replayed on its own and timed (`wall_s` per case and per policy): the cost of each part.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.sim import replay
from scheduler.sim.cluster import build_cluster, parse_cluster_spec
from scheduler.sim.engine_policy import DEFAULT_ROUND_S
from scheduler.sim.fractional import POLICIES, run_fractional
from scheduler.sim.metrics import ReplayResult
from scheduler.sim.policies import POLICY_NAMES
from scheduler.sim.report import leaf_count
from scheduler.sim.traces import Trace, load_trace
from scheduler.sim.traces.alibaba import load_openb
from scheduler.sim.traces.slurm import churn_table, parse_slurm

BOUND = "bound"
ORACLES = ("srtf",)  # knows every job's remaining time
OURS = ("default", "default-blind")

Locate = Callable[[str], Path | None]
Progress = Callable[[str, str, int, int], None]  # case key, policy, done, total


@dataclass(frozen=True, slots=True)
class Metric:
    name: str  # avg_jct, makespan, leaf, unallocated, first_failure
    peer: str | None  # policy (or BOUND) every figure is divided by; None: no ratio


@dataclass(frozen=True, slots=True)
class Case:
    key: str
    title: str
    kind: str
    file: str  # file name, looked up in the trace folders
    cluster: str | None  # NODESxGPUS[/NODES_PER_LEAF][:OVERSUB]; None: the trace's own nodes (Alibaba)
    network: bool
    metrics: tuple[Metric, ...] = field(default=())
    generate: tuple[int, int] | None = None  # (jobs, seed): a churn table drawn like the shipped one, no file


JCT = (Metric("avg_jct", "tiresias-l"),)
CASES: tuple[Case, ...] = (
    Case("tiresias-2x4", "Tiresias 60-job", "tiresias", "tiresias_60_job.csv", "2x4", False, JCT),
    Case("tiresias-4x4", "Tiresias 60-job", "tiresias", "tiresias_60_job.csv", "4x4", False, JCT),
    Case("tiresias-32x4", "Tiresias 60-job", "tiresias", "tiresias_60_job.csv", "32x4", False, JCT),
    Case("pollux-6", "Pollux workload-6", "pollux", "pollux_workload-6.csv", "16x4/4:2", True, JCT),
    Case("gavel", "Gavel physical", "gavel", "gavel_physical_max_min_fairness.trace", "12x4/4:2", True, JCT),
    Case(
        "slurm-churn",
        "Slurm churn 500",
        "slurm",
        "slurm_churn_500_seed1.tsv",
        "32x8/8:2",
        True,
        (
            Metric("avg_jct", "default-blind"),
            Metric("makespan", BOUND),
            Metric("leaf", None),
            Metric("preemptions", None),
        ),
    ),
    Case(
        "alibaba",
        "Alibaba 2023 OpenB",
        "alibaba",
        "alibaba_v2023_openb_pod_list_default.csv",
        None,
        False,
        (Metric("unallocated", "fgd"), Metric("first_failure", "best-fit")),
    ),
)
CHURN_METRICS = next(c.metrics for c in CASES if c.key == "slurm-churn")
# Variations of the churn, drawn by `churn_table` (not shipped files; not in the default run): a policy tuned
# to one file is not a policy. `--suite-cases variations` runs them all.
VARIATIONS: tuple[Case, ...] = (
    Case("churn-seed2", "Slurm churn seed 2", "slurm", "", "32x8/8:2", True, CHURN_METRICS, (500, 2)),
    Case("churn-seed3", "Slurm churn seed 3", "slurm", "", "32x8/8:2", True, CHURN_METRICS, (500, 3)),
    Case("churn-4to1", "Slurm churn 4:1", "slurm", "", "32x8/8:4", True, CHURN_METRICS, (500, 1)),
    Case("churn-128", "Slurm churn 2000", "slurm", "", "128x8/16:2", True, CHURN_METRICS, (2000, 1)),
)
CASE_KEYS = tuple(c.key for c in CASES)
ALL_KEYS = CASE_KEYS + tuple(c.key for c in VARIATIONS)

LABELS = {
    "avg_jct": "avg JCT s",
    "makespan": "makespan s",
    "leaf": "multi-node in 1 leaf",
    "preemptions": "preemptions",
    "unallocated": "unallocated % @100%",
    "first_failure": "1st failure % arrived",
}
FORMATS = {"avg_jct": ".1f", "makespan": ".0f", "preemptions": "d", "unallocated": ".2f", "first_failure": ".1f"}
HIGHER_IS_BETTER = {"leaf", "first_failure"}


def find_in(name: str, dirs: Iterable[str | Path]) -> Path | None:
    """The first `dir/name` that exists, or None."""
    for d in dirs:
        p = Path(d) / name
        if p.is_file():
            return p
    return None


def select_cases(keys: str | None) -> tuple[Case, ...]:
    """The shipped cases, or those named (comma-separated keys; `variations` = every variation, `all` = both);
    ValueError lists the known keys."""
    if not keys:
        return CASES
    wanted: list[str] = []
    for k in (k.strip() for k in keys.split(",")):
        if k == "all":
            wanted += ALL_KEYS
        elif k == "variations":
            wanted += [c.key for c in VARIATIONS]
        elif k:
            wanted.append(k)
    unknown = [k for k in wanted if k not in ALL_KEYS]
    if unknown or not wanted:
        raise ValueError(
            f"unknown suite case(s) {', '.join(unknown) or '(none)'}; known: {', '.join(ALL_KEYS)}, variations, all"
        )
    return tuple(c for c in CASES + VARIATIONS if c.key in wanted)


# ---------------------------------------------------------------------------------------- bounds


def jct_bounds(trace: Trace, n_gpus: int) -> dict[str, float]:
    """Lower bounds no policy can beat on `n_gpus` GPUs (see the module docstring)."""
    jobs = trace.jobs
    first = min(j.submit_s for j in jobs)
    return {
        "avg_jct": sum(j.duration_s for j in jobs) / len(jobs),
        "makespan": max(trace.gpu_seconds / n_gpus, max(j.submit_s + j.duration_s for j in jobs) - first),
    }


# ---------------------------------------------------------------------------------------- running


def run_suite(
    locate: Locate,
    cases: Sequence[Case] = CASES,
    *,
    jct_policies: Sequence[str] = POLICY_NAMES,
    round_s: float = DEFAULT_ROUND_S,
    seed: int = 0,
    limit: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the cases; `locate(file name)` gives a trace's path (None: the case is reported as skipped, with
    the reason). `limit` replays only the first N jobs (pods) of every trace and is said in the result."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"cases": [], "limit": limit, "round_s": round_s, "seed": seed}
    for case in cases:
        if case.generate is not None:
            out["cases"].append(_run_jct(case, None, jct_policies, round_s, seed, limit, progress))
            continue
        path = locate(case.file)
        if path is None:
            out["cases"].append(_head(case, None) | {"skipped": f"{case.file} not found in the trace folders"})
            continue
        if case.kind == "alibaba":
            out["cases"].append(_run_alibaba(case, path, limit, progress))
        else:
            out["cases"].append(_run_jct(case, path, jct_policies, round_s, seed, limit, progress))
    out["wall_s"] = round(time.perf_counter() - t0, 2)
    return out


def _head(case: Case, path: Path | None) -> dict[str, Any]:
    return {
        "key": case.key,
        "title": case.title,
        "kind": case.kind,
        "file": case.file or None,
        "generated": {"jobs": case.generate[0], "seed": case.generate[1]} if case.generate else None,
        "path": str(path) if path is not None else None,
        "cluster": case.cluster,
        "network_model": None if case.kind == "alibaba" else ("on" if case.network else "off"),
    }


def _run_jct(
    case: Case,
    path: Path | None,
    policies: Sequence[str],
    round_s: float,
    seed: int,
    limit: int | None,
    progress: Progress | None,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    if case.generate is not None:
        jobs, draw = case.generate
        trace = parse_slurm(churn_table(jobs, seed=draw), f"churn_table({jobs}, seed={draw})")
    else:
        assert path is not None
        trace = load_trace(case.kind, path)
    if limit:
        trace = trace.head(limit)
    assert case.cluster is not None
    cluster = build_cluster(parse_cluster_spec(case.cluster))
    results: dict[str, ReplayResult] = {}
    walls: dict[str, float] = {}
    for name in policies:
        cb = (lambda _p, d, n, _k=case.key, _n=name: progress(_k, _n, d, n)) if progress else None
        t = time.perf_counter()
        (results[name],) = replay(trace, cluster, [name], network=case.network, round_s=round_s, seed=seed, progress=cb)
        walls[name] = round(time.perf_counter() - t, 3)
    bounds = jct_bounds(trace, cluster.n_gpus)
    metrics = []
    for m in case.metrics:
        values: dict[str, float | None] = {}
        shown: dict[str, str] = {}
        unfinished: dict[str, int] = {}
        for name, r in results.items():
            if r.unfinished:
                unfinished[name] = len(r.unfinished)
            if m.name == "leaf":
                values[name] = r.multi_node_one_leaf
                shown[name] = leaf_count(r)
            elif m.name == "preemptions":
                values[name] = r.preemptions
            else:
                v = r.avg_jct if m.name == "avg_jct" else r.makespan
                values[name] = None if (v is None or math.isnan(v)) else round(v, 2)
        if m.name in bounds:
            values[BOUND] = round(bounds[m.name], 2)
        metrics.append(_metric(m, values, shown, unfinished, list(results)))
    doc = _head(case, path) | {
        "jobs": len(trace.jobs),
        "gpus": cluster.n_gpus,
        "policies": list(results),
        "metrics": metrics,
        "notes": list(trace.notes),
        "policy_wall_s": walls,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    if case.kind == "slurm":
        doc["multi_node_jobs"] = sum(1 for j in trace.jobs if (j.nodes or 1) > 1)
    return doc


def _run_alibaba(case: Case, path: Path, limit: int | None, progress: Progress | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    pods, nodes = load_openb(path)
    if limit:
        pods = pods[:limit]
    cb = (lambda p, d, n: progress(case.key, p, d, n)) if progress else None
    res = run_fractional(pods, nodes, POLICIES, progress=cb)
    pols = res["policies"]
    metrics = []
    for m in case.metrics:
        values: dict[str, float | None] = {}
        for name, r in pols.items():
            if m.name == "unallocated":
                at = r["at"].get("100")
                values[name] = at["unallocated_pct"] if at else None
            else:
                values[name] = r["first_failure_arrived_pct"]  # None: no pod failed
        metrics.append(_metric(m, values, {}, {}, list(pols)))
    return _head(case, path) | {
        "pods": len(pods),
        "gpus": res["cluster"]["gpus"],
        "nodes": res["cluster"]["nodes"],
        "policies": list(pols),
        "metrics": metrics,
        "notes": [
            f"arrivals in trace order up to {100 * res['workload']['inflate_to']:.0f} % of capacity, no departures "
            f"(seed {res['workload']['seed']}); a first failure of None means no pod failed"
        ],
        "policy_wall_s": {k: v["wall_s"] for k, v in pols.items()},
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def _metric(
    m: Metric,
    values: dict[str, float | None],
    shown: dict[str, str],
    unfinished: dict[str, int],
    policies: list[str],
) -> dict[str, Any]:
    """Ratios to the peer, and where default stands against the best baseline without an oracle. A policy
    that left jobs unfinished gets no ratio (its average covers only the jobs that finished)."""
    peer = values.get(m.peer) if m.peer else None
    ratios: dict[str, float | None] = {}
    for name, v in values.items():
        ok = v is not None and peer and name not in unfinished and m.peer not in unfinished
        ratios[name] = round(v / peer, 3) if ok else None  # type: ignore[operator]
    higher = m.name in HIGHER_IS_BETTER
    baselines = [p for p in policies if p not in ORACLES and p not in OURS and p in values]
    # A first failure of None means no pod failed: the best there is.
    never = math.inf if m.name == "first_failure" else None
    cands = [(never if values[p] is None else values[p], p) for p in baselines if p not in unfinished]
    cands = [(v, p) for v, p in cands if v is not None]
    best = None
    if cands and m.name != "preemptions":
        # Ties go to the peer, then to the earlier policy in the list.
        v, p = min(cands, key=lambda c: ((-c[0] if higher else c[0]), c[1] != m.peer, baselines.index(c[1])))
        best = {"policy": p, "value": None if v == math.inf else v}
    d = values.get("default")
    vs_best = None
    if best and best["value"] and d is not None and "default" not in unfinished:
        vs_best = round(d / best["value"], 3)
    return {
        "metric": m.name,
        "label": LABELS[m.name],
        "better": "higher" if higher else "lower",
        "peer": m.peer,
        "values": values,
        "shown": shown,
        "ratios": ratios if m.peer else {},
        "unfinished": unfinished,
        "best_baseline": best,
        "default_vs_best_baseline": vs_best,
    }


# ---------------------------------------------------------------------------------------- table


def _fmt(metric: dict[str, Any], name: str) -> str:
    if name in metric["shown"]:
        return metric["shown"][name]
    v = metric["values"].get(name)
    if v is None:
        return "none" if metric["metric"] == "first_failure" and name in metric["values"] else "-"
    s = f"{v:{FORMATS[metric['metric']]}}"
    return s + "*" if name in metric["unfinished"] else s


def format_suite(result: dict[str, Any]) -> str:
    """One table: a block per case (its policies as columns), per metric a row of figures and a row of
    ratios to the peer; then where default stands against the best baseline without an oracle."""
    lines: list[str] = []
    limit = result.get("limit")
    lines.append(
        "Policy suite: every shipped trace under every policy. Under each figure, its ratio to the peer (x peer); "
        "lower is better, except for multi-node jobs inside one leaf and the arrival level of the first failure."
        + (f" LIMITED to the first {limit} jobs/pods of each trace." if limit else "")
    )
    label_w = 2 + max([len("trace / cluster / network")] + [len(_case_label(c)) for c in result["cases"]])
    metric_w = 24
    header_for: tuple[str, ...] | None = None
    for c in result["cases"]:
        if c.get("skipped"):
            lines.append(f"{_case_label(c):<{label_w}}skipped: {c['skipped']}")
            continue
        cols = tuple(c["policies"]) + ((BOUND,) if c["kind"] != "alibaba" else ())
        widths = [max(9, len(n) + 2) for n in cols]
        if cols != header_for:
            lines.append("")
            lines.append(f"{'trace / cluster / network':<{label_w}}{'metric':<{metric_w}}" + _row(cols, widths))
            header_for = cols
        first = True
        for m in c["metrics"]:
            label = _case_label(c) if first else ""
            first = False
            name = m["label"]
            lines.append(f"{label:<{label_w}}{name:<{metric_w}}" + _row([_fmt(m, n) for n in cols], widths))
            if m["peer"]:
                peer = "lower bound" if m["peer"] == BOUND else m["peer"]
                cells = [("-" if m["ratios"].get(n) is None else f"{m['ratios'][n]:.2f}") for n in cols]
                lines.append(f"{'':<{label_w}}{'  x ' + peer:<{metric_w}}" + _row(cells, widths))
    lines.append("")
    lines.append("default against the best baseline without an oracle (srtf knows durations; default-blind is ours):")
    for c in result["cases"]:
        if c.get("skipped"):
            continue
        for m in c["metrics"]:
            best, vs = m["best_baseline"], m["default_vs_best_baseline"]
            d = _fmt(m, "default")
            if best is None:
                continue
            b = _fmt(m, best["policy"])
            extra = f" = {vs:.3f}x" if vs is not None else ""
            lines.append(f"  {_case_label(c)}, {m['label']}: default {d} vs {best['policy']} {b}{extra}")
    lines.append("")
    lines.append("* some jobs never finished: the average covers the finished ones only, and no ratio is given")
    for c in result["cases"]:
        if c.get("skipped"):
            continue
        walls = ", ".join(f"{k} {v:.1f}" for k, v in c["policy_wall_s"].items())
        lines.append(f"wall {_case_label(c)}: {c['wall_s']:.1f} s ({walls})")
    lines.append(f"suite wall time: {result['wall_s']:.1f} s")
    return "\n".join(lines)


def _case_label(c: dict[str, Any]) -> str:
    if c["kind"] == "alibaba":
        return c["title"]
    return f"{c['title']} {c['cluster']} {c['network_model']}"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "".join(f"{s:>{w}}" for s, w in zip(cells, widths, strict=True))
