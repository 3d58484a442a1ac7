"""Applying a round's decisions in the round's transaction, in the order the engine documents."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field, fields
from functools import partial
from itertools import compress, filterfalse, repeat
from operator import is_not

import psycopg
from django.db import IntegrityError, connections, transaction
from django.db.models import F
from django.utils import timezone
from psycopg.types.json import Jsonb

from scheduler import events, queue_lines, snapshot_from_db
from scheduler.actions.allocations import (
    LedgerRoom,
    ShareSpec,
    _ensure_ledgers,
    _fits,
    _insert_rows,
    _take,
    allocate,
    release_allocations,
)
from scheduler.actions.errors import ActionError, StaleDecision
from scheduler.actions.jobs import SCHEDULER, move_job
from scheduler.actions.lifecycle import abandon_launches, launch_on_commit, placed_status
from scheduler.actions.lifecycle import enabled as launches_enabled
from scheduler.actions.lifecycle import migrate as migrate_launches
from scheduler.actions.lifecycle import preempt as preempt_launches
from scheduler.actions.locking import jobs_for_update, lock_jobs, lock_ledgers
from scheduler.choices import ACTIVE_STATUSES, JobStatus, ShareKind
from scheduler.core.mig import profiles_for
from scheduler.models import (
    Allocation,
    ClusterScheduler,
    GpuLedger,
    Job,
    JobEvent,
    MigSliceClaim,
    Pool,
)

log = logging.getLogger(__name__)


def _shares(placement, index) -> list[ShareSpec]:
    """The engine's shares with what the ledger needs (memory held, MIG memory slots)."""
    specs = []
    for s in placement.shares:
        memory = index.gpu_memory[s.gpu_id]
        if s.kind == ShareKind.MIG:
            profile = profiles_for(index.gpu_model[s.gpu_id], memory)[s.mig_profile]
            specs.append(
                ShareSpec(s.gpu_id, s.kind, compute_pct=0, memory_mib=profile.memory_mib, mig_profile=s.mig_profile,
                          mig_start=s.mig_start, mig_slices=profile.memory_slots)
            )  # fmt: skip
        elif s.kind == ShareKind.WHOLE:
            specs.append(ShareSpec(s.gpu_id, s.kind, compute_pct=100, memory_mib=memory))
        elif s.kind == ShareKind.MPS:
            specs.append(ShareSpec(s.gpu_id, s.kind, compute_pct=s.compute_pct, memory_mib=s.memory_mib))
        else:
            specs.append(ShareSpec(s.gpu_id, s.kind, compute_pct=0, memory_mib=0, replica=s.replica))
    return specs


@dataclass
class Applied:
    placed: int = 0
    preempted: int = 0
    migrated: int = 0
    requeued: int = 0
    failed: int = 0
    rejected_stale: int = 0
    queue_ms: float = 0.0
    log: list[dict] = field(default_factory=list)


def apply_decisions(round_id: int, decisions, index) -> Applied:
    """Apply one round in the caller's transaction, in the order the engine documents.

    Each decision runs in its own savepoint: one made stale by a concurrent change (a job cancelled,
    a GPU taken) is skipped and counted, the others still apply, and the job is retried next round.
    With node agents (LAUNCHER process/container; scheduler.actions.lifecycle) placed jobs are admitted and
    launched after commit, and preempted or migrating jobs keep their GPUs until their nodes stopped them;
    under the twin a stop is immediate: preempted jobs requeue at once and migrations relaunch at once.
    """
    done = Applied()
    jobs, pools = index.jobs, index.pools
    now = timezone.now()
    _lock_in_order(decisions)

    def attempt(kind: str, job_id: int, fn) -> bool:
        try:
            with transaction.atomic():
                fn()
        except (StaleDecision, ActionError) as exc:
            done.rejected_stale += 1
            done.log.append({"kind": "stale", "job": job_id, "what": kind, "why": str(exc)})
            return False
        return True

    for job_id, reason in decisions.requeues:
        if attempt("requeue", job_id, lambda jid=job_id, r=reason: _requeue(index.job(jid), r, round_id)):
            done.requeued += 1
            done.log.append({"kind": "requeue", "job": job_id, "why": reason})
    for job_id, reason in decisions.failures:
        if attempt("failure", job_id, lambda jid=job_id, r=reason: _fail(index.job(jid), r, round_id)):
            done.failed += 1
            done.log.append({"kind": "failure", "job": job_id, "why": reason})
    for p in decisions.preemptions:
        if attempt("preemption", p.job_id, lambda p=p: _preempt(index.job(p.job_id), p, round_id)):
            done.preempted += 1
            done.log.append({"kind": "preemption", "job": p.job_id, "for": p.for_job, "why": p.reason})
    for m in decisions.migrations:
        job = index.job(m.job_id)
        specs = _shares(m.placement, index)
        if attempt("migration", m.job_id, lambda j=job, m=m, s=specs: _migrate(j, m, s, pools, round_id, now)):
            done.migrated += 1
            done.log.append({"kind": "migration", "job": m.job_id, "to": list(m.placement.nodes), "why": m.reason})
    try:
        with transaction.atomic():
            placed, stale = _place_all(decisions.placements, index, round_id, now)
    except IntegrityError:  # the database saw a conflict the locked ledger did not: go one by one
        placed, stale = [], []
        for p in decisions.placements:
            job, specs = index.job(p.job_id), _shares(p, index)
            if attempt("placement", p.job_id, lambda j=job, p=p, s=specs: _place(j, p, s, pools, round_id, now)):
                placed.append(p)
    for p in placed:
        done.log.append({"kind": "placement", "job": p.job_id, "nodes": list(p.nodes), "why": p.explanation})
    for job_id, why in stale:
        done.log.append({"kind": "stale", "job": job_id, "what": "placement", "why": why})
    done.placed += len(placed)
    done.rejected_stale += len(stale)

    t = time.perf_counter()
    _record_queue(index.cluster_id, decisions, jobs, from_snapshot=True)
    done.queue_ms = (time.perf_counter() - t) * 1000
    return done


def _lock_in_order(decisions) -> None:
    """Lock every job the round changes, then every GPU ledger it changes, before the first decision applies.

    Decisions apply one after another in one transaction: left to each, a requeue would lock its job and ledgers,
    and the preemption after it another job, so a job lock would come after a ledger lock, against the order
    every other action takes them (scheduler.actions). A round of placements only is already in order
    (_place_all locks its jobs, then its ledgers).
    """
    moving = [j for j, _ in decisions.requeues] + [j for j, _ in decisions.failures]
    moving += [p.job_id for p in decisions.preemptions] + [m.job_id for m in decisions.migrations]
    if not moving:
        return
    lock_jobs([*moving, *(p.job_id for p in decisions.placements)])
    held = Allocation.objects.filter(job_id__in=moving, active=True).values_list("gpu_id", flat=True)
    wanted = {s.gpu_id for m in decisions.migrations for s in m.placement.shares}
    wanted |= {s.gpu_id for p in decisions.placements for s in p.shares}
    _ensure_ledgers(wanted)
    lock_ledgers({*held, *wanted})


def _requeue(job: Job, reason: str, round_id: int) -> None:
    release_allocations(job)
    abandon_launches(job, "requeue")
    move_job(job, JobStatus.PENDING, reason, actor=SCHEDULER, expect=ACTIVE_STATUSES, round_id=round_id,
          started_at=None)  # fmt: skip


def _fail(job: Job, reason: str, round_id: int) -> None:
    release_allocations(job)
    abandon_launches(job, "failure")
    move_job(job, JobStatus.FAILED, reason, actor=SCHEDULER, expect=ACTIVE_STATUSES, round_id=round_id,
          finished_at=timezone.now())  # fmt: skip


def _preempt(job: Job, p, round_id: int) -> None:
    # Recorded on the victim: the next rounds give the GPUs freed for p.for_job to it, not back to this job.
    record = {"preempted_for": p.for_job, "preempted_at": timezone.now(), "preempted_gpus": list(p.gpu_ids)}
    if launches_enabled():  # its nodes stop it (checkpoint, grace period); it requeues once they did
        preempt_launches(job, p.reason, p.for_job, round_id, record=record)
        return
    move_job(job, JobStatus.PREEMPTED, p.reason, actor=SCHEDULER, expect=ACTIVE_STATUSES, round_id=round_id,
          **record)  # fmt: skip
    release_allocations(job)
    move_job(job, JobStatus.PENDING, f"requeued after preemption for job {p.for_job}", actor=SCHEDULER,
          expect=[JobStatus.PREEMPTED], round_id=round_id, started_at=None, borrowed=False)  # fmt: skip


def _migrate(job: Job, m, specs: list[ShareSpec], pools: dict[int, Pool], round_id: int, now) -> None:
    if launches_enabled():  # stopped on the old GPUs first, then relaunched on the new ones as the next generation
        migrate_launches(job, m, specs, pools[job.pool_id].timeslice_replicas, round_id, now)
        return
    move_job(job, JobStatus.MIGRATING, m.reason, actor=SCHEDULER, expect=[JobStatus.RUNNING], round_id=round_id)
    old = list(Allocation.objects.filter(job=job, active=True).values_list("pk", flat=True))
    release_allocations(job)
    allocate(job, specs, replicas_max=pools[job.pool_id].timeslice_replicas)
    where = ", ".join(m.placement.nodes)
    move_job(job, JobStatus.RUNNING, f"moved to {where}: {m.placement.explanation}", actor=SCHEDULER,
          expect=[JobStatus.MIGRATING], round_id=round_id, last_migrated_at=now)  # fmt: skip
    log.info("job %s migrated off %d allocations", job.pk, len(old))


def _place(job: Job, p, specs: list[ShareSpec], pools: dict[int, Pool], round_id: int, now) -> None:
    allocate(job, specs, replicas_max=pools[job.pool_id].timeslice_replicas)
    where = ", ".join(p.nodes)
    move_job(job, placed_status(), f"placed on {where}: {p.explanation}", actor=SCHEDULER,
          expect=[JobStatus.PENDING], round_id=round_id, started_at=now, borrowed=p.borrowed,
          generation=F("generation") + 1)  # fmt: skip
    launch_on_commit([job.pk])


def _place_all(placements, index, round_id: int, now) -> tuple[list, list[tuple[int, str]]]:
    """Every placement of a round in a fixed number of statements (the round holds the cluster lock).

    The jobs and the GPU ledgers are locked and re-checked in memory (same rules as the conditional
    UPDATE of a single claim); a placement whose job changed or whose GPUs filled since the snapshot
    is left out whole and reported stale. The CHECK and unique constraints still guard every write.
    """
    if not placements:
        return [], []
    specs = {p.job_id: _shares(p, index) for p in placements}
    # Ids go to `__any_of` as a set or a view, not a list: the ORM walks a list's items one by one looking for
    # expressions (3 ms per 10,000). The rows are locked in the ORDER BY's order, the lock order, whatever theirs.
    current = {
        pk: (status, version, held)
        for pk, status, version, held in jobs_for_update()
        .filter(pk__any_of=specs.keys())
        .order_by("pk")
        .values_list("pk", "status", "version", "held")
    }
    ledger_fields = [f.name for f in fields(LedgerRoom)]
    wanted = {s.gpu_id for v in specs.values() for s in v}

    def lock(ids) -> dict[int, LedgerRoom]:
        rows = GpuLedger.objects.select_for_update(no_key=True).filter(gpu_id__any_of=ids).order_by("gpu_id")
        return {row[0]: LedgerRoom(*row) for row in rows.values_list(*ledger_fields)}

    ledgers = lock(wanted)
    if len(ledgers) < len(wanted):  # GPUs imported after the scheduler first saw the cluster
        _ensure_ledgers(wanted - ledgers.keys())
        ledgers.update(lock(wanted - ledgers.keys()))
    placed, stale, touched = [], [], set()
    for p in placements:
        job = index.jobs[p.job_id]
        if current.get(p.job_id) != (JobStatus.PENDING, job.version, False):
            stale.append((p.job_id, f"job {p.job_id} changed since the snapshot"))
            continue
        replicas_max = index.pools[job.pool_id].timeslice_replicas
        if not all(_fits(ledgers[s.gpu_id], s, replicas_max) for s in specs[p.job_id]):
            stale.append((p.job_id, f"job {p.job_id}: its GPUs filled since the snapshot"))
            continue
        for s in specs[p.job_id]:
            _take(ledgers[s.gpu_id], s, replicas_max)
            touched.add(s.gpu_id)
        placed.append(p)
    if not placed:
        return placed, stale

    # Absolute values are safe: the rows are locked. Most touched GPUs end alike (whole and full), so one
    # UPDATE per distinct end state.
    by_state: dict[tuple, set[int]] = defaultdict(set)
    for g in touched:
        lg = ledgers[g]
        by_state[(lg.compute_pct, lg.memory_mib, lg.mig_slices, lg.replicas, lg.replicas_max)].add(g)
    for (pct, memory, slices, replicas, replicas_max), ids in by_state.items():
        GpuLedger.objects.filter(gpu_id__any_of=ids).update(
            compute_pct=pct, memory_mib=memory, mig_slices=slices, replicas=replicas, replicas_max=replicas_max
        )
    shares = [(p.job_id, s) for p in placed for s in specs[p.job_id]]
    # MIG allocations need their ids for the slot claims; the rest are streamed.
    mig = [
        Allocation(job_id=j, gpu_id=s.gpu_id, kind=s.kind, compute_pct=s.compute_pct, memory_mib=s.memory_mib,
                   mig_profile=s.mig_profile, mig_start=s.mig_start, mig_slices=s.mig_slices)
        for j, s in shares
        if s.kind == ShareKind.MIG
    ]  # fmt: skip
    Allocation.objects.bulk_create(mig, batch_size=2000)
    MigSliceClaim.objects.bulk_create(
        [MigSliceClaim(gpu_id=a.gpu_id, slice=slot, allocation=a) for a in mig
         for slot in range(a.mig_start, a.mig_start + a.mig_slices)],
        batch_size=2000,
    )  # fmt: skip
    _insert_rows(
        Allocation,
        ["job_id", "gpu_id", "kind", "compute_pct", "memory_mib", "mig_profile", "mig_start", "mig_slices",
         "replica", "active", "created"],
        [(j, s.gpu_id, s.kind, s.compute_pct, s.memory_mib, "", None, 0, s.replica, True, now)
         for j, s in shares if s.kind != ShareKind.MIG],
    )  # fmt: skip
    # The full "placed on ...: why" goes to each job's event; the job row gets one shared status line.
    status_reason = f"placed by scheduling round {round_id}"
    status = placed_status()  # admitted until its nodes started it; running at once under the twin
    for borrowed in (False, True):
        ids = [p.job_id for p in placed if p.borrowed == borrowed]
        for chunk in (ids[i : i + 10_000] for i in range(0, len(ids), 10_000)):
            Job.objects.filter(pk__any_of=set(chunk)).update(
                status=status, status_reason=status_reason, started_at=now, borrowed=borrowed,
                version=F("version") + 1, generation=F("generation") + 1,
            )  # fmt: skip
    _insert_rows(
        JobEvent,
        ["job_id", "at", "from_status", "to_status", "reason", "actor", "round_id"],
        [(p.job_id, now, JobStatus.PENDING, status, f"placed on {', '.join(p.nodes)}: {p.explanation}"[:500],
          SCHEDULER, round_id) for p in placed],
    )  # fmt: skip
    events.jobs_changed_on_commit(index.cluster_id, [(p.job_id, status) for p in placed])
    launch_on_commit(p.job_id for p in placed)
    # The next round's snapshot takes what was written as read, rather than reading it back.
    apart: dict[int, dict[int, float]] = defaultdict(dict)
    for a in mig:  # created at their own save (auto_now_add), the rest at `now`
        apart[a.job_id][a.gpu_id] = a.created.timestamp()
    kept = [(p.job_id, p.borrowed, specs[p.job_id], apart.get(p.job_id, _NONE)) for p in placed]
    transaction.on_commit(partial(snapshot_from_db.placements_committed, index, status, now, kept))
    return placed, stale


_NONE: dict = {}


def _record_queue(cluster_id: int, decisions, jobs: dict, *, from_snapshot: bool = False) -> None:
    """The queue order and every pending reason, in one row per cluster (many jobs share a reason), and the start
    the round estimated for the jobs it holds GPUs for (its reservations): job id -> [epoch seconds, basis].

    A job of the queue that `jobs` (the snapshot's rows) does not hold is left out. `from_snapshot`: the decisions
    were made from the snapshot `jobs` indexes (apply_decisions), which holds every job it queued: no job-by-job check.
    """
    placed = {p.job_id for p in decisions.placements}
    # C loops over the 50,000 waiting jobs (the Python ones were 30 ms a round). With the engine's reasons in queue
    # order they read places in line only: a job id read in queue order misses the cache (the ids are not in memory
    # in that order), some 14 ms a round where the placed and the gone were filtered out by id.
    aligned = decisions.queue_reasons
    if aligned is not None and len(aligned) == len(decisions.queue_order):
        waits = list(map(is_not, aligned, repeat(None)))  # None: placed this round
        order = list(compress(decisions.queue_order, waits))
        said = list(compress(aligned, waits))
    else:
        order = list(filterfalse(placed.__contains__, decisions.queue_order))
        said = list(map(decisions.pending_reasons.get, order, repeat("")))
    if not from_snapshot:
        known = list(map(jobs.__contains__, order))
        if not all(known):
            order, said = list(compress(order, known)), list(compress(said, known))
    # The texts numbered as a job-by-job pass numbers them: by the first job with each.
    texts: dict[str, int] = {}
    number = {reason: texts.setdefault(reason[:500], len(texts)) for reason in dict.fromkeys(said)}
    reasons = list(map(number.__getitem__, said))
    starts: dict[str, list] = {}
    for r in decisions.reservations:
        key = str(r.job_id)
        # Still waiting: in `order` (a reservation is always for a job of the queue), without a set of its 50,000.
        waiting = r.job_id in jobs and r.job_id not in placed
        if waiting and (key not in starts or r.start_at < starts[key][0]):
            starts[key] = [round(r.start_at, 3), r.basis]
    queue = {"texts": list(texts), "starts": starts}
    _store_queue(cluster_id, queue, queue_lines.pack(order, reasons))


def _store_queue(cluster_id: int, queue: dict, packed: bytes) -> None:
    connection = connections[ClusterScheduler.objects.db]
    if connection.vendor != "postgresql":
        ClusterScheduler.objects.filter(cluster_id=cluster_id).update(queue=queue, queue_lines=packed)
        return
    # Django's psycopg cursors bind parameters on the client: the 280 KB of queue lines went into the statement as a
    # hex literal twice their size that PostgreSQL parsed (12-16 ms a round at 50,000 jobs). A server-binding cursor
    # of the same connection, in the same transaction, sends them as one binary parameter (2 ms).
    table = connection.ops.quote_name(ClusterScheduler._meta.db_table)
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(
            f"UPDATE {table} SET queue = %s, queue_lines = %b WHERE cluster_id = %s",
            [Jsonb(queue), packed, cluster_id],
        )
