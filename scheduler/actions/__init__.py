"""Every state change of the scheduler: jobs, allocations, pools, quotas, tenants, rounds.

Each function is one transaction. Job status moves only here, each move writes a JobEvent with
its reason, and a scheduling round is requested after commit whenever capacity or demand changed.
Allocations go through the GPU ledger, its rows locked and re-checked, so a decision made on a stale
snapshot changes no row and the database's constraints refuse double allocation outright.
"""

from scheduler.actions.allocations import ShareSpec, allocate, ensure_cluster_ledgers, release_allocations
from scheduler.actions.apply import Applied, apply_decisions
from scheduler.actions.errors import ActionError, StaleDecision
from scheduler.actions.jobs import (
    SCHEDULER,
    _move,
    cancel_job,
    finish_job,
    hold_job,
    release_job,
    request_round_on_commit,
    requeue_job,
    submit_job,
    submit_jobs_bulk,
)
from scheduler.actions.setup import (
    add_member,
    assign_nodes,
    create_pool,
    create_tenant,
    delete_cluster,
    ensure_priority_classes,
    ensure_scheduler,
    set_quota,
)

__all__ = [
    "SCHEDULER",
    "ActionError",
    "Applied",
    "ShareSpec",
    "StaleDecision",
    "_move",
    "add_member",
    "allocate",
    "apply_decisions",
    "assign_nodes",
    "cancel_job",
    "create_pool",
    "create_tenant",
    "delete_cluster",
    "ensure_cluster_ledgers",
    "ensure_priority_classes",
    "ensure_scheduler",
    "finish_job",
    "hold_job",
    "release_allocations",
    "release_job",
    "request_round_on_commit",
    "requeue_job",
    "set_quota",
    "submit_job",
    "submit_jobs_bulk",
]
