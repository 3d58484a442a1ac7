"""What a (re)started node agent does with the jobs it finds, given what the database expects (PURE).

`found`: the launcher's `adopt()` (job, generation, running / exited / lost); `expected`: job id ->
generation of the launches the database says run on this node. Each found job lands in exactly one list,
so nothing runs twice (a stale generation or an unknown job is killed) and nothing is lost (an end that
happened while no agent watched is reported, with its exit code when the shim recorded one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol


class Found(Protocol):
    job_id: int
    generation: int
    state: str  # "running", "exited", "lost"
    returncode: int | None


@dataclass(slots=True)
class ReconcilePlan:
    keep: list[tuple[int, int]] = field(default_factory=list)  # running, wanted: adopt and watch
    kill: list[tuple[int, int]] = field(default_factory=list)  # running, not wanted (orphan or stale generation)
    report: list[tuple[int, int, int | None]] = field(default_factory=list)  # ended unwatched, wanted: report
    forget: list[tuple[int, int]] = field(default_factory=list)  # ended, not wanted: drop its files
    missing: list[tuple[int, int]] = field(default_factory=list)  # wanted, not here at all: the centre decides


def plan_reconcile(found: Iterable[Found], expected: Mapping[int, int]) -> ReconcilePlan:
    plan = ReconcilePlan()
    seen: set[tuple[int, int]] = set()
    for item in sorted(found, key=lambda f: (f.job_id, f.generation)):
        key = (item.job_id, item.generation)
        seen.add(key)
        wanted = expected.get(item.job_id) == item.generation
        if item.state == "running":
            (plan.keep if wanted else plan.kill).append(key)
        elif wanted:
            plan.report.append((*key, item.returncode))
        else:
            plan.forget.append(key)
    plan.missing = sorted((job, gen) for job, gen in expected.items() if (job, gen) not in seen)
    return plan
