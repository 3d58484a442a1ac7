"""Pollux workload traces (petuum/adaptdl, branch osdi21-artifact, `simulator/workloads/workload-*.csv`).

Columns: `name,time,application,num_replicas,batch_size`: submission time in seconds, one of six
applications (`simulator/applications.py`), the fixed replica count and global batch size the workload
generator chose for it (the configuration non-adaptive schedulers such as Tiresias run it with).

The file has no duration: the artifact's simulator derives progress from profiled throughputs of each
application (`traces/<app>/placements.csv`) until the job reaches its last epoch. Here the same idea
with a documented throughput assumption (`APPLICATIONS` and the per-GPU throughput in
`scheduler.sim.runtime.MODEL_PROFILES`):

    steps     = ceil(epochs x samples per epoch / batch_size)
    duration  = steps x ideal_step(replicas, local batch = batch_size / replicas)
    ideal     = local batch / samples_per_s  +  ring all-reduce of the gradients on an ideal placement
                of the reference cluster (4 x V100 per node in one NVLink island, one EDR HCA)

Epochs are the artifact's `max_epochs`; samples per epoch are the datasets' training-set sizes. The
per-GPU throughputs were chosen so that each application's ideal duration at its most common replica
count is close to the shortest JCT of that class in the artifact's published Tiresias run on
workload-6 (`results-jobload/tiresias-1.0/summary.json`, 16 nodes x 4 GPUs): a floor of what the job
really took there. Statistical efficiency (Pollux's goodput) is ignored: the replica count and batch
size are fixed, as for the non-adaptive baselines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from scheduler.sim.runtime import MODEL_PROFILES, Work, reference_ideal_step
from scheduler.sim.traces.base import Trace, TraceError, TraceJob, csv_rows, in_submission_order, parse_float, parse_int

REQUIRED = ("name", "time", "application", "num_replicas", "batch_size")


@dataclass(frozen=True, slots=True)
class Application:
    name: str
    epochs: int  # applications.py max_epochs
    samples_per_epoch: int  # training-set size


APPLICATIONS: dict[str, Application] = {
    a.name: a
    for a in (
        Application("cifar10", 100, 50_000),  # CIFAR-10 train
        Application("imagenet", 90, 1_281_167),  # ILSVRC-2012 train
        Application("bert", 2, 88_641),  # SQuAD v1.1 train features
        Application("deepspeech2", 80, 7_600),  # CMU-ARCTIC utterances
        Application("yolov3", 50, 16_551),  # PASCAL VOC 07+12 trainval
        Application("ncf", 10, 4_970_845),  # MovieLens-1M ratings x (1 + 4 negatives)
    )
}


def job_duration(app: str, replicas: int, batch_size: int) -> tuple[float, float]:
    """(ideal duration in s, compute s of one step) of a Pollux job; KeyError for an unknown application."""
    a = APPLICATIONS[app]
    prof = MODEL_PROFILES[app]
    local = batch_size / replicas
    step_compute = prof.compute_s(local)
    steps = math.ceil(a.epochs * a.samples_per_epoch / batch_size)
    return steps * reference_ideal_step(Work(replicas, step_compute, prof.grad_bytes)), step_compute


def parse_pollux(lines: Iterable[str], source: str = "pollux workload") -> Trace:
    raw: list[TraceJob] = []
    for lineno, row in csv_rows(lines, source, REQUIRED):
        name = row["name"]
        if not name:
            raise TraceError(source, lineno, "name is empty")
        submit = parse_float(row["time"], "time", source, lineno)
        app = row["application"]
        if app not in APPLICATIONS:
            raise TraceError(source, lineno, f"application {app!r} is not one of {', '.join(APPLICATIONS)}")
        replicas = parse_int(row["num_replicas"], "num_replicas", source, lineno, low=1)
        batch = parse_int(row["batch_size"], "batch_size", source, lineno, low=1)
        if batch < replicas:
            raise TraceError(source, lineno, f"batch_size {batch} is smaller than num_replicas {replicas}")
        duration, step_compute = job_duration(app, replicas, batch)
        prof = MODEL_PROFILES[app]
        raw.append(TraceJob(0, name, submit, replicas, duration, app, step_compute, prof.grad_bytes, lineno))
    if not raw:
        raise TraceError(source, 0, "no jobs")
    jobs = in_submission_order(raw)
    note = (
        "durations derived: epochs x dataset / batch steps at the ideal step time of the reference cluster "
        "(per-GPU throughputs in scheduler.sim.runtime, calibrated to the artifact's Tiresias JCT floors)"
    )
    shape = (
        "no gang shape in the workload (num_replicas only; Pollux's simulator spreads replicas over nodes freely): "
        "any split over nodes, topology prefer-leaf; no runtime estimates"
    )
    return Trace("pollux", source, jobs, (note, shape))


def load_pollux(path: str | Path) -> Trace:
    p = Path(path)
    with p.open(newline="") as fh:
        return parse_pollux(fh, str(p))
