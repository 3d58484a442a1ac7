"""Gavel traces (stanford-futuredata/gavel, `scheduler/traces/physical_cluster/*.trace`).

One job a line, ten tab-separated fields (Gavel's `utils.parse_trace` with the working directory):
`job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps, scale_factor,
priority_weight, SLO, arrival_time`, e.g. `ResNet-50 (batch size 64)` ... `19384  4  1  -1.000000  0`.
`scale_factor` is the number of GPUs (data-parallel workers), `arrival_time` seconds from the start.

The trace gives steps, not time. Duration = total_steps x the job's ideal step on the reference cluster
(scheduler.sim.runtime: per-V100 throughput of each job type, the batch size being per GPU, plus the
ring all-reduce of an ideal placement). Gavel's generator drew each job's duration first and turned it
into steps with measured throughputs; the throughputs here are documented approximations of those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from scheduler.sim.runtime import MODEL_PROFILES, Work, reference_ideal_step
from scheduler.sim.traces.base import Trace, TraceError, TraceJob, in_submission_order, parse_float, parse_int

FIELDS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
)
_TYPE_RE = re.compile(r"^(?P<model>.+?)\s*\(batch size (?P<batch>\d+)\)\s*$")


def parse_gavel(lines: Iterable[str], source: str = "gavel trace") -> Trace:
    raw: list[TraceJob] = []
    for lineno, line in enumerate(lines, start=1):
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        cells = text.split("\t")
        if len(cells) != len(FIELDS):
            raise TraceError(
                source, lineno, f"{len(cells)} tab-separated fields, expected {len(FIELDS)} ({', '.join(FIELDS)})"
            )
        row = dict(zip(FIELDS, (c.strip() for c in cells), strict=True))
        m = _TYPE_RE.match(row["job_type"])
        if not m:
            raise TraceError(source, lineno, f"job_type {row['job_type']!r} is not 'MODEL (batch size N)'")
        model = m.group("model")
        prof = MODEL_PROFILES.get(model)
        if prof is None or prof.samples_per_s is None:
            known = ", ".join(sorted(k for k, v in MODEL_PROFILES.items() if v.samples_per_s and k[0].isupper()))
            raise TraceError(source, lineno, f"job type {model!r} has no throughput profile (known: {known})")
        batch = int(m.group("batch"))
        steps = parse_int(row["total_steps"], "total_steps", source, lineno, low=1)
        gpus = parse_int(row["scale_factor"], "scale_factor", source, lineno, low=1)
        parse_float(row["priority_weight"], "priority_weight", source, lineno)
        try:
            float(row["SLO"])
        except ValueError:
            raise TraceError(source, lineno, f"SLO {row['SLO']!r} is not a number") from None
        arrival = parse_float(row["arrival_time"], "arrival_time", source, lineno)
        step_compute = prof.compute_s(batch)
        duration = steps * reference_ideal_step(Work(gpus, step_compute, prof.grad_bytes))
        raw.append(TraceJob(0, f"job{len(raw)}", arrival, gpus, duration, model, step_compute, prof.grad_bytes, lineno))
    if not raw:
        raise TraceError(source, 0, "no jobs")
    jobs = in_submission_order(raw)
    note = "durations derived: total_steps x ideal step time (per-V100 throughputs in scheduler.sim.runtime)"
    shape = (
        "no gang shape in the trace (scale_factor = GPUs only): any split over nodes, topology prefer-leaf; "
        "no runtime estimates (the SLO column is -1 in the physical-cluster traces)"
    )
    return Trace("gavel", source, jobs, (note, shape))


def load_gavel(path: str | Path) -> Trace:
    p = Path(path)
    with p.open(newline="") as fh:
        return parse_gavel(fh, str(p))
