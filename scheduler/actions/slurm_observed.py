"""Slurm's own jobs, mirrored read-only (issue 17, part 3; docs/integrations.md "Observe a Slurm cluster").

For a site that keeps Slurm's scheduler: what `scontrol show job -d -o` says (scheduler.launch.slurm_observe) becomes
one Job per Slurm job in the cluster's default pool, of the tenant `slurm`, with `observed_slurm_id` set:

- running in Slurm: `running` here, holding exactly the GPUs slurmd bound it to (host and device index), so the GPU
  and fabric heat maps, the job page and the pool's load show it, and clusterctl's own rounds place around it; it is
  never preempted or moved by them (not preemptible, not movable);
- pending in Slurm: `pending` here with Slurm's reason ("Slurm: Resources"), shown in the queue, never placed by a
  round (it waits in Slurm's queue);
- ended in Slurm, or gone from it: completed, failed or cancelled here, its GPUs released.

Nothing here sends anything to Slurm, and the operator actions refuse these jobs (scheduler.actions.jobs
refuse_observed). One call per reading, idempotent: a second call with the same reading changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db.models import F
from django.utils import timezone

from fabric.models import GPU
from scheduler import events
from scheduler.actions.allocations import ShareSpec, allocate, release_allocations
from scheduler.actions.errors import ActionError, StaleDecision
from scheduler.actions.jobs import move_job, record_event
from scheduler.actions.locking import atomic_retry
from scheduler.choices import FINAL_STATUSES, JobStatus, ShareKind
from scheduler.launch.slurm_observe import ObservedJob
from scheduler.models import Allocation, Job, Pool, PriorityClass, Tenant

log = logging.getLogger(__name__)
SLURM_TENANT = "slurm"
ACTOR = "slurm"
FAILED = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def _reason(o: ObservedJob) -> str:
    return f"Slurm: {o.reason}" if o.reason else f"Slurm: {o.state.lower()}"


@atomic_retry
def sync_observed(cluster_id: int, observed: Sequence[ObservedJob]) -> dict[str, int]:
    """Bring the mirror of the cluster's Slurm jobs in line with one reading. Returns the counts of what changed."""
    pool = Pool.objects.filter(cluster_id=cluster_id, is_default=True).first()
    if pool is None:
        raise ActionError(f"cluster {cluster_id} has no default pool: give it a scheduler first (ensure_scheduler)")
    tenant, _ = Tenant.objects.get_or_create(
        name=SLURM_TENANT, defaults={"description": "Slurm's own jobs, observed read-only (SLURM_OBSERVE)"}
    )
    normal = PriorityClass.objects.get(name="normal")
    gpu_of = {(h, i): pk for pk, h, i in GPU.objects.filter(node__cluster_id=cluster_id).values_list(
        "pk", "node__hostname", "index")}  # fmt: skip
    mirrors = {
        j.observed_slurm_id: j
        for j in Job.objects.select_for_update(of=("self",))
        .filter(pool__cluster_id=cluster_id, observed_slurm_id__isnull=False)
        .exclude(status__in=FINAL_STATUSES)
        .order_by("pk")
    }
    # What every mirror holds now, in one query (not one per job: a pass runs every SLURM_OBSERVE_INTERVAL_S).
    holding: dict[int, set[int]] = {}
    for job_id, gpu_id in Allocation.objects.filter(
        job_id__in=[j.pk for j in mirrors.values()], active=True
    ).values_list("job_id", "gpu_id"):
        holding.setdefault(job_id, set()).add(gpu_id)
    done = {"new": 0, "changed": 0, "ended": 0, "unknown_gpus": 0, "conflicts": 0}
    by_id = {o.slurm_id: o for o in observed}
    now = timezone.now()
    # Ended first: the GPUs they give back may be those a job Slurm started since holds now.
    for sid, job in list(mirrors.items()):
        o = by_id.get(sid)
        if o is not None and (o.active or o.waiting):
            continue
        release_allocations(job)
        if o is None:
            to, why = (
                JobStatus.COMPLETED,
                f"Slurm job {sid} is no longer listed by Slurm (its end is in Slurm's records)",
            )
        elif o.state == "COMPLETED" and not o.exit_code:
            to, why = JobStatus.COMPLETED, f"Slurm job {sid} completed (exit 0)"
        elif o.state == "CANCELLED":
            to, why = JobStatus.CANCELLED, f"Slurm job {sid} was cancelled in Slurm"
        else:
            to, why = JobStatus.FAILED, f"Slurm job {sid} ended {o.state} (exit {o.exit_code})"
        move_job(job, to, why, actor=ACTOR, expect=[job.status], finished_at=now)
        events.job_changed_on_commit(job)
        del mirrors[sid]
        done["ended"] += 1
    for o in sorted(observed, key=lambda x: x.slurm_id):
        if not (o.active or o.waiting):
            continue
        job = mirrors.get(o.slurm_id)
        status = JobStatus.RUNNING if o.active else JobStatus.PENDING
        changed = True
        if job is None:
            job = Job.objects.create(
                tenant=tenant, pool=pool, priority_class=normal, name=o.name or f"slurm-{o.slurm_id}",
                gpus=max(1, o.gpus_requested or len(o.gpus)), preemptible=False, observed_slurm_id=o.slurm_id,
                status=status, status_reason=_reason(o), pending_reason=_reason(o) if o.waiting else "",
                started_at=now if o.active else None,
            )  # fmt: skip
            Job.objects.filter(pk=job.pk).update(queue_seq=job.pk)
            where = f" on {o.nodes}" if o.nodes else ""
            record_event(job, status, f"observed in Slurm as job {o.slurm_id} (user {o.user or '?'}, partition "
                         f"{o.partition or '?'}){where}", actor=ACTOR, from_status="")  # fmt: skip
            done["new"] += 1
        elif job.status != status or job.status_reason != _reason(o)[:500]:
            fields = {"pending_reason": _reason(o)[:500] if o.waiting else ""}
            if status == JobStatus.RUNNING and job.started_at is None:
                fields["started_at"] = now
            move_job(job, status, _reason(o), actor=ACTOR, expect=[job.status], **fields)
            job.refresh_from_db()
            done["changed"] += 1
        else:
            changed = False
        if o.active:
            changed = _hold(job, o, gpu_of, holding.get(job.pk, set()), done) or changed
        elif holding.get(job.pk):
            release_allocations(job)  # requeued in Slurm: it holds nothing until it runs again
            changed = True
        if changed:
            events.job_changed_on_commit(job)
    return done


def _hold(job: Job, o: ObservedJob, gpu_of: dict[tuple[str, int], int], held: set[int], done: dict[str, int]) -> bool:
    """Allocations on exactly the GPUs Slurm bound the job to (those the inventory knows); whether they changed."""
    want = set()
    for key in o.gpus:
        if key in gpu_of:
            want.add(gpu_of[key])
        else:
            done["unknown_gpus"] += 1
    if held - want:
        release_allocations(job, gpu_ids=held - want)
    for gpu_id in sorted(want - held):
        try:
            allocate(job, [ShareSpec(gpu_id=gpu_id, kind=ShareKind.WHOLE)])
        except StaleDecision as exc:  # clusterctl placed a job of its own there: two schedulers on one GPU
            done["conflicts"] += 1
            log.warning("slurm job %s holds GPU %s, which a clusterctl job holds too: %s", o.slurm_id, gpu_id, exc)
    if want != held:
        Job.objects.filter(pk=job.pk).update(version=F("version") + 1)
    return want != held
