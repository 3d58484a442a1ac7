"""Every state change of the scheduler: jobs, allocations, pools, quotas, tenants, rounds.

Each function is one transaction. Job status moves only here, each move writes a JobEvent with
its reason, and a scheduling round is requested after commit whenever capacity or demand changed.
Allocations go through the GPU ledger, its rows locked and re-checked, so a decision made on a stale
snapshot changes no row and the database's constraints refuse double allocation outright.

Lock order. Every transaction that changes scheduling state takes its row locks in this order, so no two can
wait on each other in a cycle (scheduler.actions.locking has the helpers):

1. the cluster's ClusterScheduler row: rounds only, NOWAIT (a second round is RoundBusy, never a waiter);
2. job rows, in id order: several at once in one statement (a round locks every job it changes before its first
   decision; agent_hello every job of the node), one alone by lock_job;
3. the rows a job owns (its launches, allocations and MIG slot claims), after its job row: only the holder of a
   job's lock changes them, so they never make a cycle, whatever their order;
4. GPU ledger rows, in gpu_id order: the only rows that several jobs share (MPS, MIG, time-slicing), locked for
   a claim or a release all at once, after every job lock the transaction will take;
5. the ClusterScheduler row again (the round's queue record: held since step 1).

Parents are never locked: a job's pool, tenant and priority class, a GPU, a node, a cluster. A child row's insert
takes FOR KEY SHARE on its parent when PostgreSQL checks the foreign key at COMMIT, so a FOR UPDATE on a pool (a
select_for_update with select_related) deadlocked every job submitted meanwhile. Locks are FOR NO KEY UPDATE of the
row itself, which those checks pass. What PostgreSQL still aborts (a deadlock with a writer outside this order, a
serialization failure) is rerun whole by atomic_retry, a few times with jittered backoff; past that the caller gets
Contended (the API answers 503 with Retry-After, never 500).
"""

from scheduler.actions.allocations import ShareSpec, allocate, ensure_cluster_ledgers, release_allocations
from scheduler.actions.apply import Applied, apply_decisions
from scheduler.actions.errors import ActionError, Contended, RoundBusy, StaleDecision
from scheduler.actions.jobs import (
    SCHEDULER,
    cancel_job,
    finish_job,
    hold_job,
    move_job,
    record_finished_bulk,
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
    "Contended",
    "RoundBusy",
    "ShareSpec",
    "StaleDecision",
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
    "move_job",
    "record_finished_bulk",
    "release_allocations",
    "release_job",
    "request_round_on_commit",
    "requeue_job",
    "set_quota",
    "submit_job",
    "submit_jobs_bulk",
]
