from .allocations import Allocation, GpuLedger, MigSliceClaim
from .jobs import Job, JobEvent
from .launches import Launch, LaunchState
from .pools import Pool, PoolNode
from .rounds import ClusterScheduler, SchedulingRound
from .tenants import PriorityClass, Quota, Tenant, TenantMember

__all__ = [
    "Allocation",
    "ClusterScheduler",
    "GpuLedger",
    "Job",
    "JobEvent",
    "Launch",
    "LaunchState",
    "MigSliceClaim",
    "Pool",
    "PoolNode",
    "PriorityClass",
    "Quota",
    "SchedulingRound",
    "Tenant",
    "TenantMember",
]
