"""Every state change of the scheduler: jobs, allocations, pools, quotas, tenants.

Each function is one transaction. Job status moves only here, each move writes a JobEvent with
its reason, and a scheduling round is requested after commit whenever capacity or demand changed.
Allocations go through the GPU ledger with conditional UPDATEs, so a decision made on a stale
snapshot changes no row and the database's constraints refuse double allocation outright.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from fabric.models import GPU, Cluster, Node
from scheduler import events
from scheduler.choices import ACTIVE_STATUSES, DEFAULT_PRIORITY_CLASSES, FINAL_STATUSES, JobStatus, ShareKind
from scheduler.models import (
    Allocation,
    ClusterScheduler,
    GpuLedger,
    Job,
    JobEvent,
    MigSliceClaim,
    Pool,
    PoolNode,
    PriorityClass,
    Quota,
    Tenant,
    TenantMember,
)

log = logging.getLogger(__name__)
SCHEDULER = "scheduler"


class ActionError(ValueError):
    """A request the scheduler refuses; the message says why."""


class StaleDecision(Exception):
    """The state a decision was based on changed before it could be applied."""


#
# Tenants, pools, quotas
#


@transaction.atomic
def create_tenant(name: str, *, description: str = "", max_priority: str | None = None) -> Tenant:
    max_class = PriorityClass.objects.get(name=max_priority) if max_priority else None
    tenant, _ = Tenant.objects.update_or_create(
        name=name, defaults={"description": description, "max_priority": max_class}
    )
    return tenant


@transaction.atomic
def add_member(tenant: Tenant, user) -> TenantMember:
    if user.is_staff:
        raise ActionError(f"{user} is an operator; operators see every tenant and need no membership")
    member, _ = TenantMember.objects.update_or_create(user=user, defaults={"tenant": tenant})
    return member


def ensure_priority_classes() -> None:
    """The default classes, if an operator (or a test's flush) removed them all."""
    if not PriorityClass.objects.exists():
        for name, value, preemptible, description in DEFAULT_PRIORITY_CLASSES:
            PriorityClass.objects.get_or_create(
                name=name, defaults={"value": value, "preemptible_default": preemptible, "description": description}
            )


def ensure_scheduler(cluster: Cluster) -> Pool:
    """The cluster's scheduling state, its GPUs' ledgers and its default pool (created on first use)."""
    ensure_priority_classes()
    _, created = ClusterScheduler.objects.get_or_create(cluster=cluster)
    if created:
        ensure_cluster_ledgers(cluster.pk)
    pool, _ = Pool.objects.get_or_create(cluster=cluster, is_default=True, defaults={"name": "default"})
    return pool


@transaction.atomic
def create_pool(cluster: Cluster, name: str, *, sharing: str, timeslice_replicas: int = 4) -> Pool:
    ensure_scheduler(cluster)
    return Pool.objects.create(cluster=cluster, name=name, sharing=sharing, timeslice_replicas=timeslice_replicas)


@transaction.atomic
def assign_nodes(pool: Pool, nodes: Iterable[Node]) -> int:
    """Move nodes into `pool` (out of any other pool). Nodes with held GPUs may move: their jobs keep running."""
    nodes = list(nodes)
    foreign = [n.hostname for n in nodes if n.cluster_id != pool.cluster_id]
    if foreign:
        raise ActionError(f"nodes {', '.join(foreign[:5])} are not in cluster {pool.cluster}")
    PoolNode.objects.filter(node__in=nodes).delete()
    if not pool.is_default:
        PoolNode.objects.bulk_create([PoolNode(pool=pool, node=n) for n in nodes])
    request_round_on_commit(pool.cluster_id, "pool membership changed")
    return len(nodes)


@transaction.atomic
def set_quota(tenant: Tenant, pool: Pool, *, guaranteed_gpus: int, borrow_limit: int) -> Quota:
    if guaranteed_gpus < 0 or borrow_limit < 0:
        raise ActionError("quotas cannot be negative")
    quota, _ = Quota.objects.update_or_create(
        tenant=tenant, pool=pool, defaults={"guaranteed_gpus": guaranteed_gpus, "borrow_limit": borrow_limit}
    )
    request_round_on_commit(pool.cluster_id, f"quota of {tenant} changed")
    return quota


#
# Job lifecycle
#


def _event(job: Job, to: str, reason: str, *, actor: str, round_id: int | None = None, from_status=None) -> None:
    JobEvent.objects.create(
        job=job,
        from_status=job.status if from_status is None else from_status,
        to_status=to,
        reason=reason[:500],
        actor=actor,
        round_id=round_id,
    )


def _move(job: Job, to: str, reason: str, *, actor: str, expect: Sequence[str], round_id: int | None = None, **fields):
    """Conditional status change: only from one of `expect`, and only if nobody changed the job meanwhile."""
    updated = Job.objects.filter(pk=job.pk, status__in=expect, version=job.version).update(
        status=to, status_reason=reason[:500], version=F("version") + 1, **fields
    )
    if not updated:
        raise StaleDecision(f"job {job.pk} changed since it was read (wanted {'/'.join(expect)} -> {to})")
    _event(job, to, reason, actor=actor, round_id=round_id)
    job.refresh_from_db()
    events.job_changed_on_commit(job)


@transaction.atomic
def submit_job(tenant: Tenant, pool: Pool, priority_class: PriorityClass, *, actor: str = "", **request: Any) -> Job:
    """Queue a validated request (scheduler.validation checks it first). A round follows on commit."""
    job = Job.objects.create(tenant=tenant, pool=pool, priority_class=priority_class, **request)
    Job.objects.filter(pk=job.pk).update(queue_seq=job.pk)
    job.queue_seq = job.pk
    _event(job, JobStatus.PENDING, "submitted", actor=actor or str(tenant), from_status="")
    events.job_changed_on_commit(job)
    request_round_on_commit(pool.cluster_id, f"job {job.pk} submitted")
    return job


def _locked(job: Job) -> Job:
    return Job.objects.select_for_update().select_related("pool").get(pk=job.pk)


@transaction.atomic
def cancel_job(job: Job, *, actor: str, reason: str = "cancelled") -> Job:
    job = _locked(job)
    if job.status in FINAL_STATUSES:
        raise ActionError(f"job {job.pk} is already {job.status}")
    release_allocations(job)
    _move(job, JobStatus.CANCELLED, reason, actor=actor, expect=[job.status], finished_at=timezone.now())
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} cancelled")
    return job


@transaction.atomic
def finish_job(job: Job, *, succeeded: bool, reason: str = "", actor: str = "node agent") -> Job:
    job = _locked(job)
    if job.status not in ACTIVE_STATUSES:
        raise ActionError(f"job {job.pk} is {job.status}, not running")
    release_allocations(job)
    to = JobStatus.COMPLETED if succeeded else JobStatus.FAILED
    _move(job, to, reason or ("exited 0" if succeeded else "failed"), actor=actor, expect=ACTIVE_STATUSES,
          finished_at=timezone.now())  # fmt: skip
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} finished")
    return job


@transaction.atomic
def hold_job(job: Job, *, actor: str, reason: str = "held by an operator") -> Job:
    job = _locked(job)
    if job.status != JobStatus.PENDING:
        raise ActionError(f"only pending jobs can be held; job {job.pk} is {job.status}")
    if job.held:
        raise ActionError(f"job {job.pk} is already held")
    Job.objects.filter(pk=job.pk).update(held=True, pending_reason=reason, version=F("version") + 1)
    _event(job, JobStatus.PENDING, reason, actor=actor)
    job.refresh_from_db()
    events.job_changed_on_commit(job)
    return job


@transaction.atomic
def release_job(job: Job, *, actor: str) -> Job:
    job = _locked(job)
    if not job.held:
        raise ActionError(f"job {job.pk} is not held")
    Job.objects.filter(pk=job.pk).update(held=False, pending_reason="", version=F("version") + 1)
    _event(job, job.status, "released by an operator", actor=actor)
    job.refresh_from_db()
    events.job_changed_on_commit(job)
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} released")
    return job


@transaction.atomic
def requeue_job(job: Job, *, actor: str, reason: str = "requeued by an operator", round_id: int | None = None) -> Job:
    """A running job goes back to pending, keeping its place in line (queue_seq)."""
    job = _locked(job)
    if job.status not in ACTIVE_STATUSES:
        raise ActionError(f"only running jobs can be requeued; job {job.pk} is {job.status}")
    release_allocations(job)
    _move(job, JobStatus.PENDING, reason, actor=actor, expect=ACTIVE_STATUSES, round_id=round_id, started_at=None)
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} requeued")
    return job


#
# Allocations
#


@dataclass(frozen=True)
class ShareSpec:
    """One GPU's part for a job, as the engine decided it."""

    gpu_id: int
    kind: str
    compute_pct: int = 100
    memory_mib: int = 0
    mig_profile: str = ""
    mig_start: int | None = None
    mig_slices: int = 0
    replica: int | None = None


def _ensure_ledgers(gpu_ids: Iterable[int]) -> None:
    ids = set(gpu_ids)
    have = set(GpuLedger.objects.filter(gpu_id__in=ids).values_list("gpu_id", flat=True))
    missing = ids - have
    if missing:
        totals = dict(GPU.objects.filter(pk__in=missing).values_list("pk", "memory_mib"))
        GpuLedger.objects.bulk_create(
            [GpuLedger(gpu_id=g, memory_total_mib=totals[g]) for g in missing], ignore_conflicts=True
        )


def ensure_cluster_ledgers(cluster_id: int) -> int:
    """A ledger row for every GPU of the cluster that lacks one, in one INSERT ... SELECT."""
    ledger = connection.ops.quote_name(GpuLedger._meta.db_table)
    gpu = connection.ops.quote_name(GPU._meta.db_table)
    node = connection.ops.quote_name(Node._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ledger} (gpu_id, compute_pct, memory_mib, memory_total_mib, mig_slices, replicas, "
            f"replicas_max) SELECT g.id, 0, 0, g.memory_mib, 0, 0, 1 FROM {gpu} g JOIN {node} n ON n.id = g.node_id "
            f"WHERE n.cluster_id = %s AND NOT EXISTS (SELECT 1 FROM {ledger} l WHERE l.gpu_id = g.id)",
            [cluster_id],
        )
        return cursor.rowcount


def _claim(job: Job, share: ShareSpec, replicas_max: int) -> Allocation:
    """Take one share through the ledger; raise StaleDecision when the GPU no longer has room."""
    ledger = GpuLedger.objects.filter(gpu_id=share.gpu_id)
    if share.kind in (ShareKind.WHOLE, ShareKind.MPS):
        taken = ledger.filter(
            compute_pct__lte=100 - share.compute_pct,
            memory_mib__lte=F("memory_total_mib") - share.memory_mib,
            mig_slices=0,
            replicas=0,
        ).update(compute_pct=F("compute_pct") + share.compute_pct, memory_mib=F("memory_mib") + share.memory_mib)
    elif share.kind == ShareKind.MIG:
        taken = ledger.filter(compute_pct=0, replicas=0, mig_slices__lte=8 - share.mig_slices).update(
            mig_slices=F("mig_slices") + share.mig_slices
        )
    else:
        taken = ledger.filter(compute_pct=0, mig_slices=0, replicas__lt=replicas_max).update(
            replicas=F("replicas") + 1, replicas_max=replicas_max
        )
    if not taken:
        raise StaleDecision(f"GPU {share.gpu_id} no longer has room for a {share.kind} share")
    allocation = Allocation.objects.create(
        job=job,
        gpu_id=share.gpu_id,
        kind=share.kind,
        compute_pct=share.compute_pct,
        memory_mib=share.memory_mib,
        mig_profile=share.mig_profile,
        mig_start=share.mig_start,
        mig_slices=share.mig_slices,
        replica=share.replica,
    )
    if share.kind == ShareKind.MIG:
        MigSliceClaim.objects.bulk_create(
            [
                MigSliceClaim(gpu_id=share.gpu_id, slice=s, allocation=allocation)
                for s in range(share.mig_start, share.mig_start + share.mig_slices)
            ]
        )
    return allocation


def allocate(job: Job, shares: Sequence[ShareSpec], *, replicas_max: int = 1) -> list[Allocation]:
    """All shares or none (a savepoint): a gang never holds part of its GPUs."""
    _ensure_ledgers(s.gpu_id for s in shares)
    try:
        with transaction.atomic():
            return [_claim(job, share, replicas_max) for share in shares]
    except IntegrityError as exc:  # the database refused a double allocation the ledger did not catch
        raise StaleDecision(f"job {job.pk}: {exc}") from exc


def release_allocations(job: Job) -> int:
    """Give back everything the job holds; the ledger sums go down by exactly what it held."""
    held = list(Allocation.objects.select_for_update().filter(job=job, active=True))
    for a in held:
        ledger = GpuLedger.objects.filter(gpu_id=a.gpu_id)
        if a.kind in (ShareKind.WHOLE, ShareKind.MPS):
            ledger.update(compute_pct=F("compute_pct") - a.compute_pct, memory_mib=F("memory_mib") - a.memory_mib)
        elif a.kind == ShareKind.MIG:
            ledger.update(mig_slices=F("mig_slices") - a.mig_slices)
        else:
            ledger.update(replicas=F("replicas") - 1)
    MigSliceClaim.objects.filter(allocation__in=held).delete()
    Allocation.objects.filter(pk__in=[a.pk for a in held]).update(active=False, released_at=timezone.now())
    return len(held)


#
# Rounds
#


def request_round_on_commit(cluster_id: int, trigger: str) -> None:
    """Ask for a scheduling round after this transaction commits (debounced by the task)."""

    def enqueue() -> None:
        from scheduler.tasks import request_round

        try:
            request_round(cluster_id, trigger)
        except Exception:  # a broker hiccup must not undo a committed submit; the periodic round catches up
            log.exception("could not request a scheduling round for cluster %s", cluster_id)

    transaction.on_commit(enqueue)


#
# Applying a round's decisions
#


def _shares(placement, index) -> list[ShareSpec]:
    """The engine's shares with what the ledger needs (memory held, MIG memory slots)."""
    from scheduler.core.mig import profiles_for

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
    Until node agents launch jobs (issue 6), a stop is immediate: preempted jobs requeue at once and
    migrations relaunch at once.
    """
    done = Applied()
    jobs, pools = index.jobs, index.pools
    now = timezone.now()

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
    _record_queue(index.cluster_id, decisions, jobs)
    done.queue_ms = (time.perf_counter() - t) * 1000
    return done


def _requeue(job: Job, reason: str, round_id: int) -> None:
    release_allocations(job)
    _move(job, JobStatus.PENDING, reason, actor=SCHEDULER, expect=ACTIVE_STATUSES, round_id=round_id,
          started_at=None)  # fmt: skip


def _fail(job: Job, reason: str, round_id: int) -> None:
    release_allocations(job)
    _move(job, JobStatus.FAILED, reason, actor=SCHEDULER, expect=ACTIVE_STATUSES, round_id=round_id,
          finished_at=timezone.now())  # fmt: skip


def _preempt(job: Job, p, round_id: int) -> None:
    _move(job, JobStatus.PREEMPTED, p.reason, actor=SCHEDULER, expect=ACTIVE_STATUSES, round_id=round_id)
    release_allocations(job)
    _move(job, JobStatus.PENDING, f"requeued after preemption for job {p.for_job}", actor=SCHEDULER,
          expect=[JobStatus.PREEMPTED], round_id=round_id, started_at=None, borrowed=False)  # fmt: skip


def _migrate(job: Job, m, specs: list[ShareSpec], pools: dict[int, Pool], round_id: int, now) -> None:
    _move(job, JobStatus.MIGRATING, m.reason, actor=SCHEDULER, expect=[JobStatus.RUNNING], round_id=round_id)
    old = list(Allocation.objects.filter(job=job, active=True).values_list("pk", flat=True))
    release_allocations(job)
    allocate(job, specs, replicas_max=pools[job.pool_id].timeslice_replicas)
    where = ", ".join(m.placement.nodes)
    _move(job, JobStatus.RUNNING, f"moved to {where}: {m.placement.explanation}", actor=SCHEDULER,
          expect=[JobStatus.MIGRATING], round_id=round_id, last_migrated_at=now)  # fmt: skip
    log.info("job %s migrated off %d allocations", job.pk, len(old))


def _place(job: Job, p, specs: list[ShareSpec], pools: dict[int, Pool], round_id: int, now) -> None:
    allocate(job, specs, replicas_max=pools[job.pool_id].timeslice_replicas)
    where = ", ".join(p.nodes)
    _move(job, JobStatus.RUNNING, f"placed on {where}: {p.explanation}", actor=SCHEDULER,
          expect=[JobStatus.PENDING], round_id=round_id, started_at=now, borrowed=p.borrowed,
          )  # fmt: skip


def _fits(ledger: GpuLedger, share: ShareSpec, replicas_max: int) -> bool:
    """The same conditions as _claim's conditional UPDATE, on a locked ledger row in memory."""
    if share.kind in (ShareKind.WHOLE, ShareKind.MPS):
        return (
            ledger.compute_pct + share.compute_pct <= 100
            and ledger.memory_mib + share.memory_mib <= ledger.memory_total_mib
            and ledger.mig_slices == 0
            and ledger.replicas == 0
        )
    if share.kind == ShareKind.MIG:
        return ledger.compute_pct == 0 and ledger.replicas == 0 and ledger.mig_slices + share.mig_slices <= 8
    return ledger.compute_pct == 0 and ledger.mig_slices == 0 and ledger.replicas < replicas_max


def _take(ledger: GpuLedger, share: ShareSpec, replicas_max: int) -> None:
    if share.kind in (ShareKind.WHOLE, ShareKind.MPS):
        ledger.compute_pct += share.compute_pct
        ledger.memory_mib += share.memory_mib
    elif share.kind == ShareKind.MIG:
        ledger.mig_slices += share.mig_slices
    else:
        ledger.replicas += 1
        ledger.replicas_max = replicas_max


def _place_all(placements, index, round_id: int, now) -> tuple[list, list[tuple[int, str]]]:
    """Every placement of a round in a fixed number of statements (the round holds the cluster lock).

    The jobs and the GPU ledgers are locked and re-checked in memory (same rules as the conditional
    UPDATE of a single claim); a placement whose job changed or whose GPUs filled since the snapshot
    is left out whole and reported stale. The CHECK and unique constraints still guard every write.
    """
    if not placements:
        return [], []
    specs = {p.job_id: _shares(p, index) for p in placements}
    current = {
        pk: (status, version, held)
        for pk, status, version, held in Job.objects.select_for_update()
        .filter(pk__in=list(specs))
        .values_list("pk", "status", "version", "held")
    }
    ledger_fields = (
        "gpu_id",
        "compute_pct",
        "memory_mib",
        "memory_total_mib",
        "mig_slices",
        "replicas",
        "replicas_max",
    )
    wanted = {s.gpu_id for v in specs.values() for s in v}

    def lock(ids) -> dict[int, GpuLedger]:
        rows = GpuLedger.objects.select_for_update().filter(gpu_id__in=ids).values_list(*ledger_fields)
        return {row[0]: GpuLedger(**dict(zip(ledger_fields, row, strict=True))) for row in rows}

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
    by_state: dict[tuple, list[int]] = defaultdict(list)
    for g in touched:
        lg = ledgers[g]
        by_state[(lg.compute_pct, lg.memory_mib, lg.mig_slices, lg.replicas, lg.replicas_max)].append(g)
    for (pct, memory, slices, replicas, replicas_max), ids in by_state.items():
        GpuLedger.objects.filter(gpu_id__in=ids).update(
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
    for borrowed in (False, True):
        ids = [p.job_id for p in placed if p.borrowed == borrowed]
        for chunk in (ids[i : i + 10_000] for i in range(0, len(ids), 10_000)):
            Job.objects.filter(pk__in=chunk).update(
                status=JobStatus.RUNNING, status_reason=status_reason, started_at=now, borrowed=borrowed,
                version=F("version") + 1,
            )  # fmt: skip
    _insert_rows(
        JobEvent,
        ["job_id", "at", "from_status", "to_status", "reason", "actor", "round_id"],
        [(p.job_id, now, JobStatus.PENDING, JobStatus.RUNNING, f"placed on {', '.join(p.nodes)}: {p.explanation}"[:500],
          SCHEDULER, round_id) for p in placed],
    )  # fmt: skip
    events.jobs_changed_on_commit(index.cluster_id, [(p.job_id, JobStatus.RUNNING) for p in placed])
    return placed, stale


def _insert_rows(model, columns: list[str], rows: list[tuple]) -> None:
    """Many plain rows at once: COPY on PostgreSQL (no model instances, no SQL to compile), bulk_create elsewhere."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**dict(zip(columns, row, strict=True))) for row in rows], batch_size=2000)
        return
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(model._meta.get_field(c.removesuffix("_id")).column) for c in columns)
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _record_queue(cluster_id: int, decisions, jobs: dict) -> None:
    """The queue order and every pending reason, in one row per cluster (many jobs share a reason)."""
    placed = {p.job_id for p in decisions.placements}
    order = [j for j in decisions.queue_order if j not in placed and j in jobs]
    texts: dict[str, int] = {}
    reasons = [texts.setdefault(decisions.pending_reasons.get(j, "")[:500], len(texts)) for j in order]
    queue = {"order": order, "reason": reasons, "texts": list(texts)}
    ClusterScheduler.objects.filter(cluster_id=cluster_id).update(queue=queue)


@transaction.atomic
def submit_jobs_bulk(
    tenant: Tenant, pool: Pool, priority_class: PriorityClass, requests: list[dict], *, request_round: bool = True
) -> int:
    """Queue many validated requests at once (batch submission, benchmarks): one INSERT per table."""
    jobs = Job.objects.bulk_create(
        [Job(tenant=tenant, pool=pool, priority_class=priority_class, **r) for r in requests], batch_size=2000
    )
    # A job's place in line is its id; one UPDATE sets it for the whole batch.
    if jobs:
        Job.objects.filter(pk__gte=jobs[0].pk, pk__lte=jobs[-1].pk, queue_seq=0).update(queue_seq=F("pk"))
    JobEvent.objects.bulk_create(
        [JobEvent(job=j, from_status="", to_status=JobStatus.PENDING, reason="submitted", actor=str(tenant))
         for j in jobs],
        batch_size=2000,
    )  # fmt: skip
    if request_round:
        request_round_on_commit(pool.cluster_id, f"{len(jobs)} jobs submitted")
    return len(jobs)


@transaction.atomic
def delete_cluster(cluster: Cluster) -> None:
    """Remove a cluster with its scheduling history (jobs, allocations, pools), then its inventory."""
    from fabric.actions import delete_cluster as delete_inventory

    MigSliceClaim.objects.filter(gpu__node__cluster=cluster).delete()
    Job.objects.filter(pool__cluster=cluster).delete()
    Pool.objects.filter(cluster=cluster).delete()
    delete_inventory(cluster)
