"""The lifecycle of a placed job on its nodes: launch (two phases), watch, stop, relaunch, reconcile.

Central side only (the database); the node side is scheduler/launch/agent.py behind the tasks of
scheduler/tasks.py. docs/running-jobs.md draws the states. In short:

- A placement leaves the job `admitted` with a new `generation`; after commit `launch_job` writes one
  `Launch` per node and sends each node `node_prepare`. Only when every node of that generation prepared
  does anyone get `node_start`; the job is `running` once every node started. A refusal, or a node silent
  for LAUNCH_ACK_TIMEOUT_S, rolls the launch back: what started is stopped, the GPUs are released and the
  job requeued.
- Stops (SIGTERM, the job's grace period, SIGKILL) go to every node that may run the job. A preempted job
  keeps its GPUs until every node confirmed (it checkpoints meanwhile), then is requeued; a migrating job
  holds old and new GPUs until then, and relaunches on the new ones as the next generation, with the same
  checkpoint directory. A cancelled or failed job frees its GPUs at once: a node runs its queue in order,
  so the stop runs there before any later launch on those GPUs.
- Exits come from each agent's watcher: all nodes 0 -> completed, any other code -> failed (the others
  stopped), an exit lost with its node -> requeued (or failed with requeue_opt_out).
- A restarted agent says hello with what it found; `agent_hello` applies reconcile.plan_reconcile.

Every message names (job, generation, host); one about a generation that is not the job's current one, or
a launch already past that state, changes nothing. Under LAUNCHER="twin" nothing is sent: placements run
at once, stops are immediate, and `sweep` ends jobs once their est_runtime_s has passed.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Count, F
from django.utils import timezone

from clusterctl import outages
from fabric.models import GPU, NodeTopology
from scheduler import enqueue
from scheduler.actions.allocations import ShareSpec, allocate, release_allocations
from scheduler.actions.jobs import SCHEDULER, finish_job, move_job, record_event, request_round_on_commit, requeue_job
from scheduler.actions.locking import atomic_retry, lock_job, lock_jobs
from scheduler.choices import ACTIVE_STATUSES, OPEN_LAUNCH_STATES, STARTED_LAUNCH_STATES, JobStatus, LaunchState
from scheduler.launch.agent import FoundJob
from scheduler.launch.env import free_master_port, master_hostname, parse_port_range
from scheduler.launch.reconcile import plan_reconcile
from scheduler.models import Allocation, Job, Launch

log = logging.getLogger(__name__)

AGENT = "node agent"
ORPHAN_GRACE_S = 10  # grace period for a process whose job the database no longer has
TWIN = "twin"
S = LaunchState


def enabled() -> bool:
    """Whether jobs are launched (node agents under LAUNCHER process or container, Slurm under slurm), or the twin
    plays them."""
    return settings.LAUNCHER != "twin"


def by_slurm() -> bool:
    """LAUNCHER=slurm: one sbatch per generation from the submit host's worker (queue `slurm`), no node agents."""
    return settings.LAUNCHER == "slurm"


def placed_status() -> str:
    """The status a placement gives: admitted until its nodes started it, or running at once under the twin."""
    return JobStatus.ADMITTED if enabled() else JobStatus.RUNNING


def node_queue(host: str) -> str:
    return f"node.{host}"


def _send_on_commit(task: str, messages: Sequence[tuple[str, tuple]], link: str = "", **options: Any) -> None:
    """After commit, each (host, args) to that node's queue as scheduler.tasks.<task>, its answer to <link>.

    Never raises into the committed caller (a cancel answers 200 with the broker down): what could not be sent
    follows from the launches' state, whose sweep sends an unanswered prepare, start or stop again (resend)."""
    if not messages:
        return

    def send() -> None:
        _send(task, messages, link, **options)

    transaction.on_commit(send)


def _send_slurm_on_commit(task: str, args: tuple) -> None:
    """After commit, scheduler.tasks.<task> to the Slurm submit host's queue (never raises into the caller)."""
    transaction.on_commit(lambda: _send_slurm(task, args))


def _send_slurm(task: str, args: tuple) -> bool:
    return _send(task, [("the Slurm submit host", args)], queue=settings.SLURM_QUEUE) == 1


def _send(task: str, messages: Sequence[tuple[str, tuple]], link: str = "", *, queue: str = "", **options: Any) -> int:
    """Send each (host, args) now, to that node's queue (or to `queue`); returns how many went out. The first outage
    error stops the rest (the broker is down for them too: each would wait out the publish retries), which the sweep
    sends again."""
    if outages.recent(outages.BROKER):
        return 0  # it just failed here: the sweep sends these (clusterctl.outages.SKIP_S)
    node_task, ack = enqueue.task(task), enqueue.task(link).s() if link else None
    for i, (host, args) in enumerate(messages):
        try:
            node_task.apply_async(args, queue=queue or node_queue(host), link=ack, **options)
        except outages.OUTAGE_ERRORS as exc:
            outages.note(exc, f"node messages are not sent ({task} to {host} and {len(messages) - i - 1} more "
                         "here); the launch sweep sends unanswered ones again", key="node messages")  # fmt: skip
            return i
        except Exception:
            log.exception("could not send %s to %s", task, host)
    return len(messages)


# -- launch ------------------------------------------------------------------------------------------------


def launch_on_commit(job_ids: Iterable[int]) -> None:
    """After commit, one launch_jobs task per 200 placed jobs (nothing under the twin)."""
    ids = list(job_ids)
    if not ids or not enabled():
        return

    def send() -> None:
        launch_jobs = enqueue.task("launch_jobs")
        if outages.recent(outages.BROKER):
            return  # it just failed here: the sweep launches them (clusterctl.outages.SKIP_S)
        for i in range(0, len(ids), 200):
            chunk = ids[i : i + 200]
            try:
                # A short repr for the monitoring headers: Celery's own of 200 ids was a third of the 30 sends' time
                # after a round that filled 10,000 GPUs.
                launch_jobs.apply_async((chunk,), argsrepr=f"([{len(chunk)} jobs: {chunk[0]}..{chunk[-1]}],)")
            except outages.OUTAGE_ERRORS as exc:  # the sweep launches admitted jobs that have no launch
                outages.note(exc, "placed jobs are not launched at once; the launch sweep launches them",
                             key="launch requests")  # fmt: skip
                return
            except Exception:
                log.exception("could not enqueue the launch of jobs %s", chunk)

    transaction.on_commit(send)


def _share(a: Allocation) -> dict[str, Any]:
    return {
        "uuid": a.gpu.uuid,
        "index": a.gpu.index,
        "kind": a.kind,
        "compute_pct": a.compute_pct,
        "memory_mib": a.memory_mib if a.kind == "mps" else 0,  # MPS pinned memory limit; others hold the GPU's
        "mig_uuid": "",
    }


@atomic_retry
def launch_job(job_id: int) -> list[Launch]:
    """Write the launches of the job's current generation and send each node its prepare (idempotent)."""
    job = lock_job(job_id)
    if job is None or job.status != JobStatus.ADMITTED:
        return []
    if Launch.objects.filter(job=job, generation=job.generation).exists():
        return []
    allocations = list(
        Allocation.objects.filter(job=job, active=True)
        .select_related("gpu__node")
        .order_by("gpu__node__hostname", "gpu__index")
    )
    if not allocations:
        rollback(job, "admitted without GPUs: requeued")
        return []
    by_node: dict[int, list[Allocation]] = defaultdict(list)
    for a in allocations:
        by_node[a.gpu.node_id].append(a)
    nodes = {a.gpu.node_id: a.gpu.node for a in allocations}
    topologies = {t.node_id: t for t in NodeTopology.objects.filter(node_id__in=list(nodes))}
    allocation = {
        "job_id": job.pk,
        "generation": job.generation,
        "env": dict(job.env or {}),
        "nodes": [
            {"hostname": nodes[n].hostname, "address": "", "gpus": [_share(a) for a in items]}
            for n, items in by_node.items()
        ],
    }
    now = timezone.now()
    rows = []
    for node_id, items in by_node.items():
        topo = topologies.get(node_id)
        payload = {
            "job_id": job.pk,
            "generation": job.generation,
            "host": nodes[node_id].hostname,
            "allocation": allocation,
            "mig": {
                str(a.gpu.index): {"profile": a.mig_profile, "start": a.mig_start} for a in items if a.kind == "mig"
            },
            "command": job.command,
            "image": job.image,
            "workdir": job.workdir,
            "run_as": job.tenant.run_as,  # uid:gid on the nodes (scheduler/launch/checks.py); "" the agent's user
            "grace_s": job.grace_period_s,
            # The host CPU and memory the job was placed by on each node: the container launcher limits it to them.
            "limits": {"cpu_milli": job.host_cpu_milli or 0, "memory_mib": job.host_memory_mib or 0},
            "affinity": {"nics": topo.nics, "nic_affinity": topo.nic_affinity} if topo and topo.nics else None,
        }
        rows.append(
            Launch(job=job, generation=job.generation, node_id=node_id, hostname=nodes[node_id].hostname,
                   state=S.SENT, gpu_ids=[a.gpu_id for a in items], payload=payload, changed_at=now)
        )  # fmt: skip
    if by_slurm():  # how many GPUs each node has: a job holding every one of them is --exclusive in Slurm
        totals = dict(GPU.objects.filter(node_id__in=list(nodes)).values("node_id").annotate(n=Count("pk"))
                      .values_list("node_id", "n").order_by())  # fmt: skip
        for r in rows:
            r.payload["node_gpus"] = totals.get(r.node_id, 0)
    master = next(r for r in rows if r.hostname == master_hostname(r.hostname for r in rows))
    if _store_with_master_port(job, rows, master) is None:
        rollback(job, f"every master port ({settings.LAUNCH_MASTER_PORTS}) is held on {master.hostname}: requeued")
        return []
    if by_slurm():
        _send_slurm_on_commit("slurm_submit", (job.pk, job.generation))
        return rows
    prepares = [(r.hostname, (r.payload,)) for r in rows]
    _send_on_commit("node_prepare", prepares, link="launch_ack", expires=settings.LAUNCH_ACK_TIMEOUT_S)
    return rows


MASTER_PORT_ATTEMPTS = 5


def _store_with_master_port(job: Job, rows: list[Launch], master: Launch) -> int | None:
    """Store the generation's launches with a MASTER_PORT no open launch on the master node holds (a port that is a
    function of the job id alone collides there: jobs 7 and 507 share 29507). The job id's own port when free, else
    the next free one. Two launches choosing at once on one master: the partial unique index
    one_open_launch_per_master_port refuses the second, which chooses again. None when every port is held."""
    low, high = parse_port_range(settings.LAUNCH_MASTER_PORTS)
    for attempt in range(MASTER_PORT_ATTEMPTS):
        taken = Launch.objects.filter(
            node_id=master.node_id, state__in=OPEN_LAUNCH_STATES, master_port__isnull=False
        ).values_list("master_port", flat=True)
        port = free_master_port(job.pk, taken, low, high)
        if port is None:
            return None
        master.master_port = port
        master.payload["allocation"]["master_port"] = port  # one allocation dict: every node's payload says it
        try:
            with transaction.atomic():
                Launch.objects.bulk_create(rows)
        except IntegrityError:
            if attempt == MASTER_PORT_ATTEMPTS - 1:
                raise
            continue
        return port
    return None


def launches_for_update():
    """Launch rows to lock, the launch's row only: the default ordering on `job` would join, and lock, the job too."""
    return Launch.objects.select_for_update(no_key=True, of=("self",)).order_by("pk")


def _locked(result: Mapping[str, Any]) -> tuple[Job | None, Launch | None]:
    job = lock_job(int(result["job_id"]))
    if job is None:
        return None, None
    launch = (
        launches_for_update().filter(job=job, generation=int(result["generation"]), hostname=result["host"]).first()
    )
    return job, launch


def set_launch(launch: Launch, state: str, **fields: Any) -> None:
    launch.state = state
    launch.changed_at = timezone.now()
    for key, value in fields.items():
        setattr(launch, key, value)
    launch.save()


def close_launch(launch: Launch, state: str, reason: str, **fields: Any) -> None:
    set_launch(launch, state, reason=reason[:500], finished_at=timezone.now(), **fields)


def _generation(job: Job, generation: int | None = None) -> list[Launch]:
    return list(Launch.objects.filter(job=job, generation=job.generation if generation is None else generation))


@atomic_retry
def record_prepared(result: Mapping[str, Any]) -> None:
    """launch_ack: a node prepared (or refused). Once every node of the generation prepared, start them all."""
    job, launch = _locked(result)
    if launch is None or launch.state != S.SENT:
        return  # unknown, or answered already (a redelivered prepare)
    if job.generation != launch.generation or job.status != JobStatus.ADMITTED:
        close_launch(launch, S.STOPPED, "stale: the job moved on before this node prepared")
        return
    if not result.get("ok"):
        reason = str(result.get("reason") or "refused")
        close_launch(launch, S.REFUSED, reason, acked_at=timezone.now())
        rollback(job, f"{launch.hostname} refused the launch: {reason}; requeued")
        return
    set_launch(launch, S.PREPARED, acked_at=timezone.now())
    launches = _generation(job)
    if not all(la.state == S.PREPARED for la in launches):
        return
    for la in launches:
        set_launch(la, S.STARTING)
    starts = [(la.hostname, (la.payload,)) for la in launches]
    _send_on_commit("node_start", starts, link="start_ack", expires=settings.LAUNCH_ACK_TIMEOUT_S)


@atomic_retry
def record_started(result: Mapping[str, Any]) -> None:
    """start_ack: a node started its part (or could not). The job runs once every node started."""
    job, launch = _locked(result)
    if launch is None or launch.state != S.STARTING:
        return  # already running (redelivered), stopping (cancelled meanwhile) or ended
    if not result.get("ok"):
        reason = str(result.get("reason") or "could not start")
        close_launch(launch, S.REFUSED, reason)
        if job.generation == launch.generation:
            rollback(job, f"{launch.hostname} could not start the job: {reason}; requeued")
        return
    set_launch(launch, S.RUNNING, pid=result.get("pid"), started_at=timezone.now())
    advance_job(job)


def advance_job(job: Job) -> None:
    """Move the job on from what its current generation's launches say: running, then completed."""
    launches = _generation(job)
    if not launches or job.status not in (JobStatus.ADMITTED, JobStatus.RUNNING):
        return
    if job.status == JobStatus.ADMITTED and all(la.state in (S.RUNNING, S.EXITED) for la in launches):
        where = ", ".join(f"{la.hostname} (pid {la.pid})" for la in launches)
        move_job(job, JobStatus.RUNNING, f"started on {where}", actor=AGENT, expect=[JobStatus.ADMITTED],
              started_at=timezone.now())  # fmt: skip
    if all(la.state == S.EXITED and la.returncode == 0 for la in launches):
        finish_job(job, succeeded=True, reason=f"exited 0 on {', '.join(la.hostname for la in launches)}")


@atomic_retry
def record_exit(host: str, item: Mapping[str, Any]) -> None:
    """An agent saw the job end on its own (or lose it). Completion, failure or requeue follows; then forget."""
    job, launch = _locked({**item, "host": host})
    gen = int(item["generation"])
    if launch is not None:
        code = item.get("returncode")
        lost = item.get("state") == "lost"
        if launch.state in (S.STARTING, S.RUNNING, S.SENT, S.PREPARED):
            if lost:
                close_launch(launch, S.LOST, f"{host} lost it: gone without an exit status (killed with its shim, or a "
                       "reboot)")  # fmt: skip
            else:
                close_launch(launch, S.EXITED, f"exited with code {code}", returncode=code)
            if job.generation == gen and job.status in ACTIVE_STATUSES:
                if lost and not job.requeue_opt_out:
                    requeue_job(job, actor=AGENT, reason=f"lost on {host} (no exit status); requeued")
                elif lost:
                    finish_job(job, succeeded=False, reason=f"lost on {host} (no exit status)")
                elif code != 0:
                    finish_job(job, succeeded=False, reason=f"exited with code {code} on {host}")
                else:
                    advance_job(job)
        elif launch.state == S.STOPPING:
            close_launch(launch, S.STOPPED, f"ended during its stop (code {code})", returncode=code)
            settle(job)
    _forget_on_commit(host, int(item["job_id"]), gen)


def _forget_on_commit(host: str, job_id: int, generation: int) -> None:
    if by_slurm():
        return  # no node agent keeps files of it: Slurm forgets its own jobs
    _send_on_commit("node_forget", [(host, (host, job_id, generation))])


# -- stop --------------------------------------------------------------------------------------------------


def _stop(job: Job, launches: Sequence[Launch], why: str) -> int:
    """Stop these launches: close those that never got a start; SIGTERM the rest (after commit). Returns how
    many nodes were asked."""
    now = timezone.now()
    asked = []
    for la in launches:
        if la.state in (S.SENT, S.PREPARED):
            close_launch(la, S.STOPPED, f"{why}: never started")
        elif la.state in (S.STARTING, S.RUNNING):
            set_launch(la, S.STOPPING, stop_why=why, stop_sent_at=now)
            asked.append((la.hostname, (la.hostname, job.pk, la.generation, job.grace_period_s, why)))
    if by_slurm():  # one scancel per generation: Slurm signals every node of the job
        for generation in sorted({args[2] for _, args in asked}):
            _send_slurm_on_commit("slurm_stop", (job.pk, generation, job.grace_period_s, why))
        return len(asked)
    _send_on_commit("node_stop", asked, link="stop_ack")
    return len(asked)


def _open(job: Job) -> list[Launch]:
    return list(launches_for_update().filter(job=job, state__in=OPEN_LAUNCH_STATES))


def abandon_launches(job: Job, why: str) -> int:
    """Stop whatever may run of the job on its nodes, whatever becomes of the job (cancel, failure, requeue).
    Its GPUs are released by the caller at once: each node stops it before it runs anything queued later."""
    return _stop(job, _open(job), why)


def preempt(
    job: Job, reason: str, for_job: int | None, round_id: int | None = None, *, record: dict | None = None
) -> None:
    """A round preempts the job: it keeps its GPUs while its nodes stop it (SIGTERM: checkpoint), then requeues.
    `record`: the preemption's fields stored on the job with the status (preempted_for, _at, _gpus)."""
    move_job(job, JobStatus.PREEMPTED, reason, actor=SCHEDULER, expect=ACTIVE_STATUSES, round_id=round_id,
          **(record or {}))  # fmt: skip
    _stop(job, _open(job), "preemption")
    settle(job, round_id=round_id, for_job=for_job)


def migrate(job: Job, migration, specs: list[ShareSpec], replicas_max: int, round_id: int | None, now) -> None:
    """A round moves the job: take the new GPUs now, stop it on the old ones, relaunch once it stopped."""
    move_job(job, JobStatus.MIGRATING, migration.reason, actor=SCHEDULER, expect=[JobStatus.RUNNING],
          round_id=round_id, last_migrated_at=now)  # fmt: skip
    old = list(Allocation.objects.filter(job=job, active=True).values_list("gpu_id", flat=True))
    allocate(job, specs, replicas_max=replicas_max)  # disjoint from the old shares (the engine's contract)
    reason = f"moved to {', '.join(migration.placement.nodes)}: {migration.placement.explanation}"
    launches = _open(job)
    if not launches:  # nothing of it runs on a node (launched before agents did): relaunch at once
        release_allocations(job, gpu_ids=old)
        move_job(job, JobStatus.ADMITTED, reason, actor=SCHEDULER, expect=[JobStatus.MIGRATING], round_id=round_id,
              generation=F("generation") + 1)  # fmt: skip
        launch_on_commit([job.pk])
        return
    _stop(job, launches, "migration")
    settle(job, round_id=round_id, relaunch_reason=reason)


def settle(job: Job, *, round_id: int | None = None, for_job: int | None = None, relaunch_reason: str = "") -> bool:
    """Once nothing of a preempted or migrating job runs on any node: requeue it, or relaunch it on its new
    GPUs as the next generation. Returns whether it moved."""
    job.refresh_from_db()
    if job.status not in (JobStatus.PREEMPTED, JobStatus.MIGRATING):
        return False
    if Launch.objects.filter(job=job, state__in=OPEN_LAUNCH_STATES).exists():
        return False
    stopped = _generation(job)
    if job.status == JobStatus.PREEMPTED:
        release_allocations(job)
        why = f" for job {for_job}" if for_job else ""
        how = _how_stopped(stopped)
        move_job(job, JobStatus.PENDING, f"requeued after preemption{why}{how}", actor=SCHEDULER,
              expect=[JobStatus.PREEMPTED], round_id=round_id, started_at=None, borrowed=False)  # fmt: skip
        request_round_on_commit(job.pool.cluster_id, f"job {job.pk} requeued after preemption")
        return True
    # The GPUs its stopped generation ran on; the new ones were taken when the move was decided.
    release_allocations(job, gpu_ids={g for la in stopped for g in la.gpu_ids})
    reason = relaunch_reason or f"relaunching on its new GPUs{_how_stopped(stopped)}"
    move_job(job, JobStatus.ADMITTED, reason, actor=SCHEDULER, expect=[JobStatus.MIGRATING], round_id=round_id,
          generation=F("generation") + 1)  # fmt: skip
    launch_on_commit([job.pk])
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} migrated")
    return True


def _how_stopped(launches: Sequence[Launch]) -> str:
    killed = [la.hostname for la in launches if la.exited_within_grace is False]
    if killed:
        return f" (killed after its grace period on {', '.join(killed)})"
    if launches and all(la.exited_within_grace for la in launches):
        return " (stopped within its grace period)"
    return ""


def rollback(job: Job, reason: str) -> None:
    """A launch that cannot complete: stop what started, release the GPUs, requeue (keeping its place)."""
    if job.status != JobStatus.ADMITTED:
        return
    _stop(job, _open(job), "rollback")
    release_allocations(job)
    move_job(job, JobStatus.PENDING, reason, actor=SCHEDULER, expect=[JobStatus.ADMITTED], started_at=None)
    request_round_on_commit(job.pool.cluster_id, f"job {job.pk} launch rolled back")


@atomic_retry
def record_stopped(result: Mapping[str, Any]) -> None:
    """stop_ack: a node stopped its part, within the grace period or with SIGKILL. Settles the job."""
    job, launch = _locked(result)
    if launch is None:
        if result.get("found"):  # an orphan the agent reported and we asked it to kill: drop its files
            _forget_on_commit(result["host"], int(result["job_id"]), int(result["generation"]))
        return
    if not result.get("ok"):
        launch.reason = f"stop failed: {result.get('reason', '')}"[:500]
        launch.save(update_fields=["reason"])
        return
    grace = job.grace_period_s
    code, within = result.get("returncode"), result.get("exited_within_grace")
    if not result.get("found"):
        text = "nothing of it ran there (never started, or already gone)"
    elif result.get("already_exited"):
        text = f"had already exited (code {code})"
    elif within:
        waited = result.get("waited_s") or 0
        text = f"exited {waited:.1f} s after SIGTERM, within its {grace} s grace period (code {code})"
    else:
        text = f"still running after its {grace} s grace period: killed with SIGKILL"
    if launch.state in OPEN_LAUNCH_STATES:
        close_launch(launch, S.STOPPED, text, returncode=code, exited_within_grace=within)
    elif launch.exited_within_grace is None and result.get("found"):
        launch.exited_within_grace = within
        launch.returncode = launch.returncode if launch.returncode is not None else code
        launch.reason = text[:500]
        launch.save(update_fields=["exited_within_grace", "returncode", "reason"])
    if result.get("found"):
        record_event(job, job.status, f"{launch.hostname}: {text}", actor=AGENT)
        _forget_on_commit(launch.hostname, job.pk, launch.generation)
    settle(job)


# -- agent restart -----------------------------------------------------------------------------------------


@atomic_retry
def agent_hello(host: str, found: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """A (re)started agent reports what its run directory holds; keep, kill, report, forget, or mark lost."""
    items = [FoundJob.from_dict(f) for f in found]
    # Every job the steps below may change, locked at once in id order: each step then locks its job again (held
    # already) and its launches and ledgers after it, so no job lock ever follows a ledger lock (scheduler.actions).
    lock_jobs(
        [*Launch.objects.filter(hostname=host, state__in=STARTED_LAUNCH_STATES).values_list("job_id", flat=True),
         *(f.job_id for f in items)]
    )  # fmt: skip
    launches = list(Launch.objects.filter(hostname=host, state__in=STARTED_LAUNCH_STATES).order_by("generation"))
    expected = {la.job_id: la.generation for la in launches}  # the newest generation per job
    by_key = {(la.job_id, la.generation): la for la in launches}
    plan = plan_reconcile(items, expected)
    pids = {(f.job_id, f.generation): f.pid for f in items}
    for key in plan.keep:
        la = by_key[key]
        if la.state == S.STARTING:  # it started; the start's answer was lost with the agent
            record_started({"job_id": key[0], "generation": key[1], "host": host, "ok": True, "pid": pids.get(key)})
    for job_id, generation, code in plan.report:
        state = next(f.state for f in items if (f.job_id, f.generation) == (job_id, generation))
        record_exit(host, {"job_id": job_id, "generation": generation, "state": state, "returncode": code})
    for job_id, generation in plan.forget:
        _forget_on_commit(host, job_id, generation)
    # Still running where a stop was asked: that stop may have been lost with the agent; ask again (a stop of what
    # already ended only says so).
    restop = [key for key in plan.keep if by_key[key].state == S.STOPPING]
    graces = dict(Job.objects.filter(pk__in=[j for j, _ in plan.kill + restop]).values_list("pk", "grace_period_s"))
    kills = [
        (host, (host, j, g, graces.get(j, ORPHAN_GRACE_S), "stop again" if (j, g) in restop else "orphan"))
        for j, g in plan.kill + restop
    ]
    _send_on_commit("node_stop", kills, link="stop_ack")
    missing = 0
    for key in plan.missing:
        la = by_key.get(key)
        if la is not None and la.state in (S.RUNNING, S.STOPPING):  # a start still queued is not missing yet
            record_exit(host, {"job_id": key[0], "generation": key[1], "state": "lost", "returncode": None})
            missing += 1
    found_keys = {(f.job_id, f.generation) for f in items}
    gone = [la for la in launches if (la.job_id, la.generation) not in found_keys and la.job_id in expected
            and la.generation < expected[la.job_id]]  # fmt: skip
    for la in gone:  # an older generation that was being stopped, and is not there any more
        record_exit(host, {"job_id": la.job_id, "generation": la.generation, "state": "lost", "returncode": None})
    counts = {"keep": len(plan.keep), "kill": len(plan.kill), "stop_again": len(restop), "report": len(plan.report),
              "forget": len(plan.forget), "missing": missing}  # fmt: skip
    log.info("agent %s is back: %s", host, counts)
    return counts


# -- timeouts, and the twin --------------------------------------------------------------------------------


def sweep(now=None) -> dict[str, int]:
    """Beat: launches nobody acknowledged in time are rolled back; stops nobody confirmed are given up; a prepare,
    start or stop unanswered for LAUNCH_RESEND_S is sent once more; admitted jobs whose launch message was lost are
    launched; under the twin, jobs end after est_runtime_s."""
    now = now or timezone.now()
    done = {"timed_out": 0, "stops_given_up": 0, "resent": 0, "launched": 0, "twin_finished": 0}
    if not enabled():
        done["twin_finished"] = _twin_finish(now)
        return done
    ack_limit = settings.LAUNCH_ACK_TIMEOUT_S
    # In Slurm, a submitted generation (STARTING) may wait its turn there: the Slurm watcher rolls it back only for a
    # reason Slurm will not get over (scheduler.launch.slurm.outcome); an unanswered submit (SENT) times out here.
    waiting = (S.SENT, S.PREPARED) if by_slurm() else (S.SENT, S.PREPARED, S.STARTING)
    stuck = Launch.objects.filter(state__in=waiting, changed_at__lt=now - timedelta(seconds=ack_limit))
    for job_id in set(stuck.values_list("job_id", flat=True)):
        done["timed_out"] += _time_out(job_id, now, ack_limit)
    stopping = Launch.objects.filter(
        state=S.STOPPING, stop_sent_at__lt=now - timedelta(seconds=settings.LAUNCH_STOP_TIMEOUT_S)
    ).select_related("job")
    for la in list(stopping):
        limit = la.job.grace_period_s + settings.LAUNCH_STOP_TIMEOUT_S
        if la.stop_sent_at < now - timedelta(seconds=limit):
            done["stops_given_up"] += _give_up_stop(la.pk, limit)
    done["resent"] = _resend_slurm(now) if by_slurm() else _resend(now)
    unlaunched = Job.objects.filter(status=JobStatus.ADMITTED).exclude(launches__generation=F("generation"))
    for job_id in list(unlaunched.values_list("pk", flat=True)[:1000]):
        done["launched"] += bool(launch_job(job_id))
    return done


# What each waiting state was sent, and where its answer goes.
_RESEND = {S.SENT: ("node_prepare", "launch_ack"), S.STARTING: ("node_start", "start_ack"),
           S.STOPPING: ("node_stop", "stop_ack")}  # fmt: skip


def _resend_key(launch_id: int, state: str) -> str:
    return f"scheduler:launch-resent:{launch_id}:{state}"


def _resend(now) -> int:
    """Send once more the prepare, start or stop of each launch unanswered for LAUNCH_RESEND_S: it may never have
    been published (the broker was down when its transaction committed), and without it a prepare would wait for
    the ack timeout's rollback, and a cancelled job would run on until its stop is given up. Once per launch and
    state, marked in the cache for as long as that state may wait. Node tasks are idempotent and answers name their
    generation, so a message that was only slow costs a duplicate answer that changes nothing. Returns how many."""

    ack_limit = settings.LAUNCH_ACK_TIMEOUT_S
    quiet = Launch.objects.filter(
        state__in=list(_RESEND), changed_at__lt=now - timedelta(seconds=settings.LAUNCH_RESEND_S)
    ).values_list("pk", "state", "hostname", "job_id", "generation", "payload", "changed_at", "stop_why",
                  "job__grace_period_s")  # fmt: skip
    resent = 0
    for pk, state, host, job_id, generation, payload, changed_at, why, grace in quiet.order_by("pk")[:1000]:
        task, link = _RESEND[state]
        if state == S.STOPPING:
            args, options = (host, job_id, generation, grace, why), {}
            hold = grace + settings.LAUNCH_STOP_TIMEOUT_S
        else:
            left = ack_limit - (now - changed_at).total_seconds()
            args, options, hold = (payload,), {"expires": max(1.0, left)}, ack_limit
        key = _resend_key(pk, state)
        try:
            if not cache.add(key, 1, timeout=int(hold) + 1):
                continue  # sent again already
        except outages.OUTAGE_ERRORS as exc:  # Redis is down: the broker with it; the next sweep tries
            outages.note(exc, "unanswered node messages are not sent again until it is back", key="resends")
            return resent
        if not _send(task, [(host, args)], link, **options):
            cache.delete(key)  # not sent: the next sweep tries again
            return resent
        log.info("sent %s for job %s generation %s to %s again: unanswered for %s s", task, job_id, generation,
                 host, round((now - changed_at).total_seconds()))  # fmt: skip
        resent += 1
    return resent


def _resend_slurm(now) -> int:
    """Under LAUNCHER=slurm: a submit or stop unanswered for LAUNCH_RESEND_S is sent once more (both idempotent: the
    submit finds the Slurm job it may have made by its comment, the stop of an ended job only says so)."""
    cutoff = now - timedelta(seconds=settings.LAUNCH_RESEND_S)
    quiet = (
        Launch.objects.filter(state__in=(S.SENT, S.STOPPING), changed_at__lt=cutoff)
        .values_list("pk", "state", "job_id", "generation", "stop_why", "job__grace_period_s")
        .order_by("pk")[:1000]
    )
    resent, seen = 0, set()
    for pk, state, job_id, generation, why, grace in quiet:
        if (job_id, generation, state) in seen:
            continue  # one message per generation, whatever its number of nodes
        seen.add((job_id, generation, state))
        key = _resend_key(pk, state)
        hold = grace + settings.LAUNCH_STOP_TIMEOUT_S if state == S.STOPPING else settings.LAUNCH_ACK_TIMEOUT_S
        try:
            if not cache.add(key, 1, timeout=int(hold) + 1):
                continue
        except outages.OUTAGE_ERRORS as exc:
            outages.note(exc, "unanswered Slurm submits and stops are not sent again until it is back", key="resends")
            return resent
        args = (job_id, generation, grace, why) if state == S.STOPPING else (job_id, generation)
        if not _send_slurm("slurm_stop" if state == S.STOPPING else "slurm_submit", args):
            cache.delete(key)
            return resent
        resent += 1
    return resent


@atomic_retry
def _time_out(job_id: int, now, limit: float) -> int:
    job = lock_job(job_id)
    if job is None:
        return 0
    cutoff = now - timedelta(seconds=limit)
    late = list(
        launches_for_update().filter(job=job, state__in=(S.SENT, S.PREPARED, S.STARTING), changed_at__lt=cutoff)
    )
    if not late:
        return 0
    silent = sorted({la.hostname for la in late if la.state != S.PREPARED})
    for la in late:
        if la.state == S.SENT:
            close_launch(la, S.TIMED_OUT, f"no answer from {la.hostname} within {limit:g} s")
    if job.status == JobStatus.ADMITTED and any(la.generation == job.generation for la in late):
        who = ", ".join(silent) or "its nodes"
        rollback(job, f"{who} did not acknowledge the launch within {limit:g} s; rolled back and requeued")
    else:  # an older generation's launch: nothing to roll back, only stop what may have started
        _stop(job, [la for la in late if la.state in (S.PREPARED, S.STARTING)], "stale")
    return len(late)


@atomic_retry
def _give_up_stop(launch_id: int, limit: float) -> int:
    # Job first, then its launch: the order every other lifecycle handler locks in (the reverse could deadlock).
    job_id = Launch.objects.filter(pk=launch_id).values_list("job_id", flat=True).first()
    job = lock_job(job_id) if job_id is not None else None
    la = launches_for_update().filter(pk=launch_id, state=S.STOPPING).first() if job else None
    if la is None:
        return 0
    la.job = job
    close_launch(la, S.LOST, f"no stop confirmation from {la.hostname} within {limit:g} s (its agent is gone?)")
    record_event(
        la.job, la.job.status, f"{la.hostname}: stop not confirmed within {limit:g} s; given up", actor=SCHEDULER
    )
    settle(la.job)
    return 1


def _twin_finish(now) -> int:
    """The twin plays a job until its est_runtime_s, then it exits 0."""
    rows = Job.objects.filter(status=JobStatus.RUNNING, est_runtime_s__isnull=False, started_at__isnull=False)
    ended = [
        pk
        for pk, started, runtime in rows.values_list("pk", "started_at", "est_runtime_s")[:50_000]
        if started + timedelta(seconds=runtime) <= now
    ]
    finished = 0
    for job in Job.objects.filter(pk__in=ended[:1000]):
        try:
            finish_job(job, succeeded=True, reason="the twin played it for its est_runtime_s; exited 0", actor=TWIN)
            finished += 1
        except Exception as exc:  # changed meanwhile (cancelled, requeued): the next sweep sees it again
            log.info("twin: job %s not finished: %s", job.pk, exc)
    return finished


# -- logs --------------------------------------------------------------------------------------------------


def read_log(job: Job, lines: int) -> dict[str, Any]:
    """The last lines of the job's log from each node of its latest launch, asked with a short timeout."""
    body: dict[str, Any] = {"job": job.pk, "generation": job.generation, "lines": lines, "nodes": [], "detail": ""}
    if not enabled():
        body["detail"] = "the twin plays this job (LAUNCHER=twin): nothing runs on a node, so there is no log"
        return body
    latest = Launch.objects.filter(job=job).order_by("-generation").values_list("generation", flat=True).first()
    if latest is None:
        body["detail"] = "not launched yet: no node has a log of it"
        return body
    if by_slurm():
        sid = (Launch.objects.filter(job=job, generation=latest, slurm_job_id__isnull=False)
               .values_list("slurm_job_id", flat=True).first())  # fmt: skip
        name = f"cc-{job.pk}-g{latest}-{sid}.out"
        where = (
            f"{settings.SLURM_OUTPUT_DIR}/{name}"
            if settings.SLURM_OUTPUT_DIR
            else f"slurm-{sid}.out in {job.workdir or '/tmp'}"
        )
        body["detail"] = (f"runs in Slurm as job {sid}: Slurm writes its output to {where} (on the job's first node)"
                          if sid else "submitted to Slurm, which has not answered with a job id yet")  # fmt: skip
        return body

    node_tail = enqueue.task("node_tail")
    timeout = settings.LAUNCH_LOG_TIMEOUT_S
    hosts = list(Launch.objects.filter(job=job, generation=latest).values_list("hostname", flat=True))
    asked = [(h, node_tail.apply_async((h, job.pk, lines), queue=node_queue(h), expires=timeout)) for h in hosts]
    deadline = time.monotonic() + timeout
    for host, result in asked:
        entry: dict[str, Any] = {"host": host, "lines": [], "error": ""}
        try:
            # A web request, never a task; a process that also runs an in-process worker (the embedded demo, tests)
            # has Celery's "no result.get() in a task" guard armed for the whole process.
            answer = result.get(
                timeout=max(0.1, deadline - time.monotonic()), propagate=True, disable_sync_subtasks=False
            )
            entry["lines"] = list(answer.get("lines", []))
        except CeleryTimeout:
            entry["error"] = f"{host} did not answer within {timeout:g} s (is its agent running?)"
        except Exception as exc:
            entry["error"] = f"{host}: {exc}"
        finally:
            result.forget()
        body["nodes"].append(entry)
    return body
