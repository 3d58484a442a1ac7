"""The event-driven replay: arrivals, scheduling rounds, completions, preemptions, migrations. PURE.

    sim = Simulator(trace, cluster, policy, network=True)
    result = sim.run()                       # scheduler.sim.metrics.ReplayResult

Time only jumps between events: a job's arrival, a job's completion (predicted from its progress rate),
the end of a checkpoint, a policy's own wake-up (Tiresias' queue demotions) and, for policies that ask
for them, periodic rounds (the production engine runs one every `round_s` seconds, besides the rounds a
submission or a completion triggers). At each event the finished jobs release their GPUs, the arrived
ones join the queue, and the policy decides: it calls `start`, `preempt` and `migrate` on the simulator,
which keeps the books (who holds which GPU, work done, service received, utilisation over time).

Progress. A running job advances `rate` seconds of its trace duration per second. With the network
model off the rate is 1 and preemption and migration are free: the Tiresias simulator's assumptions.
With it on, `scheduler.sim.runtime.RuntimeModel` gives every running job its rate from its placement
and the other jobs on its links (recomputed whenever a placement changes), and every preemption or
migration costs the job `checkpoint + restart` seconds of no progress on the GPUs it then holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

from scheduler.core.topology import LEVEL_LEAF_GROUP
from scheduler.sim.cluster import SimCluster
from scheduler.sim.metrics import ReplayResult, summarise
from scheduler.sim.runtime import RuntimeModel, RuntimeParams, Work
from scheduler.sim.traces.base import Trace, TraceJob

WAITING, PENDING, RUNNING, STOPPING, DONE = "waiting", "pending", "running", "stopping", "done"
INF = math.inf
_EPS = 1e-9


class SimError(RuntimeError):
    """A policy asked for something impossible (a GPU that is not free, a job that is not running)."""


class JobState:
    """A trace job during the replay (what policies read; only the simulator writes)."""

    __slots__ = (
        "attained_gpu_s",
        "dead_until",
        "duration",
        "end",
        "est_runtime_s",
        "first_start",
        "gpus",
        "gpus_per_node",
        "grad_bytes",
        "id",
        "job",
        "last_migrated",
        "last_start",
        "last_update",
        "migrations",
        "multi_node",
        "nodes",
        "one_island",
        "one_leaf",
        "penalty",
        "preemptions",
        "rate",
        "run_s",
        "shares",
        "starts",
        "status",
        "stop_at",
        "submit",
        "t_done",
        "topology",
        "work",
        "work_item",
    )

    def __init__(self, job: TraceJob) -> None:
        self.job = job
        self.id = job.id
        self.gpus = job.gpus
        self.nodes = job.nodes  # gang shape (None: any split of `gpus`), checked by Simulator.start
        self.gpus_per_node = job.gpus_per_node
        self.topology = job.topology
        self.est_runtime_s = job.est_runtime_s
        self.submit = job.submit_s
        self.duration = job.duration_s
        self.grad_bytes = job.grad_bytes
        self.work_item = Work(job.gpus, job.step_compute_s, job.grad_bytes)
        self.work = 0.0  # seconds of the trace duration done
        self.status = WAITING
        self.shares: tuple[int, ...] = ()  # GPU positions held
        self.first_start: float | None = None
        self.last_start: float | None = None
        self.last_migrated: float | None = None
        self.end: float | None = None
        self.rate = 1.0
        self.dead_until = -INF  # no progress before this (checkpoint / restart)
        self.penalty = 0.0  # dead time to pay at the next start
        self.last_update = 0.0
        self.run_s = 0.0  # wall seconds holding GPUs
        self.attained_gpu_s = 0.0  # GPUs x seconds of service (Tiresias' attained service)
        self.preemptions = 0
        self.migrations = 0
        self.starts = 0
        self.stop_at = INF
        self.t_done = INF
        self.one_island = True
        self.one_leaf = True
        self.multi_node = False  # ran on more than one node at least once

    @property
    def remaining(self) -> float:
        return max(0.0, self.duration - self.work)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<job {self.id} {self.gpus}G {self.status} {self.work:.0f}/{self.duration:.0f}>"


class Policy(Protocol):
    name: str

    def bind(self, sim: Simulator) -> None: ...

    def on_event(self, now: float, arrived: list[JobState], finished: list[JobState]) -> None: ...

    def next_wakeup(self, now: float) -> float | None: ...


class Simulator:
    def __init__(
        self,
        trace: Trace,
        cluster: SimCluster,
        policy: Policy,
        network: bool = False,
        params: RuntimeParams | None = None,
        progress: Callable[[int, int], None] | None = None,
        max_events: int = 5_000_000,
    ) -> None:
        self.trace = trace
        self.cluster = cluster
        self.policy = policy
        self.network = network
        self.params = params or RuntimeParams()
        self.model = RuntimeModel(cluster, self.params) if network else None
        self.progress = progress
        self.max_events = max_events
        self.jobs = [JobState(j) for j in trace.jobs]
        self.now = self.jobs[0].submit if self.jobs else 0.0
        self.start_time = self.now
        c = cluster
        self.gpu_owner: list[int] = [-1] * c.n_gpus  # position -> job id, -1 free
        self.node_free: list[int] = [len(g) for g in c.node_gpus]
        self.free_count = c.n_gpus
        self.running: dict[int, JobState] = {}
        self.stopping: dict[int, JobState] = {}
        self.done_count = 0
        self.events = 0
        self.rounds = 0
        self.busy_timeline: list[tuple[float, int]] = [(self.now, 0)]
        self._busy_gpu_s = 0.0
        self._last_t = self.now
        self._dirty = False  # placements changed since the rates were computed
        self.link_util: dict[str, float] = {}
        self.version = 0  # bumped by every change of who holds what or who is queued

    # ------------------------------------------------------------------ what policies read

    def free_positions(self, node: int) -> list[int]:
        owner = self.gpu_owner
        return [p for p in self.cluster.node_gpus[node] if owner[p] < 0]

    def is_free(self, p: int) -> bool:
        return self.gpu_owner[p] < 0

    # ------------------------------------------------------------------ what policies do

    def start(self, job: JobState, positions: Sequence[int]) -> None:
        if job.status != PENDING:
            raise SimError(f"job {job.id} is {job.status}, not pending")
        self._check_shape(job, positions)
        self._take(job, positions)
        now = self.now
        job.status = RUNNING
        job.starts += 1
        if job.first_start is None:
            job.first_start = now
        job.last_start = now
        job.last_update = now
        job.dead_until = now + job.penalty if job.penalty > 0 else -INF
        job.penalty = 0.0
        self.running[job.id] = job
        self._note_layout(job)
        self._dirty = True

    def preempt(self, job: JobState, checkpoint_in_place: bool = False) -> None:
        """Stop a running job; it goes back to the queue. With the network model on it pays
        checkpoint + restart: `checkpoint_in_place` keeps its GPUs while it checkpoints (the production
        contract: victims hold their GPUs until they stop), otherwise the whole cost is paid at restart."""
        if job.status != RUNNING:
            raise SimError(f"job {job.id} is {job.status}, not running")
        self._settle(job)
        job.preemptions += 1
        del self.running[job.id]
        self._dirty = True
        if self.network:
            ck = self.params.checkpoint_s(job.grad_bytes)
            if checkpoint_in_place:
                job.status = STOPPING
                job.stop_at = self.now + ck
                self.stopping[job.id] = job
                job.penalty = self.params.restart_s
                return
            job.penalty = ck + self.params.restart_s
        self._release(job)
        job.status = PENDING

    def migrate(self, job: JobState, positions: Sequence[int]) -> None:
        """Move a running job to other GPUs (free ones; its old GPUs are released); with the network model
        on it makes no progress for checkpoint + restart seconds."""
        if job.status != RUNNING:
            raise SimError(f"job {job.id} is {job.status}, not running")
        self._check_shape(job, positions)
        self._settle(job)
        self._release(job)
        self._take(job, positions)
        job.migrations += 1
        job.last_migrated = self.now
        if self.network:
            job.dead_until = self.now + self.params.move_cost_s(job.grad_bytes)
        self._note_layout(job)
        self._dirty = True

    # ------------------------------------------------------------------ bookkeeping

    def _check_shape(self, job: JobState, positions: Sequence[int]) -> None:
        """Every policy must honour the job's request: its GPU count, its gang shape (exactly `nodes` nodes
        with `gpus_per_node` GPUs each) and a required leaf."""
        if len(positions) != job.gpus or len(set(positions)) != job.gpus:
            raise SimError(f"job {job.id} needs {job.gpus} distinct GPUs, got {list(positions)}")
        if job.nodes is None and job.topology != "require-leaf":
            return
        per: dict[int, int] = {}
        node_of = self.cluster.gpu_node
        for p in positions:
            per[node_of[p]] = per.get(node_of[p], 0) + 1
        if job.nodes is not None and (len(per) != job.nodes or any(k != job.gpus_per_node for k in per.values())):
            raise SimError(
                f"job {job.id} is a gang of {job.nodes} x {job.gpus_per_node} GPUs, got "
                f"{'+'.join(str(k) for k in per.values())} on {len(per)} node(s)"
            )
        if job.topology == "require-leaf" and len(per) > 1 and self.cluster.level_of(positions) > LEVEL_LEAF_GROUP:
            raise SimError(f"job {job.id} requires one leaf, got GPUs under several")

    def _take(self, job: JobState, positions: Sequence[int]) -> None:
        owner, node_of = self.gpu_owner, self.cluster.gpu_node
        for p in positions:
            if owner[p] >= 0:
                raise SimError(f"GPU {p} is held by job {owner[p]}, cannot give it to job {job.id}")
        for p in positions:
            owner[p] = job.id
            self.node_free[node_of[p]] -= 1
        self.free_count -= len(positions)
        job.shares = tuple(positions)
        self.version += 1
        self._mark_busy()

    def _release(self, job: JobState) -> None:
        owner, node_of = self.gpu_owner, self.cluster.gpu_node
        for p in job.shares:
            owner[p] = -1
            self.node_free[node_of[p]] += 1
        self.free_count += len(job.shares)
        job.shares = ()
        self.version += 1
        self._mark_busy()

    def _mark_busy(self) -> None:
        busy = self.cluster.n_gpus - self.free_count
        t = self.now
        if self.busy_timeline[-1][0] == t:
            self.busy_timeline[-1] = (t, busy)
        else:
            self.busy_timeline.append((t, busy))

    def _note_layout(self, job: JobState) -> None:
        if job.gpus > 1:
            level = self.cluster.level_of(job.shares)
            if level > 0:
                job.one_island = False
            if level >= LEVEL_LEAF_GROUP:
                job.multi_node = True
            if level > LEVEL_LEAF_GROUP:
                job.one_leaf = False

    def _settle(self, job: JobState) -> None:
        """Bring a job's work and service up to now."""
        now = self.now
        dt = now - job.last_update
        if dt > 0:
            job.run_s += dt
            job.attained_gpu_s += job.gpus * dt
            if job.status == RUNNING:
                eff = now - max(job.last_update, job.dead_until)
                if eff > 0:
                    job.work = min(job.duration, job.work + job.rate * eff)
        job.last_update = now

    def _advance(self, t: float) -> None:
        dt = t - self._last_t
        if dt > 0:
            self._busy_gpu_s += (self.cluster.n_gpus - self.free_count) * dt
        self._last_t = t
        self.now = t
        for job in self.running.values():
            self._settle(job)
        for job in self.stopping.values():
            self._settle(job)

    def _refresh_rates(self) -> None:
        """Rates of the running jobs (network model) and their predicted completion times."""
        self._dirty = False
        if self.model is not None:
            jobs = {jid: (j.work_item, j.shares) for jid, j in self.running.items()}
            rates = self.model.rates(jobs)
            for jid, j in self.running.items():
                j.rate = rates[jid][0]
            self.link_util = self.model.link_utilisation(jobs, rates)
        for j in self.running.values():
            self._predict(j)

    def _predict(self, j: JobState) -> None:
        begin = max(self.now, j.dead_until)
        j.t_done = begin + (j.duration - j.work) / j.rate if j.rate > 0 else INF

    # ------------------------------------------------------------------ the loop

    def run(self) -> ReplayResult:
        policy = self.policy
        policy.bind(self)
        jobs = sorted(self.jobs, key=lambda j: (j.submit, j.id))
        nxt = 0
        total = len(jobs)
        wake: float | None = None
        while self.done_count < total:
            self.events += 1
            if self.events > self.max_events:
                raise SimError(f"more than {self.max_events} events: policy {policy.name!r} does not converge")
            if self._dirty:
                self._refresh_rates()
            t_arr = jobs[nxt].submit if nxt < total else INF
            t_done = min((j.t_done for j in self.running.values()), default=INF)
            t_stop = min((j.stop_at for j in self.stopping.values()), default=INF)
            t_wake = wake if wake is not None else INF
            t = min(t_arr, t_done, t_stop, t_wake)
            if t == INF:
                break  # nothing left can happen: the remaining jobs never fit
            if t < self.now:
                t = self.now
            self._advance(t)
            finished: list[JobState] = []
            for j in list(self.running.values()):
                if j.t_done <= t + _EPS * max(1.0, t):
                    j.work = j.duration
                    j.status = DONE
                    j.end = t
                    del self.running[j.id]
                    self._release(j)
                    finished.append(j)
                    self.done_count += 1
                    self._dirty = True
            for j in list(self.stopping.values()):
                if j.stop_at <= t:
                    del self.stopping[j.id]
                    self._release(j)
                    j.status = PENDING
                    j.stop_at = INF
            arrived: list[JobState] = []
            while nxt < total and jobs[nxt].submit <= t:
                j = jobs[nxt]
                j.status = PENDING
                j.last_update = t
                arrived.append(j)
                nxt += 1
                self.version += 1
            self.rounds += 1
            policy.on_event(t, arrived, finished)
            wake = policy.next_wakeup(t)
            if wake is not None and wake <= t:
                wake = None
            if finished and self.progress is not None:
                self.progress(self.done_count, total)
        self._advance(self.now)
        return summarise(self)
