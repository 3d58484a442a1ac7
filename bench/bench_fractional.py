"""Benchmark of the fractional-GPU replay on the Alibaba 2023 OpenB trace (8,152 pods, 1,213 nodes, 6,212 GPUs).

    .venv/bin/python bench/bench_fractional.py [--policies best-fit,fgd,default] [--order trace|shuffled]
                                               [--seeds 42 | 42-51] [--inflate-to 1.3] [--json OUT]

Reads the trace where it lies (`../shared/data/traces/`, research use only: never copied into the project),
replays it under each policy (`scheduler.sim.fractional.run_fractional`) on one core, and prints the
unallocated GPUs (% of capacity) when arrivals reach 80 ... 130 % of the cluster's GPU capacity, the
first failed GPU request, the fragmentation at 100 %, and the wall time of each policy and of the whole
run. Target: the full trace under ten minutes on one core. With several seeds (`--order shuffled`, the
paper's setting) the median over seeds is printed as well.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.sim.fractional import POLICIES, format_fractional, run_fractional
from scheduler.sim.traces.alibaba import load_nodes, load_pods

TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
POD_LIST = TRACES / "alibaba_v2023_openb_pod_list_default.csv"
NODE_LIST = TRACES / "alibaba_v2023_openb_node_list_gpu_node.csv"


def seeds_arg(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=Path, default=POD_LIST)
    ap.add_argument("--nodes", type=Path, default=NODE_LIST)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--order", choices=("trace", "shuffled"), default="trace")
    ap.add_argument("--seeds", type=seeds_arg, default=[42])
    ap.add_argument("--inflate-to", type=float, default=1.3)
    ap.add_argument("--json", type=Path, help="write the results (one per seed) as JSON")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    args = ap.parse_args(argv)

    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if not args.pods.exists():
        print(f"trace not found: {args.pods} (the Alibaba trace is read from ../shared/data/traces)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    pods = load_pods(args.pods)
    nodes = load_nodes(args.nodes)
    t_load = time.perf_counter() - t0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"Python {platform.python_version()} on {platform.machine()}, {cpus} CPU(s) usable; "
        f"loaded {len(pods)} pods and {len(nodes)} nodes in {t_load:.2f} s"
    )
    results = []
    t_all = time.perf_counter()
    for seed in args.seeds:
        r = run_fractional(pods, nodes, args.policies, inflate_to=args.inflate_to, seed=seed, order=args.order)
        results.append(r)
        print()
        print(format_fractional(r))
    wall = time.perf_counter() - t_all
    if len(results) > 1:
        print(f"\nmedian over seeds {args.seeds[0]}..{args.seeds[-1]} (unallocated GPUs, % of capacity):")
        for name in results[0]["policies"]:
            cells = []
            for cp in ("95", "100", "110", "130"):
                vals = [
                    r["policies"][name]["at"][cp]["unallocated_pct"] for r in results if cp in r["policies"][name]["at"]
                ]
                if vals:
                    cells.append(f"@{cp} {statistics.median(vals):.2f}")
            print(f"  {name:<10} " + "  ".join(cells))
    per_policy = {
        name: round(sum(r["policies"][name]["wall_s"] for r in results), 2) for name in results[0]["policies"]
    }
    print(
        f"\nwall time: {wall:.1f} s for {len(results)} replay(s) of {results[0]['workload']['arrivals']} arrivals; "
        f"per policy {per_policy} (target: < 600 s for the full trace)"
    )
    if args.json:
        args.json.write_text(json.dumps(results if len(results) > 1 else results[0], indent=1))
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    rc = main()
    print(peak_rss_line())
    raise SystemExit(rc)
