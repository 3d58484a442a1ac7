"""Tenant quotas per pool: guaranteed share, borrowing of idle capacity, and who may reclaim. PURE.

Usage is counted in GPU-equivalents: a whole GPU is 1, an MPS share its compute percentage / 100, a
MIG instance its compute slices / 7 (3g.40gb = 3/7), a time-slice replica 1 / replicas.

A job of `need` GPU-equivalents, with `used` already running for its tenant in its pool:
* used + need <= guaranteed                     in quota: may start; may reclaim borrowed GPUs
* <= guaranteed + borrow_limit                  borrowing: may start on idle GPUs, marked `borrowed`
                                                (reclaimable); a non-preemptible job may not borrow,
                                                since a borrowed GPU must be given back on demand
* more                                          refused, the sum stated: "tenant quota: 16 GPUs in use + 96
                                                asked = 112, more than 64 guaranteed + 32 borrowable = 96"
A tenant with no quota in a pool has guaranteed 0 and may borrow without limit when
`Config.borrow_without_quota` (the default), otherwise it is refused.
"""

from __future__ import annotations

from scheduler.core import reasons
from scheduler.core.types import Config, JobRequest, PoolState, Quota, TenantState

INF = float("inf")


class QuotaVerdict:
    __slots__ = ("borrowed", "in_quota", "ok", "reason")

    def __init__(self, ok: bool, borrowed: bool, in_quota: bool, reason: str | None) -> None:
        self.ok = ok
        self.borrowed = borrowed
        self.in_quota = in_quota
        self.reason = reason


class QuotaBook:
    def __init__(self, tenants: list[TenantState], pools: dict[int, PoolState], config: Config) -> None:
        self.tenants = {t.name: t for t in tenants}
        self.pools = pools
        self.config = config
        self.used: dict[tuple[str, int], float] = {}
        self._limits: dict[tuple[str, int], tuple[float, float]] = {}
        # Refusals by (tenant, pool, used, need, whether borrowing would fit): a full pool refuses thousands of
        # waiting jobs of one tenant alike, and each refusal is a sentence with its sums.
        self._refusals: dict[tuple, QuotaVerdict] = {}

    def quota(self, tenant: str, pool: int) -> Quota | None:
        t = self.tenants.get(tenant)
        return t.quotas.get(pool) if t else None

    def usage(self, tenant: str, pool: int) -> float:
        return self.used.get((tenant, pool), 0.0)

    def charge(self, tenant: str, pool: int, amount: float) -> None:
        key = (tenant, pool)
        self.used[key] = self.used.get(key, 0.0) + amount

    def refund(self, tenant: str, pool: int, amount: float) -> None:
        key = (tenant, pool)
        self.used[key] = max(0.0, self.used.get(key, 0.0) - amount)

    def limits(self, tenant: str, pool: int) -> tuple[float, float] | None:
        """(guaranteed, borrow limit), or None when the tenant may not use the pool at all."""
        q = self.quota(tenant, pool)
        if q is None:
            return (0.0, INF) if self.config.borrow_without_quota else None
        return float(q.guaranteed_gpus), float(q.borrow_limit)

    def check(self, job: JobRequest, need: float) -> QuotaVerdict:
        key = (job.tenant, job.pool)
        lim = self._limits.get(key)
        if lim is None:
            lim = self._limits[key] = self.limits(job.tenant, job.pool) or _NO_QUOTA
        if lim is _NO_QUOTA:
            pool = self.pools.get(job.pool)
            return QuotaVerdict(False, False, False, reasons.no_quota(job.tenant, pool.name if pool else str(job.pool)))
        guaranteed, limit = lim
        used = self.used.get(key, 0.0)
        after = used + need
        if after <= guaranteed + 1e-9:
            return IN_QUOTA
        fits = after <= guaranteed + limit + 1e-9
        if fits and job.preemptible:
            return BORROWING
        rkey = (key, used, need, fits)
        verdict = self._refusals.get(rkey)
        if verdict is None:
            if fits:
                why = reasons.quota_no_borrow(used, need, guaranteed)
            elif need > guaranteed + limit + 1e-9:
                why = reasons.quota_too_big(need, guaranteed, limit)
            else:
                why = reasons.quota_exhausted(used, need, guaranteed, limit)
            verdict = self._refusals[rkey] = QuotaVerdict(False, False, False, why)
        return verdict


IN_QUOTA = QuotaVerdict(True, False, True, None)
BORROWING = QuotaVerdict(True, True, False, None)
_NO_QUOTA = (-1.0, -1.0)
