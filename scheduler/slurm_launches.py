"""LAUNCHER=slurm, the submit host's side: submit a placed generation, stop it, watch every job of ours in Slurm.

Runs in the worker that consumes the `slurm` queue on a host with Slurm's client commands and munge (the tasks
slurm_submit, slurm_stop and the beat's slurm_watch). The Slurm side is the pure scheduler.launch.slurm (commands,
parsing, `outcome`, `plan_watch`); this module reads the launches it needs, runs the commands, and hands what Slurm
said to scheduler.actions.slurm_launches (or record_stopped), which write. Nothing is kept in memory between calls:
a restarted worker, or a second one, sees the same launches and the same Slurm jobs, so it adopts a submit whose
answer died with the last worker, and cancels a second submit of one generation.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from scheduler.actions.lifecycle import record_stopped
from scheduler.actions.slurm_launches import apply_outcome, record_submit_failed, record_submitted
from scheduler.choices import OPEN_LAUNCH_STATES, LaunchState
from scheduler.launch.slurm import (
    SlurmError,
    SlurmJob,
    SlurmLauncher,
    outcome,
    plan_watch,
    sbatch_argv,
    spec_from_payloads,
    transient,
)
from scheduler.models import Launch
from scheduler.slurm_drains import launcher

log = logging.getLogger(__name__)
S = LaunchState


class SlurmUnavailable(ConnectionError):
    """Slurm could not be asked (its controller down or slow): the task is retried."""


def _submit_key(job_id: int, generation: int) -> str:
    return f"scheduler:slurm-submit:{job_id}:{generation}"


def submit(job_id: int, generation: int, *, slurm: SlurmLauncher | None = None) -> str:
    """Submit the generation once (its launches still SENT). Returns what happened: submitted, found (a submit of an
    earlier delivery was there already), refused, skipped (answered already, moved on, or another delivery of the
    same submit holds it). SlurmUnavailable when Slurm cannot be asked (the task retries)."""
    rows = list(
        Launch.objects.filter(job_id=job_id, generation=generation).values_list("state", "payload", "slurm_job_id")
    )
    if not rows or any(sid for _, _, sid in rows) or any(state != S.SENT for state, _, _ in rows):
        return "skipped"
    slurm = slurm or launcher()
    try:  # what Slurm cannot be asked to do, whatever the nodes: the job fails with the reason
        spec = spec_from_payloads(
            [payload for _, payload, _ in rows],
            partition=settings.SLURM_PARTITION,
            account=settings.SLURM_ACCOUNT,
            output_dir=settings.SLURM_OUTPUT_DIR,
        )
        sbatch_argv(spec, slurm.tag)
    except SlurmError as exc:
        record_submit_failed(job_id, generation, str(exc), permanent=True)
        return "refused"
    # A redelivery (the sweep's resend) while the first delivery runs sbatch would submit twice: the watcher would
    # cancel the second, but not making it is better. The mark outlives one sbatch (the launcher's timeout), not a
    # worker killed before it: the next resend then submits.
    if not cache.add(_submit_key(job_id, generation), 1, timeout=int(slurm.timeout_s) + 5):
        return "skipped"
    try:
        slurm_id, existed = slurm.submit(spec)
    except SlurmError as exc:  # Slurm's refusal of these nodes (unknown, drained, down): placed again elsewhere
        cache.delete(_submit_key(job_id, generation))
        if transient(str(exc)):
            raise SlurmUnavailable(str(exc)) from None
        record_submit_failed(job_id, generation, str(exc), permanent=False)
        return "refused"
    if not record_submitted(job_id, generation, slurm_id):
        log.info("slurm: job %s generation %s moved on before Slurm job %s was recorded; the watcher cancels it",
                 job_id, generation, slurm_id)  # fmt: skip
    return "found" if existed else "submitted"


def stop(job_id: int, generation: int, grace_s: float, why: str = "", *, slurm: SlurmLauncher | None = None) -> dict:
    """SIGTERM to every step of the generation's Slurm job, its grace period, then SIGKILL; each node's launch is
    answered as a node agent's stop would be (record_stopped). SlurmUnavailable when Slurm cannot be asked."""
    rows = list(
        Launch.objects.filter(job_id=job_id, generation=generation).values_list("hostname", "slurm_job_id", "state")
    )
    if not any(state == S.STOPPING for _, _, state in rows):
        return {"found": False, "skipped": True}
    slurm = slurm or launcher()
    try:
        sid = next((s for _, s, _ in rows if s), None)
        if sid is None:  # stopped before the submit's answer: the submit may still have gone through
            found = slurm.find(job_id, generation)
            sid = found.slurm_id if found else None
        if sid is None:
            result = {"found": False, "exited_within_grace": None, "returncode": None, "waited_s": 0.0,
                      "already_exited": True}  # fmt: skip
        else:
            log.info("slurm: stopping job %s generation %s (Slurm job %s, %s, grace %s s)", job_id, generation, sid,
                     why, grace_s)  # fmt: skip
            result = slurm.stop(int(sid), float(grace_s))
    except SlurmError as exc:
        raise SlurmUnavailable(str(exc)) from None
    for host, _, state in rows:
        if state == S.STOPPING:
            record_stopped({**result, "ok": True, "job_id": job_id, "generation": generation, "host": host})
    return result


def watch(*, slurm: SlurmLauncher | None = None, now=None) -> dict[str, int]:
    """One pass over every Slurm job of ours and every open generation: adopt, cancel, and apply each outcome.
    SlurmError when squeue cannot be read (the beat tries again next tick)."""
    slurm = slurm or launcher()
    # Slurm first, then the database: a generation launched in between is then in the database's answer, so its job
    # (which Slurm did not list yet) is never taken for a stray and cancelled.
    found = slurm.ours()
    now = now or timezone.now()
    rows = Launch.objects.filter(state__in=OPEN_LAUNCH_STATES).values_list(
        "job_id", "generation", "slurm_job_id", "state", "changed_at"
    )
    expected: dict[tuple[int, int], int | None] = {}
    states: dict[tuple[int, int], set[str]] = defaultdict(set)
    since: dict[tuple[int, int], object] = {}
    for job_id, generation, sid, state, changed_at in rows:
        key = (job_id, generation)
        expected[key] = expected.get(key) or sid
        states[key].add(state)
        since[key] = min(since.get(key, changed_at), changed_at)
    plan = plan_watch(found, expected)
    done = {"watched": 0, "adopted": 0, "cancelled": 0, "changed": 0, "lost": 0, "errors": 0}
    for sid in plan.cancel:
        try:
            slurm.cancel(sid)
            done["cancelled"] += 1
            log.info("slurm: cancelled Slurm job %s (no open generation of ours is it)", sid)
        except SlurmError as exc:
            done["errors"] += 1
            log.warning("slurm: cancelling job %s: %s", sid, exc)
    for key in plan.adopt:
        if record_submitted(*key, plan.watch[key].slurm_id, adopted=True):
            done["adopted"] += 1
            expected[key] = plan.watch[key].slurm_id
    for key, job in sorted(plan.watch.items()):
        if states[key] <= {S.STOPPING}:
            continue  # its stop answers for it
        done["watched"] += 1
        if job.ended:  # squeue has no exit code: scontrol has, for MinJobAge after the end
            job = _status(slurm, job.slurm_id) or job
        done["changed"] += _apply(key, job, states[key], since[key], now)
    for key in plan.missing:
        if states[key] <= {S.STOPPING}:
            continue
        sid = int(expected[key])
        try:
            job = slurm.status(sid)
        except SlurmError as exc:
            done["errors"] += 1
            log.warning("slurm: reading job %s: %s", sid, exc)
            continue
        if job is None:
            why = f"Slurm job {sid} is gone from Slurm (no state or exit left): requeued here as the next generation"
            done["lost"] += apply_outcome(*key, sid, "lost", why)
        else:
            done["changed"] += _apply(key, job, states[key], since[key], now)
    return done


def _status(slurm: SlurmLauncher, slurm_id: int) -> SlurmJob | None:
    try:
        return slurm.status(slurm_id)
    except SlurmError as exc:
        log.warning("slurm: reading job %s: %s", slurm_id, exc)
        return None


def _apply(key: tuple[int, int], job: SlurmJob, states: set[str], since, now) -> int:
    waiting = (now - since).total_seconds() if since else 0.0
    result = outcome(job, was_running=S.RUNNING in states, waiting_s=waiting,
                     ack_timeout_s=settings.LAUNCH_ACK_TIMEOUT_S)  # fmt: skip
    return int(apply_outcome(*key, job.slurm_id, result.kind, result.reason, result.exit_code))
