"""Fair share's decayed usage of the jobs that finished lately, per tenant, kept between rounds.

A round charges each tenant the GPU-hours of its jobs that finished within the window, each halved per half-life
of age (scheduler.snapshot_from_db._tenants). Read afresh, that is every job of the last week, each round: a cost
that grows with the cluster's history, not with what changed. Kept here, a round adds the jobs written since its
last read (the change feed) and drops those that aged out of the window, and reads the sums.

Each job's term is kept at a reference time: a / 3600 x 2^-((ref - finished) / half-life). The usage at `now` is the
tenant's sum x 2^-((now - ref) / half-life): the same sum as each term aged to `now`, to rounding. The reference
moves to `now` (every term again) once it is a half-life old, so that rounding never builds up. The caller starts
again (`reset`) from a whole read at its first round and after any deletion.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

Row = tuple[int, int, float, float | None]  # job id, tenant id, attained GPU-seconds, finished at (epoch s) or None


class FinishedUsage:
    def __init__(self, half_life_s: float, window_s: float) -> None:
        self.half_life_s = half_life_s
        self.window_s = window_s
        self.ref = 0.0
        self._terms: dict[int, tuple[int, float, float, float]] = {}  # job -> (tenant, attained, finished, term)
        self._sums: dict[int, float] = {}  # tenant -> sum of its terms at `ref`
        self._counts: dict[int, int] = {}  # tenant -> its jobs in `_terms`
        self._by_end: list[tuple[float, int]] = []  # (finished, job): a heap, with entries of jobs since changed

    def reset(self, rows: Iterable[Row], now: float) -> None:
        """Start again from every job finished within the window (others in `rows` are left out)."""
        self.ref = now
        self._terms, self._sums, self._counts, self._by_end = {}, {}, {}, []
        self.update(rows, now)

    def update(self, rows: Iterable[Row], now: float) -> None:
        """Jobs written since the last read, finished or not (a job that is no longer finished leaves)."""
        for job, tenant, attained, finished in rows:
            self._drop(job)
            if finished is not None and finished >= now - self.window_s:
                self._add(job, tenant, attained, finished)

    def usage(self, now: float) -> dict[int, float]:
        """Tenant -> its decayed GPU-hours of finished jobs at `now`, after the jobs older than the window leave."""
        cutoff = now - self.window_s
        by_end = self._by_end
        while by_end and by_end[0][0] < cutoff:
            finished, job = heapq.heappop(by_end)
            kept = self._terms.get(job)
            if kept is not None and kept[2] == finished:
                self._drop(job)
        if now - self.ref >= self.half_life_s:
            self._rebase(now)
        scale = 0.5 ** ((now - self.ref) / self.half_life_s)
        return {tenant: max(0.0, s) * scale for tenant, s in self._sums.items()}

    def __len__(self) -> int:
        return len(self._terms)

    def _term(self, attained: float, finished: float) -> float:
        return attained / 3600 * 0.5 ** ((self.ref - finished) / self.half_life_s)

    def _add(self, job: int, tenant: int, attained: float, finished: float) -> None:
        term = self._term(attained, finished)
        self._terms[job] = (tenant, attained, finished, term)
        self._sums[tenant] = self._sums.get(tenant, 0.0) + term
        self._counts[tenant] = self._counts.get(tenant, 0) + 1
        heapq.heappush(self._by_end, (finished, job))

    def _drop(self, job: int) -> None:
        kept = self._terms.pop(job, None)
        if kept is None:
            return
        tenant, _, _, term = kept
        self._counts[tenant] -= 1
        if self._counts[tenant]:
            self._sums[tenant] -= term
        else:  # its last job: exactly nothing, not what rounding leaves of the subtractions
            del self._counts[tenant], self._sums[tenant]

    def _rebase(self, now: float) -> None:
        """Every kept term again, at `now`."""
        kept = [(job, tenant, attained, finished) for job, (tenant, attained, finished, _) in self._terms.items()]
        self.reset(kept, now)
