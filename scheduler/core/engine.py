"""One scheduling round: `schedule(snapshot, policy=None) -> Decisions`. PURE (no Django, no I/O).

Phases (each timed in `Decisions.stats["ms"]`):
1. build      index the snapshot (`ClusterState`); the fabric index comes from `Snapshot.topology`
              or is built here.
2. failures   running jobs on unhealthy GPUs, down nodes or (multi-node) nodes off the fabric are
              requeued keeping their place in line, or failed when they opted out; their GPUs are
              released for this round.
3. order      the queue policy orders pending + requeued jobs (`queue_order`).
4. place      jobs in order. For each: validation (cached per equivalence class), backfill-off
              blocking, quota, then placement. Jobs of one equivalence class (same pool, shape, GPU
              constraints, sharing request, workload, dataset) that failed once this round fail again
              without a search: capacity only shrinks during this phase. A blocked job may preempt
              (bounded per round), else the top blocked job of its pool gets a backfill reservation;
              later jobs run ahead only around it. Every job left pending gets a reason.
5. migrate    the rebalance pass (`migration.plan_migrations`) on what is left.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from dataclasses import replace
from itertools import compress, count, islice, repeat, takewhile
from operator import add, attrgetter, is_not, itemgetter, le

from scheduler.core import reasons
from scheduler.core.backfill import HeldReservation, hold_reservation, plan_reservation
from scheduler.core.carry import RoundCarry
from scheduler.core.failures import broken_jobs
from scheduler.core.migration import plan_migrations
from scheduler.core.placement import JobCtx, Placer
from scheduler.core.policies import (
    PolicyContext,
    PriorityFairSharePolicy,
    QueuePolicy,
    ServiceRank,
    effective_priority,
)
from scheduler.core.preemption import VictimClasses, block_gpus, plan_preemption, unblock_gpus
from scheduler.core.quotas import QuotaBook, QuotaVerdict
from scheduler.core.state import ClusterState
from scheduler.core.topology import LEVEL_POD_GROUP, build_topology
from scheduler.core.types import Decisions, JobRequest, PendingReasons, Preemption, Reservation, Snapshot

DEFAULT_POLICY = PriorityFairSharePolicy()
_RESERVATION_TRIES = 4  # reservation plans per pool and round (each walks the pool's running jobs)
# How far a turn of the placement loop changed what other turns read: nothing, its tenant's quota and its pool's
# capacity, its pool, every pool (_Round._place_all's `forget`).
_CHANGED_NOTHING, _CHANGED_TENANT, _CHANGED_POOL, _CHANGED_ALL = range(4)
_MAX_TURN_SIGNATURES = 1 << 16  # a carry's table of turn signatures starts again beyond this many


# Jobs with equal keys are interchangeable for placement: the equivalence class. The first fields
# decide whether (and where) a job fits at all; the last ones only change its scores.
FEASIBILITY_FIELDS = (
    "pool",
    "sharing",
    "gpus",
    "nodes",
    "gpus_per_node",
    "gpu_model",
    "gpu_memory_mib",
    "mps_compute_pct",
    "mps_memory_mib",
    "mig_profile",
    "require",
)
COST_FIELDS = ("workload", "dataset_node", "allreduce_bytes", "step_compute_s", "io_bytes_per_step")
CLASS_FIELDS = FEASIBILITY_FIELDS + COST_FIELDS
_FEAS = attrgetter(*FEASIBILITY_FIELDS)
_COST = attrgetter(*COST_FIELDS)
_EST = attrgetter("est_runtime_s")
_ID = attrgetter("id")
_PREEMPTED_FOR = attrgetter("preempted_for")
_REQ_PREEMPTED_FOR = attrgetter("request.preempted_for")
_FIRST, _SECOND = itemgetter(0), itemgetter(1)
_NAN, _NINF = float("nan"), float("-inf")


def need_equiv(ctx: JobCtx) -> float:
    """GPU-equivalents the job takes from its tenant's quota."""
    n = ctx.n
    if ctx.sharing == "mps":
        return n * ctx.mps_pct / 100.0
    if ctx.sharing == "mig":
        prof = ctx.parts[0].profiles.get(ctx.mig_profile or "")
        return n * (prof.compute_fraction if prof else 1.0)
    if ctx.sharing == "timeslice":
        return n / max(p.replicas for p in ctx.parts)
    return float(n)


class _Round:
    remember_turns = True  # False: no turn stands for another (tests check that the decisions are the same)
    # Runs of remembered turns read each job's estimate once more than this share of the queue might end before its
    # pool's earliest reservation; below it, a run ends at each of them (_place_all). Tests set it to take each way.
    short_runs_share = 0.125

    def __init__(self, snapshot: Snapshot, policy: QueuePolicy | None, carry: RoundCarry | None = None) -> None:
        self.snap = snapshot
        self.carry = carry
        self.cfg = snapshot.config
        self.policy = policy or DEFAULT_POLICY
        self.dec = Decisions()
        self._victims: VictimClasses | None = None
        self._borrowers: dict[int, set[str]] = {}  # pool -> tenants with a borrowed running job there (place phase)
        self._vinfo: dict[int, tuple] | None = None  # what preemption reads of each preemptible running job
        # Victims per node by what decides who may be one (see _preempt): jobs of many shapes try alike.
        self._by_node: dict[tuple, tuple[dict, dict, dict[int, float]]] = {}
        self.started: dict[int, tuple[float, list]] = {}  # placed this round: job id -> (expected end, shares)
        self.ms: dict[str, float] = {}
        self.counters: dict[str, int] = {
            "pending": 0,
            "placed": 0,
            "placed_backfill_window": 0,
            "class_skips": 0,
            "searches": 0,
            "invalid": 0,
            "quota_blocked": 0,
            "preemption_attempts": 0,
            "victims": 0,
            "reservations": 0,
            "claims": 0,  # beneficiaries of earlier preemptions with GPUs freed for them
            "claims_started": 0,
            "claims_dropped": 0,  # their victims are gone and they still could not start
            "min_run_protected": 0,  # preemptions held back by Config.preemption_min_run_s
            "leaf_waits": 0,  # multi-node jobs that wait for one leaf rather than start across leaves
            "left_for_next_round": 0,  # waiting jobs without a turn: the round placed its limit (a round follows)
        }
        self._min_run_wait: dict[int, float] = {}  # job -> seconds until the victims it needs may be preempted
        self._claim_blocks: list = []  # claimed GPUs blocked at the end of the placement phase
        self._said: list[str | None] = []  # Decisions.queue_reasons, filled by the placement loop
        self._turned: list[int] = []  # the places in it of the jobs whose turn was taken (not remembered)

    # ------------------------------------------------------------------ phases

    def run(self) -> Decisions:
        t_all = t = time.perf_counter()
        snap = self.snap
        topo = snap.topology if snap.topology is not None else build_topology(snap.fabric)
        # The last round's index, brought to this snapshot where only occupancy and load changed (ClusterState.
        # advance): the same index a build gives, for the nodes this round changed and the last one touched.
        kept = self.carry.state if self.carry is not None else None
        if kept is not None:
            self.carry.state = None  # until this round ends well
        self.state = st = kept if kept is not None and kept.advance(snap, topo) else ClusterState(snap, topo)
        self.placer = Placer(st)
        self.tenants = {tn.name: tn for tn in snap.tenants}
        # Each tenant's priority cap, for effective_priority inlined where thousands of jobs ask it.
        self.maxp = {name: t.max_priority for name, t in self.tenants.items()}
        t = self._lap("build", t)

        requeued = self._failures()
        self.book = QuotaBook(snap.tenants, st.pools, self.cfg)
        running_gpus: dict[str, float] = {}
        job_equiv, running, charge = st.job_equiv, st.running, self.book.charge
        for jid in st.job_gpus:
            req = running[jid].request
            eq = job_equiv[jid]
            charge(req.tenant, req.pool, eq)
            running_gpus[req.tenant] = running_gpus.get(req.tenant, 0.0) + eq
        t = self._lap("failures", t)

        # The jobs waiting this round, each once (a requeued job may be listed as pending too).
        id_list = list(map(_ID, snap.pending))
        seen = set(id_list)
        if len(seen) == len(snap.pending):
            pending = list(snap.pending)
        else:
            id_list = None
            seen, pending = set(), []
            for job in snap.pending:
                if job.id not in seen:
                    seen.add(job.id)
                    pending.append(job)
        for job in requeued:
            if job.id not in seen:
                seen.add(job.id)
                pending.append(job)
                if id_list is not None:
                    id_list.append(job.id)
        self.waiting_ids = seen
        cfg = self.cfg
        self.service = (
            ServiceRank(cfg.service_quantum_gpu_s, cfg.service_base, cfg.service_levels, cfg.service_aging_s)
            if cfg.service_order
            else None
        )
        # The jobs whose per-job values are worked out this round: all of them, or with a carry the new ones.
        carry = self.carry
        self.changed = pending
        if carry is not None:
            self.changed = carry.begin(pending, seen, self._carry_signature(), id_list)
        # Every job's service sort key, once: the policy orders by it and the placement loop reads its level.
        self.service_keys = None
        if self.service is not None:
            keys = self.service.sort_keys(self.changed, snap.now)
            if carry is not None:
                carry.service_keys.update(keys)
                keys = carry.service_keys
            self.service_keys = keys
        tid_of = self._number_turns(pending)
        pctx = PolicyContext(
            self.tenants,
            running_gpus,
            cfg.fairshare_horizon_h,
            snap.now,
            self.service,
            self.service_keys,
            carry,
            self.changed if carry is not None else None,
            tag_of=(lambda j: tid_of[j.id]) if carry is not None else None,
            jobs_out=False,
        )
        ordered = self.policy.order(pending, pctx)
        self.dec.queue_order = pctx.out_ids if pctx.out_ids is not None else [j.id for j in ordered]
        # The jobs by id: the loop reads only the few thousand whose turn it takes, in queue order.
        if carry is not None:
            self.job_of = carry.jobs  # the round's waiting jobs (RoundCarry.begin)
        else:
            self.job_of = dict(zip(id_list if id_list is not None else map(_ID, pending), pending, strict=True))
        # Every job's turn number in queue order, from the policy when it kept them beside the jobs: read by id in
        # queue order instead, each is a cache miss (the queue's order is not the jobs' order in memory).
        self.ests_of = pctx.out_ests  # each job's estimate in queue order (nan: none), on call
        self.tids = pctx.out_tags if pctx.out_tags is not None else list(map(tid_of.__getitem__, self.dec.queue_order))
        self.counters["pending"] = len(self.dec.queue_order)
        t = self._lap("order", t)

        self._place_all(pending)
        t = self._lap("place", t)

        placed_ids = {p.job_id for p in self.dec.placements}
        said, order, reasons_out = self._said, self.dec.queue_order, self.dec.pending_reasons
        for k in self._turned:
            jid = order[k]
            said[k] = None if jid in placed_ids else reasons_out.get(jid, "")
        self.dec.queue_reasons = said
        # The reasons by id for those who read them (tests, tools): the round's record reads them in queue order.
        self.dec.pending_reasons = PendingReasons(order, said, self._turned, reasons_out)
        # A job preempted for one still waiting is not moved back onto the GPUs freed for it either.
        waiting = self.waiting_ids  # less the placed: not a set of 46,000 made for the few preempted for someone
        kept_off = {}
        running = st.running
        # A C pass over the running jobs, of which few were preempted for someone.
        for jid, rj in compress(running.items(), map(is_not, map(_REQ_PREEMPTED_FOR, running.values()), repeat(None))):
            req = rj.request
            b = req.preempted_for
            if b is not None and req.preempted_gpus and b in waiting and b not in placed_ids:
                kept_off[jid] = req.preempted_gpus
        # A round that stopped at its limit leaves free GPUs to the jobs still waiting their turn, not to moves.
        if not self.counters["left_for_next_round"]:
            migrations, mc = plan_migrations(self.placer, placed_ids, kept_off)
            self.dec.migrations.extend(migrations)
            self.counters.update(mc)
        unblock_gpus(st, self._claim_blocks)
        t = self._lap("migrate", t)

        if self.carry is not None:
            self.carry.state = st
        self.ms["total"] = round((time.perf_counter() - t_all) * 1000, 3)
        self.dec.stats = {
            **self.counters,
            "migrations": len(self.dec.migrations),
            "preemptions": len(self.dec.preemptions),
            "requeues": len(self.dec.requeues),
            "failures": len(self.dec.failures),
            "evaluations": self.placer.evaluations,
            "policy": getattr(self.policy, "name", type(self.policy).__name__),
            # Waiting jobs worked out afresh this round: all of them without a carry, else the new or changed.
            "jobs_worked_out": len(self.changed),
            "ms": self.ms,
            "warnings": st.warnings,
            **st.stats(),
        }
        return self.dec

    def _carry_signature(self) -> tuple:
        """What the carry's kept values depend on besides the jobs themselves (scheduler.core.carry)."""
        cfg = self.cfg
        return (
            type(self.policy),
            getattr(self.policy, "name", None),
            cfg.service_order,
            cfg.service_preemption,
            cfg.service_quantum_gpu_s,
            cfg.service_base,
            cfg.service_levels,
            cfg.service_aging_s,
            # The clock only while aging is on: a waiting job's key then moves with it.
            self.snap.now if cfg.service_aging_s > 0 else None,
            tuple(sorted((t.name, t.max_priority) for t in self.snap.tenants)),
        )

    def _lap(self, name: str, t: float) -> float:
        now = time.perf_counter()
        self.ms[name] = round((now - t) * 1000, 3)
        return now

    def _failures(self) -> list[JobRequest]:
        st = self.state
        requeued: list[JobRequest] = []
        for rj, why in broken_jobs(st):
            jid = rj.request.id
            if not rj.request.movable:
                continue  # another scheduler's job (observed): its own scheduler decides; it keeps its GPUs here
            if rj.request.requeue_opt_out:
                self.dec.failures.append((jid, reasons.failed(why)))
            else:
                self.dec.requeues.append((jid, reasons.requeued(why)))
                # It waits again with all the service it has had (its current run's too), as its record will say.
                req = rj.request
                requeued.append(replace(req, attained_gpu_s=rj.attained_at(st.now)) if rj.serving_since else req)
            st.release_job(jid)
            st.drop_running(jid)
        return requeued

    # ------------------------------------------------------------------ placement loop

    def _place_all(self, pending: list[JobRequest]) -> None:
        """Each waiting job's turn in queue order (`dec.queue_order`; `pending`: the same jobs in the snapshot's
        order, for passes over all of them)."""
        st, placer, cfg, dec = self.state, self.placer, self.cfg, self.dec
        now = st.now
        check_quota = self.book.check
        maxp = self.maxp
        big = 1 << 62
        reasons_out = dec.pending_reasons
        ctx_cache: dict[tuple, tuple[JobCtx | None, str | None, float]] = {}  # by feasibility key
        ctx_cost: dict[tuple, tuple] = {}  # the cost fields the cached context was priced with
        priced: dict[tuple, JobCtx] = {}  # (feasibility key, cost fields) -> context priced for them
        fail_cache: dict[tuple, str] = {}
        preempt_fail: set[tuple] = set()
        min_run_note: dict[tuple, float] = {}  # preemption class -> wait until its victims have run their minimum
        pool_res: dict[int, list[HeldReservation]] = {}
        borrowing_res: set[int] = set()  # reserved jobs that would start on borrowed GPUs
        res_start: dict[int, float] = {}  # earliest reserved start per pool
        res_tried: dict[int, int] = {}  # reservation plans tried per pool (bounded: a plan walks the pool)
        res_tried_keys: set[tuple] = set()
        pool_blocker: dict[int, int] = {}
        leaf_waits: dict[tuple, int | None] = {}  # shape -> the job that chose to wait for one leaf (None: cross)
        leaf_held: set[int] = set()  # jobs holding a leaf's GPUs while they wait for it
        # Multi-node jobs waiting per pool: rings that would cross a busy leaf's uplinks too (the leaf wait).
        max_g = {pid: max((p.G for p in parts), default=0) for pid, parts in st.pool_parts.items()}
        turns, tids = list(self.turn_table), self.tids
        multi_waiting: dict[int, int] = {}
        for tid, n in self.turn_count.items():
            if not n:
                continue
            pool, _, gpus, nodes = turns[tid][0][:4]  # FEASIBILITY_FIELDS begin pool, sharing, gpus, nodes
            if (nodes or 1) > 1 or (nodes is None and gpus > max_g.get(pool, 0)):
                multi_waiting[pool] = multi_waiting.get(pool, 0) + n
        counters = self.counters
        backfill = cfg.backfill
        # Who could be preempted at all, per pool: a job at or below the lowest victim priority, with no
        # borrowed jobs of other tenants to reclaim, does not try (the common case once the pool is full).
        # Least attained service between equals: per (tenant, pool, priority) the highest service level of a
        # running job that could give way to a job of its own line (none: nobody tries).
        min_victim: dict[int, int] = {}
        borrowers: dict[int, set[str]] = {}
        svc_max: dict[tuple, int] = {}
        svc = self.service if cfg.service_preemption else None
        stopping = st.stopping
        most: dict[tuple, float] = {}  # (tenant, pool, priority) -> the most service one of its jobs has had
        for jid, rj in st.running.items():
            req = rj.request
            if not req.preemptible or jid in stopping:
                continue
            p, m = req.priority, maxp.get(req.tenant, big)  # effective_priority, inlined: 6,000 running jobs
            if m < p:
                p = m
            if p < min_victim.get(req.pool, big):
                min_victim[req.pool] = p
            if rj.borrowed:
                borrowers.setdefault(req.pool, set()).add(req.tenant)
            if svc is not None:
                k3 = (req.tenant, req.pool, p)
                a = rj.attained_at(now)
                if a > most.get(k3, -1.0):
                    most[k3] = a
        if svc is not None:  # a level never falls as service grows: the highest is the level of the most service
            svc_max = {k3: svc.level_at(a) for k3, a in most.items()}
        self._borrowers = borrowers
        stopping_before = set(st.stopping)
        stopping_checked: set[tuple] = set()

        # The levels the queue was ordered by (ServiceRank.sort_keys); not shared when a base <= 1 makes
        # sort_keys and level() part ways.
        own_keys = self.service_keys if svc is not None and svc.base > 1 else None

        def service_floor(job: JobRequest, prio: int) -> int | None:
            """The service level a running job of this job's own line must be at to give way to it."""
            if svc is None:
                return None
            top = svc_max.get((job.tenant, job.pool, prio))
            if top is None:
                return None
            k = own_keys.get(job.id) if own_keys is not None else None
            # The queue's sort key starts with the level the job is at, 0 when it starves: the same sum.
            floor = (k[0] if k is not None else 0 if svc.starving(job, now) else svc.level(job)) + 1
            return floor if top >= floor else None

        max_attempts, max_victims = cfg.max_preemption_attempts, cfg.max_victims_per_round

        def preempt_budget() -> bool:
            """The round may still try a preemption."""
            return counters["preemption_attempts"] < max_attempts and counters["victims"] < max_victims

        reach = _CHANGED_NOTHING  # how far the last turn changed what turns read (`forget`)

        def process(job: JobRequest, cacheable: bool, key: tuple) -> tuple[str, str | None] | None:
            """One job's turn. `cacheable`: its outcome may stand for its equivalence class (False for a
            job kept off some GPUs, which fails where its class would not); `key`: its feasibility key.

            Returns (its reason, the counter it added one to) when its turn changed nothing but its own
            reason and that counter: no search, preemption try, reservation or blocker. Until a later turn
            changes something, a job alike in everything the turn read (its turn signature, `_number_turns`, and
            whether it would end before its pool's earliest reservation) ends the same. Otherwise it sets how far
            its change reached (`reach`)."""
            nonlocal reach
            reach = _CHANGED_NOTHING
            jid = job.id
            note: float | None = None  # seconds until a victim it needs has run its minimum time
            entry = ctx_cache.get(key)
            if entry is None:
                c, e = placer.context(job)
                entry = ctx_cache[key] = (c, e, need_equiv(c) if c is not None else 0.0)
                ctx_cost[key] = _COST(job)
            ctx = entry[0]
            if ctx is None:
                reason = reasons_out[jid] = entry[1] or "invalid request"
                counters["invalid"] += 1
                return reason, "invalid"
            pool = job.pool
            if not backfill and pool in pool_blocker:
                reason = reasons_out[jid] = reasons.behind(pool_blocker[pool])
                return reason, None
            verdict = check_quota(job, entry[2])
            if not verdict.ok:
                reasons_out[jid] = verdict.reason
                counters["quota_blocked"] += 1
                # Its tenant's own longer jobs may give way to it (least attained service), while the round's
                # preemption budget lasts (checked first: once it is spent, most of a long queue comes this way).
                if svc is None or not preempt_budget():
                    return verdict.reason, "quota_blocked"
                p0 = job.priority
                prio0 = p0 if p0 <= maxp.get(job.tenant, big) else maxp.get(job.tenant, big)
                floor0 = service_floor(job, prio0)
                if floor0 is None:
                    return verdict.reason, "quota_blocked"
                res_list0 = pool_res.get(pool)
                # A try that failed stands for the jobs alike in what it read (as `preempt_fail` below): the
                # clones of a tenant over its quota would otherwise spend the round's whole budget on one answer.
                qkey = (key, prio0, True, job.tenant, floor0, len(res_list0) if res_list0 else 0)
                if qkey in preempt_fail:
                    note0 = min_run_note.get(qkey)
                    if note0 is None:
                        return verdict.reason, "quota_blocked"
                    reason = reasons_out[jid] = reasons.min_run_wait(verdict.reason or "", note0)
                    return reason, "quota_blocked"
                counters["preemption_attempts"] += 1
                avoid0 = {g for r in res_list0 for g in r.gpu_ids} if res_list0 else frozenset()
                msg = self._preempt(job, ctx, verdict, prio0, avoid0, floor0, entry[2])
                if msg is not None:
                    reasons_out[jid] = msg
                    if not backfill:
                        pool_blocker.setdefault(pool, jid)
                    reach = _CHANGED_ALL
                    return None
                note0 = self._min_run_wait.pop(jid, None)
                if note0 is not None:
                    reasons_out[jid] = reasons.min_run_wait(verdict.reason or "", note0)
                if cacheable:
                    preempt_fail.add(qkey)
                    if note0 is not None:
                        min_run_note[qkey] = note0
                return None
            res_list = pool_res.get(pool)
            if res_list:
                est = job.est_runtime_s
                short = est is not None and now + est <= res_start[pool]
                fkey = (key, short, len(res_list))
            else:
                short = False
                fkey = key
            reason = fail_cache.get(fkey)
            trivial = reason is not None  # no search: the turn may still try a preemption or a reservation
            if trivial:
                counters["class_skips"] += 1
            else:
                counters["searches"] += 1
                ckey = (key, _COST(job))
                jctx = priced.get(ckey)
                if jctx is None:
                    jctx = priced[ckey] = ctx if _COST(job) == ctx_cost[key] else placer.reprice(ctx, job)
                ctx = jctx
                cand = placer.find(ctx)
                if cand is None and short:
                    for r in res_list:  # type: ignore[union-attr]
                        r.release(placer)
                    cand = placer.find(ctx)
                    if cand is not None:
                        self._place(job, ctx, cand, verdict)
                    for r in res_list:  # type: ignore[union-attr]
                        r.rehold(placer)
                    if cand is not None:
                        counters["placed_backfill_window"] += 1
                        reach = _CHANGED_TENANT
                        return None
                if cand is not None and cand.level >= LEVEL_POD_GROUP and cfg.leaf_wait and not ctx.require:
                    waited = self._leaf_wait(job, ctx, cand, leaf_waits, multi_waiting.get(pool, 0))
                    if waited is not None:
                        held, why = waited
                        reasons_out[jid] = why
                        if held is None:
                            # It waits behind the first of its shape, holding nothing: its search changed nothing,
                            # and a job alike ends the same (at 50,000 GPUs, 17,000 such jobs each searched again
                            # and made every turn of their pool be taken again: a 6 s round).
                            return why, "leaf_waits"
                        # Backfilled around like a reservation, not counted as one.
                        pool_res.setdefault(pool, []).append(held)
                        res_start[pool] = min(r.start_at for r in pool_res[pool])
                        leaf_held.add(jid)
                        reach = _CHANGED_POOL
                        return None
                if cand is not None:
                    self._place(job, ctx, cand, verdict)
                    reach = _CHANGED_TENANT
                    return None
                reason = placer.fail_reason(ctx)
                if res_list and not short:
                    blocking = self._reservation_blocks(ctx, res_list)
                    if blocking is not None:
                        reason = reasons.backfill_window(blocking)
                if cacheable:
                    fail_cache[fkey] = reason
            # Blocked: wait for jobs already stopping, preempt, or reserve.
            may_preempt = floor = None
            if preempt_budget():
                p = job.priority
                m = maxp.get(job.tenant, big)
                prio = p if p <= m else m
                may_preempt = prio > min_victim.get(pool, big)
                if not may_preempt and verdict.in_quota:
                    b = borrowers.get(pool)
                    may_preempt = bool(b) and (len(b) > 1 or job.tenant not in b)
                floor = service_floor(job, prio)
                if floor is not None:
                    may_preempt = True
            if may_preempt:
                if stopping_before and (key,) not in stopping_checked:
                    trivial = False
                    stopping_checked.add((key,))
                    counters["preemption_attempts"] += 1
                    cand = self._fits_after_stopping(ctx, stopping_before)
                    if cand is not None:
                        held = hold_reservation(placer, jid, now + cfg.preemption_grace_s, cand, pool)
                        dec.reservations.append(Reservation(jid, held.start_at, held.gpu_ids, held.nodes, "stopping"))
                        reasons_out[jid] = reasons.waiting_for_stopping(reason)
                        if not backfill:
                            pool_blocker.setdefault(pool, jid)
                        reach = _CHANGED_POOL
                        return None
                pkey = (key, prio, verdict.in_quota, job.tenant, floor)
                if pkey not in preempt_fail:
                    trivial = False
                    counters["preemption_attempts"] += 1
                    # A job that may not delay the pool's reservations may not take their planned GPUs either,
                    # except a reclaim within quota from a reservation that would start on borrowed GPUs.
                    avoid = (
                        {g for r in res_list if not (verdict.in_quota and r.job_id in borrowing_res) for g in r.gpu_ids}
                        if res_list and not short
                        else frozenset()
                    )
                    msg = self._preempt(job, ctx, verdict, prio, avoid, floor)
                    if msg is not None:
                        reasons_out[jid] = msg
                        if not backfill:
                            pool_blocker.setdefault(pool, jid)
                        reach = _CHANGED_ALL
                        return None
                    note = self._min_run_wait.pop(jid, None)
                    if cacheable:
                        preempt_fail.add(pkey)
                        if note is not None:
                            min_run_note[pkey] = note
                else:
                    note = min_run_note.get(pkey)
            if backfill:
                lst = pool_res.setdefault(pool, [])
                tried = res_tried.get(pool, 0)
                if (  # cheapest test first: most jobs reach here after their pool's tries are spent
                    tried < _RESERVATION_TRIES
                    and key not in res_tried_keys
                    and not reason.startswith("waiting for reserved")
                    and sum(1 for r in lst if r.job_id not in leaf_held) < cfg.reservations_per_pool
                ):
                    trivial = False
                    reach = _CHANGED_POOL
                    res_tried[pool] = tried + 1
                    res_tried_keys.add(key)
                    planned = plan_reservation(placer, ctx, self.started)
                    if planned is not None:
                        start_at, cand = planned
                        held = hold_reservation(placer, jid, start_at, cand, pool)
                        lst.append(held)
                        if verdict.borrowed:
                            borrowing_res.add(jid)
                        res_start[pool] = min(r.start_at for r in lst)
                        dec.reservations.append(Reservation(jid, start_at, held.gpu_ids, held.nodes))
                        counters["reservations"] += 1
                        reason = reasons.reserved(reason, start_at - now)
            elif pool not in pool_blocker:
                trivial = False
                reach = _CHANGED_POOL
                pool_blocker[pool] = jid
            reason = reasons_out[jid] = reason if note is None else reasons.min_run_wait(reason, note)
            return (reason, "class_skips") if trivial else None

        # No thrashing (docs/scheduler.md): the beneficiaries of earlier preemptions have first call on the
        # GPUs freed for them, and nobody else takes those while they wait for victims still stopping.
        job_of = self.job_of
        claims, waits, kept_off = self._claims(pending)
        blocked = {b: block_gpus(st, gids) for b, gids in claims.items()}
        counters["claims"] = len(claims)
        early: set[int] = set()  # claimants whose turn this was
        queue = dec.queue_order
        for job in map(job_of.__getitem__, compress(queue, map(claims.__contains__, queue))) if claims else ():
            jid = job.id
            unblock_gpus(st, blocked.pop(jid))
            outcome = self._claimant(job, waits.get(jid, ()), stopping_before)
            if outcome is None:  # all its victims are gone and it still cannot start: the GPUs are nobody's
                counters["claims_dropped"] += 1
                continue
            early.add(jid)
            if outcome == "waiting":  # nobody else waits for (or reserves) the GPUs still being freed for it
                blocked[jid] = block_gpus(st, claims[jid])
        started = self.started
        # Turns that changed nothing, by what they read: most of a long queue waits behind a full cluster, and
        # a job alike in all of it to one of them gets its reason and counter without the turn. A turn that
        # changed something says how far (`reach`), and the remembered turns it may have changed are forgotten:
        # - a placement: its pool's capacity and its tenant's quota there. A remembered turn read capacity only when
        #   it waited for one leaf (the others failed a search, whose answer stands for the round, or never searched);
        #   its tenant's turns of that pool read the quota;
        # - a reservation, a held leaf or a pool's blocker: its pool (reservations and the class caches are per pool);
        # - a preemption: every pool's turns (its victims' tenants' quotas, the round's budget);
        # - a search that failed, or a preemption try that did: nothing another turn read, but the round's budget,
        #   which every pool's turns read once it is spent.
        ended: dict[int, tuple[str, str | None]] = {}
        remember = self.remember_turns
        pool_of = [t[0][0] for t in turns]
        tenant_of = [t[1] for t in turns]  # the turn signature's tenant (_number_turns)
        # The signatures remembered since they last forgot, per pool and tenant (None: those that waited for a leaf):
        # forgetting costs what was remembered, not a walk of every pool's turns (a round that fills the cluster
        # forgets after each of thousands of placements).
        ended_in: dict[int, dict[str | None, list[int]]] = {}
        # What runs read (see below): the remembered turns of the turn numbers none of whose jobs might end before its
        # pool's earliest reservation, by their signature without the reservation bit.
        bulk: dict[int, tuple[str, str | None]] = {}

        def forget(pool: int, tenant: str, before: int) -> None:
            """After a turn of `pool` and `tenant` that changed something (as far as `reach` says); `before`: the
            round's preemption tries before it."""
            if reach == _CHANGED_ALL or (counters["preemption_attempts"] != before and not preempt_budget()):
                ended.clear()
                ended_in.clear()
                bulk.clear()
                return
            if reach == _CHANGED_POOL:
                per = ended_in.pop(pool, None)
                lists = per.values() if per else ()
            elif reach == _CHANGED_TENANT:
                per = ended_in.get(pool)
                lists = (per.pop(tenant, ()), per.pop(None, ())) if per else ()
            else:
                return
            for sigs in lists:
                for s in sigs:
                    ended.pop(s, None)
                    bulk.pop(s, None)

        # Each job's reason in queue order beside the dict (Decisions.queue_reasons): a remembered turn's here, the
        # others' (`turned`, by place) once the round has placed what it places.
        said: list[str | None] = []
        say = said.append
        turned = self._turned = []
        self._said = said
        ids = dec.queue_order
        n = len(ids)
        # The places whose turn is never one remembered: the claimants and the victims kept off GPUs (then n).
        forced = list(compress(count(), map(early.union(kept_off).__contains__, ids))) if early or kept_off else []
        forced.append(n)
        fk = 0
        stop = forced[0]
        # Runs of remembered turns are read by C passes, not a Python step a job (see _remembered_run), by each place's
        # signature without its reservation bit. Per turn number: its pool's earliest reservation where one of its
        # jobs might end before it (now + the least estimate among them, `turn_floor`, would), else -inf; `maybe`: the
        # waiting jobs of such turn numbers. While they are few, a run ends at each of them (`bulk` holds none of
        # theirs) and the loop works out its bit; when many, runs read the bit from each job's estimate in queue
        # order (nan without one), which costs a permutation of 46,000 and three more C steps a place.
        dbl = list(map(add, tids, tids))
        ests: list[float] | None = None
        starts = [_NINF] * len(turns)
        maybe, many = 0, int(n * self.short_runs_share)
        count_of = self.turn_count
        floor = self.turn_floor
        by_pool: dict[int, list[int]] = {}  # pool -> its turn numbers, made at the round's first reservation
        res_seen: dict[int, float] = {}

        def follow_reservations() -> None:
            """After a turn that moved a pool's earliest reservation (only a turn does), before anything reads them: the
            pool's turn numbers' starts, the count of jobs that might end before one, and what runs may read."""
            nonlocal maybe, res_seen
            if not by_pool:
                for t, p in enumerate(pool_of):
                    by_pool.setdefault(p, []).append(t)
            for p, r in res_start.items():
                if res_seen.get(p) == r:
                    continue
                for t in by_pool.get(p, ()):
                    f = floor.get(t)
                    was = starts[t] != _NINF
                    starts[t] = r if f is not None and now + f <= r else _NINF
                    if starts[t] == _NINF:
                        if was:
                            maybe -= count_of.get(t, 0)
                            if t + t in ended:
                                bulk[t + t] = ended[t + t]
                    elif not was:
                        maybe += count_of.get(t, 0)
                        bulk.pop(t + t, None)
            res_seen = dict(res_start)

        outs: list[tuple[str, str | None]] = []  # the outcomes the runs read, counted once the loop ends
        limit = cfg.max_placements_per_round or n + 1
        i = n if counters["placed"] >= limit else 0  # the claimants alone reached the round's limit
        while i < n:
            if res_start != res_seen:  # the last turn moved a pool's earliest reservation (or held a leaf)
                follow_reservations()
            jid, tid = ids[i], tids[i]
            if i == stop:
                fk += 1
                stop = forced[fk]
                if jid in early:
                    turned.append(i)
                    say(None)
                    i += 1
                    continue
                off = kept_off.get(jid)
                if off is not None and off[0] not in started:  # a victim, while its beneficiary waits
                    turned.append(i)
                    say(None)
                    tries = counters["preemption_attempts"]
                    blocks = block_gpus(st, off[1])
                    changed = process(job_of[jid], False, turns[tid][0]) is None
                    if changed:
                        forget(pool_of[tid], tenant_of[tid], tries)
                    unblock_gpus(st, blocks)
                    i += 1
                    if changed and counters["placed"] >= limit:
                        break
                    continue
            # What the turn reads: the job's turn signature (`_number_turns`) and whether it would end before its
            # pool's earliest reservation (-inf where none of its turn number's jobs might).
            sig = tid + tid
            start = starts[tid]
            if start != _NINF:
                est = job_of[jid].est_runtime_s
                if est is not None and now + est <= start:
                    sig += 1
            hit = ended.get(sig)
            if hit is not None:
                say(hit[0])
                if hit[1] is not None:
                    counters[hit[1]] += 1
                i += 1
                if i < stop:  # the remembered turns right after it, up to the next place never remembered
                    if maybe > many:
                        if ests is None:
                            ests = (
                                self.ests_of()
                                if self.ests_of is not None
                                # a policy without them
                                else [_NAN if e is None else e for e in map(_EST, map(job_of.__getitem__, ids))]
                            )
                        run = _remembered_run(ended, dbl, i, stop, (now, ests, starts, tids))
                    else:
                        run = _remembered_run(bulk, dbl, i, stop, None)
                    if run:
                        m = len(run)
                        said.extend(map(_FIRST, run))
                        outs.extend(run)
                        i += m
                continue
            turned.append(i)
            say(None)
            tries = counters["preemption_attempts"]
            out = process(job_of[jid], True, turns[tid][0])
            if out is None:
                forget(pool_of[tid], tenant_of[tid], tries)
                if counters["placed"] >= limit:
                    i += 1
                    break
            elif remember:
                ended[sig] = out
                who = tenant_of[tid] if out[1] != "leaf_waits" else None
                ended_in.setdefault(pool_of[tid], {}).setdefault(who, []).append(sig)
                if sig == tid + tid and starts[tid] == _NINF:
                    bulk[sig] = out
            i += 1
        if len(said) < n:
            self._leave_for_next_round(len(said), early)
        for counter, k in Counter(map(_SECOND, outs)).items():
            if counter is not None:
                counters[counter] += k
        self._claim_blocks = [b for bl in blocked.values() for b in bl]

    def _leave_for_next_round(self, first: int, early: set[int]) -> None:
        """The round started its limit of jobs (Config.max_placements_per_round): the jobs from place `first` on wait
        for the next round without a turn, but for the claimants whose turn came before the loop."""
        said, ids = self._said, self.dec.queue_order
        why = reasons.round_limit(self.cfg.max_placements_per_round)
        left = len(ids) - first
        said.extend(repeat(why, left))
        for k in compress(range(first, len(ids)), map(early.__contains__, islice(ids, first, None))) if early else ():
            self._turned.append(k)
            said[k] = None
            left -= 1
        self.counters["left_for_next_round"] = left

    def _number_turns(self, pending: list[JobRequest]) -> dict[int, int]:
        """Number every waiting job's turn signature: what its turn in the placement loop reads of it (feasibility
        class, tenant, preemptible, priority, and the service level its preemption floor starts from). Returns job
        id -> number; the signatures by number are `self.turn_table`. With a carry, only the round's new jobs are
        worked out."""
        svc = self.service if self.cfg.service_preemption else None
        own_keys = self.service_keys if svc is not None and svc.base > 1 else None
        now = self.snap.now
        carry = self.carry
        if carry is not None and len(carry.turn_table) <= _MAX_TURN_SIGNATURES:
            table, tid_of, per_sig, todo = carry.turn_table, carry.turn_ids, carry.turn_count, self.changed
            floor = carry.turn_floor
        else:
            table, tid_of, per_sig, todo, floor = {}, {}, {}, pending, {}
            if carry is not None:
                carry.turn_table, carry.turn_ids, carry.turn_count, carry.turn_floor = table, tid_of, per_sig, floor
        for job in todo:
            if svc is None:
                level = None
            elif own_keys is not None:
                level = own_keys[job.id][0]
            else:
                level = 0 if svc.starving(job, now) else svc.level(job)
            sig = (_FEAS(job), job.tenant, job.preemptible, job.priority, level)
            tid = table.get(sig)
            if tid is None:
                tid = table[sig] = len(table)
            tid_of[job.id] = tid
            per_sig[tid] = per_sig.get(tid, 0) + 1
            est = job.est_runtime_s
            if est is not None:
                f = floor.get(tid)
                if f is None or est < f:
                    floor[tid] = est
        # Waiting jobs per signature number (the carry's are kept as jobs come and go: RoundCarry.begin), and the
        # least estimate among them (kept as jobs come: a lower bound as they go, which is all the loop reads).
        self.turn_count, self.turn_floor = per_sig, floor
        if carry is not None and todo is pending:
            carry.retag(tid_of.__getitem__)  # the kept lines' numbers are from the table started again
        self.turn_table = table
        return tid_of

    def _claims(
        self, pending: list[JobRequest]
    ) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, tuple[int, tuple[int, ...]]]]:
        """What earlier preemptions left for this round, from the victims' records (`JobRequest.preempted_*`):
        * claims: waiting beneficiary -> GPUs freed (or being freed) for it: those of its victims that are
          still stopping, and of victims requeued within `Config.preemption_claim_s` of their preemption;
        * waits: beneficiaries with a victim still stopping -> those victims;
        * kept_off: waiting victim -> (its beneficiary, the GPUs it may not take while that one waits)."""
        st, cfg = self.state, self.cfg
        now = st.now
        waiting = self.waiting_ids
        claims: dict[int, set[int]] = {}
        waits: dict[int, list[int]] = {}
        kept_off: dict[int, tuple[int, tuple[int, ...]]] = {}
        # The waiting victims of earlier preemptions in queue order: C passes over the 50,000 waiting jobs in their
        # order in memory, of which few are, then over the queue's ids.
        if self.carry is not None:
            victims = {jid: self.job_of[jid] for jid in self.carry.victims}
        else:
            victims = {j.id: j for j in compress(pending, map(is_not, map(_PREEMPTED_FOR, pending), repeat(None)))}
        queue = self.dec.queue_order
        for j in map(victims.__getitem__, compress(queue, map(victims.__contains__, queue))) if victims else ():
            b = j.preempted_for
            if b == j.id or b not in waiting or not j.preempted_gpus:
                continue
            kept_off[j.id] = (b, j.preempted_gpus)
            if j.preempted_at is not None and now - j.preempted_at <= cfg.preemption_claim_s:
                claims.setdefault(b, set()).update(j.preempted_gpus)
        for jid in sorted(st.stopping):
            rj = st.running[jid]
            req = rj.request
            b = req.preempted_for
            # A record older than its last start is from an earlier preemption: this stop is another one.
            fresh = req.preempted_at is not None and req.preempted_at >= rj.started_at
            if b in waiting and req.preempted_gpus and fresh:
                claims.setdefault(b, set()).update(req.preempted_gpus)
                waits.setdefault(b, []).append(jid)
        return {b: sorted(g) for b, g in claims.items()}, waits, kept_off

    def _claimant(self, job: JobRequest, victims: list[int] | tuple[int, ...], stopping: set[int]) -> str | None:
        """A beneficiary of an earlier preemption, before the queue: "placed" on the GPUs freed for it (or
        better ones), "waiting" (with its placement held) when it fits once its victims still stopping are
        gone, None when it cannot start either way (quota, the cluster changed): then it takes its turn.
        `victims`: its victims still stopping; their quota is its (they leave for it), so the quota is checked
        without them, and a waiting claimant holds its own share of the quota from now on."""
        placer, cfg = self.placer, self.cfg
        ctx, _ = placer.context(job)
        if ctx is None:
            return None
        freed = self._refund(victims)
        need = need_equiv(ctx)
        verdict = self.book.check(job, need)
        if not verdict.ok:
            self._recharge(freed)
            return None
        cand = placer.find(ctx)
        if cand is not None:
            self._place(job, ctx, cand, verdict)
            self.counters["claims_started"] += 1
            return "placed"
        if not victims:
            return None
        reason = placer.fail_reason(ctx)
        cand = self._fits_after_stopping(ctx, stopping)
        if cand is None:
            self._recharge(freed)
            return None
        held = hold_reservation(placer, job.id, self.state.now + cfg.preemption_grace_s, cand, job.pool)
        self.dec.reservations.append(Reservation(job.id, held.start_at, held.gpu_ids, held.nodes, "stopping"))
        self.dec.pending_reasons[job.id] = reasons.waiting_for_stopping(reason)
        self.book.charge(job.tenant, job.pool, need)
        return "waiting"

    def _refund(self, victims) -> list[tuple[str, int, float]]:
        """Take stopping (or just preempted) jobs off their tenants' quota usage for the rest of the round."""
        st = self.state
        out = []
        for vid in victims:
            req = st.running[vid].request
            eq = sum(st.share_equiv(g, sh) for g, sh in st.job_gpus.get(vid, ()))
            self.book.refund(req.tenant, req.pool, eq)
            out.append((req.tenant, req.pool, eq))
        return out

    def _recharge(self, freed: list[tuple[str, int, float]]) -> None:
        for tenant, pool, eq in freed:
            self.book.charge(tenant, pool, eq)

    def _leaf_wait(self, job: JobRequest, ctx: JobCtx, cand, plans: dict[tuple, int | None], multi_waiting: int):
        """The cost model's choice for a multi-node job whose best placement now spans leaves: start now, or
        wait for one leaf (docs/scheduler.md, "Waiting for one leaf"). Waiting W (until enough running jobs
        end, by their estimates, for one leaf to hold it) costs the job W. Starting now costs its expected run
        time x (its slowdown across leaves - 1) for itself and for each ring it would share the leaves'
        uplinks with: the rings there now, or, when other multi-node jobs wait too, as many as the leaves
        have other hosts (they will cross as well), at the leaves' oversubscribed share then. It waits when
        W is the smaller, holding the leaf's free GPUs it will take (later jobs backfill around them as
        around a reservation). Returns (the held reservation, the reason), or None: start now. Jobs of one
        shape decide alike in a round: after the first, the others wait (holding nothing) or start as it did;
        at most `leaf_wait_plans` shapes are planned a round."""
        st, placer, cfg = self.state, self.placer, self.cfg
        key = _FEAS(job)
        if key in plans:
            first = plans[key]
            if first is None:
                return None
            self.counters["leaf_waits"] += 1
            return None, reasons.leaf_wait_behind(first)
        if len(plans) >= cfg.leaf_wait_plans:
            return None
        plans[key] = None
        leaf = placer.reprice(ctx, job)
        leaf.require = "leaf"
        planned = plan_reservation(placer, leaf, self.started)
        if planned is None:
            return None
        start_at, lcand = planned
        run_s = job.est_runtime_s if job.est_runtime_s is not None else cfg.default_runtime_s
        cost = self._cross_cost(ctx, cand, run_s, multi_waiting - 1)
        wait = start_at - st.now
        if wait >= cost:
            return None
        held = hold_reservation(placer, job.id, start_at, lcand, job.pool)
        self.dec.reservations.append(Reservation(job.id, start_at, held.gpu_ids, held.nodes, "leaf"))
        self.counters["leaf_waits"] += 1
        plans[key] = job.id
        where = st.group_label(lcand.picks[0][0].group) if lcand.picks else "one leaf"
        return held, reasons.leaf_wait(where, wait, cost)

    def _cross_cost(self, ctx: JobCtx, cand, run_s: float, others: int) -> float:
        """Seconds a placement across leaves costs its job and the rings that share its uplinks (see above)."""
        placer = self.placer
        topo = self.state.topo
        load = placer.ring_load()
        groups = {node.group for node, _ in cand.picks if node.group >= 0}
        sharing = max((load.on_group(g) for g in groups), default=0)
        slow = cand.slowdown
        if others > 0:
            room = max((len(topo.groups[g].hosts) - 1 for g in groups), default=0)
            sharing = min(room, sharing + others)
            slow = max(slow, placer.saturated_slowdown(ctx, cand))
        return max(0.0, slow - 1.0) * run_s * (1 + sharing)

    def _place(self, job: JobRequest, ctx: JobCtx, cand, verdict: QuotaVerdict) -> None:
        placement = self.placer.commit(job, ctx, cand, borrowed=verdict.borrowed)
        self.dec.placements.append(placement)
        # Jobs started this round end too: reservations computed later count them.
        est = job.est_runtime_s if job.est_runtime_s is not None else self.cfg.default_runtime_s
        gpus = self.state.gpus
        self.started[job.id] = (self.state.now + est, [(gpus[s.gpu_id], s) for s in placement.shares])
        self.book.charge(job.tenant, job.pool, need_equiv(ctx))
        self.counters["placed"] += 1

    def _reservation_blocks(self, ctx: JobCtx, res_list: list[HeldReservation]) -> int | None:
        """The reserved job whose held GPUs are all that keep this job from fitting now, if any."""
        st, placer = self.state, self.placer
        mark = st.journal()
        try:
            for r in res_list:
                r.release(placer)
            if placer.find(ctx) is not None:
                return res_list[0].job_id
            return None
        finally:
            st.rollback(mark)

    def _fits_now(self, ctx: JobCtx, avoid: frozenset[int] | set[int]) -> bool:
        """The job has a placement on GPUs free now, off the GPUs it must avoid."""
        if not avoid:
            return self.placer.find(ctx) is not None
        st = self.state
        mark = st.journal()
        try:
            block_gpus(st, avoid)
            return self.placer.find(ctx) is not None
        finally:
            st.rollback(mark)

    def _fits_after_stopping(self, ctx: JobCtx, stopping: set[int]):
        """The job's placement once the jobs that were already stopping at the snapshot are gone, if any:
        it then waits for them rather than preempting more."""
        st, placer = self.state, self.placer
        part_ids = {id(p) for p in ctx.parts}
        ids = [
            jid
            for jid in stopping
            if any(g.node.part is not None and id(g.node.part) in part_ids for g, _ in st.job_gpus.get(jid, ()))
        ]
        if not ids:
            return None
        mark = st.journal()
        try:
            for jid in ids:
                st.release_job(jid)
            return placer.find(ctx)
        finally:
            st.rollback(mark)

    def _preempt(
        self,
        job: JobRequest,
        ctx: JobCtx,
        verdict: QuotaVerdict,
        prio: int,
        avoid: frozenset[int] | set[int],
        service_floor: int | None = None,
        quota_need: float | None = None,
    ) -> str | None:
        """Preempt for `job`. `service_floor`: running jobs of its own tenant, pool and priority at this service
        level or above may give way too (least attained service), when their expected remaining time beats
        `service_preempt_pays` x their checkpoint and restart cost. `quota_need`: the job is blocked by its
        tenant's quota, so only such jobs may give way, and only if they free enough of it."""
        st, placer, cfg = self.state, self.placer, self.cfg
        if quota_need is not None and self._fits_now(ctx, avoid):
            # A quota swap gives way GPUs the job needs too: one that fits on free GPUs needs none of its own
            # jobs' GPUs, and waits for its quota (one search, not a victim plan per node that the check drops).
            return None
        svc = self.service
        move_s = cfg.restart_overhead_s
        pays = cfg.service_preempt_pays
        tenants = self.tenants
        running = st.running
        now = st.now
        min_run = cfg.preemption_min_run_s
        exempt = cfg.preemption_min_run_priority_exempt
        if self._vinfo is None:
            # Per preemptible running job, once a round: what `eligible` reads of it, and the jobs by those values.
            # The service one has had is worked out where a rule asks for it (by_service), not for each of thousands.
            maxp, big = self.maxp, 1 << 62
            vinfo = self._vinfo = {}
            for jid, rj in running.items():
                req = rj.request
                if req.preemptible:
                    p, m = req.priority, maxp.get(req.tenant, big)  # effective_priority, inlined
                    moved = rj.last_migrated_at
                    vinfo[jid] = (
                        p if p <= m else m,
                        rj.borrowed,
                        req.tenant,
                        req.pool,
                        rj.started_at if moved is None else max(rj.started_at, moved),
                        rj,
                    )
            self._victims = VictimClasses(st, self._vinfo, now, min_run)
        vinfo = self._vinfo
        in_quota, tenant, pool = verdict.in_quota, job.tenant, job.pool
        per_job = service_floor is not None and svc is not None

        def rule(vpool: int, vprio: int, borrowed: bool, vtenant: str) -> bool | None:
            """Whether a class may give way (None: per job, by its service level)."""
            if quota_need is not None:
                ok = False
            elif in_quota:
                ok = vprio < prio or (borrowed and vtenant != tenant and vpool == pool)
            else:
                # A borrowing job takes nothing from another tenant's guaranteed share.
                ok = vprio < prio and (borrowed or vtenant == tenant)
            if not ok and per_job and vtenant == tenant and vpool == pool and vprio == prio:
                return None
            return ok

        def by_service(vid: int) -> bool:
            """Least attained service: a job of the same line at or above the floor, when its preemption pays."""
            rj = vinfo[vid][5]
            req, attained = rj.request, rj.attained_at(now)
            return svc.level_at(attained) >= service_floor and svc.remaining_s(req, attained) > pays * (
                req.checkpoint_cost_s + move_s
            )

        def protected(vprio: int) -> bool:
            return min_run > 0 and not (exempt and vprio < prio)

        # Everything the rules read, with the partitions searched, the GPUs avoided and the jobs stopping
        # (the only victims' state that changes during the placement phase).
        # The job's tenant matters only to a victim of its own that borrows (and to the cases below that name it):
        # without one, every tenant's job of this priority, within its quota, may take the same victims.
        tenant_free = verdict.in_quota and quota_need is None and service_floor is None
        ekey = (
            None if tenant_free and job.tenant not in self._borrowers.get(job.pool, ()) else job.tenant,
            job.pool,
            prio,
            verdict.in_quota,
            quota_need is not None,
            service_floor,
            tuple(map(id, ctx.parts)),
            frozenset(avoid),
            len(st.stopping),
        )
        kept = self._by_node.get(ekey)
        if kept is None:
            kept = self._by_node[ekey] = self._victims.select(st, ctx, rule, by_service, protected, avoid)
        by_node, young_by_node, young = kept
        plan = plan_preemption(placer, ctx, None, None, avoid, by_node)
        if plan is None:
            if young:
                # Would it preempt once they have run their minimum? Then say when.
                everyone = VictimClasses.with_young(by_node, young_by_node)
                later = plan_preemption(placer, ctx, None, None, avoid, everyone)
                if later is not None:
                    self.counters["min_run_protected"] += 1
                    self._min_run_wait[job.id] = max(young.get(v, 0.0) for v in later[0])
            return None
        victims, cand = plan
        if quota_need is not None:
            freed = sum(st.share_equiv(g, sh) for v in victims for g, sh in st.job_gpus[v])
            book = self.book
            lim = book.limits(job.tenant, job.pool)
            if lim is None or book.usage(job.tenant, job.pool) - freed + quota_need > lim[0] + lim[1] + 1e-9:
                return None
        if cand.shares is not None:
            used = {g.id for g, _ in cand.shares}
        else:
            used = {g.id for node, mask in cand.picks for g in node.gpus if g.bit & mask}
        why_parts = []
        for vid in victims:
            rj = running[vid]
            vprio = effective_priority(rj.request, tenants)
            if vprio < prio:
                why = f"priority {prio} over {vprio}"
            elif rj.request.tenant == job.tenant:
                why = "least attained service: it has had more GPU time"
            else:
                why = f"reclaiming GPUs tenant {rj.request.tenant} borrowed"
            why_parts.append(why)
            taken = tuple(sorted(g.id for g, _ in st.job_gpus[vid] if g.id in used))
            self.dec.preemptions.append(Preemption(vid, job.id, reasons.preempted(job.id, why), taken))
            st.stopping.add(vid)
        self.counters["victims"] += len(victims)
        # The victims' quota is the preemptor's from now on: later jobs of this round do not take it.
        self._refund(victims)
        self.book.charge(job.tenant, job.pool, need_equiv(ctx))
        # The preemptor's GPUs are held for it (not a backfill window: short jobs do not get them).
        held = hold_reservation(placer, job.id, st.now + self.cfg.preemption_grace_s, cand, job.pool)
        self.dec.reservations.append(Reservation(job.id, held.start_at, held.gpu_ids, held.nodes, "preempting"))
        what = _describe(cand)
        return reasons.preempting(victims, what)


def _remembered_run(
    ended: dict[int, tuple[str, str | None]], dbl: list[int], i: int, stop: int, short: tuple | None
) -> list[tuple[str, str | None]]:
    """The remembered outcomes of the places i, i+1, ... before `stop` while each place's turn signature is in
    `ended`: C passes over the lists, about a fifth of a Python loop step a place. A place's signature is `dbl` (its
    turn number twice) plus one where its pool has a reservation and the job would end before it: with `short` =
    (now, estimates, earliest reservation start per turn number, turn numbers), now + its estimate at or before its
    turn number's start. None: the signature is `dbl` alone, where `ended` holds only turns of turn numbers none of
    whose jobs might end before a reservation (the run ends at the others)."""
    sigs = _from(dbl, i, stop)
    if short is not None:
        now, ests, starts, tids = short
        ends = map(add, repeat(now), _from(ests, i, stop))  # as the loop's `now + est`
        sigs = map(add, sigs, map(le, ends, map(starts.__getitem__, _from(tids, i, stop))))
    return list(map(ended.__getitem__, takewhile(ended.__contains__, sigs)))


def _from(values: list, i: int, stop: int):
    """values[i:stop] as an iterator, without a copy or a walk from the start (islice alone steps over i items)."""
    it = iter(values)
    it.__setstate__(i)
    return islice(it, stop - i)


def _describe(cand) -> str:
    if cand.shares is not None:
        g = cand.shares[0][0]
        return f"a {cand.shares[0][1].kind} share of GPU {g.index} on {g.node.name}"
    if len(cand.picks) == 1:
        node, mask = cand.picks[0]
        return f"{reasons.gpus(mask.bit_count())} on {node.name}"
    n = sum(mask.bit_count() for _, mask in cand.picks)
    return f"{reasons.gpus(n)} on {len(cand.picks)} nodes"


def schedule(snapshot: Snapshot, policy: QueuePolicy | None = None, carry: RoundCarry | None = None) -> Decisions:
    """Decide one round. Pure: the snapshot is not changed; the same input gives the same Decisions.
    `carry`: what earlier rounds of this cluster worked out per waiting job (scheduler.core.carry); the round
    keeps it up to date, and decides exactly as it would without it.

    The cyclic garbage collector is paused for the round (and restored after): a round allocates a
    few hundred thousand short-lived objects, and generation-2 passes over the snapshot's own objects
    cost more than the round's real work at 50k pending jobs. Nothing it allocates outlives the call
    except the Decisions and what it keeps in the carry."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Round(snapshot, policy, carry).run()
    except BaseException:
        if carry is not None:
            carry.clear()  # it may hold this round's jobs without their lines
        raise
    finally:
        if enabled:
            gc.enable()
