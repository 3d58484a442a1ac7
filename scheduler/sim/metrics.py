"""What a replay measures, per policy. PURE.

* JCT (job completion time) = completion - submission; average, median and 95th percentile (linear
  interpolation between order statistics, numpy's default) over the jobs that finished;
* makespan = last completion - first submission;
* queueing delay = JCT - the time the job held GPUs (waiting before its first start and after every
  preemption); averaged over jobs;
* GPU utilisation = GPU-seconds held by jobs / (GPUs x makespan), and the held GPUs over time;
* placement: among jobs of more than one GPU, the share placed in one NVLink island (resp. one leaf)
  every time they ran; among the jobs that ran on more than one node (every gang of several nodes, and
  any other job the policy split over nodes), how many stayed inside one leaf every time they ran;
* preemptions and migrations, counted per event.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from scheduler.sim.simulator import Simulator


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: int
    name: str
    gpus: int
    submit: float
    start: float | None
    end: float | None
    jct: float | None
    queueing: float | None
    preemptions: int
    migrations: int
    one_island: bool
    one_leaf: bool
    multi_node: bool = False  # ran on more than one node at least once


@dataclass(slots=True)
class ReplayResult:
    policy: str
    trace: str
    cluster: str
    network: bool
    n_gpus: int
    jobs: list[JobRecord]
    busy_timeline: list[tuple[float, int]]
    avg_jct: float
    median_jct: float
    p95_jct: float
    makespan: float
    avg_queueing: float
    utilisation: float
    island_share: float | None
    leaf_share: float | None
    preemptions: int
    migrations: int
    unfinished: list[str] = field(default_factory=list)
    multi_node_jobs: int = 0  # finished jobs that ran on more than one node
    multi_node_one_leaf: int = 0  # ... of which every run stayed inside one leaf
    rounds: int = 0  # scheduling rounds: engine calls (default) or event handlings (baselines)
    events: int = 0  # simulator events
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The per-policy figures (no per-job rows), JSON-ready."""
        return {
            "policy": self.policy,
            "trace": self.trace,
            "cluster": self.cluster,
            "network_model": "on" if self.network else "off",
            "jobs": len(self.jobs),
            "finished": len(self.jobs) - len(self.unfinished),
            "unfinished": list(self.unfinished),
            "avg_jct_s": _r(self.avg_jct),
            "median_jct_s": _r(self.median_jct),
            "p95_jct_s": _r(self.p95_jct),
            "makespan_s": _r(self.makespan),
            "avg_queueing_s": _r(self.avg_queueing),
            "gpu_utilisation": _r(self.utilisation, 4),
            "multi_gpu_in_one_island": _r(self.island_share, 4),
            "multi_gpu_in_one_leaf": _r(self.leaf_share, 4),
            "multi_node_jobs": self.multi_node_jobs,
            "multi_node_in_one_leaf": self.multi_node_one_leaf,
            "preemptions": self.preemptions,
            "migrations": self.migrations,
            "rounds": self.rounds,  # engine calls for default, scheduling events for the baselines
        }

    def as_dict(self, with_jobs: bool = True) -> dict[str, Any]:
        d = self.summary()
        if with_jobs:
            d["job_records"] = [asdict(j) for j in self.jobs]
            d["busy_timeline"] = [[t, b] for t, b in self.busy_timeline]
        return d


def _r(v: float | None, nd: int = 2) -> float | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return round(v, nd)


def percentile(values: list[float], q: float) -> float:
    """q in [0, 100], linear interpolation between order statistics (numpy's default)."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * q / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarise(sim: Simulator) -> ReplayResult:
    records: list[JobRecord] = []
    jcts: list[float] = []
    queues: list[float] = []
    multi = island = leaf = 0
    mn = mn_leaf = 0
    unfinished: list[str] = []
    for j in sorted(sim.jobs, key=lambda x: x.id):
        jct = (j.end - j.submit) if j.end is not None else None
        q = (jct - j.run_s) if jct is not None else None
        if jct is None:
            unfinished.append(j.job.name)
        else:
            jcts.append(jct)
            queues.append(max(0.0, q))  # type: ignore[arg-type]
            if j.gpus > 1:
                multi += 1
                island += j.one_island
                leaf += j.one_leaf
            if j.multi_node:
                mn += 1
                mn_leaf += j.one_leaf
        records.append(
            JobRecord(
                j.id,
                j.job.name,
                j.gpus,
                j.submit,
                j.first_start,
                j.end,
                jct,
                q,
                j.preemptions,
                j.migrations,
                j.one_island,
                j.one_leaf,
                j.multi_node,
            )
        )
    ends = [j.end for j in sim.jobs if j.end is not None]
    first = min((j.submit for j in sim.jobs), default=0.0)
    makespan = (max(ends) - first) if ends else math.nan
    util = sim._busy_gpu_s / (sim.cluster.n_gpus * makespan) if ends and makespan > 0 else math.nan
    notes = list(sim.trace.notes)
    if unfinished:
        notes.append(f"{len(unfinished)} job(s) never ran to completion on this cluster under this policy")
    return ReplayResult(
        policy=sim.policy.name,
        trace=sim.trace.source,
        cluster=sim.cluster.label,
        network=sim.network,
        n_gpus=sim.cluster.n_gpus,
        jobs=records,
        busy_timeline=list(sim.busy_timeline),
        avg_jct=sum(jcts) / len(jcts) if jcts else math.nan,
        median_jct=percentile(jcts, 50),
        p95_jct=percentile(jcts, 95),
        makespan=makespan,
        avg_queueing=sum(queues) / len(queues) if queues else math.nan,
        utilisation=util,
        island_share=island / multi if multi else None,
        leaf_share=leaf / multi if multi else None,
        preemptions=sum(j.preemptions for j in sim.jobs),
        migrations=sum(j.migrations for j in sim.jobs),
        unfinished=unfinished,
        multi_node_jobs=mn,
        multi_node_one_leaf=mn_leaf,
        rounds=getattr(sim.policy, "rounds", sim.rounds),
        events=sim.events,
        notes=notes,
    )
