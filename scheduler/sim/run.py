"""One replay run, as `manage.py replay` and the dashboard's what-if page both start it. PURE.

    cluster = resolve_cluster("2x4")                       # or a Tiresias spec CSV, or inventory(name)
    run = run_jct(load_trace("tiresias", path), cluster, ["fifo", "default"], network_model="off")
    doc = run.as_json()                                    # what `replay --json` prints
    result = run_fractional_file(openb_pod_list)           # the Alibaba trace: what `replay --json` prints

The adapters (the command, scheduler.policy_lab) bring what needs Django: a cluster of the database
(`inventory`), progress display, and where the result goes.
"""

from __future__ import annotations

import io
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.sim import replay
from scheduler.sim.cluster import SimCluster, build_cluster, load_tiresias_cluster_spec, looks_like_spec
from scheduler.sim.cluster import parse_cluster_spec as _parse_spec
from scheduler.sim.engine_policy import DEFAULT_ROUND_S
from scheduler.sim.fractional import POLICIES, run_fractional
from scheduler.sim.metrics import ReplayResult
from scheduler.sim.report import as_json
from scheduler.sim.traces import Trace
from scheduler.sim.traces.alibaba import load_openb
from scheduler.sim.traces.gavel import parse_gavel
from scheduler.sim.traces.pollux import parse_pollux
from scheduler.sim.traces.slurm import parse_slurm
from scheduler.sim.traces.tiresias import parse_tiresias

DEFAULT_POLICIES = "fifo,fjf,srtf,tiresias-l,tiresias-g,default"
FRACTIONAL_KIND = "alibaba"
JCT_PARSERS = {"tiresias": parse_tiresias, "pollux": parse_pollux, "gavel": parse_gavel, "slurm": parse_slurm}
SPEC_SYNTAX = "NODESxGPUS[/NODES_PER_LEAF][:OVERSUB] (e.g. 2x4, 16x4/4:2)"

Progress = Callable[[str, int, int], None]


class UnknownCluster(ValueError):
    """A cluster spec that is neither the spec syntax, a Tiresias spec file, nor a known cluster."""


class ReplayTimeout(RuntimeError):
    """The replay ran past its deadline (raised from the progress callback)."""


def resolve_cluster(
    spec: str,
    gpu_model: str = "V100",
    link_rate: str = "EDR",
    *,
    spec_file: Callable[[str], Path | None] | None = None,
    inventory: Callable[[str], SimCluster | None] | None = None,
) -> SimCluster:
    """`NODESxGPUS[/NODES_PER_LEAF][:OVERSUB]`; else a Tiresias cluster-spec CSV (`spec_file(spec)` -> its path or
    None; default: `spec` itself when it is an existing `.csv`); else `inventory(spec)` (a cluster of the database).
    ValueError names the problem; UnknownCluster when it is none of the three."""
    if looks_like_spec(spec):
        return build_cluster(_parse_spec(spec, gpu_model, link_rate))
    path = spec_file(spec) if spec_file is not None else _existing_csv(spec)
    if path is not None:
        return build_cluster(load_tiresias_cluster_spec(path, gpu_model, link_rate))
    found = inventory(spec) if inventory is not None else None
    if found is None:
        raise UnknownCluster(
            f"{spec!r} is neither {SPEC_SYNTAX}, a Tiresias cluster-spec CSV, nor the name of a cluster in the database"
        )
    return found


def _existing_csv(spec: str) -> Path | None:
    return Path(spec) if spec.endswith(".csv") and Path(spec).exists() else None


def guess_kind(name: str) -> str | None:
    """The trace kind a file's name says (`*_job.csv` Tiresias, `*workload-*.csv` Pollux, `*.trace` Gavel,
    `*.tsv` a Slurm workload table, `*pod_list*.csv` Alibaba OpenB), or None."""
    n = name.lower()
    if n.endswith(".trace"):
        return "gavel"
    if n.endswith(".tsv"):
        return "slurm"
    if not n.endswith(".csv"):
        return None
    if "pod_list" in n:
        return FRACTIONAL_KIND
    if "workload-" in n:
        return "pollux"
    if n.endswith("job.csv") or "_job" in n:
        return "tiresias"
    return None


def is_cluster_spec_file(path: str | Path) -> bool:
    """A Tiresias cluster-spec CSV (`num_switch,num_node_p_switch,num_gpu_p_node,...`)."""
    p = Path(path)
    if p.suffix.lower() != ".csv":
        return False
    try:
        with p.open(newline="", encoding="utf-8", errors="replace") as fh:
            return "num_switch" in fh.readline()
    except OSError:
        return False


def parse_trace(kind: str, text: str, source: str) -> Trace:
    """A JCT trace from its text (an upload), with the loaders' parsers: TraceError names `source:line`."""
    try:
        parser = JCT_PARSERS[kind]
    except KeyError:
        raise ValueError(f"unknown JCT trace kind {kind!r}; known: {', '.join(JCT_PARSERS)}") from None
    return parser(io.StringIO(text, newline=""), source)


def with_deadline(progress: Progress | None, timeout_s: float | None) -> Progress | None:
    """`progress`, raising ReplayTimeout once `timeout_s` seconds have passed since this call."""
    if not timeout_s:
        return progress
    deadline = time.monotonic() + timeout_s

    def call(policy: str, done: int, total: int) -> None:
        if time.monotonic() > deadline:
            raise ReplayTimeout(f"the replay took longer than {timeout_s:g} s ({policy}: {done} of {total} done)")
        if progress is not None:
            progress(policy, done, total)

    return call


@dataclass
class JctRun:
    trace: Trace
    cluster: SimCluster
    results: list[ReplayResult]
    network_model: str
    round_s: float
    wall_s: float

    def as_json(self, with_jobs: bool = False, **extra: Any) -> dict[str, Any]:
        """The document `manage.py replay --json` prints."""
        return as_json(
            self.trace,
            self.results,
            with_jobs=with_jobs,
            cluster=self.cluster.label,
            network_model=self.network_model,
            round_s=self.round_s,
            wall_s=round(self.wall_s, 3),
            **extra,
        )


def run_jct(
    trace: Trace,
    cluster: SimCluster,
    policies: Iterable[str],
    *,
    network_model: str = "on",
    round_s: float = DEFAULT_ROUND_S,
    seed: int = 0,
    limit: int | None = None,
    progress: Progress | None = None,
) -> JctRun:
    """Replay the trace (its first `limit` jobs) under each policy; wall_s counts the replays only."""
    if network_model not in ("on", "off"):
        raise ValueError(f"network model must be 'on' or 'off', not {network_model!r}")
    if round_s <= 0:
        raise ValueError("round_s must be > 0")
    if limit:
        trace = trace.head(limit)
    t0 = time.perf_counter()
    results = replay(
        trace, cluster, list(policies), network=network_model == "on", round_s=round_s, seed=seed, progress=progress
    )
    return JctRun(trace, cluster, results, network_model, round_s, time.perf_counter() - t0)


def run_fractional_file(
    path: str | Path, policies: str | None = None, *, limit: int | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    """The Alibaba OpenB replay of a pod list (its node list beside it): the dict `replay --json` prints."""
    pods, nodes = load_openb(path)
    if limit:
        pods = pods[:limit]
    t0 = time.perf_counter()
    result = run_fractional(pods, nodes, policies or ",".join(POLICIES), progress=progress)
    result["wall_s"] = round(time.perf_counter() - t0, 3)
    return result


# --------------------------------------------------------------------------------------- charts


def jct_charts(results: Sequence[ReplayResult], max_points: int = 400) -> dict[str, Any]:
    """What the what-if page draws, per policy: the JCT CDF ([seconds, fraction of finished jobs]) and the share of
    GPUs held over time ([seconds, fraction], a step function: each value holds until the next point), both
    thinned to about `max_points` points (utilisation as time-weighted bucket averages)."""
    out: dict[str, Any] = {"policies": []}
    for r in results:
        jcts = sorted(j.jct for j in r.jobs if j.jct is not None)
        n = len(jcts)
        if n > max_points:
            idx = sorted({round(k * (n - 1) / (max_points - 1)) for k in range(max_points)})
        else:
            idx = list(range(n))
        cdf = [[round(jcts[i], 2), round((i + 1) / n, 4)] for i in idx]
        out["policies"].append(
            {
                "policy": r.policy,
                "jct_cdf": cdf,
                "utilisation": _utilisation_series(r.busy_timeline, r.n_gpus, max_points),
            }
        )
    return out


def _utilisation_series(timeline: Sequence[tuple[float, int]], n_gpus: int, max_points: int) -> list[list[float]]:
    if not timeline or n_gpus <= 0:
        return []
    pts = [(float(t), b / n_gpus) for t, b in timeline]
    if len(pts) <= max_points:
        return [[round(t, 2), round(u, 4)] for t, u in pts]
    t0, t1 = pts[0][0], pts[-1][0]
    if t1 <= t0:
        return [[round(t0, 2), round(pts[-1][1], 4)]]
    bins = max_points - 1
    width = (t1 - t0) / bins
    area = [0.0] * bins
    for (ta, u), (tb, _next) in itertools.pairwise(pts):
        a = ta
        while a < tb:
            k = min(int((a - t0) / width), bins - 1)
            end = min(tb, t0 + (k + 1) * width) if k < bins - 1 else tb
            if end <= a:  # float rounding at a bin edge
                end = tb
            area[k] += u * (end - a)
            a = end
    series = [[round(t0 + k * width, 2), round(area[k] / width, 4)] for k in range(bins)]
    series.append([round(t1, 2), round(pts[-1][1], 4)])
    return series
