"""Celery tasks of the scheduler: thin, take ids, idempotent (a round recomputes everything it decides).

Rounds follow from state, not from a message surviving: events request one (debounced), and every
ROUND_INTERVAL_S beat's periodic_rounds sends one for each cluster with work whatever became of those requests, so
a round lost with a killed worker (its message unacknowledged until the broker's visibility timeout) is made up
within one interval. Only what a rerun can cure is retried; a bug fails once and is logged.
"""

from __future__ import annotations

import logging

from celery import shared_task, signals
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fabric.models import Cluster
from scheduler import k8s_cordons as k8s
from scheduler import rounds, slurm_launches, slurm_mirror
from scheduler.actions.errors import Contended, RoundBusy
from scheduler.actions.lifecycle import agent_hello as hello
from scheduler.actions.lifecycle import launch_job, record_exit, record_prepared, record_started, record_stopped, sweep
from scheduler.choices import ACTIVE_STATUSES, JobStatus
from scheduler.enqueue import DEBOUNCE_S, round_requested_key
from scheduler.launch.agent import AgentConfig, NodeAgent, Watcher
from scheduler.launch.env import LaunchSettings
from scheduler.launch.slurm import SlurmError
from scheduler.models import ClusterScheduler, Job
from scheduler.slurm_drains import launcher as drains_launcher
from scheduler.slurm_drains import slurm_nodes, sync_drains

log = logging.getLogger(__name__)
# The database, the cache or the broker briefly out of reach, or a lock race lost more often than the actions' own
# retry allows (Contended): a later run succeeds. RoundBusy is retried on its own, sooner.
TRANSIENT = (
    OperationalError,
    InterfaceError,
    Contended,
    RedisConnectionError,
    RedisTimeoutError,
    BrokerError,
    ConnectionError,
    TimeoutError,
)


def _key(cluster_id: int) -> str:
    return round_requested_key(cluster_id)


def _periodic_key(cluster_id: int) -> str:
    return f"scheduler:round-periodic:{cluster_id}"


@shared_task(
    bind=True,
    ignore_result=True,
    acks_late=True,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=10,
)
def run_round(self, cluster_id: int, trigger: str = "periodic") -> None:
    # Requests arriving from now on need a new round: this one may already have read the state.
    cache.delete(_key(cluster_id))
    try:
        rounds.run_round(cluster_id, trigger)
    except RoundBusy:
        log.info("round for cluster %s busy; retrying", cluster_id)
        raise self.retry(countdown=DEBOUNCE_S) from None


@shared_task(ignore_result=True)
def periodic_rounds() -> int:
    """Beat: a round for each cluster with work a round acts on (jobs waiting, or placed and running), sent whether
    or not an event's request is outstanding: that request's round may have died with a worker. Ticks that queued
    up while no worker ran make one round per cluster, and a round that waited a whole interval unstarted expires
    (the next tick sends another). Returns the number of rounds sent."""

    with_work = (
        Job.objects.filter(status__in=[JobStatus.PENDING, JobStatus.PREEMPTED, *ACTIVE_STATUSES])
        .exclude(status=JobStatus.PENDING, held=True)
        .exclude(status=JobStatus.PENDING, observed_slurm_id__isnull=False)  # Slurm's queue, not ours
        .filter(pool__cluster_id__in=ClusterScheduler.objects.values("cluster_id"))
        .values_list("pool__cluster_id", flat=True)
        .order_by()
        .distinct()
    )
    sent = 0
    for cluster_id in with_work:
        if cache.add(_periodic_key(cluster_id), 1, timeout=1):
            run_round.apply_async((cluster_id, "periodic"), expires=settings.ROUND_INTERVAL_S)
            sent += 1
    return sent


#
# Running jobs (scheduler.actions.lifecycle, docs/running-jobs.md). Central tasks take ids or a node's answer and
# are idempotent: each answer names (job, generation, host), and one that no longer applies changes nothing.
# Node tasks run on the agent of queue node.<hostname>: no database there, only the run directory. Each returns
# its answer (never raises: a link callback runs only on success), and the central *_ack task ingests it.
#
LAUNCH_RETRY = {
    "autoretry_for": TRANSIENT,
    "retry_backoff": True,
    "retry_backoff_max": 30,
    "max_retries": 10,
}


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def launch_jobs(job_ids: list[int]) -> None:
    """Central, after a placement commits: each job's launches, and a prepare to each of its nodes."""

    for job_id in job_ids:
        launch_job(job_id)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def launch_ack(result: dict) -> None:
    """Central: a node prepared (or refused); the last one to prepare makes every node start."""

    record_prepared(result)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def start_ack(result: dict) -> None:
    record_started(result)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def stop_ack(result: dict) -> None:
    record_stopped(result)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def launch_exited(host: str, item: dict) -> None:
    """Central: an agent's watcher saw a job end (or lose it)."""

    record_exit(host, item)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def agent_hello(host: str, found: list[dict]) -> None:
    """Central: a (re)started agent says what its run directory holds; reconcile with the launches."""

    hello(host, found)


@shared_task(ignore_result=True)
def slurm_drains() -> dict[str, dict]:
    """Beat (SLURM_DRAIN dry-run or on): Slurm's drains brought in line with each cluster's health, from one sinfo.
    A Slurm that cannot be read is logged and tried again next tick."""
    if settings.SLURM_DRAIN == "off":
        return {}
    slurm = drains_launcher()
    try:
        nodes = slurm_nodes(slurm)  # once for every cluster: they may share one Slurm
    except SlurmError as exc:
        log.warning("slurm drains: %s", exc)
        return {}
    results = {}
    for cluster_id, name in Cluster.objects.values_list("pk", "name"):
        results[name] = sync_drains(cluster_id, slurm=slurm, nodes=nodes).as_dict()
    return results


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def slurm_submit(job_id: int, generation: int) -> str:
    """Slurm submit host (queue `slurm`, LAUNCHER=slurm): sbatch the placed generation once."""
    return slurm_launches.submit(job_id, generation)


@shared_task(ignore_result=True, acks_late=True, **LAUNCH_RETRY)
def slurm_stop(job_id: int, generation: int, grace_s: float, why: str = "") -> dict:
    """Slurm submit host: scancel --signal=TERM, the grace period, then KILL; each node's launch answered."""
    return slurm_launches.stop(job_id, generation, grace_s, why)


@shared_task(ignore_result=True)
def slurm_watch() -> dict:
    """Beat (LAUNCHER=slurm), on the submit host: Slurm's state of our jobs applied to theirs; strays cancelled.
    A Slurm that cannot be read is logged and read again next tick."""
    if settings.LAUNCHER != "slurm":
        return {}
    try:
        return slurm_launches.watch()
    except SlurmError as exc:
        log.warning("slurm watch: %s", exc)
        return {}


@shared_task(ignore_result=True)
def k8s_cordons() -> dict[str, dict]:
    """Beat (K8S_CORDON dry-run or on): Kubernetes' cordons brought in line with each cluster's health, from one
    node list. An API server that cannot be read is logged and tried again next tick."""
    if settings.K8S_CORDON == "off":
        return {}
    try:
        api = k8s.api_from_kubeconfig(settings.K8S_KUBECONFIG)
        nodes = api.nodes()  # once for every cluster: they may share one Kubernetes
    except k8s.K8sError as exc:
        log.warning("k8s cordons: %s", exc)
        return {}
    return {name: k8s.sync_cordons(pk, api=api, nodes=nodes).as_dict()
            for pk, name in Cluster.objects.values_list("pk", "name")}  # fmt: skip


@shared_task(ignore_result=True)
def slurm_observe() -> dict:
    """Beat (SLURM_OBSERVE), on the Slurm submit host: Slurm's own jobs mirrored read-only onto the clusters. A Slurm
    that cannot be read is logged and read again next tick."""
    if not settings.SLURM_OBSERVE:
        return {}
    try:
        return slurm_mirror.observe()
    except SlurmError as exc:
        log.warning("slurm observe: %s", exc)
        return {}


@shared_task(ignore_result=True)
def launch_sweep() -> dict:
    """Beat: ack and stop timeouts, lost launch messages; the twin's jobs that reached est_runtime_s."""

    return sweep()


def _agent(host: str):
    """This process's agent for the node (one per node name, kept: its launcher reaps what it started)."""

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
    if settings.LAUNCHER in ("twin", "slurm") or sender is None:
        return
    queues = [q for q in sender.app.amqp.queues.consume_from]
    for host in (q[len("node.") :] for q in queues if q.startswith("node.")):
        Watcher(
            _agent(host),
            hello=lambda found, host=host: agent_hello.delay(host, found),
            exited=lambda item, host=host: launch_exited.delay(host, item),
            interval_s=settings.LAUNCH_WATCH_INTERVAL_S,
        ).start()
        log.info("node agent %s: watching its jobs (launcher %s)", host, settings.LAUNCHER)
