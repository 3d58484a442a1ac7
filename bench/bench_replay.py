"""Benchmark of the policy lab's replay (pure, no database): the Pollux workload-6 trace on 64 GPUs.

    .venv/bin/python bench/bench_replay.py [--trace ../shared/data/traces/pollux_workload-6.csv]
        [--cluster-spec 16x4/4:2] [--link-rate EDR] [--policies default,default-blind,...] [--network-model on]

Replays the 160 jobs once per policy on one core (the replay is single-threaded) and prints, per
policy, the wall time, the scheduling events and the engine rounds, and the average JCT; then the
total. Target: the whole Pollux replay in under 60 s (the issue's "Done when").
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.sim import build_cluster, load_trace, make_policy, parse_cluster_spec
from scheduler.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "traces" / "pollux_workload-6.csv"
FALLBACK = ROOT / "tests" / "fixtures" / "pollux_workload-6.csv"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(DEFAULT_TRACE if DEFAULT_TRACE.exists() else FALLBACK))
    ap.add_argument("--kind", default="pollux")
    ap.add_argument("--cluster-spec", default="16x4/4:2")
    ap.add_argument("--link-rate", default="EDR")
    ap.add_argument("--policies", default="default,default-blind,fifo,fjf,srtf,tiresias-l,tiresias-g")
    ap.add_argument("--network-model", choices=("on", "off"), default="on")
    ap.add_argument("--round-s", type=float, default=10.0)
    a = ap.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
        except OSError:  # pragma: no cover
            pass
    trace = load_trace(a.kind, a.trace)
    cluster = build_cluster(parse_cluster_spec(a.cluster_spec, link_rate=a.link_rate))
    net = a.network_model == "on"
    print(
        f"{trace.kind} {a.trace}: {len(trace.jobs)} jobs on {cluster.label} ({cluster.n_gpus} GPUs, {a.link_rate}), "
        f"network model {a.network_model}; python {platform.python_version()}, one core"
    )
    print(f"{'policy':<16}{'wall s':>8}{'events':>9}{'engine rounds':>15}{'avg JCT s':>11}{'unfinished':>12}")
    total = 0.0
    for name in a.policies.split(","):
        policy = make_policy(name.strip(), round_s=a.round_s)
        t0 = time.perf_counter()
        r = Simulator(trace, cluster, policy, network=net).run()
        wall = time.perf_counter() - t0
        total += wall
        rounds = getattr(policy, "rounds", r.rounds)
        print(f"{r.policy:<16}{wall:>8.2f}{r.events:>9}{rounds:>15}{r.avg_jct:>11.1f}{len(r.unfinished):>12}")
    print(f"total {total:.2f} s for {len(a.policies.split(','))} policies (target: < 60 s)")
    return 0 if total < 60 else 1


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    rc = main()
    print(peak_rss_line())
    raise SystemExit(rc)
