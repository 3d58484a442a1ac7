"""Trace loaders for the replay. JCT traces return a `Trace` of `TraceJob`s:

    load_trace("tiresias", "../shared/data/traces/tiresias_60_job.csv")
    load_trace("pollux", "../shared/data/traces/pollux_workload-6.csv")
    load_trace("gavel", "../shared/data/traces/gavel_physical_max_min_fairness.trace")
    load_trace("slurm", "../shared/data/traces/slurm_churn_500_seed1.tsv")

The Alibaba 2023 pod list (fractional GPUs, for fragmentation rather than JCT) has its own loader,
`scheduler.sim.traces.alibaba`, and replay (`scheduler.sim.fractional`).
"""

from __future__ import annotations

from pathlib import Path

from scheduler.sim.traces.base import Trace, TraceError, TraceJob
from scheduler.sim.traces.gavel import load_gavel, parse_gavel
from scheduler.sim.traces.pollux import load_pollux, parse_pollux
from scheduler.sim.traces.slurm import load_slurm, parse_slurm
from scheduler.sim.traces.tiresias import load_tiresias, parse_tiresias

JCT_LOADERS = {"tiresias": load_tiresias, "pollux": load_pollux, "gavel": load_gavel, "slurm": load_slurm}
KINDS = (*JCT_LOADERS, "alibaba")


def load_trace(kind: str, path: str | Path) -> Trace:
    """A JCT trace by kind; ValueError for an unknown kind, TraceError (with the line) for a bad row."""
    try:
        loader = JCT_LOADERS[kind]
    except KeyError:
        raise ValueError(f"unknown trace kind {kind!r}; known: {', '.join(KINDS)}") from None
    return loader(path)


__all__ = [
    "JCT_LOADERS",
    "KINDS",
    "Trace",
    "TraceError",
    "TraceJob",
    "load_gavel",
    "load_pollux",
    "load_slurm",
    "load_tiresias",
    "load_trace",
    "parse_gavel",
    "parse_pollux",
    "parse_slurm",
    "parse_tiresias",
]
