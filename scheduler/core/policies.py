"""Queue policies: the order in which pending jobs are offered capacity. PURE and pluggable.

    schedule(snapshot, policy=FifoPolicy())      # or PriorityFairSharePolicy() (default), LasPolicy()
    policy_by_name("las")

A policy only orders; the engine still applies quotas, backfill and preemption in that order. All
policies break ties by `queue_seq` (a job's original place in line, kept across requeues), then id.

* FifoPolicy: submission order only.
* PriorityFairSharePolicy (default): priority class (higher first; a job's priority is clamped to its
  tenant's `max_priority`), then fair share, then age. Fair share interleaves tenants of the same
  priority by their share ratio

      ratio(tenant) = (usage_decayed + running_gpus * horizon + queued_ahead_gpus * horizon) / entitlement
      entitlement   = weight * max(1, sum of guaranteed GPUs over pools)

  where `queued_ahead_gpus` grows as the tenant's jobs are put in line, so one tenant's thousand jobs
  do not all go ahead of another tenant's first job (one sort, O(J log J)).
* LasPolicy: Tiresias-style least attained service. Jobs fall into discretised queues by the GPU-seconds
  they have received (`attained_gpu_s`, thresholds `queue_limits`); lower queues go first, FIFO
  inside a queue. `respect_priority=True` (default) keeps priority classes above it.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, chain, compress, count, islice, repeat
from operator import attrgetter, eq, truediv
from typing import TYPE_CHECKING, Protocol

from scheduler.core.types import JobRequest, TenantState

if TYPE_CHECKING:
    from scheduler.core.carry import RoundCarry


@dataclass(slots=True)
class PolicyContext:
    tenants: dict[str, TenantState]
    running_gpus: dict[str, float] = field(default_factory=dict)  # tenant -> GPU-equivalents running now
    fairshare_horizon_h: float = 1.0
    now: float = 0.0
    service: ServiceRank | None = None  # within a tenant: rank by expected remaining service (None: queue_seq)
    # `service.sort_keys(jobs, now)` when the caller has them already (the engine reads the levels too).
    service_keys: dict[int, tuple] | None = None
    # The lines kept from the last round (scheduler.core.carry), and the jobs of this round not in them yet.
    carry: RoundCarry | None = None
    changed: list[JobRequest] | None = None
    # A number per job that the caller wants back in queue order (the engine's turn signature), kept in a carry's
    # lines beside each job; and what the policy hands back beside the order when it has them (None: it has not):
    # the jobs' ids and these numbers, in queue order.
    tag_of: Callable[[JobRequest], int] | None = None
    # False: the caller reads the jobs by id in `out_ids` and needs no list of them in queue order; a policy that
    # hands `out_ids` back then returns an empty list (a list of 50,000 jobs in queue order touches each job object
    # in an order that is not theirs in memory: a cache miss a job).
    jobs_out: bool = True
    out_ids: list[int] | None = None
    out_tags: list[int] | None = None
    # Each job's est_runtime_s in queue order (nan without one), worked out when called: the engine needs them only
    # where a job might end before its pool's earliest reservation, and permuting 50,000 of them costs 3-4 ms.
    out_ests: Callable[[], list[float]] | None = None


@dataclass(frozen=True, slots=True)
class ServiceRank:
    """How one tenant's jobs of one priority class are ordered, and which of its running jobs may give way
    to which (docs/scheduler.md, "Queue order").

    level: least attained service in discrete levels (Tiresias' LAS, exponentially growing queues): 0 below
    `quantum_gpu_s` GPU-seconds received, then one more each time the service grows `base`-fold, at most
    `levels` - 1. A lower level goes first; a running job may give way to a job at least one level below.
    Inside a level, jobs with an estimate they have not run past go first, shortest expected remaining
    GPU-seconds first (gpus x (estimate - time run): SRPT on GPU-time, Smith's rule), then the others
    (no estimate, or past it) in their order of submission. A job that has waited `aging_s` or more
    (queue time, not counting time it ran) goes to level 0, before the others there: nothing starves."""

    quantum_gpu_s: float = 600.0
    base: float = 4.0
    levels: int = 3
    aging_s: float = 0.0  # 0: no aging

    def level(self, job: JobRequest) -> int:
        return self.level_at(job.attained_gpu_s)

    def level_at(self, a: float) -> int:
        """The level of a job that has received `a` GPU-seconds."""
        q = self.quantum_gpu_s
        if a < q or q <= 0 or self.levels <= 1:
            return 0
        return min(self.levels - 1, 1 + int(math.log(a / q) / math.log(self.base) + 1e-9))

    def remaining_s(self, job: JobRequest, attained: float | None = None) -> float:
        """Expected seconds left: the rest of its estimate, else as long again as it has run (a job that ran
        long is likely long: the decreasing hazard least-attained-service rests on). `attained`: its service when
        the request's figure is not all of it (a running job's, RunningJob.attained_at)."""
        ran = (job.attained_gpu_s if attained is None else attained) / max(1, job.gpus)
        est = job.est_runtime_s
        if est is not None and est > ran:
            return est - ran
        return ran

    def starving(self, job: JobRequest, now: float) -> bool:
        if self.aging_s <= 0:
            return False
        return now - job.submitted_at - job.attained_gpu_s / max(1, job.gpus) >= self.aging_s

    def sort_keys(self, jobs: list[JobRequest], now: float) -> dict[int, tuple]:
        """job id -> (level, 0 with an estimate / 1 without, GPU-seconds left, queue_seq, id): `key` for a
        whole queue, inlined (50,000 jobs a round)."""
        q, levels, aging = self.quantum_gpu_s, self.levels, self.aging_s
        top = levels - 1
        lb = math.log(self.base) if self.base > 1 else 1.0
        log = math.log
        out: dict[int, tuple] = {}
        for j in jobs:
            a = j.attained_gpu_s
            g = j.gpus if j.gpus > 0 else 1
            ran = a / g
            if aging > 0 and now - j.submitted_at - ran >= aging:
                out[j.id] = (0, -1, 0.0, j.queue_seq, j.id)
                continue
            if a < q or q <= 0 or top <= 0:
                lv = 0
            else:
                lv = 1 + int(log(a / q) / lb + 1e-9)
                if lv > top:
                    lv = top
            est = j.est_runtime_s
            if est is not None and est > ran:
                out[j.id] = (lv, 0, g * (est - ran), j.queue_seq, j.id)
            else:
                out[j.id] = (lv, 1, 0.0, j.queue_seq, j.id)
        return out

    def key(self, job: JobRequest, now: float) -> tuple[int, int, float]:
        if self.starving(job, now):
            return (0, -1, 0.0)
        g = max(1, job.gpus)
        ran = job.attained_gpu_s / g
        est = job.est_runtime_s
        if est is not None and est > ran:
            return (self.level(job), 0, g * (est - ran))
        return (self.level(job), 1, 0.0)


class QueuePolicy(Protocol):
    name: str

    def order(self, jobs: list[JobRequest], ctx: PolicyContext) -> list[JobRequest]: ...


def effective_priority(job: JobRequest, tenants: dict[str, TenantState]) -> int:
    t = tenants.get(job.tenant)
    return min(job.priority, t.max_priority) if t is not None else job.priority


_seq = attrgetter("queue_seq", "id")
_NAN = float("nan")
_MOST_CUTS = 32  # Line.remove_many: beyond this many cuts, one copy of each list is quicker (each cut moves the rest)


class FifoPolicy:
    name = "fifo"

    def order(self, jobs: list[JobRequest], ctx: PolicyContext) -> list[JobRequest]:
        return sorted(jobs, key=_seq)


class PriorityFairSharePolicy:
    name = "priority-fairshare"

    def order(self, jobs: list[JobRequest], ctx: PolicyContext) -> list[JobRequest]:
        tenants = ctx.tenants
        horizon = ctx.fairshare_horizon_h
        maxp = {name: t.max_priority for name, t in tenants.items()}
        big = 1 << 62
        svc = ctx.service
        if svc is not None:
            memo = ctx.service_keys if ctx.service_keys is not None else svc.sort_keys(jobs, ctx.now)
            within = lambda j: memo[j.id]  # noqa: E731
        else:
            within = _seq

        def line_of(j: JobRequest) -> tuple[int, str]:
            p = j.priority
            m = maxp.get(j.tenant, big)
            return (p if p <= m else m, j.tenant)

        carry = ctx.carry
        # Kept lines take the round's new jobs one by one (a binary search each); when most jobs are new,
        # sorting the lines afresh is quicker.
        tag_of = ctx.tag_of if carry is not None else None
        if carry is not None and carry.lines and ctx.changed is not None and len(ctx.changed) * 4 <= len(jobs):
            carry.place_in_lines(ctx.changed, line_of, within, tag_of)
            lines = carry.lines
        else:
            lines = _lines(jobs, line_of, within, with_keys=carry is not None, tag_of=tag_of)
            if carry is not None:
                carry.fill_lines(lines)
        # Ids and tags beside the order, permuted as the jobs are (C passes over short lists, where reading them from
        # the 50,000 job objects or a dict by id in queue order misses the cache at each job).
        tagged = tag_of is not None and all(len(line.tags) == len(line.jobs) for line in lines.values())
        out_ids: list[int] = []
        out_tags: list[int] = []
        ests_by_block: list[tuple[list[array], list[int] | None]] = []  # each block's lines' estimates, its merge
        by_prio: dict[int, list[tuple[str, Line]]] = {}
        for (prio, name), line in lines.items():
            if line.jobs:
                by_prio.setdefault(prio, []).append((name, line))
        charge: dict[str, float] = {}
        entitlement: dict[str, float] = {}
        for name in {name for per in by_prio.values() for name, _ in per}:
            t = tenants.get(name)
            guaranteed = sum(q.guaranteed_gpus for q in t.quotas.values()) if t else 0.0
            weight = t.weight if t and t.weight > 0 else 1.0
            entitlement[name] = weight * max(1.0, guaranteed)
            charge[name] = (t.usage_decayed if t else 0.0) + ctx.running_gpus.get(name, 0.0) * horizon
        out: list[JobRequest] = []
        jobs_out = ctx.jobs_out
        for prio in sorted(by_prio, reverse=True):
            per_tenant = by_prio[prio]
            if len(per_tenant) == 1:
                ((name, line),) = per_tenant
                if jobs_out:
                    out.extend(line.jobs)
                out_ids.extend(line.ids)
                ests_by_block.append(([line.ests], None))
                if tagged:
                    out_tags.extend(line.tags)
                charge[name] += sum(line.gpus) * horizon
                continue
            # Each job's key is its tenant's ratio when it reaches the head of the tenant's line: merging
            # the tenants' lines by that key is what a heap over tenants would pop, in one sort.
            ratios: list[float] = []
            jobs_in: list[list[JobRequest]] = []  # the lines' jobs, one list a line
            ids_in = array("q")
            tags_in: list[int] = []
            for name, line in per_tenant:
                # The tenant's charge before each job of its line, then its ratio (C loops: 50,000 jobs a round;
                # a charge of g x 1.0 adds the same float as g).
                steps = line.gpus if horizon == 1.0 else [g * horizon for g in line.gpus]
                before = list(accumulate(steps, initial=charge[name]))
                charge[name] = before.pop()
                ratios.extend(map(truediv, before, repeat(entitlement[name])))
                jobs_in.append(line.jobs)
                ids_in.extend(line.ids)
                if tagged:
                    tags_in.extend(line.tags)
            order = _merge_order(ratios, jobs_in)
            if jobs_out:
                joined = list(chain.from_iterable(jobs_in))
                out.extend(map(joined.__getitem__, order))
            out_ids.extend(map(ids_in.__getitem__, order))
            ests_by_block.append(([line.ests for _, line in per_tenant], order))
            if tagged:
                out_tags.extend(map(tags_in.__getitem__, order))
        ctx.out_ids = out_ids
        ctx.out_ests = partial(_ests_in_order, ests_by_block)
        ctx.out_tags = out_tags if tagged else None
        return out


def _ests_in_order(blocks: list[tuple[list[array], list[int] | None]]) -> list[float]:
    """PolicyContext.out_ests: each block's lines' estimates one after another, in its merge's order where it has one.
    Called in the round that ordered them (the lines change in the next one)."""
    out: list[float] = []
    for ests, order in blocks:
        joined = array("d")
        for e in ests:
            joined.extend(e)
        out.extend(joined if order is None else map(joined.__getitem__, order))
    return out


def _merge_order(ratios: list[float], lines: list[list[JobRequest]]) -> list[int]:
    """The positions of the jobs of `lines` one after another (their ratios: `ratios`) sorted by (ratio, queue_seq,
    id). Sorting positions by their float alone compares floats natively, several times quicker than comparing
    (ratio, seq, id) tuples; the rare runs of equal ratios are then put in (seq, id) order, the only jobs read."""
    order = sorted(range(len(ratios)), key=ratios.__getitem__)
    starts = list(accumulate(map(len, lines), initial=0))

    def job(k: int) -> JobRequest:
        i = bisect_right(starts, k) - 1
        return lines[i][k - starts[i]]

    in_order = list(map(ratios.__getitem__, order))
    ties = list(map(eq, in_order, islice(in_order, 1, None)))
    n, i = len(ties), 0
    while True:
        try:
            i = ties.index(True, i)
        except ValueError:
            return order
        j = i + 1
        while j < n and ties[j]:
            j += 1
        order[i : j + 1] = sorted(order[i : j + 1], key=lambda k: (job(k).queue_seq, job(k).id))
        i = j + 1


class Line:
    """One (priority, tenant)'s waiting jobs in the line's own order, with their sort keys (unique: each ends with
    the job id) and what the fair-share merge reads of each, in lists beside them."""

    __slots__ = ("ests", "gpus", "ids", "jobs", "keys", "tags")

    def __init__(self, keys: list[tuple], jobs: list[JobRequest], tag_of: Callable[[JobRequest], int] | None = None):
        self.keys = keys
        self.jobs = jobs
        # Machine integers: the ids the merge hands back (PolicyContext.out_ids) are then new objects made one after
        # another in queue order, read without a cache miss each by the passes that follow (the reasons, the record).
        self.ids = array("q", [j.id for j in jobs])
        self.gpus = [j.gpus for j in jobs]
        self.ests = array("d", map(_est_or_nan, jobs))  # for PolicyContext.out_ests
        self.tags = list(map(tag_of, jobs)) if tag_of is not None else []  # PolicyContext.tag_of, kept if given

    def insert(self, key: tuple, job: JobRequest, tag: int | None = None) -> None:
        i = bisect_left(self.keys, key)
        self.keys.insert(i, key)
        self.jobs.insert(i, job)
        self.ids.insert(i, job.id)
        self.gpus.insert(i, job.gpus)
        self.ests.insert(i, _est_or_nan(job))
        if tag is not None and len(self.tags) == len(self.jobs) - 1:
            self.tags.insert(i, tag)
        else:  # a line without tags keeps none
            self.tags = []

    def remove_many(self, keys: list[tuple], ids: set[int]) -> None:
        """Take out the jobs with these keys (their ids: `ids`). A removal from a long line moves the rest of it in
        each of its lists: after a round that placed thousands, jobs next to each other go in one cut, and where the
        cuts are many the lists are copied once without them (found by one pass over the ids)."""
        if len(keys) * 8 < len(self.ids):
            places = sorted(map(bisect_left, repeat(self.keys), keys))
        else:
            places = list(compress(count(), map(ids.__contains__, self.ids)))
        cuts: list[tuple[int, int]] = []  # [start, end) of each run of places next to each other
        for i in places:
            if cuts and cuts[-1][1] == i:
                cuts[-1] = (cuts[-1][0], i + 1)
            else:
                cuts.append((i, i + 1))
        if len(cuts) > _MOST_CUTS:
            # The runs kept between the cuts, joined by slices: a copy of each list, and of the machine arrays a
            # block at a time where a filter of them converts each number.
            runs: list[tuple[int, int]] = []
            at = 0
            for a, b in cuts:
                if a > at:
                    runs.append((at, a))
                at = b
            if at < len(self.ids):
                runs.append((at, len(self.ids)))
            self.keys = _joined(self.keys, runs, [])
            self.jobs = _joined(self.jobs, runs, [])
            self.ids = _joined(self.ids, runs, array("q"))
            self.gpus = _joined(self.gpus, runs, [])
            self.ests = _joined(self.ests, runs, array("d"))
            if self.tags:
                self.tags = _joined(self.tags, runs, [])
            return
        lists = [self.keys, self.jobs, self.ids, self.gpus, self.ests]
        if self.tags:
            lists.append(self.tags)
        for a, b in reversed(cuts):
            for lst in lists:
                del lst[a:b]


def _joined(seq, runs: list[tuple[int, int]], out):
    """`out` extended by the slices [a, b) of `seq`, in order."""
    for a, b in runs:
        out += seq[a:b]
    return out


def _est_or_nan(job: JobRequest) -> float:
    est = job.est_runtime_s
    return _NAN if est is None else est


def _lines(jobs: list[JobRequest], line_of, within, with_keys: bool, tag_of=None) -> dict[tuple, Line]:
    """Each line's jobs (`line_of`: (priority, tenant)) in its own order, with their sort keys when `with_keys` and
    their tags when `tag_of`."""
    grouped: dict[tuple[int, str], list[JobRequest]] = {}
    for j in jobs:
        lk = line_of(j)
        lst = grouped.get(lk)
        if lst is None:
            grouped[lk] = [j]
        else:
            lst.append(j)
    lines = {}
    for lk, lst in grouped.items():
        lst.sort(key=within)
        lines[lk] = Line([within(j) for j in lst] if with_keys else [], lst, tag_of)
    return lines


class LasPolicy:
    name = "las"

    def __init__(self, queue_limits: tuple[float, ...] = (3600.0, 36000.0, 360000.0), respect_priority: bool = True):
        self.queue_limits = tuple(sorted(queue_limits))
        self.respect_priority = respect_priority

    def queue_of(self, attained_gpu_s: float) -> int:
        for i, limit in enumerate(self.queue_limits):
            if attained_gpu_s < limit:
                return i
        return len(self.queue_limits)

    def order(self, jobs: list[JobRequest], ctx: PolicyContext) -> list[JobRequest]:
        tenants = ctx.tenants
        if self.respect_priority:
            return sorted(
                jobs,
                key=lambda j: (-effective_priority(j, tenants), self.queue_of(j.attained_gpu_s), j.queue_seq, j.id),
            )
        return sorted(jobs, key=lambda j: (self.queue_of(j.attained_gpu_s), j.queue_seq, j.id))


POLICIES: dict[str, type] = {
    FifoPolicy.name: FifoPolicy,
    PriorityFairSharePolicy.name: PriorityFairSharePolicy,
    LasPolicy.name: LasPolicy,
}


def policy_by_name(name: str) -> QueuePolicy:
    try:
        return POLICIES[name]()
    except KeyError:
        raise KeyError(f"unknown queue policy {name!r}; known: {', '.join(POLICIES)}") from None
