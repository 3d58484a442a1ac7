"""Tiresias simulator job traces (SymbioticLab/Tiresias, `simulator/*_job.csv`, e.g. `60_job.csv`).

Columns (the simulator's README and `jobs.py`): `job_id,num_gpu,submit_time,iterations,model_name,
duration,interval`; the simulator needs `job_id`, `num_gpu`, `submit_time` and `duration` (seconds on
its testbed; it reads `int(float(duration))`), `model_name` gives the CPU / memory / tensor profile,
`iterations` and `interval` (gap to the next submission) are informational. Jobs are replayed in
submission order, ties in file order (the simulator's stable sort on `submit_time`).

The duration is replayed as given (the run time on an ideal placement); `model_name` picks the runtime
profile (`scheduler.sim.runtime`) that sets how much the job suffers from a worse placement.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from scheduler.sim.runtime import profile
from scheduler.sim.traces.base import Trace, TraceError, TraceJob, csv_rows, in_submission_order, parse_float, parse_int

REQUIRED = ("job_id", "num_gpu", "submit_time", "duration")


def parse_tiresias(lines: Iterable[str], source: str = "tiresias trace") -> Trace:
    jobs: list[TraceJob] = []
    unknown: set[str] = set()
    for lineno, row in csv_rows(lines, source, REQUIRED):
        name = row["job_id"]
        if not name:
            raise TraceError(source, lineno, "job_id is empty")
        gpus = parse_int(row["num_gpu"], "num_gpu", source, lineno, low=1)
        submit = parse_float(row["submit_time"], "submit_time", source, lineno)
        duration = int(parse_float(row["duration"], "duration", source, lineno, strict=True))
        if duration < 1:
            raise TraceError(source, lineno, f"duration {row['duration']!r} is under one second")
        model = (row.get("model_name") or "").strip()
        p = profile(model)
        if p.name == "default" and model:
            unknown.add(model)
        jobs.append(TraceJob(0, name, submit, gpus, float(duration), p.name, p.compute_s(), p.grad_bytes, lineno))
    if not jobs:
        raise TraceError(source, 0, "no jobs")
    out = in_submission_order(jobs)
    notes = [
        "durations as given by the trace (run time on an ideal placement)",
        "no gang shape in the trace (num_gpu only): any split over nodes, topology prefer-leaf; no runtime estimates",
    ]
    if unknown:
        notes.append(f"models {', '.join(sorted(unknown))} are not in the runtime profiles: ResNet-50-like default")
    return Trace("tiresias", source, out, tuple(notes))


def load_tiresias(path: str | Path) -> Trace:
    p = Path(path)
    with p.open(newline="") as fh:
        return parse_tiresias(fh, str(p))
