"""What the apps above the fabric tell it, without the fabric importing them.

The fabric is the ground floor: the scheduler reads it, never the reverse. Two things the fabric shows need
the scheduler's knowledge: the jobs the twin (the simulated cluster) runs, and the pools' share of a cluster's
live load. The scheduler registers a provider for each at start-up (`SchedulerConfig.ready`); without one the
twin runs no jobs and the load has no pool section (a fabric used on its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabric.collectors.twin_model import TwinJob

JobDemand = Callable[[int], list[TwinJob]]  # cluster id -> the jobs holding its GPUs now
LoadSection = Callable[[Any], Any]  # cluster row -> a JSON-serialisable section of its live load

_job_demand: JobDemand | None = None
_load_sections: dict[str, LoadSection] = {}


def register_job_demand(provider: JobDemand) -> None:
    """The one provider of the jobs running on a cluster (a later registration replaces it)."""
    global _job_demand
    _job_demand = provider


def job_demand(cluster_id: int) -> list[TwinJob]:
    return _job_demand(cluster_id) if _job_demand is not None else []


def register_load_section(name: str, provider: LoadSection) -> None:
    """A section `name` of GET /clusters/<id>/load/ (e.g. the scheduler's pools)."""
    _load_sections[name] = provider


def load_sections(cluster: Any) -> dict[str, Any]:
    return {name: provider(cluster) for name, provider in _load_sections.items()}
