"""Job lifecycle: every status change, with a JobEvent and its reason; rounds requested after commit."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from clusterctl import outages
from scheduler import enqueue, events
from scheduler.actions.allocations import release_allocations
from scheduler.actions.errors import ActionError, StaleDecision
from scheduler.actions.locking import atomic_retry, lock_job
from scheduler.choices import ACTIVE_STATUSES, FINAL_STATUSES, JobStatus
from scheduler.models import (
    Job,
    JobEvent,
    Pool,
    PriorityClass,
    Tenant,
)

log = logging.getLogger(__name__)

SCHEDULER = "scheduler"


def record_event(job: Job, to: str, reason: str, *, actor: str, round_id: int | None = None, from_status=None) -> None:
    JobEvent.objects.create(
        job=job,
        from_status=job.status if from_status is None else from_status,
        to_status=to,
        reason=reason[:500],
        actor=actor,
        round_id=round_id,
    )


def move_job(
    job: Job, to: str, reason: str, *, actor: str, expect: Sequence[str], round_id: int | None = None, **fields
):
    """Conditional status change: only from one of `expect`, and only if nobody changed the job meanwhile."""
    updated = Job.objects.filter(pk=job.pk, status__in=expect, version=job.version).update(
        status=to, status_reason=reason[:500], version=F("version") + 1, **fields
    )
    if not updated:
        raise StaleDecision(f"job {job.pk} changed since it was read (wanted {'/'.join(expect)} -> {to})")
    record_event(job, to, reason, actor=actor, round_id=round_id)
    job.refresh_from_db()
    events.job_changed_on_commit(job)


@atomic_retry
def submit_job(tenant: Tenant, pool: Pool, priority_class: PriorityClass, *, actor: str = "", **request: Any) -> Job:
    """Queue a validated request (scheduler.validation checks it first). A round follows on commit."""
    _refuse_protected(priority_class, [request])
    job = Job.objects.create(tenant=tenant, pool=pool, priority_class=priority_class, **request)
    Job.objects.filter(pk=job.pk).update(queue_seq=job.pk)
    job.queue_seq = job.pk
    record_event(job, JobStatus.PENDING, "submitted", actor=actor or str(tenant), from_status="")
    events.job_changed_on_commit(job)
    request_round_on_commit(pool.cluster_id, f"job {job.pk} submitted")
    return job


def _locked(job: Job) -> Job:
    locked = lock_job(job.pk)
    if locked is None:
        raise Job.DoesNotExist(f"job {job.pk} no longer exists")
    return locked


def refuse_observed(job: Job) -> None:
    """Slurm's own jobs are observed read-only (scheduler.actions.slurm_observed): Slurm decides their fate."""
    if job.observed_slurm_id is not None:
        raise ActionError(
            f"job {job.pk} is Slurm's job {job.observed_slurm_id}, observed read-only: use scancel, scontrol hold or "
            "scontrol requeue in Slurm"
        )


@atomic_retry
def cancel_job(job: Job, *, actor: str, reason: str = "cancelled") -> Job:
    job = _locked(job)
    refuse_observed(job)
    if job.status in FINAL_STATUSES:
        raise ActionError(f"job {job.pk} is already {job.status}")
    release_allocations(job)
    _abandon_launches(job, "cancel")
    move_job(job, JobStatus.CANCELLED, reason, actor=actor, expect=[job.status], finished_at=timezone.now())
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} cancelled")
    return job


@atomic_retry
def finish_job(job: Job, *, succeeded: bool, reason: str = "", actor: str = "node agent") -> Job:
    job = _locked(job)
    if job.status not in ACTIVE_STATUSES:
        raise ActionError(f"job {job.pk} is {job.status}, not running")
    release_allocations(job)
    _abandon_launches(job, "finished" if succeeded else "failure")
    to = JobStatus.COMPLETED if succeeded else JobStatus.FAILED
    move_job(job, to, reason or ("exited 0" if succeeded else "failed"), actor=actor, expect=ACTIVE_STATUSES,
          finished_at=timezone.now())  # fmt: skip
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} finished")
    return job


@atomic_retry
def hold_job(job: Job, *, actor: str, reason: str = "held by an operator") -> Job:
    job = _locked(job)
    refuse_observed(job)
    if job.status != JobStatus.PENDING:
        raise ActionError(f"only pending jobs can be held; job {job.pk} is {job.status}")
    if job.held:
        raise ActionError(f"job {job.pk} is already held")
    Job.objects.filter(pk=job.pk).update(held=True, pending_reason=reason, version=F("version") + 1)
    record_event(job, JobStatus.PENDING, reason, actor=actor)
    job.refresh_from_db()
    events.job_changed_on_commit(job)
    return job


@atomic_retry
def release_job(job: Job, *, actor: str) -> Job:
    job = _locked(job)
    refuse_observed(job)
    if not job.held:
        raise ActionError(f"job {job.pk} is not held")
    Job.objects.filter(pk=job.pk).update(held=False, pending_reason="", version=F("version") + 1)
    record_event(job, job.status, "released by an operator", actor=actor)
    job.refresh_from_db()
    events.job_changed_on_commit(job)
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} released")
    return job


@atomic_retry
def requeue_job(job: Job, *, actor: str, reason: str = "requeued by an operator", round_id: int | None = None) -> Job:
    """A running job goes back to pending, keeping its place in line (queue_seq)."""
    job = _locked(job)
    refuse_observed(job)
    if job.status not in ACTIVE_STATUSES:
        raise ActionError(f"only running jobs can be requeued; job {job.pk} is {job.status}")
    release_allocations(job)
    _abandon_launches(job, "requeue")
    move_job(job, JobStatus.PENDING, reason, actor=actor, expect=ACTIVE_STATUSES, round_id=round_id, started_at=None)
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} requeued")
    return job


@atomic_retry
def submit_jobs_bulk(
    tenant: Tenant, pool: Pool, priority_class: PriorityClass, requests: list[dict], *, request_round: bool = True
) -> int:
    """Queue many validated requests at once (batch submission, benchmarks): one INSERT per table."""
    _refuse_protected(priority_class, requests)
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
def record_finished_bulk(
    tenant: Tenant,
    pool: Pool,
    priority_class: PriorityClass,
    requests: list[dict],
    finished: list[tuple[datetime, float]],
    *,
    actor: str = "history",
) -> int:
    """Jobs that already ran, recorded as completed in bulk: each request with its end and the GPU-seconds it received
    (`finished`, in the same order). Fair share charges their tenants as it does any finished job; nothing waits or
    runs, so no round is asked for. Its caller today is `bench_scheduler --history` (a week of a busy cluster)."""
    if len(requests) != len(finished):
        raise ActionError(f"{len(requests)} jobs but {len(finished)} ends: one (end, GPU-seconds) per job")
    _refuse_protected(priority_class, requests)
    jobs = []
    for r, (end, attained) in zip(requests, finished, strict=True):
        if attained < 0:
            raise ActionError(f"job {r.get('name', '?')!r}: {attained} GPU-seconds received, less than none")
        ran = timedelta(seconds=attained / max(1, r.get("gpus", 1)))
        jobs.append(Job(tenant=tenant, pool=pool, priority_class=priority_class, status=JobStatus.COMPLETED,
                        started_at=end - ran, finished_at=end, attained_gpu_s=attained, **r))  # fmt: skip
    jobs = Job.objects.bulk_create(jobs, batch_size=2000)
    JobEvent.objects.bulk_create(
        [JobEvent(job=j, from_status="", to_status=JobStatus.COMPLETED, reason="recorded as finished", actor=actor)
         for j in jobs],
        batch_size=2000,
    )  # fmt: skip
    return len(jobs)


def _refuse_protected(priority_class: PriorityClass, requests: Sequence[dict]) -> None:
    """What no caller may ask for, the API or not (scheduler.validation says the same to the API, as a 400)."""
    if priority_class.always_preemptible and any(r.get("preemptible") is False for r in requests):
        raise ActionError(f"jobs of priority class {priority_class.name} are always preemptible, not preemptible=false")


def _abandon_launches(job: Job, why: str) -> None:
    """Stop whatever of the job runs on its nodes (scheduler.actions.lifecycle; nothing under the twin)."""
    # Here, not at the top: launches builds on this module's transitions (move_job, requeue_job, finish_job).
    from scheduler.actions.lifecycle import abandon_launches

    abandon_launches(job, why)


def request_round_on_commit(cluster_id: int, trigger: str, countdown: float = enqueue.DEBOUNCE_S) -> None:
    """Ask for a scheduling round after this transaction commits (at once outside one), to start `countdown` seconds
    later (enqueue.request_round). Never raises: what was committed stays committed, and the periodic round
    (scheduler.tasks.periodic_rounds) takes up pending work."""

    def send() -> None:
        if outages.recent(outages.REDIS, outages.BROKER):
            return  # it just failed here: a second wait would only delay the answer (clusterctl.outages.SKIP_S)
        try:
            enqueue.request_round(cluster_id, trigger, countdown=countdown)
        except outages.OUTAGE_ERRORS as exc:  # Redis restarting: one warning per outage, not one per request
            outages.note(exc, "rounds are not requested on events; the periodic round takes up pending jobs",
                         key="round requests")  # fmt: skip
        except Exception:
            log.exception("could not request a scheduling round for cluster %s", cluster_id)

    transaction.on_commit(send)
