"""The contract of the scheduling engine: a Snapshot in, Decisions out. PURE (no Django, no I/O).

`scheduler/snapshot_from_db.py` builds a `Snapshot` from the database in bulk, calls
`scheduler.core.schedule(snapshot)` and applies the `Decisions` in one transaction.

Occupancy. `GpuState`'s held fields (`exclusive_job`, `mps_*_used`, `mig_used`, `timeslice_used`)
say what is allocated on a GPU now; `RunningJob.shares` say which job holds which part. The adapter
fills both from the same allocation rows. A GPU whose held fields say "busy" with no running job
on it stays busy (e.g. an allocation the engine does not know the owner of).

A running job that was told to stop (preempted, or migrating) must be passed with `stopping=True` until
it is gone: it is then neither a victim nor a mover again, and a job that would fit once it stops waits
for it instead of preempting more.

Applying Decisions (the order matters):
1. `requeues` and `failures`: release the allocations of those running jobs; requeued jobs go back
   to pending keeping their `queue_seq`, failed ones are marked failed.
2. `preemptions`: send the checkpoint signal; the victims keep their GPUs until they stop. Record on each
   victim `for_job`, the time and `gpu_ids`, and pass them back as `JobRequest.preempted_*` while it waits
   or stops: the next rounds give those GPUs to `for_job` first and keep the victim off them while it waits.
3. `migrations`: allocate `placement.shares` (always disjoint from the job's current shares), then
   checkpoint, stop and relaunch the job there, then release the old shares.
4. `placements`: allocate and launch. A job requeued in step 1 may be placed again in the same round.
Everything else (`pending_reasons`, `queue_order`, `reservations`, `stats`) is information.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from fabric.topology.types import Fabric

if TYPE_CHECKING:  # pragma: no cover
    from scheduler.core.topology import Topology

Sharing = Literal["exclusive", "mps", "mig", "timeslice"]
ShareKind = Literal["whole", "mps", "mig", "timeslice"]
Workload = Literal["training", "inference", "data-intensive"]
Require = Literal["island", "node", "leaf", "pod"]

SHARING_MODES: tuple[str, ...] = ("exclusive", "mps", "mig", "timeslice")
WORKLOADS: tuple[str, ...] = ("training", "inference", "data-intensive")
REQUIRE_LEVELS: tuple[str, ...] = ("island", "node", "leaf", "pod")
SHARE_KIND_OF: dict[str, str] = {"exclusive": "whole", "mps": "mps", "mig": "mig", "timeslice": "timeslice"}

# What each sharing mode isolates (shown to tenants next to the mode).
ISOLATION: dict[str, str] = {
    "exclusive": "whole GPU: nothing shared",
    "mig": "hardware partition: own SMs, memory, L2 and bandwidth; PCIe and power shared",
    "mps": "compute capped by percentage and memory pinned by limit; a fatal fault can affect other clients",
    "timeslice": "none: time-shared context switching, memory not limited",
}


# --------------------------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class GpuState:
    id: int  # database pk
    index: int  # device index on the node (nvidia-smi)
    model: str  # "H100", as in fabric/topology/catalog.py
    memory_mib: int
    healthy: bool = True
    utilisation: float = 0.0  # live, 0..1
    nvlink_gbps: float = 0.0  # GB/s per GPU, bidirectional; 0 = no NVLink
    # Held now:
    exclusive_job: int | None = None
    mps_compute_pct_used: int = 0
    mps_memory_mib_used: int = 0
    mig_used: tuple[tuple[str, int], ...] = ()  # (profile, start slice)
    timeslice_used: int = 0


@dataclass(frozen=True, slots=True)
class NodeState:
    hostname: str
    schedulable: bool = True  # up and not drained/cordoned: may take new work
    storage: bool = False
    gpus: tuple[GpuState, ...] | list[GpuState] = ()
    # GPU index groups fully joined by NVLink (nvidia-smi topo -m NV# codes): one group of 8 on a DGX,
    # singletons on a PCIe box. GPUs missing from every group count as singleton islands.
    nvlink_islands: tuple[tuple[int, ...], ...] | list[tuple[int, ...]] = ()
    hca_gbps: float = 0.0  # total injection bandwidth of the node's HCAs, Gb/s (used when the fabric lacks the host)
    up: bool = True  # False: the node is down; jobs on it are requeued (a drained node that is up keeps its jobs)
    # Host resources jobs may ask for (Kubernetes' allocatable, Slurm's CPUs / RealMemory): milli-CPUs and
    # MiB in all, what running jobs hold is subtracted by the engine. 0 = not tracked: never a constraint.
    cpu_milli: int = 0
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class PoolState:
    id: int
    name: str
    sharing: Sharing = "exclusive"
    timeslice_replicas: int = 1
    hostnames: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Quota:
    guaranteed_gpus: float = 0  # GPUs (fractional for shared pools) the tenant is always entitled to
    borrow_limit: float = 0  # GPUs it may borrow beyond that from idle capacity


@dataclass(frozen=True, slots=True)
class TenantState:
    name: str
    quotas: dict[int, Quota] = field(default_factory=dict)  # pool id -> quota
    usage_decayed: float = 0.0  # GPU-hours, decayed (fair share)
    max_priority: int = 1_000_000  # job priorities are clamped to this
    weight: float = 1.0  # fair-share weight (entitlement multiplier)


@dataclass(frozen=True, slots=True)
class JobRequest:
    id: int
    tenant: str
    pool: int
    gpus: int  # total GPUs (shared modes: GPUs that each get one share)
    nodes: int | None = None  # gang shape; None = any shape
    gpus_per_node: int | None = None
    gpu_model: str | None = None
    gpu_memory_mib: int | None = None  # minimum memory per GPU
    sharing: Sharing = "exclusive"
    mps_compute_pct: int | None = None
    mps_memory_mib: int | None = None
    mig_profile: str | None = None
    priority: int = 50
    preemptible: bool = True
    movable: bool = True  # False: never preempted nor moved here (a job another scheduler runs, observed read-only)
    workload: Workload = "training"
    dataset_node: str | None = None  # hostname of the storage node holding the dataset
    est_runtime_s: float | None = None  # user's estimate of the run time (backfill, migration gain)
    checkpoint_cost_s: float = 60.0  # seconds to checkpoint and restart (migration cost)
    submitted_at: float = 0.0
    attained_gpu_s: float = 0.0  # GPU-seconds of service received so far (LAS)
    queue_seq: int = 0  # original place in line; a requeued job keeps it
    requeue_opt_out: bool = False  # on failure: fail instead of going back to the queue
    # Additions (all optional):
    require: Require | None = None  # required topology domain; None = preferred only
    allreduce_bytes: float | None = None  # gradient bytes all-reduced per step; None = CostParams default
    step_compute_s: float | None = None  # compute seconds per step on an idle reference GPU
    io_bytes_per_step: float | None = None  # dataset bytes read per step (data-intensive)
    name: str = ""
    # Host CPU (milli-CPUs) and host memory (MiB) the job needs on each node it runs on (Slurm's --mem is
    # per node; a Kubernetes pod is one node): 0 = none asked. Checked only on nodes that track them.
    host_cpu_milli: int = 0
    host_memory_mib: int = 0
    # Its last preemption, as recorded when it was applied (docs/scheduler.md, "No thrashing"): while the
    # job it was preempted for waits, it is not placed (or moved) back onto those GPUs, and that job has
    # first call on them.
    preempted_for: int | None = None  # the job its GPUs were freed for
    preempted_at: float | None = None
    preempted_gpus: tuple[int, ...] = ()  # its GPUs the beneficiary's planned placement takes


@dataclass(frozen=True, slots=True)
class RequestClass:
    """One shape of shared-GPU request in the workload's recent mix, with its weight (e.g. a decayed
    count of submissions): what the fragmentation term (`scheduler.core.fragmentation`) keeps room for."""

    pool: int
    sharing: Sharing
    gpus: int = 1
    mps_compute_pct: int = 0
    mps_memory_mib: int = 0
    mig_profile: str | None = None
    gpu_model: str | None = None
    weight: float = 1.0
    host_cpu_milli: int = 0  # per node, as JobRequest.host_cpu_milli
    host_memory_mib: int = 0  # per node, as JobRequest.host_memory_mib


@dataclass(frozen=True, slots=True)
class Share:
    """One GPU's part held by a job."""

    gpu_id: int
    kind: ShareKind = "whole"
    compute_pct: int = 100
    memory_mib: int = 0
    mig_profile: str | None = None
    mig_start: int | None = None
    replica: int | None = None
    # The job's host CPU and memory on this GPU's node, carried by one share per node (the engine's
    # ClusterState.hold/release count them there), so everything that holds and releases shares
    # (journals, backfill, preemption trials) moves them too.
    host_cpu_milli: int = 0
    host_memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class RunningJob:
    request: JobRequest
    shares: tuple[Share, ...]
    started_at: float
    last_migrated_at: float | None = None
    borrowed: bool = False
    stopping: bool = False  # already told to stop (preempted / migrating): not a victim or mover again
    # When each share of its current run began to count (a GPU-second per share and second held), where
    # `request.attained_gpu_s` holds only its earlier runs (the database's record): `attained_at` adds them up. Empty:
    # the request's figure is the whole service. The same job object then serves round after round.
    serving_since: tuple[float, ...] = ()

    def attained_at(self, now: float) -> float:
        """GPU-seconds of service received by `now`: its earlier runs and its current one."""
        since = self.serving_since
        if not since:
            return self.request.attained_gpu_s
        serving = max(0.0, now - since[0]) if len(since) == 1 else sum(max(0.0, now - c) for c in since)
        return self.request.attained_gpu_s + serving


@dataclass(frozen=True, slots=True)
class CostParams:
    """Weights and constants of the placement cost model (docs/scheduler.md, "Cost model")."""

    nvlink_efficiency: float = 0.53  # all-reduce busbw / NVLink bidir spec: 476 of 900 GB/s measured on 8xH100
    pcie_gbps: float = 20.0  # busbw between GPUs of one node that are not NVLink peers, GB/s
    net_efficiency: float = 0.96  # busbw / NIC data rate: 48 of 50 GB/s on NDR
    spine_factor: float = 0.9  # bandwidth kept when the ring crosses a spine (ECMP collisions)
    core_factor: float = 0.8  # ... when it crosses the core
    error_factor: float = 0.25  # bandwidth kept on a link that is logging errors (retransmits, retraining)
    min_available: float = 0.05  # floor of (1 - utilisation) so a saturated link is slow, not infinitely so
    latency_s: tuple[float, float, float, float, float] = (2e-6, 3e-6, 5e-6, 6e-6, 7e-6)  # per ring step, by level
    # Bytes all-reduced per step by workload: gradients of a ~0.5B-parameter bf16 model for training,
    # tensor-parallel activations for inference.
    default_allreduce_bytes: dict[str, float] = field(
        default_factory=lambda: {
            "training": float(1 << 30),
            "inference": float(64 << 20),
            "data-intensive": float(1 << 30),
        }
    )
    default_step_compute_s: dict[str, float] = field(
        default_factory=lambda: {"training": 0.1, "inference": 0.05, "data-intensive": 0.1}
    )
    default_io_bytes_per_step: float = 1 << 30  # data-intensive jobs read 1 GiB per step by default
    gpu_strength: dict[str, float] = field(
        default_factory=lambda: {
            "V100": 0.15,
            "L4": 0.15,
            "A30": 0.3,
            "A100": 0.4,
            "A800": 0.4,
            "H100": 1.0,
            "H200": 1.1,
            "B200": 2.2,
        }
    )
    unknown_strength: float = 0.5
    # Background interference on the job's GPU by sharing mode: how much of the GPU's live utilisation
    # (by others) slows the job down. MIG is hardware-isolated; MPS caps compute but shares bandwidth.
    interference: dict[str, float] = field(
        default_factory=lambda: {"exclusive": 1.0, "mps": 0.25, "mig": 0.0, "timeslice": 1.0}
    )
    # Fragmentation, in units of slowdown (a placement 2 % slower costs 0.02):
    w_break_island: float = 0.02  # an island that was wholly free is left partly used
    w_break_node: float = 0.02  # a node that was wholly free is left partly used
    w_break_leaf: float = 0.05  # a leaf (group) that was wholly free is left partly used
    w_leftover: float = 0.01  # x fraction of the touched nodes' GPUs left free (best fit)
    w_spread_nodes: float = 0.005  # x nodes beyond the minimum the job needs
    # x the change of the node's expected fragmentation against the request mix, in GPUs (MPS shares;
    # scheduler/core/fragmentation.py): stranding one GPU's worth for the typical request costs as much as
    # a step 10 % slower. Replaces w_leftover for MPS when the pool has a mix.
    w_fragmentation: float = 0.1
    # x the share of the node's host CPU and memory (mean of the two) a job asking for them leaves free:
    # best fit on host resources, so nodes with much CPU and memory left stay whole for large requests.
    w_host_leftover: float = 0.02


@dataclass(frozen=True, slots=True)
class Config:
    backfill: bool = True
    reservations_per_pool: int = 1  # EASY backfill: the top blocked job of each pool gets a reservation
    max_migrations_per_round: int = 2
    # Never move a job twice (or a fresh job) within this, nor within preemption_min_run_s: one minimum run
    # time governs both ways of stopping a running job.
    migration_hold_down_s: float = 1800.0
    migration_scan_limit: int = 256  # running jobs examined per round for migration
    migration_min_net_gain_s: float = 60.0  # gain must beat cost by at least this
    restart_overhead_s: float = 30.0  # relaunch time added to a job's checkpoint cost
    default_runtime_s: float = 4 * 3600.0  # used where a job gives no estimate
    hot_link_utilisation: float = 0.8
    overloaded_gpu_utilisation: float = 0.95  # a shared GPU this busy slows every tenant on it
    max_preemption_attempts: int = 16  # blocked jobs that may try preemption per round
    max_victims_per_round: int = 256
    # Jobs started per round (0: no limit). A round that starts this many stops there: the jobs after them in line
    # wait for the next round, which follows at once. It bounds a round's time and locks when a cluster fills from
    # empty (the round writes each start's job, allocations and event rows), and the first jobs in line start
    # sooner. Slurm bounds its passes alike (sched_max_job_start, bf_max_job_start, default_queue_depth). 1,500: at
    # 10,000 GPUs such a round ends at its COMMIT within 0.5 s on a slow hour too, and the fill is no slower than in
    # rounds of 2,000 (docs/scheduler.md, "A round's limit of starts").
    max_placements_per_round: int = 1500
    preemption_grace_s: float = 120.0  # time victims get to checkpoint; a preemptor's reservation starts then
    # No thrashing (docs/scheduler.md): a job is not preempted before it has run this long since it (re)started
    # or moved. 5 min: Gavel's 6-min round lease, Slurm's PreemptExemptTime; with the default checkpoint and
    # restart cost (60 + 30 s) a job preempted at that pace still spends 300 / (300 + 90) = 77 % of its time working.
    preemption_min_run_s: float = 300.0
    # A strictly higher priority preempts regardless of the minimum (priority classes are the operator's own
    # order, and each arrival preempts once); False: the minimum holds against every preemption.
    preemption_min_run_priority_exempt: bool = True
    # How long after a preemption its beneficiary has first call on the freed GPUs (placed before the queue),
    # on top of the time its victims still take to stop.
    preemption_claim_s: float = 300.0
    # Within one tenant and priority class (docs/scheduler.md, "Queue order"): least attained service in levels
    # (service_quantum_gpu_s, x service_base each, service_levels of them), inside a level jobs with an estimate
    # by expected remaining GPU-seconds, then the others in submission order; a job queued service_aging_s
    # (0: never) goes to the front. False: submission order.
    service_order: bool = True
    service_quantum_gpu_s: float = 600.0
    service_base: float = 4.0
    service_levels: int = 3
    service_aging_s: float = 0.0
    # A blocked job may preempt a running job of its own tenant and priority at a higher service level (after
    # the victim's minimum run time), when the victim's expected remaining time beats its checkpoint and
    # restart cost by service_preempt_pays.
    service_preemption: bool = True
    service_preempt_pays: float = 2.0
    # A multi-node job whose best placement now spans leaves waits for one leaf when the cost model says so
    # (docs/scheduler.md, "Waiting for one leaf"); at most leaf_wait_plans job shapes are planned a round.
    leaf_wait: bool = True
    leaf_wait_plans: int = 4
    borrow_without_quota: bool = True  # a tenant with no quota in a pool may borrow idle GPUs there
    fairshare_horizon_h: float = 1.0  # GPU-hours charged per queued GPU while interleaving tenants
    max_candidates: int = 24  # placements scored per job (the best found so far wins)
    domain_candidates: int = 4  # leaves (groups) tried per level for a multi-node job
    backfill_probes: int = 24  # placement tries when looking for a reservation's start
    # The fragmentation term's request mix: the heaviest classes covering this share of the weight (FGD's
    # "typical pods", 95 %), at most this many (the term costs O(candidates x classes)); 0 classes turns the
    # term off (MPS packs onto the GPU with the least compute left, as before).
    fragmentation_coverage: float = 0.95
    fragmentation_max_classes: int = 32
    # Pseudo-requests of one whole GPU added to every MPS pool's mix (a prior: few observed requests pack as
    # best fit does, keeping whole GPUs; hundreds outweigh it).
    fragmentation_prior_whole: float = 4.0
    cost: CostParams = field(default_factory=CostParams)


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    fabric: Fabric
    nodes: list[NodeState]
    pools: list[PoolState]
    tenants: list[TenantState] = field(default_factory=list)
    pending: list[JobRequest] = field(default_factory=list)
    running: list[RunningJob] = field(default_factory=list)
    link_utilisation: dict[str, float] = field(default_factory=dict)  # TLink.key -> 0..1; missing = 0
    link_errors: dict[str, bool] = field(default_factory=dict)  # TLink.key -> erroring
    priority_classes: dict[str, int] = field(
        default_factory=lambda: {"high": 100, "normal": 50, "low": 10, "best-effort": 0}
    )
    config: Config = field(default_factory=Config)
    # Static index of the fabric (`scheduler.core.topology.build_topology(fabric)`). Build it once per
    # fabric version and pass it in every round; None = built here (tens of ms at 10k GPUs).
    topology: Topology | None = None
    # The workload's recent shared-GPU requests (pending and recently submitted, decayed), for the
    # fragmentation term; a pool with none here uses its pending and running jobs of this snapshot.
    request_mix: list[RequestClass] = field(default_factory=list)


# ----------------------------------------------------------------------------------------- decisions


@dataclass(frozen=True, slots=True)
class Placement:
    job_id: int
    shares: tuple[Share, ...]
    nodes: tuple[str, ...]
    score: float  # lower is better: modelled slowdown vs an ideal placement + fragmentation
    cost: dict[str, Any]  # breakdown: comm_s, compute_s, io_s, step_s, ideal_step_s, slowdown, ...
    explanation: str
    borrowed: bool = False  # the tenant is over its guaranteed quota with this job (reclaimable)
    level: str = ""  # "island", "node", "leaf", "pod", "fabric": the smallest domain holding the job


@dataclass(frozen=True, slots=True)
class Preemption:
    job_id: int
    for_job: int
    reason: str
    gpu_ids: tuple[int, ...] = ()  # the victim's GPUs that for_job's planned placement takes (to record on it)


@dataclass(frozen=True, slots=True)
class Migration:
    job_id: int
    placement: Placement
    gain_s: float
    cost_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class Reservation:
    job_id: int
    start_at: float  # estimated start (epoch seconds)
    gpu_ids: tuple[int, ...]
    nodes: tuple[str, ...]
    # What the estimate rests on (RESERVATION_BASES), i.e. how sure it is: "preempting" / "stopping", the GPUs
    # are being freed now (its victims, or jobs already stopping, get preemption_grace_s); "backfill" (EASY) and
    # "leaf" (waiting for one leaf), running jobs end by their estimates (default_runtime_s without one).
    basis: str = "backfill"


RESERVATION_BASES: tuple[str, ...] = ("preempting", "stopping", "backfill", "leaf")


class PendingReasons(Mapping[int, str]):
    """`Decisions.pending_reasons` as the engine hands it: job id -> reason, read from the reasons in queue order
    (`Decisions.queue_reasons`) and the reasons of the jobs whose turn was taken (`turned`, places in the queue;
    `taken`, their reasons by id) on first use. A round gives most of a long queue a remembered turn's reason
    (engine._remembered_run) and the queue's record reads them in queue order: building this dict for 46,000 jobs
    each round would cost more than the passes that made them. Holds what the dict held: each job given a reason,
    a job placed after it was given one included; in another order. Copied or pickled, it is a dict."""

    __slots__ = ("_built", "_order", "_said", "_taken", "_turned")

    def __init__(self, order: list[int], said: list[str | None], turned: list[int], taken: dict[int, str]) -> None:
        self._order, self._said, self._turned, self._taken = order, said, turned, taken
        self._built: dict[int, str] | None = None

    def _dict(self) -> dict[int, str]:
        d = self._built
        if d is None:
            d = dict(zip(self._order, self._said, strict=True))  # a remembered turn's reason at its place
            taken, order = self._taken, self._order
            for k in self._turned:  # a turn taken: what it said, or nothing
                jid = order[k]
                if jid in taken:
                    d[jid] = taken[jid]
                else:
                    del d[jid]
            self._built = d
        return d

    def __getitem__(self, job_id: int) -> str:
        return self._dict()[job_id]

    def get(self, job_id: int, default=None):  # type: ignore[override]
        return self._dict().get(job_id, default)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._dict()

    def __iter__(self) -> Iterator[int]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __repr__(self) -> str:
        return repr(self._dict())

    def __reduce__(self):
        return (dict, (self._dict(),))


@dataclass(slots=True)
class Decisions:
    placements: list[Placement] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    migrations: list[Migration] = field(default_factory=list)
    requeues: list[tuple[int, str]] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)
    pending_reasons: dict[int, str] | PendingReasons = field(default_factory=dict)
    queue_order: list[int] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    # `pending_reasons` in queue order, beside `queue_order`: each job's reason ("" for none), None for a job placed
    # this round. The engine fills it; None where nobody did (the queue's record then reads the dict).
    queue_reasons: list[str | None] | None = None

    def placement_for(self, job_id: int) -> Placement | None:
        for p in self.placements:
            if p.job_id == job_id:
                return p
        return None
