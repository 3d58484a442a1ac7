"""Slurm-style workload tables (the project's Slurm side-by-side harness, `../shared/slurm_emu/bench.py jobs`,
e.g. `slurm_churn_500_seed1.tsv`): what was submitted to a real Slurm with `sbatch`, one job a row.

Tab-separated, a header and one row per job: `idx gpus nodes gpus_per_node duration_s timelimit_min`:
the job's index (submission order), its GPUs in all, its gang shape (`--nodes`, `--gpus-per-node`; gpus =
nodes x gpus_per_node), how long it runs (the batch script sleeps that long) and its time limit (`--time`
in minutes). The file has no submission times: every job was submitted while the partition was down
and released at once, so all are submitted at time 0, in file order.

`churn_table(jobs, gpus_per_node, seed)` writes such a table the way the harness does (its SOURCES row gives
the rules), so variations of the shipped file (other seeds, sizes) can be replayed too; seed 1, 500 jobs
and 8 GPUs a node give `slurm_churn_500_seed1.tsv` byte for byte.

Replayed as: a gang of exactly `nodes` x `gpus_per_node`; topology `prefer-leaf` (the harness submits no
`--switches`: Slurm's topology/tree plugin then packs a job under as few leaves as it can, best effort);
the time limit is the user's runtime estimate (what Slurm's backfill plans with); the duration is the run
time on an ideal placement. The table names no model, so every job gets the ResNet-50-like `default`
runtime profile (`scheduler.sim.runtime`): what the network model charges a job placed across leaves.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from pathlib import Path

from scheduler.sim.runtime import profile
from scheduler.sim.traces.base import (
    PREFER_LEAF,
    Trace,
    TraceError,
    TraceJob,
    csv_rows,
    in_submission_order,
    parse_float,
    parse_int,
)

REQUIRED = ("idx", "gpus", "nodes", "gpus_per_node", "duration_s", "timelimit_min")
CHURN_MIX = ((1, 30.0), (2, 20.0), (4, 15.0), (8, 15.0), (16, 12.0), (32, 8.0))  # GPUs: weight
CHURN_DURATION_S = (5, 30)


def churn_table(
    jobs: int,
    gpus_per_node: int = 8,
    seed: int = 1,
    mix: tuple[tuple[int, float], ...] = CHURN_MIX,
    duration_s: tuple[int, int] = CHURN_DURATION_S,
) -> list[str]:
    """The lines of a churn table (header first), drawn as the Slurm harness draws them: per job, a GPU count
    from `mix` (`random.Random(seed).choices` by weight; more than a node's GPUs = whole nodes), then a
    duration uniform in `duration_s` (`randint`), and a time limit of ceil(duration / 60) + 1 minutes."""
    rng = random.Random(seed)
    shapes = [g for g, _w in mix]
    weights = [w for _g, w in mix]
    lines = ["\t".join(REQUIRED)]
    for i in range(jobs):
        g = rng.choices(shapes, weights)[0]
        if g <= gpus_per_node:
            n, k = 1, g
        elif g % gpus_per_node:
            raise ValueError(f"a {g}-GPU job is not a whole number of {gpus_per_node}-GPU nodes")
        else:
            n, k = g // gpus_per_node, gpus_per_node
        d = rng.randint(*duration_s)
        lines.append(f"{i}\t{g}\t{n}\t{k}\t{d}\t{math.ceil(d / 60) + 1}")
    return lines


def parse_slurm(lines: Iterable[str], source: str = "slurm workload") -> Trace:
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    p = profile("default")
    for lineno, row in csv_rows(lines, source, REQUIRED, delimiter="\t"):
        name = row["idx"]
        if not name:
            raise TraceError(source, lineno, "idx is empty")
        if name in seen:
            raise TraceError(source, lineno, f"idx {name} repeats the job of line {seen[name]}")
        seen[name] = lineno
        gpus = parse_int(row["gpus"], "gpus", source, lineno, low=1)
        nodes = parse_int(row["nodes"], "nodes", source, lineno, low=1)
        per_node = parse_int(row["gpus_per_node"], "gpus_per_node", source, lineno, low=1)
        if nodes * per_node != gpus:
            raise TraceError(source, lineno, f"gpus {gpus} is not nodes {nodes} x gpus_per_node {per_node}")
        duration = parse_float(row["duration_s"], "duration_s", source, lineno, strict=True)
        limit_min = parse_int(row["timelimit_min"], "timelimit_min", source, lineno, low=1)
        if duration > limit_min * 60:
            raise TraceError(
                source,
                lineno,
                f"duration_s {row['duration_s']} exceeds the time limit ({limit_min} min = {limit_min * 60} s): "
                "Slurm would have killed the job",
            )
        jobs.append(
            TraceJob(
                0,
                name,
                0.0,
                gpus,
                duration,
                p.name,
                p.compute_s(),
                p.grad_bytes,
                lineno,
                nodes=nodes,
                gpus_per_node=per_node,
                topology=PREFER_LEAF,
                est_runtime_s=limit_min * 60.0,
            )
        )
    if not jobs:
        raise TraceError(source, 0, "no jobs")
    notes = (
        "all jobs submitted at time 0 in file order (the table has no submission times)",
        "gangs of exactly nodes x gpus_per_node; topology prefer-leaf (no --switches: Slurm packs leaves best effort)",
        "time limit = the user's runtime estimate; durations as given (run time on an ideal placement)",
        "no model in the table: every job has the ResNet-50-like default runtime profile",
    )
    return Trace("slurm", source, in_submission_order(jobs), notes)


def load_slurm(path: str | Path) -> Trace:
    p = Path(path)
    with p.open(newline="") as fh:
        return parse_slurm(fh, str(p))
