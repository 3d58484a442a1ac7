"""What every JCT trace loader returns: `Trace` of `TraceJob`s. A malformed row raises `TraceError` with
the file and the line number; nothing half-read is returned.

A job's shape: `gpus` in all; a gang (`nodes` x `gpus_per_node`, both set) must get exactly that many
nodes with exactly that many GPUs on each (Slurm's `--nodes=N --gpus-per-node=K`); without them any split
of `gpus` over nodes is acceptable (the trace gives only a GPU count). `topology` says what the user asked
of the fabric: `require-leaf` (all nodes under one leaf switch, Slurm `--switches=1` with an unlimited
wait), `prefer-leaf` (one leaf when the scheduler can, e.g. Slurm's topology/tree best effort) or `any`.
`est_runtime_s` is the user's run-time estimate (a time limit), never the true duration."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

Topology = Literal["require-leaf", "prefer-leaf", "any"]
REQUIRE_LEAF: Topology = "require-leaf"
PREFER_LEAF: Topology = "prefer-leaf"
ANY_TOPOLOGY: Topology = "any"
TOPOLOGIES: tuple[str, ...] = (REQUIRE_LEAF, PREFER_LEAF, ANY_TOPOLOGY)


class TraceError(ValueError):
    """A trace file that cannot be read as its format says: `path:line: problem`."""

    def __init__(self, source: str, line: int, message: str) -> None:
        self.source, self.line, self.problem = source, line, message
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")


@dataclass(frozen=True, slots=True)
class TraceJob:
    id: int  # 0.. in submission order (the replay's queue order)
    name: str  # the job's id or name in the trace
    submit_s: float  # seconds from the trace start
    gpus: int
    duration_s: float  # run time on an ideal placement (given by the trace, or derived: see Trace.notes)
    model: str = "default"  # runtime profile (scheduler.sim.runtime.MODEL_PROFILES)
    step_compute_s: float = 0.086  # one step on the reference GPU (V100)
    grad_bytes: float = 102.4e6  # all-reduced per step
    line: int = 0
    nodes: int | None = None  # gang: exactly this many nodes ... (None: any split of `gpus`)
    gpus_per_node: int | None = None  # ... with exactly this many GPUs on each
    topology: Topology = PREFER_LEAF
    est_runtime_s: float | None = None  # the user's estimate (time limit); None: the trace gives none

    def __post_init__(self) -> None:
        if (self.nodes is None) != (self.gpus_per_node is None):
            raise ValueError(f"job {self.name}: a gang needs both nodes and gpus_per_node")
        if self.nodes is not None and (self.nodes < 1 or self.nodes * self.gpus_per_node != self.gpus):  # type: ignore[operator]
            raise ValueError(f"job {self.name}: {self.nodes} nodes x {self.gpus_per_node} GPUs is not {self.gpus} GPUs")
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"job {self.name}: topology {self.topology!r} is not one of {', '.join(TOPOLOGIES)}")

    @property
    def gang(self) -> tuple[int, int] | None:
        """(nodes, GPUs per node) of a gang, None for a job of any shape."""
        return (self.nodes, self.gpus_per_node) if self.nodes is not None else None  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Trace:
    kind: str
    source: str
    jobs: tuple[TraceJob, ...]
    notes: tuple[str, ...] = field(default=())  # assumptions the loader made (derived durations ...)

    @property
    def gpu_seconds(self) -> float:
        return sum(j.gpus * j.duration_s for j in self.jobs)

    def head(self, n: int) -> Trace:
        return Trace(self.kind, self.source, self.jobs[:n], self.notes)


def in_submission_order(jobs: Iterable[TraceJob]) -> tuple[TraceJob, ...]:
    """The jobs sorted by submission time, ties in file order (a stable sort), numbered 0.. in that order."""
    return tuple(replace(j, id=i) for i, j in enumerate(sorted(jobs, key=lambda j: j.submit_s)))


def csv_rows(
    lines: Iterable[str], source: str, required: tuple[str, ...], delimiter: str = ","
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for each data row; blank lines skipped; TraceError for a missing column or a row
    with the wrong number of fields."""
    reader = csv.reader(lines, delimiter=delimiter)
    header: list[str] | None = None
    for row in reader:
        lineno = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [h.strip().lstrip("\ufeff") for h in row]
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceError(
                    source, lineno, f"header lacks column(s) {', '.join(missing)} (has {', '.join(header)})"
                )
            continue
        if len(row) != len(header):
            raise TraceError(source, lineno, f"{len(row)} fields, the header has {len(header)}")
        yield lineno, {h: v.strip() for h, v in zip(header, row, strict=True)}
    if header is None:
        raise TraceError(source, 0, "empty file (no header)")


def parse_int(value: str, column: str, source: str, line: int, low: int = 0) -> int:
    try:
        v = int(value)
    except ValueError:
        try:
            f = float(value)
        except ValueError:
            raise TraceError(source, line, f"{column} {value!r} is not a number") from None
        if f != int(f):
            raise TraceError(source, line, f"{column} {value!r} is not a whole number") from None
        v = int(f)
    if v < low:
        raise TraceError(source, line, f"{column} {v} is below {low}")
    return v


def parse_float(value: str, column: str, source: str, line: int, low: float = 0.0, strict: bool = False) -> float:
    try:
        v = float(value)
    except ValueError:
        raise TraceError(source, line, f"{column} {value!r} is not a number") from None
    if v != v or v in (float("inf"), float("-inf")) or v < low or (strict and v == low):
        raise TraceError(source, line, f"{column} {value!r} must be {'>' if strict else '>='} {low:g}")
    return v
