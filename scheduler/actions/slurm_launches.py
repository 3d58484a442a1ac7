"""LAUNCHER=slurm: what Slurm answered, applied to the launches and the job (docs/running-jobs.md "The Slurm launcher").

The launch rows are the same as with node agents (one per node of the generation), read in Slurm's terms:
SENT = the submit was sent to the submit host's worker, STARTING = Slurm took it (`slurm_job_id`) and may still hold
it pending, RUNNING = Slurm runs it, then EXITED, STOPPED, REFUSED, TIMED_OUT or LOST like any launch. Stops are
scheduler.actions.lifecycle' (one `slurm_stop` per generation, answered through record_stopped for each node).

The submit host's side (scheduler/slurm_launches.py) calls these with what sbatch, squeue and scontrol said; each
names (job, generation) and changes nothing once that generation moved on, so a redelivered or late answer is
harmless. A Slurm job whose generation is no longer open is cancelled by the watcher, never run twice.
"""

from __future__ import annotations

from django.utils import timezone

from scheduler.actions.jobs import finish_job, record_event, requeue_job
from scheduler.actions.lifecycle import advance_job, close_launch, launches_for_update, rollback, set_launch
from scheduler.actions.locking import atomic_retry, lock_job
from scheduler.choices import ACTIVE_STATUSES, OPEN_LAUNCH_STATES, JobStatus, LaunchState

SLURM = "slurm"
S = LaunchState
OUTCOMES = ("wait", "running", "completed", "failed", "requeue", "lost", "unstartable")


@atomic_retry
def record_submitted(job_id: int, generation: int, slurm_id: int, *, adopted: bool = False) -> bool:
    """sbatch answered with the Slurm job id (or the watcher found the job of a submit whose answer was lost:
    `adopted`). The first id recorded is the generation's; returns whether `slurm_id` is it."""
    job = lock_job(job_id)
    if job is None:
        return False
    launches = list(launches_for_update().filter(job=job, generation=generation))
    recorded = {la.slurm_job_id for la in launches} - {None}
    if recorded:
        return int(slurm_id) in recorded
    waiting = [la for la in launches if la.state == S.SENT]
    if not waiting or job.generation != generation or job.status != JobStatus.ADMITTED:
        return False  # it moved on before the answer (cancelled, timed out): the watcher cancels that Slurm job
    now = timezone.now()
    for la in waiting:
        set_launch(la, S.STARTING, slurm_job_id=int(slurm_id), acked_at=now)
    how = "found in Slurm after its submit's answer was lost" if adopted else "submitted to Slurm"
    record_event(job, job.status, f"{how} as job {slurm_id} on {', '.join(la.hostname for la in waiting)}", actor=SLURM)
    return True


@atomic_retry
def record_submit_failed(job_id: int, generation: int, message: str, *, permanent: bool) -> bool:
    """sbatch refused the generation (a node Slurm does not know or drained, a partition that does not exist): the
    launch is rolled back and the job requeued, to be placed again. `permanent`: Slurm cannot be asked to run this
    job at all (fractional GPU shares, no command): it fails with the reason instead of coming back forever."""
    job = lock_job(job_id)
    if job is None or job.generation != generation or job.status != JobStatus.ADMITTED:
        return False
    launches = list(launches_for_update().filter(job=job, generation=generation, state=S.SENT))
    if not launches:
        return False
    for la in launches:
        close_launch(la, S.REFUSED, message)
    if permanent:
        finish_job(job, succeeded=False, reason=f"cannot run in Slurm: {message}", actor=SLURM)
    else:
        rollback(job, f"Slurm refused the job: {message}; requeued")
    return True


@atomic_retry
def apply_outcome(
    job_id: int, generation: int, slurm_id: int, kind: str, reason: str, exit_code: int | None = None
) -> bool:
    """What the watcher read of one generation's Slurm job (scheduler.launch.slurm.outcome, or `lost` when Slurm no
    longer knows it). Launches being stopped are left to their stop's answer. Returns whether anything changed."""
    if kind not in OUTCOMES:
        raise ValueError(f"unknown Slurm outcome {kind!r}")
    job = lock_job(job_id)
    if job is None:
        return False
    launches = [
        la
        for la in launches_for_update().filter(job=job, generation=generation, state__in=OPEN_LAUNCH_STATES)
        if la.state != S.STOPPING
    ]
    if not launches:
        return False
    current = job.generation == generation and job.status in ACTIVE_STATUSES
    now = timezone.now()
    if kind == "wait":
        text = f"pending in Slurm as job {slurm_id}" + (f": {reason}" if reason else "")
        changed = [la for la in launches if la.reason != text[:500]]
        for la in changed:
            la.reason = text[:500]
            la.save(update_fields=["reason"])
        return bool(changed)
    if kind == "running":
        starting = [la for la in launches if la.state in (S.SENT, S.PREPARED, S.STARTING)]
        for la in starting:
            set_launch(la, S.RUNNING, slurm_job_id=int(slurm_id), started_at=now, reason=reason[:500])
        if current:
            advance_job(job)
        return bool(starting)
    if kind in ("completed", "failed"):
        for la in launches:
            close_launch(la, S.EXITED, reason, returncode=exit_code, slurm_job_id=int(slurm_id))
        if current and kind == "completed":
            advance_job(job)
        elif current:
            finish_job(job, succeeded=False, reason=reason, actor=SLURM)
        return True
    if kind == "unstartable":
        for la in launches:
            close_launch(la, S.TIMED_OUT, reason)
        rollback(job, f"{reason}; rolled back and requeued")  # the watcher cancels the Slurm job still pending
        return True
    # requeue (Slurm requeued it, or it ran and went back to pending) or lost (Slurm no longer knows the job)
    for la in launches:
        close_launch(la, S.LOST, reason)
    if current and job.requeue_opt_out:
        finish_job(job, succeeded=False, reason=reason, actor=SLURM)
    elif current:
        requeue_job(job, actor=SLURM, reason=reason)
    return True
