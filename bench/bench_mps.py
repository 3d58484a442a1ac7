"""Benchmark of a round on an MPS pool (pure, no database): the cost of the fragmentation term.

    .venv/bin/python bench/bench_mps.py [--nodes 1000] [--fill 0.6] [--pending 5000] [--rounds 5] [--seed 0]

One MPS pool of `--nodes` servers with 8 H100 each, `--fill` of its compute held by running MPS jobs (random
sizes, random GPUs), and `--pending` MPS jobs of a mixed size (10 / 20 / 25 / 50 / 100 % of one GPU, and
whole pairs). Times `schedule()` over `--rounds` rounds of the same snapshot with the fragmentation term on
(its request mix: the snapshot's own jobs, as when the adapter gives none) and off
(`Config.fragmentation_max_classes=0`: packing onto the GPU with the least compute left, as before it), and
prints the round's process time p50, placements, evaluations and the free compute left after the round.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric.topology.types import Fabric
from scheduler.core.engine import schedule
from scheduler.core.topology import build_topology
from scheduler.core.types import Config, GpuState, JobRequest, NodeState, PoolState, RunningJob, Share, Snapshot

MEM = 81920
SIZES = (10, 20, 25, 50, 100)


def snapshot(nodes: int, fill: float, pending: int, seed: int) -> Snapshot:
    rng = random.Random(seed)
    used: dict[int, int] = {}
    running: list[RunningJob] = []
    gid = 0
    ids: list[int] = []
    for _ in range(nodes):
        for _ in range(8):
            gid += 1
            ids.append(gid)
    target = fill * 100 * len(ids)
    held = 0
    jid = 0
    while held < target:
        pct = rng.choice(SIZES)
        g = rng.choice(ids)
        if used.get(g, 0) + pct > 100:
            continue
        used[g] = used.get(g, 0) + pct
        held += pct
        jid += 1
        req = JobRequest(jid, "t", 1, 1, sharing="mps", mps_compute_pct=pct, mps_memory_mib=MEM * pct // 100)
        running.append(RunningJob(req, (Share(g, "mps", pct, MEM * pct // 100),), 0.0))
    node_states = []
    gid = 0
    for n in range(nodes):
        gpus = []
        for i in range(8):
            gid += 1
            u = used.get(gid, 0)
            gpus.append(GpuState(gid, i, "H100", MEM, mps_compute_pct_used=u, mps_memory_mib_used=MEM * u // 100))
        node_states.append(NodeState(f"mps-{n:05d}", gpus=tuple(gpus), nvlink_islands=(tuple(range(8)),)))
    jobs = []
    for k in range(pending):
        jid += 1
        if rng.random() < 0.05:
            jobs.append(JobRequest(jid, "t", 1, 2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM, queue_seq=k))
        else:
            pct = rng.choice(SIZES)
            jobs.append(
                JobRequest(
                    jid, "t", 1, 1, sharing="mps", mps_compute_pct=pct, mps_memory_mib=MEM * pct // 100, queue_seq=k
                )
            )
    fabric = Fabric()
    pool = PoolState(1, "infer", "mps", 1, frozenset(n.hostname for n in node_states))
    return Snapshot(0.0, fabric, node_states, [pool], pending=jobs, running=running, topology=build_topology(fabric))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--fill", type=float, default=0.6)
    ap.add_argument("--pending", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    snap = snapshot(args.nodes, args.fill, args.pending, args.seed)
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(
        f"MPS pool: {args.nodes} nodes x 8 H100, {len(snap.running)} running shares ({args.fill:.0%} of compute), "
        f"{len(snap.pending)} pending"
    )
    for label, cfg in (("term on", Config()), ("term off", replace(Config(), fragmentation_max_classes=0))):
        s = replace(snap, config=cfg)
        cpu: list[float] = []
        dec = None
        for _ in range(args.rounds):
            c0 = time.process_time()
            dec = schedule(s)
            cpu.append(time.process_time() - c0)
        assert dec is not None
        placed = len(dec.placements)
        asked = sum(
            j.gpus * (j.mps_compute_pct or 0) for j in snap.pending if j.id in {p.job_id for p in dec.placements}
        )
        place_ms = dec.stats["ms"].get("place", 0.0)
        print(
            f"{label:8s}: round cpu p50 {statistics.median(cpu) * 1000:7.1f} ms  place phase {place_ms:6.1f} ms  "
            f"placements {placed:5d} ({asked / 100:.1f} GPUs of compute)  evaluations {dec.stats['evaluations']}  "
            f"per placement {statistics.median(cpu) / max(1, placed) * 1e6:6.0f} us"
        )
    return 0


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    rc = main()
    print(peak_rss_line())
    raise SystemExit(rc)
