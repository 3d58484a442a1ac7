"""Our policy in the replay: the production engine itself (`scheduler.core.schedule`), not a copy. PURE.

Each round builds a `Snapshot` from the simulator's state exactly the way `scheduler/snapshot_from_db.py` builds
one from the database, calls `schedule(snapshot)` with the production default policy and `Config()`,
and applies the `Decisions` in the contract's order (preemptions: victims checkpoint on their GPUs and
are requeued with their place in line; migrations: the job moves to the new, disjoint GPUs; placements).

What the snapshot says:
* one exclusive pool of every node, one tenant ("trace") whose guaranteed quota is the whole cluster, so
  the default policy orders by priority (all equal), fair share (one tenant) and then `queue_seq`
  (submission order); EASY backfill, preemption and migration are on, as in production;
* the job's request as the trace gives it: its gang shape (`nodes` x `gpus_per_node`, None for any
  split), `require="leaf"` for a job that requires one leaf (`prefer-leaf` and `any` send no requirement:
  the engine always tries the tightest domain first), and the user's runtime estimate where the trace has
  one (a Slurm time limit), else `est_runtime_s=None` (the engine assumes `Config.default_runtime_s`):
  never the true duration (no oracle); each job's step compute and gradient bytes come from its runtime
  profile (the engine prices placements with them, as a tenant would declare them);
* with the network model on, the live link utilisation the telemetry would report (the all-reduce
  traffic of the running jobs, `RuntimeModel.link_utilisation`); off, an idle fabric.

Rounds run when a job arrives, finishes or has stopped (production requests a round on submit, finish
and requeue) and every `round_s` seconds (production's periodic round, `ROUND_INTERVAL_S`, default 10 s).
A periodic round is skipped when nothing changed since a round that decided nothing, until a running
job's migration hold-down runs out (the engine would answer the same).

`blind=True` is `default-blind`: the same engine on a topology-blind view: the snapshot has no fabric
(every node is its own domain, joined at the fabric level, so every multi-node choice costs the same)
and lists the nodes in a seeded random order. It still fills nodes and NVLink islands best-fit; it just
cannot tell one leaf from another.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

from fabric.topology.types import Fabric
from scheduler.core import schedule
from scheduler.core.policies import ServiceRank
from scheduler.core.topology import build_topology
from scheduler.core.types import (
    Config,
    GpuState,
    JobRequest,
    NodeState,
    PoolState,
    Quota,
    RunningJob,
    Share,
    Snapshot,
    TenantState,
)
from scheduler.sim.simulator import PENDING, RUNNING, STOPPING

if TYPE_CHECKING:  # pragma: no cover
    from scheduler.sim.simulator import JobState, Simulator

POOL = 1
TENANT = "trace"
DEFAULT_ROUND_S = 10.0


class EnginePolicy:
    def __init__(
        self, round_s: float = DEFAULT_ROUND_S, blind: bool = False, seed: int = 0, config: Config | None = None
    ):
        if round_s <= 0:
            raise ValueError("round_s must be > 0")
        self.name = "default-blind" if blind else "default"
        self.round_s = float(round_s)
        self.blind = blind
        self.seed = seed
        self.config = config or Config()
        self.sim: Simulator | None = None
        self.decided = True
        self.rounds = 0
        self._seen = -1  # simulator state version at the end of the last round
        self._last_round = -math.inf
        self._due = math.inf  # see _next_due

    def bind(self, sim: Simulator) -> None:
        self.sim = sim
        c = sim.cluster
        strength = self.config.cost.gpu_strength
        self._ref = strength.get(sim.params.reference_gpu, self.config.cost.unknown_strength)
        order = list(range(c.n_nodes))
        if self.blind:
            if any(j.topology == "require-leaf" and j.gpus > 1 for j in sim.jobs):
                raise ValueError("default-blind cannot see leaves, and this trace has jobs that require one leaf")
            random.Random(self.seed).shuffle(order)
            self.fabric = Fabric()
            self.topology = build_topology(self.fabric)
        else:
            self.fabric = c.fabric
            self.topology = c.topology
        self.order = order
        nodes = c.node_states
        self.hca = [c.node_nic_gbs[i] * 8.0 for i in range(c.n_nodes)]
        self.pools = [PoolState(POOL, "trace", "exclusive", 1, frozenset(c.hostnames))]
        self.tenants = [TenantState(TENANT, {POOL: Quota(float(c.n_gpus), 0.0)})]
        self._nodes = nodes
        self._ck = {}
        # The record production keeps on a preempted job (scheduler/actions/apply.py): for whom, when, which GPUs.
        self._preempted: dict[int, tuple[int, float, tuple[int, ...]]] = {}

    # ------------------------------------------------------------------ snapshot

    def _request(self, job: JobState) -> JobRequest:
        sim = self.sim
        assert sim is not None
        ck = self._ck.get(job.id)
        if ck is None:
            ck = self._ck[job.id] = sim.params.checkpoint_s(job.grad_bytes)
        pre = self._preempted.get(job.id)
        return JobRequest(
            id=job.id,
            tenant=TENANT,
            pool=POOL,
            gpus=job.gpus,
            nodes=job.nodes,
            gpus_per_node=job.gpus_per_node,
            require="leaf" if job.topology == "require-leaf" else None,
            est_runtime_s=job.est_runtime_s,
            checkpoint_cost_s=ck,
            submitted_at=job.submit,
            attained_gpu_s=job.attained_gpu_s,
            queue_seq=job.id + 1,
            allreduce_bytes=job.grad_bytes if job.gpus > 1 else None,
            step_compute_s=job.work_item.step_compute_s * self._ref,
            name=job.job.name,
            preempted_for=pre[0] if pre else None,
            preempted_at=pre[1] if pre else None,
            preempted_gpus=pre[2] if pre else (),
        )

    def snapshot(self, now: float) -> Snapshot:
        sim = self.sim
        assert sim is not None
        c = sim.cluster
        owner = sim.gpu_owner
        nodes = []
        for i in self.order:
            ns = self._nodes[i]
            gpus = []
            for p in c.node_gpus[i]:
                g = ns.gpus[p - c.node_gpus[i][0]]
                o = owner[p]
                if o >= 0:
                    gpus.append(GpuState(g.id, g.index, g.model, g.memory_mib, True, 1.0, g.nvlink_gbps, o))
                else:
                    gpus.append(g)
            nodes.append(
                NodeState(ns.hostname, gpus=tuple(gpus), nvlink_islands=ns.nvlink_islands, hca_gbps=self.hca[i])
            )
        pending: list[JobRequest] = []
        running: list[RunningJob] = []
        ids = c.gpu_ids
        for job in sim.jobs:
            if job.status == PENDING:
                pending.append(self._request(job))
            elif job.status in (RUNNING, STOPPING):
                running.append(
                    RunningJob(
                        self._request(job),
                        tuple(Share(ids[p]) for p in job.shares),
                        started_at=job.last_start if job.last_start is not None else now,
                        last_migrated_at=job.last_migrated,
                        stopping=job.status == STOPPING,
                    )
                )
        util = {} if self.blind else dict(sim.link_util)
        return Snapshot(
            now=now,
            fabric=self.fabric,
            nodes=nodes,
            pools=self.pools,
            tenants=self.tenants,
            pending=pending,
            running=running,
            link_utilisation=util,
            config=self.config,
            topology=self.topology,
        )

    # ------------------------------------------------------------------ rounds

    def on_event(self, now: float, arrived: list[JobState], finished: list[JobState]) -> None:
        sim = self.sim
        assert sim is not None
        if sim.version == self._seen and not self.decided and not self._holddown_due(now) and now < self._due:
            return  # an idle periodic round: nothing changed since a round that decided nothing
        # A victim that stopped at once (network model off: checkpoints are free) is requeued, and production
        # requests a round on requeue: its beneficiary starts in that round, not one period later. A round that
        # started its limit of jobs (Config.max_placements_per_round) is followed at once, as production's is.
        extra = 1
        while True:
            released, limited = self._round(now)
            if limited:
                continue
            if not released or not extra:
                break
            extra -= 1

    def _round(self, now: float) -> tuple[bool, bool]:
        """One engine round: whether a preemption released its victims at once, and whether the round left jobs
        at its limit of starts for the next."""
        sim = self.sim
        assert sim is not None
        self.rounds += 1
        dec = schedule(self.snapshot(now))
        by_id = {j.id: j for j in sim.jobs}
        pos = sim.cluster.pos_of_id
        for vid, _why in dec.requeues:  # pragma: no cover - nothing fails in a replay
            j = by_id[vid]
            if j.status == RUNNING:
                sim.preempt(j)
        released = False
        for p in dec.preemptions:
            j = by_id[p.job_id]
            if j.status == RUNNING:
                sim.preempt(j, checkpoint_in_place=True)
                self._preempted[j.id] = (p.for_job, now, p.gpu_ids)
                released = released or j.status == PENDING
        for m in dec.migrations:
            j = by_id[m.job_id]
            if j.status == RUNNING:
                sim.migrate(j, [pos[s.gpu_id] for s in m.placement.shares])
        for pl in dec.placements:
            j = by_id[pl.job_id]
            sim.start(j, [pos[s.gpu_id] for s in pl.shares])
        self.decided = bool(dec.preemptions or dec.migrations or dec.placements or dec.requeues)
        self._seen = sim.version
        self._last_round = now
        self._due = math.inf if self.decided else self._next_due(now)
        return released, dec.stats["left_for_next_round"] > 0

    def _next_due(self, now: float) -> float:
        """The first time after `now` when a rule of the engine that depends on time alone could decide
        differently with nothing else changed, so that skipping idle rounds until then changes nothing: a
        running job above the lowest waiting job's service level passes its minimum run time, or has run
        long enough for its preemption to pay; a running job reaches a service level above it; a waiting job
        ages; a preemption's first call on its GPUs runs out."""
        sim, cfg = self.sim, self.config
        assert sim is not None
        due = math.inf
        for _for, at, _gpus in self._preempted.values():
            if at + cfg.preemption_claim_s > now:
                due = min(due, at + cfg.preemption_claim_s)
        pending = [j for j in sim.jobs if j.status == PENDING]
        if not pending or not cfg.service_order:
            return due
        rank = ServiceRank(cfg.service_quantum_gpu_s, cfg.service_base, cfg.service_levels, cfg.service_aging_s)
        if cfg.service_aging_s > 0:
            for j in pending:
                t = j.submit + j.attained_gpu_s / j.gpus + cfg.service_aging_s
                if t > now:
                    due = min(due, t)
        if not cfg.service_preemption:
            return due
        low = min(0 if rank.starving(self._request(j), now) else rank.level(self._request(j)) for j in pending)
        q, b = cfg.service_quantum_gpu_s, cfg.service_base
        thresholds = [q * b**k for k in range(max(0, cfg.service_levels - 1))] if q > 0 else []
        for j in sim.running.values():
            level = rank.level(self._request(j))
            for thr in thresholds:  # the next level it reaches, if that puts it above the lowest waiting job
                if thr > j.attained_gpu_s:
                    if thresholds.index(thr) + 1 > low:
                        due = min(due, now + (thr - j.attained_gpu_s) / j.gpus)
                    break
            if level <= low:
                continue
            last = j.last_start if j.last_migrated is None else max(j.last_start or 0.0, j.last_migrated)
            if last is not None and last + cfg.preemption_min_run_s > now:
                due = min(due, last + cfg.preemption_min_run_s)
            pays = cfg.service_preempt_pays * (self._ck.get(j.id, 0.0) + cfg.restart_overhead_s)
            ran = j.attained_gpu_s / j.gpus
            if ran < pays and j.est_runtime_s is None:
                due = min(due, now + pays - ran)
        return due

    def _holddown_due(self, now: float) -> bool:
        last = self._last_round
        hold = self.config.migration_hold_down_s
        sim = self.sim
        assert sim is not None
        for j in sim.running.values():
            if j.gpus > 1:
                t = (j.last_migrated if j.last_migrated is not None else j.last_start) + hold
                if last < t <= now:
                    return True
        return False

    def next_wakeup(self, now: float) -> float | None:
        sim = self.sim
        assert sim is not None
        busy = any(j.status in (PENDING, STOPPING) for j in sim.jobs) or any(j.gpus > 1 for j in sim.running.values())
        if not busy:
            return None
        return (math.floor(now / self.round_s) + 1) * self.round_s
