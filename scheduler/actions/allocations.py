"""Allocations through the GPU ledger: rows locked and re-checked, CHECKs and unique claims refuse double allocation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from clusterctl.bulk import copy_rows as _insert_rows  # noqa: F401  (scheduler.actions.apply)
from fabric.models import GPU, Node
from scheduler.actions.errors import StaleDecision
from scheduler.actions.locking import lock_ledgers
from scheduler.choices import ShareKind
from scheduler.models import (
    Allocation,
    GpuLedger,
    Job,
    MigSliceClaim,
)


@dataclass(slots=True)
class LedgerRoom:
    """A locked GPU ledger row's room, read as plain values: a round checks and takes thousands at once, and a model
    instance per row cost more than the statement that locked them."""

    gpu_id: int
    compute_pct: int
    memory_mib: int
    memory_total_mib: int
    mig_slices: int
    replicas: int
    replicas_max: int


class ShareSpec(NamedTuple):
    """One GPU's part for a job, as the engine decided it. A named tuple, not a frozen dataclass: a round that fills
    a cluster makes one per GPU it places (10,000), and a frozen dataclass sets each field through a call."""

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
    have = set(GpuLedger.objects.filter(gpu_id__any_of=ids).values_list("gpu_id", flat=True))
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
    # The same room rules as a round's bulk placement (_fits), on the row locked for this claim (allocate locked
    # all of the claim's ledgers first, in gpu_id order).
    ledger = GpuLedger.objects.select_for_update(no_key=True).filter(gpu_id=share.gpu_id).first()
    if ledger is None or not _fits(ledger, share, replicas_max):
        raise StaleDecision(f"GPU {share.gpu_id} no longer has room for a {share.kind} share")
    _take(ledger, share, replicas_max)
    ledger.save(update_fields=["compute_pct", "memory_mib", "mig_slices", "replicas", "replicas_max"])
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
            lock_ledgers(s.gpu_id for s in shares)
            return [_claim(job, share, replicas_max) for share in shares]
    except IntegrityError as exc:  # the database refused a double allocation the ledger did not catch
        raise StaleDecision(f"job {job.pk}: {exc}") from exc


def release_allocations(job: Job, gpu_ids: Iterable[int] | None = None) -> int:
    """Give back everything the job holds (or only its shares on `gpu_ids`: a migration's old GPUs); the ledger
    sums go down by exactly what it held. The caller holds the job's row lock (scheduler.actions: lock order)."""
    # The allocation rows only (a default ordering on job and GPU would join, and lock, those rows too).
    held_rows = Allocation.objects.select_for_update(no_key=True, of=("self",)).filter(job=job, active=True)
    if gpu_ids is not None:
        held_rows = held_rows.filter(gpu_id__in=list(gpu_ids))
    held = list(held_rows.order_by("pk"))
    lock_ledgers(a.gpu_id for a in held)
    for a in held:
        ledger = GpuLedger.objects.filter(gpu_id=a.gpu_id)
        if a.kind in (ShareKind.WHOLE, ShareKind.MPS):
            ledger.update(compute_pct=F("compute_pct") - a.compute_pct, memory_mib=F("memory_mib") - a.memory_mib)
        elif a.kind == ShareKind.MIG:
            ledger.update(mig_slices=F("mig_slices") - a.mig_slices)
        else:
            ledger.update(replicas=F("replicas") - 1)
    MigSliceClaim.objects.filter(allocation__in=held).delete()
    now = timezone.now()
    Allocation.objects.filter(pk__in=[a.pk for a in held]).update(active=False, released_at=now)
    # Attained service (GPU-seconds: one per share held a second), what least-attained-service ordering and
    # preemption rank by and fair share charges for finished jobs; the running part is added by the adapter.
    # Every caller moves the job next, which bumps its version (the adapter re-reads the row).
    served = sum(max(0.0, (now - a.created).total_seconds()) for a in held)
    if served:
        Job.objects.filter(pk=job.pk).update(attained_gpu_s=F("attained_gpu_s") + served)
    return len(held)


def _fits(ledger: GpuLedger | LedgerRoom, share: ShareSpec, replicas_max: int) -> bool:
    """Room rules of the ledger, checked on a locked row in memory (by _claim and by a round's bulk placement)."""
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


def _take(ledger: GpuLedger | LedgerRoom, share: ShareSpec, replicas_max: int) -> None:
    if share.kind in (ShareKind.WHOLE, ShareKind.MPS):
        ledger.compute_pct += share.compute_pct
        ledger.memory_mib += share.memory_mib
    elif share.kind == ShareKind.MIG:
        ledger.mig_slices += share.mig_slices
    else:
        ledger.replicas += 1
        ledger.replicas_max = replicas_max
