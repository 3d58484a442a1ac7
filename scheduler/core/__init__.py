"""The scheduling engine. PURE: dataclasses in (`Snapshot`), decisions out (`Decisions`); no Django, no I/O.

    from scheduler.core import schedule, Snapshot, build_topology
    topo = build_topology(fabric)                       # once per fabric version
    decisions = schedule(Snapshot(now, fabric, nodes, pools, ..., topology=topo))

Modules: types (the contract), topology (fabric index), state (per-round indexes), costmodel (the
cost model), placement (search and scoring), mig (MIG profiles), quotas, policies (queue order),
preemption, backfill, migration, failures, reasons (every text), engine (`schedule`), synthetic
(generated snapshots for benchmarks and tests). docs/scheduler.md explains them.
"""

from scheduler.core.engine import schedule
from scheduler.core.policies import FifoPolicy, LasPolicy, PriorityFairSharePolicy, QueuePolicy, policy_by_name
from scheduler.core.topology import Topology, build_topology
from scheduler.core.types import (
    Config,
    CostParams,
    Decisions,
    GpuState,
    JobRequest,
    Migration,
    NodeState,
    Placement,
    PoolState,
    Preemption,
    Quota,
    Reservation,
    RunningJob,
    Share,
    Snapshot,
    TenantState,
)

__all__ = [
    "Config",
    "CostParams",
    "Decisions",
    "FifoPolicy",
    "GpuState",
    "JobRequest",
    "LasPolicy",
    "Migration",
    "NodeState",
    "Placement",
    "PoolState",
    "Preemption",
    "PriorityFairSharePolicy",
    "QueuePolicy",
    "Quota",
    "Reservation",
    "RunningJob",
    "Share",
    "Snapshot",
    "TenantState",
    "Topology",
    "build_topology",
    "policy_by_name",
    "schedule",
]
