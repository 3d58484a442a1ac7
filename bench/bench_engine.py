"""Benchmark of the scheduling engine (pure, no database): one round at cluster scale.

    .venv/bin/python bench/bench_engine.py [--gpus 10000] [--pending 50000] [--rounds 7] [--seed 0] [--churn 0.01]

Builds `synthetic_snapshot(gpus, pending)` once (a rail-optimised DGX H100 fat tree, 70 % busy, a
realistic job mix; the fabric index is built once and passed in, as the adapter caches it per fabric
version), then times `schedule()` over `--rounds` rounds of the same snapshot and prints the round
time p50 / p99 / max, placements per second (placements of a round / its time) and the phase
breakdown of the median round. Target: p99 <= 1 s at 10,000 GPUs / 50,000 pending.

With --churn F the timed rounds are production's steady state instead: an untimed round fills the cluster, then
before each timed round the previous one's decisions run and F of the running jobs end while as many jobs arrive
(`synthetic.next_round`); issue 16's goal for those is p99 <= 0.1 s. The rounds keep a carry between them
(scheduler.core.carry: the waiting jobs' values and the cluster index), as the worker does per cluster; --no-carry
times them without one.

With --growth-from GPUS,PENDING it times that size first, then the asked one, and prints the ratio of the two p50s
beside the ratio of the work (GPUs + jobs waiting): issue 16's growth check, e.g.
    bench/bench_engine.py --gpus 50000 --pending 200000 --churn 0.01 --rounds 3 --growth-from 10000,50000
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.carry import RoundCarry
from scheduler.core.engine import schedule
from scheduler.core.synthetic import next_round, synthetic_snapshot
from scheduler.core.topology import build_topology


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=10_000)
    ap.add_argument("--pending", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--running-fraction", type=float, default=0.7)
    ap.add_argument(
        "--churn",
        type=float,
        default=0.0,
        help="churn rounds instead: round 1 fills the cluster, then before each timed round its decisions run "
        "and this share of the running jobs ends while as many new jobs arrive (synthetic.next_round)",
    )
    ap.add_argument(
        "--growth-from",
        metavar="GPUS,PENDING",
        help="growth (issue 16): time this size first (the same rounds), then the asked one, and print the ratio "
        "of their p50 beside the ratio of the work (GPUs + jobs waiting)",
    )
    ap.add_argument(
        "--no-carry",
        action="store_true",
        help="no carry between rounds: every round works out each waiting job's sort key, line and turn afresh",
    )
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if not args.growth_from:
        run(args, args.gpus, args.pending)
        return 0
    try:
        ref_gpus, ref_pending = (int(x) for x in args.growth_from.split(","))
    except ValueError:
        ap.error(f"--growth-from takes GPUS,PENDING (e.g. 10000,50000), not {args.growth_from!r}")
    print(f"== reference: {ref_gpus:,} GPUs, {ref_pending:,} pending")
    ref = run(args, ref_gpus, ref_pending)
    print(f"== asked: {args.gpus:,} GPUs, {args.pending:,} pending")
    big = run(args, args.gpus, args.pending)
    cost = big / ref
    work = (args.gpus + args.pending) / (ref_gpus + ref_pending)
    # A round's phases grow with the GPUs (build, failures, migrate) or with the queue (order, place): linear cost
    # grows by no more than the larger of the two.
    bound = max(args.gpus / ref_gpus, args.pending / ref_pending)
    print(
        f"growth: round p50 {big * 1000:,.0f} ms = {cost:.2f}x the reference's {ref * 1000:,.0f} ms, for "
        f"{work:.2f}x the work ({args.gpus / ref_gpus:.2f}x the GPUs, {args.pending / ref_pending:.2f}x the queue): "
        + ("no faster than the work" if cost <= bound * 1.1 else "FASTER than the work")
        + f" (linear: at most {bound:.2f}x, the larger of the two, +10 % for noise and the queue's sort)"
    )
    return 0


def run(args, gpus: int, pending: int) -> float:
    """Time the rounds at one size, print their figures; returns the p50 in seconds."""

    t0 = time.perf_counter()
    snap = synthetic_snapshot(gpus, pending, args.running_fraction, args.seed)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_topology(snap.fabric)
    t_topo = time.perf_counter() - t0
    print(f"python {platform.python_version()} on {platform.machine()} ({platform.processor() or 'cpu'})")
    print(
        f"snapshot: {len(snap.nodes)} nodes, {sum(len(n.gpus) for n in snap.nodes)} GPUs, "
        f"{len(snap.fabric.links)} links, {len(snap.running)} running, {len(snap.pending)} pending "
        f"(generated in {t_build:.1f} s; fabric index {t_topo * 1000:.0f} ms, built once)"
    )

    times: list[float] = []
    cpu: list[float] = []
    rounds = []
    carry = None if args.no_carry else RoundCarry()
    print("carry between rounds: " + ("no" if carry is None else "yes"))
    if args.churn > 0:
        # The cluster fills first: in more than one round where a round starts its limit of jobs (Config.
        # max_placements_per_round) and leaves the rest to the next, which follows at once.
        fill_ms, fill_placed = [], 0
        while True:
            t0 = time.perf_counter()
            dec = schedule(snap, carry=carry)
            fill_ms.append((time.perf_counter() - t0) * 1000)
            fill_placed += len(dec.placements)
            if not dec.stats["left_for_next_round"]:
                break
            snap = next_round(snap, dec, 0.0, seed=args.seed - 1 - len(fill_ms))
        print(
            f"round 0 (fills the cluster, not timed below): {sum(fill_ms):.1f} ms in {len(fill_ms)} rounds "
            f"(" + ", ".join(f"{ms:.0f}" for ms in fill_ms) + f" ms), {fill_placed} placements"
        )
    for i in range(args.rounds):
        if args.churn > 0:
            snap = next_round(snap, dec, args.churn, seed=args.seed + i)
        t0 = time.perf_counter()
        c0 = time.process_time()
        dec = schedule(snap, carry=carry)
        dt = time.perf_counter() - t0
        cpu.append(time.process_time() - c0)
        times.append(dt)
        rounds.append(dec)
        print(
            f"round {i + 1}: {dt * 1000:7.1f} ms (cpu {cpu[-1] * 1000:7.1f} ms)  placements {len(dec.placements):5d}  "
            f"preemptions {len(dec.preemptions)}  migrations {len(dec.migrations)}  "
            f"reservations {len(dec.reservations)}  requeues {len(dec.requeues)}"
        )
    p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
    median = rounds[sorted(range(len(times)), key=lambda i: times[i])[len(times) // 2]]
    placed = len(median.placements)
    print(f"round time: p50 {p50 * 1000:.1f} ms  p99 {p99 * 1000:.1f} ms  max {max(times) * 1000:.1f} ms (wall)")
    print(
        f"round cpu:  p50 {percentile(cpu, 0.5) * 1000:.1f} ms  p99 {percentile(cpu, 0.99) * 1000:.1f} ms "
        "(process time: what the round costs without other load on the machine)"
    )
    print(f"placements/s: {placed / statistics.median(times):,.0f} ({placed} placements per round)")
    st = median.stats
    print("phases (ms): " + "  ".join(f"{k} {v:.1f}" for k, v in st["ms"].items()))
    print(
        f"searches {st['searches']}  class skips {st['class_skips']}  evaluations {st['evaluations']}  "
        f"quota-blocked {st['quota_blocked']}  preemption attempts {st['preemption_attempts']}  "
        f"free GPUs after {st['free_gpus']}/{st['capacity_gpus']}  jobs worked out {st['jobs_worked_out']}"
    )
    target = 0.1 if args.churn > 0 else 1.0  # a churn round (issue 16) / a round that fills the cluster
    print(f"target p99 <= {target:g} s: {'met' if p99 <= target else 'NOT met'}")
    return p50


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    rc = main()
    print(peak_rss_line())
    raise SystemExit(rc)
