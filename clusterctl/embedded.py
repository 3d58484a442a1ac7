"""Embedded mode's moving parts: a Celery worker and beat as threads of this process, on the in-memory broker.

kombu's memory transport passes messages between the threads of one process only, so in the embedded demo the
web server (main thread), the worker (solo pool, one daemon thread) and beat (one daemon thread, in-memory
schedule) share the process. `configure()` points the process at that broker and at the twin: tasks stop
running eagerly and go through the worker, which consumes the default queue and the what-if replays' queue
(WHATIF_QUEUE); node polls go to the default queue (TELEMETRY_NODE_QUEUES off), and
the fabric agent's switch-port poll reads the twin too. Production runs the same tasks in separate worker, beat
and node-agent processes on Redis; nothing here is used there.

    with EmbeddedCelery(poll_interval_s=5).start():
        ...  # polls, ingests, rounds and alerts happen in the background

`configure()` returns what it changed and `restore()` puts it back (tests run it inside a process that has its own
Celery configuration).

One process has one core's worth of Python for everything: `time_one_poll` measures what one poll of every node costs
here, and `fit_poll_interval` stretches the interval asked for to one the process can keep (the demo says so at
start); a poller that still falls behind says so itself (fabric.telemetry.liveness.poller_findings).
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections import Counter
from typing import Any

from celery import shared_task, signals
from celery.beat import EmbeddedService
from celery.worker import WorkController
from celery.worker import state as worker_state
from django.conf import settings
from django.db import connections

from clusterctl.celery import app as default_app
from fabric import inbox, tasks
from fabric.collectors.registry import agent_collector
from fabric.collectors.samples import FABRIC_SOURCE, sample_to_dict
from fabric.models import Cluster, Node, Switch

log = logging.getLogger(__name__)

MEMORY_BROKER = "memory://localhost/"  # a host name: kombu warns on every connection without one
MEMORY_RESULTS = "cache+memory://"
POLLING_INTERVAL_S = 0.05  # how often the worker looks at the in-memory queues when they are empty


POLL_SHARE = 0.5  # of the process's time that polling may take: the web server, rounds and live views need the rest
NODES_READ = "nodes read"  # EmbeddedCelery.counts: nodes read by the central polls (fabric.tasks.poll_nodes)


def fit_poll_interval(asked_s: float, one_poll_s: float, share: float = POLL_SHARE) -> float:
    """The poll interval this process can keep: `asked_s`, or, when one poll of every node (`one_poll_s` of work) would
    take more than `share` of it, the whole seconds of which it takes `share`."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], not {share!r}")
    need = one_poll_s / share
    return asked_s if need <= asked_s else float(math.ceil(need))


def time_one_poll(collector: str = "twin") -> tuple[float, int]:
    """Poll every node and the switch ports of every cluster here and now, as the worker will (a central read, then
    one ingest batch a cluster), twice: the first builds the twins and fills the live maps, the second gives them rates
    and is timed. Returns (seconds of the second poll, nodes read in it)."""
    reader = agent_collector(collector)
    clusters = []
    for cluster_id in Cluster.objects.order_by("pk").values_list("pk", flat=True):
        hosts = list(Node.objects.filter(cluster_id=cluster_id, unnamed=False).values_list("hostname", flat=True))
        guids = ["0x" + g for g in Switch.objects.filter(cluster_id=cluster_id).values_list("guid", flat=True)]
        if hosts:
            clusters.append((cluster_id, hosts, guids))
    took = 0.0
    for _ in range(2):
        started = time.perf_counter()
        for cluster_id, hosts, guids in clusters:
            samples = [reader.collect(host) for host in hosts]
            if guids:
                ports = reader.collect_switches(hosts[0], guids)
                ports.node = FABRIC_SOURCE
                samples.append(ports)
            inbox.push_many(cluster_id, [sample_to_dict(sample) for sample in samples])
            tasks.ingest_batch(cluster_id)  # here, not queued: this is what is being timed
        took = time.perf_counter() - started
    return took, sum(len(hosts) for _, hosts, _ in clusters)


def configure(
    app=None,
    *,
    collector: str = "twin",
    poll_interval_s: float = 5.0,
    round_interval_s: float = 10.0,
    hold_down_s: float | None = None,
    broker_url: str = MEMORY_BROKER,
    result_backend: str = MEMORY_RESULTS,
) -> dict[str, Any]:
    """Point this process at an in-process broker and the twin collector. Returns the previous values."""
    app = app or default_app
    django_values: dict[str, Any] = {
        "CELERY_TASK_ALWAYS_EAGER": False,
        "TELEMETRY_COLLECTOR": collector,
        "TELEMETRY_INTERVAL_S": poll_interval_s,
        "TELEMETRY_NODE_QUEUES": False,  # one worker serves every node's poll
        "TELEMETRY_FABRIC_AGENTS": ["auto"],
        "TELEMETRY_SWITCH_COLLECTOR": collector,
        "TELEMETRY_SM_INTERVAL_S": 0.0,  # the twin runs no subnet manager for saquery to ask
        "LAUNCHER": "twin",  # no node agent can reach an in-process broker: the twin plays the jobs
    }
    if hold_down_s is not None:
        django_values["TELEMETRY_HOLD_DOWN_S"] = hold_down_s
    schedule = {name: dict(entry) for name, entry in (app.conf.beat_schedule or {}).items()}
    for entry in schedule.values():
        if entry.get("task") == "fabric.tasks.poll_all":
            entry["schedule"] = poll_interval_s
            entry["options"] = {**entry.get("options", {}), "expires": poll_interval_s}
        elif entry.get("task") == "scheduler.tasks.periodic_rounds":
            entry["schedule"] = round_interval_s
    transport = {**(app.conf.broker_transport_options or {}), "polling_interval": POLLING_INTERVAL_S}
    celery_values: dict[str, Any] = {
        "task_always_eager": False,
        "broker_url": broker_url,
        "result_backend": result_backend,
        "broker_transport_options": transport,
        "beat_schedule": schedule,
    }
    previous = {
        "django": {k: getattr(settings, k, _MISSING) for k in django_values},
        "celery": {k: app.conf.get(k) for k in celery_values},
    }
    for k, v in django_values.items():
        setattr(settings, k, v)
    app.conf.update(celery_values)
    _reset_connections(app)
    return previous


def restore(previous: dict[str, Any], app=None) -> None:
    """Undo `configure`."""
    app = app or default_app
    for k, v in previous["django"].items():
        if v is _MISSING:
            delattr(settings, k)
        else:
            setattr(settings, k, v)
    app.conf.update(previous["celery"])
    _reset_connections(app)


_MISSING = object()


def _reset_connections(app) -> None:
    """Forget pooled broker connections and the result backend: the next use opens them on the new URLs."""
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None
    app._backend_cache = None
    if getattr(app._local, "backend", None) is not None:  # a thread-bound backend: this thread's
        del app._local.backend


@shared_task(name="clusterctl.embedded.wake", ignore_result=True)
def wake() -> None:
    """Nothing: a message that ends the worker's wait for the next one, so it sees it should stop."""


class _Worker(WorkController):
    """A worker that says when its consumer is ready (it runs in a thread: nobody else can tell)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()


class EmbeddedCelery:
    """A worker and (optionally) beat in daemon threads of this process. `start()` returns once the worker
    consumes; `stop()` ends both. `counts` holds how many tasks of each name finished (a Counter), and under
    NODES_READ how many nodes the central polls read."""

    def __init__(
        self,
        app=None,
        *,
        beat: bool = True,
        kick: bool = True,
        queues: list[str] | None = None,
        loglevel: str = "WARNING",
        **options: Any,
    ) -> None:
        """`options` go to `configure` (collector, poll_interval_s, round_interval_s, hold_down_s, broker_url,
        result_backend). `kick`: poll and run a round right away instead of one interval later."""
        self.app = app or default_app
        self.beat = beat
        self.kick = kick
        self.queues = queues
        self.loglevel = loglevel
        self.options = options
        self.counts: Counter[str] = Counter()
        self.started_at: float | None = None
        self._previous: dict[str, Any] | None = None
        self._worker: _Worker | None = None
        self._worker_thread: threading.Thread | None = None
        self._beat: Any = None
        self._count_lock = threading.Lock()

    def default_queues(self) -> list[str]:
        """The default queue and the what-if replays' own (production gives those a worker of their own)."""
        return [self.app.conf.task_default_queue, settings.WHATIF_QUEUE]

    def _count(self, sender: Any = None, retval: Any = None, **_: Any) -> None:
        name = getattr(sender, "name", None) or str(sender)
        with self._count_lock:
            self.counts[name] += 1
            if name == tasks.poll_nodes.name and isinstance(retval, int):
                self.counts[NODES_READ] += retval

    def start(self, timeout: float = 30.0) -> EmbeddedCelery:
        self._previous = configure(self.app, **self.options)
        for name in ("celery", "kombu"):
            logging.getLogger(name).setLevel(self.loglevel)
        self.app.finalize()
        queues = self.queues or self.default_queues()
        self._worker = _Worker(
            app=self.app,
            hostname=f"embedded-{threading.get_ident()}@{socket.gethostname()}",
            pool="solo",
            concurrency=1,
            queues=queues,
            loglevel=self.loglevel,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            ready_callback=None,
        )
        signals.task_postrun.connect(self._count, weak=False, dispatch_uid=f"embedded-count-{id(self)}")
        worker_state.should_terminate = None
        self._worker_thread = threading.Thread(target=self._run_worker, name="celery-worker", daemon=True)
        self._worker_thread.start()
        if not self._worker.ready.wait(timeout):
            self.stop()
            raise RuntimeError(f"the embedded Celery worker did not start within {timeout:g} s")
        if self.beat:
            # In-memory schedule with the heartbeat that /healthz reads (no Redis here: no RedBeat lock either).
            self._beat = EmbeddedService(self.app, thread=True, scheduler_cls="clusterctl.beat:MemoryScheduler")
            self._beat.start()
        self.started_at = time.monotonic()
        if self.kick:
            self.app.send_task("fabric.tasks.poll_all")
            self.app.send_task("scheduler.tasks.periodic_rounds")
        log.info("embedded Celery: worker on %s%s", ", ".join(queues), " and beat" if self.beat else "")
        return self

    def _run_worker(self) -> None:
        try:
            assert self._worker is not None
            self._worker.start()
        except Exception:  # logged, and start() times out for the caller
            log.exception("embedded Celery worker stopped")
        finally:
            connections.close_all()  # this thread's connections: they must not outlive it

    def stop(self, timeout: float = 15.0) -> None:
        """Stop beat, then let the worker finish its task and stop. Restores the process's Celery settings."""
        beat, worker = self._beat, self._worker_thread
        self._beat = self._worker_thread = None
        if worker is not None:
            worker_state.should_terminate = 0  # seen once the worker's wait for a message ends: two wake it
            queue = (self.queues or self.default_queues())[0]
            for _ in range(2):
                wake.apply_async(queue=queue)
        if beat is not None:
            beat.service.stop(wait=False)  # wakes within a second; both wind down at once
        if worker is not None:
            worker.join(timeout)
            worker_state.should_terminate = None
            if worker.is_alive():
                log.warning("embedded Celery worker still busy after %g s; left as a daemon thread", timeout)
        if beat is not None:
            beat.join(timeout)
        signals.task_postrun.disconnect(dispatch_uid=f"embedded-count-{id(self)}")
        if self._previous is not None:
            restore(self._previous, self.app)
            self._previous = None

    def __enter__(self) -> EmbeddedCelery:
        return self.start() if self._worker_thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
