"""Benchmark of the pure fabric analysis at cluster scale (no database).

    .venv/bin/python bench/bench_topology.py [--nodes 2000] [--gpus 8] [--runs 5] [--queries 10000]

Steps, each timed over `--runs` runs (median, min, max printed):
  generate   generate_fat_tree(nodes, gpus): ParsedFabric with GPUs and node topologies
  convert    fabric_from_parsed: ParsedFabric -> Fabric
  analyse    analyse(fabric): tiers, oversubscription, bisection, SPOFs, degraded links
  render     render_text(report) and json.dumps(report.to_dict())
  hop build  HopIndex.build(fabric)
  hop query  `--queries` random host pairs on a fresh index (cold: includes filling the group cache)
  hop warm   the same pairs again (every group pair cached)
Then one more pass under tracemalloc for the peak Python memory of generate + convert + analyse.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric.importers.fattree import generate_fat_tree
from fabric.topology.convert import fabric_from_parsed
from fabric.topology.distance import HopIndex
from fabric.topology.report import analyse, render_text


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--oversubscription", type=float, default=1.0)
    args = ap.parse_args(argv)

    times: dict[str, list[float]] = {}

    def record(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    report = None
    fabric = None
    for run in range(args.runs):
        t, parsed = timed(lambda: generate_fat_tree(args.nodes, args.gpus, oversubscription=args.oversubscription))
        record("generate", t)
        t, fabric = timed(lambda p=parsed: fabric_from_parsed(p))
        record("convert", t)
        t, report = timed(lambda f=fabric: analyse(f))
        record("analyse", t)
        t, _ = timed(lambda r=report: (render_text(r), json.dumps(r.to_dict(), allow_nan=False)))
        record("render", t)
        t, index = timed(lambda f=fabric: HopIndex.build(f))
        record("hop build", t)
        rng = random.Random(run)
        hosts = index.hosts
        pairs = [(rng.choice(hosts), rng.choice(hosts)) for _ in range(args.queries)]
        t, _ = timed(lambda i=index, ps=pairs: [i.distance(a, b) for a, b in ps])
        record("hop query", t)
        t, _ = timed(lambda i=index, ps=pairs: [i.distance(a, b) for a, b in ps])
        record("hop warm", t)

    assert report is not None and fabric is not None
    c = report.counts
    print(
        f"fabric: {args.nodes} nodes x {args.gpus} GPUs, {c.switches} switches "
        f"({', '.join(f'{k} {v}' for k, v in c.switches_by_tier.items() if v)}), "
        f"{c.host_links} host links, {c.switch_links} switch links, {report.tiers.pods} pods"
    )
    print(
        f"report: bisection {report.bisection.gbps:g} Gb/s (ratio {report.bisection.ratio}), "
        f"worst leaf {report.oversubscription.worst} {report.oversubscription.worst_ratio}, "
        f"SPOFs {report.spof.by_scope}"
    )
    print(f"{'step':<10}  {'median ms':>10}  {'min ms':>9}  {'max ms':>9}  (runs: {args.runs})")
    for name, values in times.items():
        per = ""
        if name.startswith("hop q") or name == "hop warm":
            per = f"   {statistics.median(values) / args.queries * 1e6:.2f} us/query"
        print(
            f"{name:<10}  {statistics.median(values) * 1e3:>10.1f}  {min(values) * 1e3:>9.1f}  "
            f"{max(values) * 1e3:>9.1f}{per}"
        )
    pipeline = sum(statistics.median(times[k]) for k in ("generate", "convert", "analyse"))
    print(f"generate + convert + analyse (medians): {pipeline * 1e3:.1f} ms")

    fabric = report = None  # let the last run's objects go before measuring
    tracemalloc.start()
    parsed = generate_fat_tree(args.nodes, args.gpus, oversubscription=args.oversubscription)
    _, peak_gen = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    analyse(fabric_from_parsed(parsed))
    _, peak_analyse = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"peak memory (tracemalloc): generate {peak_gen / 2**20:.1f} MiB, "
        f"convert + analyse {peak_analyse / 2**20:.1f} MiB (on top of the ParsedFabric still held)"
    )
    return 0


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    rc = main()
    print(peak_rss_line())
    raise SystemExit(rc)
