"""The replay's `default` policy is what production rounds do (issue 12: "what wins here must be what
`schedule_round` does").

One trace slice runs through the policy lab (`scheduler.sim`: `EnginePolicy` on `build_cluster(...)`, network
model off) and, in lock-step, through real DB-backed rounds (`run_round`: adapters -> schedule -> actions,
LAUNCHER=twin) on a generated fat tree of the same shape. Every engine round of the replay is followed by one
database round at the same instant (the database side's clock is the replay's clock, `Clock`); before it the
database gets the jobs the replay has queued (`submit_job`, in queue order, with the trace's shape, estimate,
topology requirement and model profile: `require`, `allreduce_mb`, `step_compute_ms`) and finishes the jobs
the replay has finished (`finish_job`). Both rounds must apply the same decisions: placements (job -> sorted
(node, GPU index)), preemptions (victim, beneficiary), migrations and requeues. The run stops at the first
round that differs, naming the round, the job, what each side did and the snapshot fields the two sides filled
differently.

The two clusters map one-to-one by name. `build_cluster` puts node i (`gpu{i+1:04d}`) under leaf
`leaf{i // per_leaf + 1:03d}`; the fat tree generator with one HCA per node (`hcas_per_node=1`, the simulator's
one EDR HCA) makes one leaf per scalable unit of `down` servers, numbered the same way, so `leaf_ports` is
chosen to give down = nodes per leaf (`db_cluster`). A GPU is (hostname, device index) on both sides.

What the two sides tell the engine differently, on purpose or for want of a field (`KNOWN_GAPS`), is checked
too: any other difference in the snapshots fails `test_the_replay_asks_the_engine_what_production_asks`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.utils import timezone

import scheduler.rounds
import scheduler.sim.engine_policy as engine_policy
import scheduler.snapshot_from_db
from fabric import actions as fabric_actions
from fabric.models import Node
from fabric.topology.types import Fabric
from scheduler import actions
from scheduler.core import schedule
from scheduler.core.topology import build_topology
from scheduler.core.types import Config, Decisions, Snapshot
from scheduler.models import Allocation, Job, PriorityClass, SchedulingRound
from scheduler.rounds import run_round
from scheduler.sim.cluster import SimCluster, build_cluster, parse_cluster_spec
from scheduler.sim.engine_policy import EnginePolicy
from scheduler.sim.simulator import DONE, WAITING, Simulator
from scheduler.sim.traces import Trace, load_trace
from scheduler.snapshot_from_db import build_snapshot
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Replay time t is EPOCH + t on the database side (a fixed instant: every run reads the same times).
EPOCH = datetime(2025, 1, 6, tzinfo=UTC).timestamp()


class Clock:
    """The replay's time for everything on the database side that reads the time: the adapter's `now`
    (time.time) and every timezone.now() (auto_now_add, started_at, finished_at, preempted_at, the rounds)."""

    def __init__(self) -> None:
        self.t = 0.0

    def time(self) -> float:
        return EPOCH + self.t

    def now(self) -> datetime:
        return datetime.fromtimestamp(EPOCH + self.t, UTC)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(timezone, "now", c.now)
    monkeypatch.setattr(scheduler.snapshot_from_db, "time", SimpleNamespace(time=c.time))
    return c


def db_cluster(name: str, spec: str):
    """The fat tree of the shape of `build_cluster(parse_cluster_spec(spec))`: the spec's GPU model and link
    rate, one HCA a node, `nodes_per_leaf` servers a leaf, uplinks at the spec's oversubscription."""
    s = parse_cluster_spec(spec)
    per_leaf = s.nodes_per_leaf or s.nodes
    # plan_fat_tree: up = floor(P / (1 + o)), down = min(P - up, floor(up * o)). P = per_leaf + per_leaf / o
    # gives down = per_leaf: 8 a leaf at 1:1 -> P 16 (8 down, 8 up), at 2:1 -> P 12 (8 down, 4 up).
    # One leaf (no /NODES_PER_LEAF): fewer servers than `down` get down = servers.
    leaf_ports = max(4, per_leaf + math.ceil(per_leaf / s.oversubscription))
    if s.nodes_per_leaf is None:
        leaf_ports = max(leaf_ports, 2 * s.nodes + 2)
    return fat_tree(
        name,
        nodes=s.nodes,
        gpus_per_node=s.gpus_per_node,
        gpu_model=s.gpu_model,
        rate=s.link_rate,
        hcas_per_node=1,
        leaf_ports=leaf_ports,
        oversubscription=s.oversubscription,
    )


# ----------------------------------------------------------------------------------------- canonical views


def gpu_names(snapshot: Snapshot) -> dict[int, tuple[str, int]]:
    return {g.id: (n.hostname, g.index) for n in snapshot.nodes for g in n.gpus}


def canonical(snapshot: Snapshot, trace_id: dict[int, int], t0: float) -> dict:
    """What the engine reads, with the side's own ids turned into the trace's (jobs) and names (GPUs, leaves)
    and times made relative to the side's epoch: equal views mean the two sides asked the engine the same."""
    names = gpu_names(snapshot)

    def request(r) -> dict:
        d = {f: getattr(r, f) for f in r.__slots__}
        for f in ("id", "tenant", "pool", "queue_seq", "name"):  # ids and labels of each side (queue: order)
            d.pop(f)
        d["submitted_at"] = round(d["submitted_at"] - t0, 6)
        if d["preempted_at"] is not None:
            d["preempted_at"] = round(d["preempted_at"] - t0, 6)
        d["preempted_for"] = trace_id.get(d["preempted_for"], d["preempted_for"])
        d["preempted_gpus"] = tuple(sorted(names[g] for g in d["preempted_gpus"]))
        return d

    nodes = {}
    for n in snapshot.nodes:
        gpus = {}
        for g in n.gpus:
            d = {f: getattr(g, f) for f in g.__slots__ if f not in ("id", "index")}
            d["exclusive_job"] = trace_id.get(d["exclusive_job"], d["exclusive_job"])
            gpus[g.index] = d
        nodes[n.hostname] = {
            "schedulable": n.schedulable,
            "storage": n.storage,
            "up": n.up,
            "hca_gbps": n.hca_gbps,
            "nvlink_islands": tuple(tuple(i) for i in n.nvlink_islands),
            "gpus": gpus,
        }
    # The fabric as the engine's index sees it, leaves named by their first host (switch names and link keys
    # are each side's own): hosts, capacities, pods, and the level two leaves meet at.
    topo = snapshot.topology or build_topology(snapshot.fabric)
    first = {g.id: min((h for h, gid in topo.group_of.items() if gid == g.id), default=str(g.id)) for g in topo.groups}
    leaves = {
        first[g.id]: {
            "hosts": sorted(h for h, gid in topo.group_of.items() if gid == g.id),
            "host_gbps": g.host_gbps,
            "uplink_gbps": g.uplink_gbps,
            "meets": {first[o.id]: topo.group_level(g.id, o.id) for o in topo.groups if o.id != g.id},
        }
        for g in topo.groups
    }
    pods = sorted((sorted(first[g] for g in p.groups), p.down_gbps, p.up_gbps) for p in topo.pods)
    return {
        "now": round(snapshot.now - t0, 6),
        "config": snapshot.config,
        "nodes": nodes,
        "leaves": leaves,
        # Orders the engine may break ties by: the nodes as listed, the leaves by their index in the topology.
        "node_order": [n.hostname for n in snapshot.nodes],
        "leaf_order": [first[g.id] for g in sorted(topo.groups, key=lambda g: g.id)],
        "pods": pods,
        "host_nominal_gbps": dict(sorted(topo.host_nominal_gbps.items())),
        # Replicas per GPU are read for time-sliced pools only.
        "pools": [
            (p.sharing, p.timeslice_replicas if p.sharing == "timeslice" else None, sorted(p.hostnames))
            for p in snapshot.pools
        ],
        "queue": [trace_id[r.id] for r in snapshot.pending],
        "pending": {trace_id[r.id]: request(r) for r in snapshot.pending},
        "running": {
            trace_id[rj.request.id]: {
                # Its service as the engine reads it (RunningJob.attained_at): the database hands its earlier runs in
                # the request and the current one's start times beside it, the replay all of it in the request.
                "request": request(replace(rj.request, attained_gpu_s=rj.attained_at(snapshot.now))),
                "gpus": tuple(sorted(names[s.gpu_id] for s in rj.shares)),
                "started_at": round(rj.started_at - t0, 6),
                "last_migrated_at": None if rj.last_migrated_at is None else round(rj.last_migrated_at - t0, 6),
                "borrowed": rj.borrowed,
                "stopping": rj.stopping,
            }
            for rj in snapshot.running
        },
        "tenants": [
            {"quotas": list(t.quotas.values()), "usage_decayed": t.usage_decayed, "weight": t.weight}
            for t in snapshot.tenants
        ],
        "link_utilisation": dict(snapshot.link_utilisation),
        "link_errors": dict(snapshot.link_errors),
    }


def differences(a, b, path: str = "") -> list[str]:
    """Where two canonical views differ, as `path: replay value != database value` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in [*a, *(k for k in b if k not in a)]:
            if k not in a or k not in b:
                out.append(f"{path}/{k}: {'only in the database' if k not in a else 'only in the replay'}")
            else:
                out.extend(differences(a[k], b[k], f"{path}/{k}"))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [line for i, (x, y) in enumerate(zip(a, b, strict=True)) for line in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


# Fields the two sides fill differently, each with why; `gap(line)` says whether a difference is one of them.
KNOWN_GAPS = {
    # A job states its profile in MB and ms (Job.allreduce_mb, step_compute_ms): bytes and seconds come back
    # within a float's rounding.
    "allreduce_bytes": "MB in the database",
    "step_compute_s": "ms in the database",
    # The replay prices a checkpoint from the profile's state size (RuntimeParams.checkpoint_s, e.g. 10.3 s);
    # the database job declares it in whole seconds (Job.checkpoint_cost_s): `submit` rounds it.
    "checkpoint_cost_s": "whole seconds in the database",
    # The replay reports a held GPU 100 % busy (what telemetry shows for a job running flat out); the database
    # side has no telemetry here (0). Free GPUs must agree (0 on both).
    "utilisation": "held GPUs only",
    # Fair share: production charges the tenant its running and recently finished GPU-hours; the replay's one
    # tenant is charged nothing. With one tenant, fair share orders nothing.
    "usage_decayed": "one tenant",
    # The generator cables every leaf to two spines, the replay's single-leaf cluster has none: the uplinks of
    # a cluster's only leaf are never on a job's path (a job never leaves it).
    "uplink_gbps": "only leaf",
    "pods": "only leaf",
}


def gap(line: str, sim_view: dict) -> bool:
    path, _, values = line.partition(": ")
    leaf = path.rsplit("/", 1)[-1].split("[")[0]
    if leaf not in KNOWN_GAPS:
        return False
    if leaf in ("allreduce_bytes", "step_compute_s"):
        a, b = (float(v) for v in values.split(" != "))
        return math.isclose(a, b, rel_tol=1e-9)
    if leaf == "checkpoint_cost_s":
        a, b = (float(v) for v in values.split(" != "))
        return abs(a - b) <= 0.5
    if leaf == "utilisation":  # /nodes/<host>/gpus/<index>/utilisation
        _, _, host, _, index, _ = path.split("/")
        return sim_view["nodes"][host]["gpus"][int(index)]["exclusive_job"] is not None
    if leaf in ("uplink_gbps", "pods"):
        return len(sim_view["leaves"]) == 1
    return True


def production_view(snapshot: Snapshot) -> Snapshot:
    """The replay's snapshot with each request as a production job can state it: no model profile (no Job
    field for all-reduce bytes or step compute) and its checkpoint cost in whole seconds."""

    def request(r):
        return replace(
            r, allreduce_bytes=None, step_compute_s=None, checkpoint_cost_s=float(round(r.checkpoint_cost_s))
        )

    running = [replace(rj, request=request(rj.request)) for rj in snapshot.running]
    return replace(snapshot, pending=[request(r) for r in snapshot.pending], running=running)


# ----------------------------------------------------------------------------------------- the lock-step


def compact(value):
    """GPU lists as `gpu0004[0-7] gpu0008[0,1]` in messages (decisions keep the sorted tuples)."""
    if isinstance(value, dict):
        return {k: compact(v) for k, v in value.items()}
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        by_host: dict[str, list[int]] = {}
        for host, index in value:
            by_host.setdefault(host, []).append(index)
        parts = []
        for host, ix in by_host.items():
            run = ix == list(range(ix[0], ix[-1] + 1)) and len(ix) > 2
            parts.append(f"{host}[{ix[0]}-{ix[-1]}]" if run else f"{host}[{','.join(map(str, ix))}]")
        return " ".join(parts)
    return value


@dataclass
class Round:
    n: int
    t: float
    sim: dict
    db: dict
    diff: list[str] = field(default_factory=list)  # snapshot differences beyond KNOWN_GAPS
    gaps: list[str] = field(default_factory=list)  # the KNOWN_GAPS differences

    def first_job(self) -> tuple[int | None, str]:
        """The first job the two sides treat differently, and how."""
        for kind in ("requeues", "preemptions", "migrations", "placements"):
            a, b = self.sim[kind], self.db[kind]
            for job in sorted(set(a) | set(b)):
                if a.get(job) != b.get(job):
                    x, y = compact(a.get(job, "nothing")), compact(b.get(job, "nothing"))
                    return job, f"job {job} ({kind}): replay {x}, database {y}"
        return None, "none"

    def message(self) -> str:
        job, how = self.first_job()
        lines = [
            f"round {self.n} at replay time {self.t:g} s: the replay and the database round decided differently",
            f"  first differing {how}",
            f"  replay:   {compact(self.sim)}",
            f"  database: {compact(self.db)}",
            "  snapshot fields filled differently (beyond KNOWN_GAPS):",
        ]
        lines += [f"    {line}" for line in self.diff[:40]] or ["    none"]
        mine = [g for g in self.gaps if g.startswith((f"/pending/{job}/", f"/running/{job}/"))]
        lines += [f"  KNOWN_GAPS on job {job}:"] + [f"    {line}" for line in mine] if mine else []
        return "\n".join(lines)


class ParityError(AssertionError):
    pass


class LockStep:
    """Runs the replay; each engine round of the replay is followed by one database round at the same time."""

    def __init__(self, trace: Trace, spec: str, clock: Clock, monkeypatch, knowledge: str = "replay") -> None:
        self.trace = trace
        self.clock = clock
        self.monkeypatch = monkeypatch
        # "replay": the replay's rounds decide on its own snapshot (the `default` policy as the policy lab runs
        # it); "production": on that snapshot less what production cannot know (`production_view`).
        self.knowledge = knowledge
        self.cluster: SimCluster = build_cluster(parse_cluster_spec(spec))
        self.db = db_cluster("parity", spec)
        self.pool = actions.ensure_scheduler(self.db)
        # As the replay's snapshot says: one tenant, its guarantee the whole cluster, the default class.
        self.tenant = actions.create_tenant("trace")
        actions.set_quota(self.tenant, self.pool, guaranteed_gpus=self.cluster.n_gpus, borrow_limit=0)
        self.normal = PriorityClass.objects.get(name="normal")
        self.policy = EnginePolicy()
        self.sim = Simulator(trace, self.cluster, self.policy, network=False)
        self.db_job: dict[int, int] = {}  # trace id -> Job pk
        self.trace_of: dict[int, int] = {}  # Job pk -> trace id
        self.finished: set[int] = set()
        self.rounds: list[Round] = []
        self.db_snapshot: Snapshot | None = None

    def _profile(self, j) -> dict:
        """The job's model profile as a tenant states it (Job.allreduce_mb, step_compute_ms), from what the replay
        tells the engine (EnginePolicy._request); nothing when the run stands for jobs that state none."""
        if self.knowledge == "production":
            return {}
        return {
            "allreduce_mb": j.grad_bytes / 1e6 if j.gpus > 1 else None,
            "step_compute_ms": j.work_item.step_compute_s * self.policy._ref * 1000,
        }

    def _sync(self) -> None:
        """Queue in the database what the replay has queued (in its queue order), finish what it finished."""
        for j in sorted(self.sim.jobs, key=lambda j: (j.submit, j.id)):
            if j.status != WAITING and j.id not in self.db_job:
                self.clock.t = j.submit
                row = actions.submit_job(
                    self.tenant,
                    self.pool,
                    self.normal,
                    name=f"t{j.id}",
                    gpus=j.gpus,
                    nodes=j.nodes,
                    gpus_per_node=j.gpus_per_node,
                    est_runtime_s=None if j.est_runtime_s is None else round(j.est_runtime_s),
                    checkpoint_cost_s=round(self.sim.params.checkpoint_s(j.grad_bytes)),
                    require="leaf" if j.topology == "require-leaf" else "",
                    **self._profile(j),
                )
                self.db_job[j.id] = row.pk
                self.trace_of[row.pk] = j.id
        for j in sorted(
            (j for j in self.sim.jobs if j.status == DONE and j.id not in self.finished), key=lambda j: j.end
        ):
            self.clock.t = j.end
            actions.finish_job(Job.objects.get(pk=self.db_job[j.id]), succeeded=True)
            self.finished.add(j.id)

    def _applied(self, record: SchedulingRound) -> dict:
        """What the database round applied, read back from its log and the allocation rows."""
        assert record.rejected_stale == 0, f"round {record.pk} rejected stale decisions: {record.decisions}"
        log = record.decisions
        moved = [d["job"] for d in log if d["kind"] in ("placement", "migration")]
        held: dict[int, list[tuple[str, int]]] = {}
        for job_id, host, index in Allocation.objects.filter(job_id__in=moved, active=True).values_list(
            "job_id", "gpu__node__hostname", "gpu__index"
        ):
            held.setdefault(self.trace_of[job_id], []).append((host, index))
        return {
            "placements": {self.trace_of[d["job"]]: tuple(sorted(held[self.trace_of[d["job"]]])) for d in log
                           if d["kind"] == "placement"},
            "preemptions": {self.trace_of[d["job"]]: self.trace_of.get(d["for"], d["for"]) for d in log
                            if d["kind"] == "preemption"},
            "migrations": {self.trace_of[d["job"]]: tuple(sorted(held[self.trace_of[d["job"]]])) for d in log
                           if d["kind"] == "migration"},
            "requeues": {self.trace_of[d["job"]]: True for d in log if d["kind"] == "requeue"},
        }  # fmt: skip

    def run(self) -> list[Round]:
        real_build = scheduler.rounds.build_snapshot

        def capture(cluster_id: int):
            snap, index = real_build(cluster_id)
            self.db_snapshot = snap
            return snap, index

        def lockstep(snapshot: Snapshot) -> Decisions:
            self._sync()
            self.clock.t = snapshot.now
            if self.knowledge == "production":
                snapshot = production_view(snapshot)
            decisions = schedule(snapshot)
            names = gpu_names(snapshot)
            sim = {
                "placements": {
                    p.job_id: tuple(sorted(names[s.gpu_id] for s in p.shares)) for p in decisions.placements
                },
                "preemptions": {p.job_id: p.for_job for p in decisions.preemptions},
                "migrations": {
                    m.job_id: tuple(sorted(names[s.gpu_id] for s in m.placement.shares)) for m in decisions.migrations
                },
                "requeues": {j: True for j, _ in decisions.requeues},
            }
            record = run_round(self.db.pk, f"parity {len(self.rounds)}")
            assert self.db_snapshot is not None
            sim_view = canonical(snapshot, {j.id: j.id for j in self.sim.jobs}, self.sim.start_time)
            db_view = canonical(self.db_snapshot, self.trace_of, EPOCH)
            lines = differences(sim_view, db_view)
            known = [line for line in lines if gap(line, sim_view)]
            diff = [line for line in lines if line not in known]
            r = Round(len(self.rounds), snapshot.now, sim, self._applied(record), diff, known)
            self.rounds.append(r)
            if r.sim != r.db:
                raise ParityError(r.message())
            return decisions

        self.monkeypatch.setattr(scheduler.rounds, "build_snapshot", capture)
        self.monkeypatch.setattr(engine_policy, "schedule", lockstep)
        self.sim.run()
        return self.rounds


def churn(n: int) -> Trace:
    return load_trace("slurm", FIXTURES / "slurm_churn_500_seed1.tsv").head(n)


def tiresias(n: int) -> Trace:
    return load_trace("tiresias", FIXTURES / "tiresias_60_job.csv").head(n)


# ----------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    ("spec", "leaves", "uplink_gbps"),
    [
        # 4 leaves of 8 nodes; 8 EDR hosts (100 Gb/s) at 2:1 -> 8 x 100 / 2 = 400 Gb/s of uplinks a leaf.
        ("32x8/8:2", 4, 400.0),
        # One leaf of 4 nodes: nothing above it is ever crossed.
        ("4x4", 1, None),
    ],
)
def test_the_two_clusters_map_one_to_one(spec, leaves, uplink_gbps):
    s = parse_cluster_spec(spec)
    sim = build_cluster(s)
    db_snapshot, _ = build_snapshot(db_cluster("parity", spec).pk)
    sim_snapshot = Snapshot(now=0.0, fabric=sim.fabric, nodes=sim.node_states, pools=[], topology=sim.topology)
    a, b = canonical(sim_snapshot, {}, 0.0), canonical(db_snapshot, {}, db_snapshot.now)
    assert list(a["nodes"]) == list(b["nodes"]) == [f"gpu{i + 1:04d}" for i in range(s.nodes)]
    # GPUs (model, memory, NVLink), islands, HCA capacity, leaves, pods, the level leaves meet at: all equal
    # but for the uplinks of a single leaf (KNOWN_GAPS).
    assert [line for line in differences(a, b) if not gap(line, a)] == []
    assert len(a["leaves"]) == leaves
    per_leaf = s.nodes_per_leaf or s.nodes
    for k, leaf in enumerate(a["leaves"].values()):
        assert leaf["hosts"] == [f"gpu{i + 1:04d}" for i in range(k * per_leaf, (k + 1) * per_leaf)]
        if uplink_gbps is not None:
            assert leaf["uplink_gbps"] == uplink_gbps


def test_both_sides_run_the_engine_with_the_same_config():
    """Production rounds build `Snapshot(...)` without a config (its default, `Config()`); the replay's
    EnginePolicy passes its own, `Config()` unless told otherwise."""
    assert EnginePolicy().config == Config()
    assert Snapshot(now=0.0, fabric=Fabric(), nodes=[], pools=[]).config == Config()


def churn_slice_runs_alike(clock, monkeypatch, knowledge: str) -> None:
    trace = churn(60)
    gangs = [j for j in trace.jobs if j.nodes is not None and j.nodes > 1]
    assert len(gangs) >= 10  # the slice exercises multi-node placement: 2 x 8 and 4 x 8 gangs
    rounds = LockStep(trace, "32x8/8:2", clock, monkeypatch, knowledge).run()
    assert rounds and all(r.sim == r.db for r in rounds)
    assert Job.objects.filter(status="completed").count() == len(trace.jobs)
    assert {j for r in rounds for j in r.db["placements"]} == {j.id for j in trace.jobs}


def test_churn_slice_places_like_the_replay(clock, monkeypatch):
    """The first 60 jobs of the Slurm-style churn (every job with its time limit as the estimate) on its cluster,
    32 nodes x 8 GPUs in 4 leaves of 8 with 2:1 uplinks, the replay's `default` as the policy lab runs it."""
    churn_slice_runs_alike(clock, monkeypatch, "replay")


def test_churn_slice_places_like_the_replay_told_what_production_knows(clock, monkeypatch):
    """The same with the replay's requests cut to what a production job states (`production_view`): every
    other field of the two snapshots agrees, and so does every round."""
    churn_slice_runs_alike(clock, monkeypatch, "production")


@pytest.mark.parametrize("spec", ["2x4", "4x4"])
def test_tiresias_trace_places_like_the_replay(clock, monkeypatch, spec):
    """The Tiresias 60-job trace (30 jobs of 1 GPU, 10 each of 2, 4 and 8; arrivals over 1,779 s; no estimates)
    on one leaf of 2 or 4 nodes x 4 GPUs: a queue that waits, least attained service (on 2x4 the replay preempts
    by it: the round that diverged before production recorded attained service)."""
    trace = tiresias(60)
    lock = LockStep(trace, spec, clock, monkeypatch)
    rounds = lock.run()
    assert rounds and all(r.sim == r.db for r in rounds)
    assert Job.objects.filter(status="completed").count() == len(trace.jobs)


@pytest.mark.parametrize(
    ("trace", "spec", "knowledge"),
    [("tiresias", "2x4", "replay"), ("churn", "32x8/8:2", "replay"), ("churn", "32x8/8:2", "production")],
)
def test_the_replay_asks_the_engine_what_production_asks(clock, monkeypatch, trace, spec, knowledge):
    """Beyond the decisions: in every round the two snapshots agree on every field the engine reads (nodes,
    GPUs, leaves and their uplinks, queue order, requests, running jobs, times), but for KNOWN_GAPS (each with
    why). A new difference means the replay and production ask the engine different questions."""
    jobs = tiresias(60) if trace == "tiresias" else churn(60)
    rounds = LockStep(jobs, spec, clock, monkeypatch, knowledge).run()
    differing = [r for r in rounds if r.diff]
    assert not differing, differing[0].message()


def test_a_difference_fails_at_its_round_naming_the_job(clock, monkeypatch):
    """The harness itself: a database cluster with one node drained (the replay's is whole) diverges in the
    first round that would use that node, and the failure says which round, which job and which field."""
    lock = LockStep(churn(60), "32x8/8:2", clock, monkeypatch)
    fabric_actions.set_node_state(Node.objects.filter(cluster=lock.db, hostname="gpu0001"), "drain", reason="test")
    with pytest.raises(ParityError) as failed:
        lock.run()
    text = str(failed.value)
    assert text.startswith(f"round {len(lock.rounds) - 1} at replay time ")
    assert "first differing job " in text
    assert "/nodes/gpu0001/schedulable: True != False" in text
