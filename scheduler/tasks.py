"""Celery tasks of the scheduler: thin, take ids, idempotent (a round recomputes everything it decides)."""

from __future__ import annotations

import logging

from celery import shared_task, signals
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError

log = logging.getLogger(__name__)
DEBOUNCE_S = 1.0


def _key(cluster_id: int) -> str:
    return f"scheduler:round-requested:{cluster_id}"


def request_round(cluster_id: int, trigger: str) -> None:
    """Enqueue one round for the cluster unless one is already waiting (bursts of submits make one round)."""
    if cache.add(_key(cluster_id), trigger, timeout=30):
        run_round.apply_async((cluster_id, trigger), countdown=DEBOUNCE_S)


@shared_task(
    bind=True,
    ignore_result=True,
    acks_late=True,
    autoretry_for=(Exception,),
    dont_autoretry_for=(),
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=10,
)
def run_round(self, cluster_id: int, trigger: str = "periodic") -> None:
    from scheduler.rounds import RoundBusy
    from scheduler.rounds import run_round as run

    # Requests arriving from now on need a new round: this one may already have read the state.
    cache.delete(_key(cluster_id))
    try:
        run(cluster_id, trigger)
    except RoundBusy:
        log.info("round for cluster %s busy; retrying", cluster_id)
        raise self.retry(countdown=DEBOUNCE_S) from None


@shared_task(ignore_result=True)
def periodic_rounds() -> None:
    """Beat: one round per cluster that has a scheduler, so nothing waits on a lost request."""
    from scheduler.models import ClusterScheduler

    for cluster_id in ClusterScheduler.objects.values_list("cluster_id", flat=True):
        request_round(cluster_id, "periodic")


#
# Running jobs (scheduler.actions.launches, docs/running-jobs.md). Central tasks take ids or a node's answer and
# are idempotent: each answer names (job, generation, host), and one that no longer applies changes nothing.
# Node tasks run on the agent of queue node.<hostname>: no database there, only the run directory. Each returns
# its answer (never raises: a link callback runs only on success), and the central *_ack task ingests it.
#
LAUNCH_RETRY = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_backoff_max": 30,
    "max_retries": 10,
}


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def launch_jobs(job_ids: list[int]) -> None:
    """Central, after a placement commits: each job's launches, and a prepare to each of its nodes."""
    from scheduler.actions.launches import launch_job

    for job_id in job_ids:
        launch_job(job_id)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def launch_ack(result: dict) -> None:
    """Central: a node prepared (or refused); the last one to prepare makes every node start."""
    from scheduler.actions.launches import record_prepared

    record_prepared(result)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def start_ack(result: dict) -> None:
    from scheduler.actions.launches import record_started

    record_started(result)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def stop_ack(result: dict) -> None:
    from scheduler.actions.launches import record_stopped

    record_stopped(result)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def launch_exited(host: str, item: dict) -> None:
    """Central: an agent's watcher saw a job end (or lose it)."""
    from scheduler.actions.launches import record_exit

    record_exit(host, item)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def agent_hello(host: str, found: list[dict]) -> None:
    """Central: a (re)started agent says what its run directory holds; reconcile with the launches."""
    from scheduler.actions.launches import agent_hello as hello

    hello(host, found)


@shared_task(ignore_result=True)
def launch_sweep() -> dict:
    """Beat: ack and stop timeouts, lost launch messages; the twin's jobs that reached est_runtime_s."""
    from scheduler.actions.launches import sweep

    return sweep()


def _agent(host: str):
    """This process's agent for the node (one per node name, kept: its launcher reaps what it started)."""
    from scheduler.launch.agent import AgentConfig, NodeAgent
    from scheduler.launch.env import LaunchSettings

    agent = _AGENTS.get(host)
    if agent is None:
        low, _, high = settings.LAUNCH_MASTER_PORTS.partition("-")
        cdi = settings.LAUNCH_CONTAINER_CDI.strip().lower()
        config = AgentConfig(
            hostname=host,
            run_dir=settings.LAUNCH_RUN_DIR,
            log_dir=settings.LAUNCH_LOG_DIR,
            launcher="container" if settings.LAUNCHER == "container" else "process",
            engine=settings.LAUNCH_CONTAINER_ENGINE,
            cdi=None if not cdi else cdi in ("1", "true", "yes", "on"),
            gpus=tuple(settings.LAUNCH_NODE_GPUS),
            settings=LaunchSettings(
                checkpoint_root=settings.LAUNCH_CHECKPOINT_ROOT,
                mps_pipe_directory=settings.LAUNCH_MPS_PIPE_DIRECTORY,
                mps_log_directory=settings.LAUNCH_MPS_LOG_DIRECTORY,
                master_port_min=int(low),
                master_port_max=int(high or low),
            ),
        )
        agent = _AGENTS[host] = NodeAgent(config)
    return agent


_AGENTS: dict = {}


@shared_task(ignore_result=True, acks_late=True)
def node_prepare(payload: dict) -> dict:
    """Node: check everything the launch needs (ledger, environment, command, directory); start nothing."""
    return _agent(payload["host"]).prepare(payload)


@shared_task(ignore_result=True, acks_late=True)
def node_start(payload: dict) -> dict:
    """Node: start this generation (the same one twice returns the running one)."""
    return _agent(payload["host"]).start(payload)


@shared_task(ignore_result=True, acks_late=True)
def node_stop(host: str, job_id: int, generation: int, grace_s: float, why: str = "") -> dict:
    """Node: SIGTERM, the grace period, SIGKILL; says whether it exited within grace."""
    log.info("%s: stopping job %s generation %s (%s, grace %s s)", host, job_id, generation, why, grace_s)
    return _agent(host).stop(job_id, generation, grace_s)


@shared_task(ignore_result=True, acks_late=True)
def node_forget(host: str, job_id: int, generation: int) -> dict:
    """Node: the central side recorded the end; drop the files, remember the generation ended."""
    return _agent(host).forget(job_id, generation)


@shared_task(ignore_result=False, acks_late=False)
def node_tail(host: str, job_id: int, lines: int = 100) -> dict:
    """Node: the last lines of the job's log (asked by the log API, which waits a few seconds for it)."""
    return _agent(host).tail(job_id, lines)


@signals.worker_ready.connect
def _start_watchers(sender=None, **kwargs) -> None:
    """A node agent (a worker consuming node.<name>) starts its watcher: hello now, then every job's end."""
    if settings.LAUNCHER == "twin" or sender is None:
        return
    queues = [q for q in sender.app.amqp.queues.consume_from]
    for host in (q[len("node.") :] for q in queues if q.startswith("node.")):
        from scheduler.launch.agent import Watcher

        Watcher(
            _agent(host),
            hello=lambda found, host=host: agent_hello.delay(host, found),
            exited=lambda item, host=host: launch_exited.delay(host, item),
            interval_s=settings.LAUNCH_WATCH_INTERVAL_S,
        ).start()
        log.info("node agent %s: watching its jobs (launcher %s)", host, settings.LAUNCHER)
