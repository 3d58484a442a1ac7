"""Load imbalance (pure): how evenly a pool's GPUs are used, and which links run hottest.

The spread is the coefficient of variation of GPU utilisation (population standard deviation / mean): 0 when
every GPU is equally busy, about 1 when half the GPUs run flat out and half idle. It is undefined (None) for an
idle pool, where there is nothing to balance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Spread:
    count: int
    mean: float | None
    stddev: float | None
    cv: float | None  # coefficient of variation
    minimum: float | None
    maximum: float | None
    idle: int  # GPUs under IDLE_BELOW
    busy: int  # GPUs at or over BUSY_FROM


IDLE_BELOW = 0.05
BUSY_FROM = 0.80


def spread(values: list[float]) -> Spread:
    """Spread of utilisations in 0..1 (values outside are clamped)."""
    xs = [min(1.0, max(0.0, v)) for v in values]
    if not xs:
        return Spread(0, None, None, None, None, None, 0, 0)
    n = len(xs)
    mean = sum(xs) / n
    stddev = math.sqrt(sum((x - mean) ** 2 for x in xs) / n)
    cv = stddev / mean if mean > 1e-9 else None
    idle = sum(1 for x in xs if x < IDLE_BELOW)
    busy = sum(1 for x in xs if x >= BUSY_FROM)
    return Spread(n, mean, stddev, cv, min(xs), max(xs), idle, busy)


def hottest(utilisation: dict[int, float], n: int = 10, among: set[int] | None = None) -> list[tuple[int, float]]:
    """The `n` busiest links (id, utilisation), busiest first, ties by id; only `among` when given."""
    items = utilisation.items() if among is None else ((k, v) for k, v in utilisation.items() if k in among)
    return sorted(items, key=lambda kv: (-kv[1], kv[0]))[:n]
