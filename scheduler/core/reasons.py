"""Every sentence the engine says to a person, in one place. PURE.

Pending reasons answer "why is my job not running?" in the words of the cluster: what the job needs,
what the cluster has, and what would change it. Tests assert these exact texts.
"""

from __future__ import annotations


def num(x: float) -> str:
    """32 -> "32", 2.5 -> "2.5", 0.3333 -> "0.33"."""
    if abs(x - round(x)) < 1e-9:
        return str(round(x))
    return f"{x:.2f}".rstrip("0").rstrip(".")


def gpus(n: float) -> str:
    return f"{num(n)} GPU" if n == 1 else f"{num(n)} GPUs"


def duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 90:
        return f"{s} s"
    m = round(s / 60)
    if m < 90:
        return f"{m} min"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m:02d} min" if m else f"{h} h"
    return f"{round(h / 24)} days"


def job_list(ids: list[int] | tuple[int, ...]) -> str:
    ids = sorted(ids)
    head = ", ".join(str(i) for i in ids[:8])
    more = f" and {len(ids) - 8} more" if len(ids) > 8 else ""
    return ("job " if len(ids) == 1 else "jobs ") + head + more


# ---------------------------------------------------------------- validation (the job can never run as asked)


def unknown_pool(pool: int) -> str:
    return f"pool {pool} does not exist"


def sharing_mismatch(pool: str, pool_sharing: str, job_sharing: str) -> str:
    return f"pool '{pool}' shares GPUs as {pool_sharing}; the job asks for {job_sharing}"


def no_gpus_asked() -> str:
    return "the job asks for no GPUs"


def bad_shape(n: int, nodes: int | None, per_node: int | None) -> str:
    if nodes and per_node:
        return f"shape {nodes} nodes x {per_node} GPUs does not make {gpus(n)}"
    if nodes:
        return f"{gpus(n)} do not split evenly over {nodes} nodes"
    return f"{gpus(n)} do not split evenly into {per_node} per node"


def no_matching_gpus(pool: str, model: str | None, memory_mib: int | None) -> str:
    what = f"{model} GPUs" if model else "GPUs"
    if memory_mib:
        what += f" with at least {memory_mib} MiB"
    return f"no {what} in pool '{pool}'"


def never_fits(n: int, pool: str, capacity: int) -> str:
    return f"needs {gpus(n)}; pool '{pool}' has only {capacity} healthy GPUs on schedulable nodes"


def node_too_small(per_node: int, pool: str, node_gpus: int) -> str:
    return f"needs {gpus(per_node)} on one node; nodes in pool '{pool}' have {node_gpus}"


def island_too_small(n: int, pool: str, largest: int) -> str:
    return f"needs {gpus(n)} in one NVLink island; the largest island in pool '{pool}' has {largest}"


def shared_one_node(mode: str, node_gpus: int) -> str:
    return f"a {mode} job must fit on one node (at most {gpus(node_gpus)})"


def mps_bad_request(memory_mib: int) -> str:
    return f"an MPS job needs a compute percentage between 1 and 100 and a memory limit up to {memory_mib} MiB"


def mig_missing_profile() -> str:
    return "a MIG job needs a MIG profile"


# ---------------------------------------------------------------- quotas


# Each states the arithmetic that refused the job (scheduler/core/quotas.py): what its tenant uses in the pool
# now (GPU-equivalents), what it asks, and the bound the sum passed.


def quota_exhausted(used: float, need: float, guaranteed: float, limit: float) -> str:
    """used + need > guaranteed + limit (and need alone fits in guaranteed + limit)."""
    return (
        f"tenant quota: {gpus(used)} in use + {num(need)} asked = {num(used + need)}, more than "
        f"{num(guaranteed)} guaranteed + {num(limit)} borrowable = {num(guaranteed + limit)}"
    )


def quota_no_borrow(used: float, need: float, guaranteed: float) -> str:
    """used + need > guaranteed, for a job that may not borrow (it is not preemptible)."""
    return (
        f"tenant quota: {gpus(used)} in use + {num(need)} asked = {num(used + need)}, more than "
        f"{num(guaranteed)} guaranteed; a non-preemptible job cannot borrow"
    )


def quota_too_big(need: float, guaranteed: float, limit: float) -> str:
    """need > guaranteed + limit: it cannot run under this quota even alone."""
    return (
        f"needs {gpus(need)}, more than the tenant quota allows at once: {num(guaranteed)} guaranteed + "
        f"{num(limit)} borrowable = {num(guaranteed + limit)}"
    )


def no_quota(tenant: str, pool: str) -> str:
    return f"tenant {tenant} has no quota in pool '{pool}'"


# ---------------------------------------------------------------- capacity


def total_free(n: int, free: int, pool: str) -> str:
    return f"needs {gpus(n)}; {free} free in pool '{pool}'"


def node_block(n: int, largest: int, where: str) -> str:
    if largest <= 0:
        return f"needs {gpus(n)} on one node; no node has a free GPU"
    return f"needs {gpus(n)} on one node; largest free block is {largest} on {where}"


def island_block(n: int, largest: int, where: str) -> str:
    if largest <= 0:
        return f"needs {gpus(n)} in one NVLink island; no node has a free GPU"
    return f"needs {gpus(n)} in one NVLink island; largest free block is {largest} on {where}"


def leaf_block(n: int, largest: int, where: str) -> str:
    if largest <= 0:
        return f"needs {gpus(n)} in one leaf; no leaf has a free GPU"
    return f"needs {gpus(n)} in one leaf; largest free block is {largest} in {where}"


def pod_block(n: int, largest: int, where: str) -> str:
    if largest <= 0:
        return f"needs {gpus(n)} in one pod; no pod has a free GPU"
    return f"needs {gpus(n)} in one pod; largest free block is {largest} in {where}"


def shape_block(nodes: int, per_node: int, have: int, pool: str, scope: str = "") -> str:
    where = scope or f"pool '{pool}'"
    return (
        f"needs {nodes} nodes with {gpus(per_node)} free each; {have} "
        f"{'node has' if have == 1 else 'nodes have'} that many free in {where}"
    )


def unreachable_nodes(n: int, pool: str) -> str:
    return f"needs {gpus(n)} on several nodes; too few nodes in pool '{pool}' are on the fabric"


def _host(cpu_milli: int, memory_mib: int) -> str:
    parts = []
    if cpu_milli:
        whole, milli = divmod(cpu_milli, 1000)
        count = str(whole) if not milli else f"{whole}.{milli:03d}".rstrip("0")
        parts.append(f"{count} CPU" + ("" if cpu_milli == 1000 else "s"))
    if memory_mib:
        parts.append(f"{memory_mib} MiB of host memory")
    return " and ".join(parts)


def host_never_fits(cpu_milli: int, memory_mib: int, pool: str) -> str:
    return f"needs {_host(cpu_milli, memory_mib)} on each node; no node in pool '{pool}' has that much in all"


def host_block(cpu_milli: int, memory_mib: int, pool: str, gpu_room: int) -> str:
    nodes, have = ("node", "has") if gpu_room == 1 else ("nodes", "have")
    return (
        f"needs {_host(cpu_milli, memory_mib)} on each node; the {gpu_room} {nodes} of pool '{pool}' with room "
        f"for its GPUs {have} too little of it left"
    )


def mps_full(pct: int, memory_mib: int, pool: str) -> str:
    return f"needs {pct}% compute and {memory_mib} MiB on one GPU (MPS); no GPU in pool '{pool}' has that much left"


def mig_full(profile: str, pool: str) -> str:
    return f"needs a free {profile} slot; none free in pool '{pool}'"


def timeslice_full(replicas: int, pool: str) -> str:
    return f"needs a time-slice replica; all {replicas} replicas of every GPU in pool '{pool}' are taken"


def shared_node_full(n: int, mode: str, pool: str) -> str:
    return f"needs {gpus(n)} with room for a {mode} share on one node; none in pool '{pool}'"


# ---------------------------------------------------------------- order, backfill, preemption


def backfill_window(reserved_job: int) -> str:
    return f"waiting for reserved start of job {reserved_job} (backfill window too short)"


def round_limit(limit: int) -> str:
    return f"waiting for the next round: this round started its limit of {limit:,} jobs"


def behind(job: int) -> str:
    return f"waiting behind job {job} (backfill off)"


def reserved(capacity_reason: str, start_in_s: float) -> str:
    return f"{capacity_reason}; reserved to start in about {duration(start_in_s)} as running jobs end"


def leaf_wait(where: str, wait_s: float, cross_cost_s: float) -> str:
    return (
        f"waiting about {duration(wait_s)} for {where} as running jobs end: across leaves now it would cost "
        f"about {duration(cross_cost_s)} (its ring slowed on shared uplinks, and theirs)"
    )


def leaf_wait_behind(job: int) -> str:
    return f"waiting for one leaf, as job {job} of the same shape does"


def preempting(victims: list[int], what: str) -> str:
    return f"preempting {job_list(victims)} to free {what}; starts when they stop"


def preempted(for_job: int, why: str) -> str:
    return f"preempted for job {for_job} ({why})"


def waiting_for_stopping(capacity_reason: str) -> str:
    return f"{capacity_reason}; waiting for preempted jobs to stop"


def min_run_wait(capacity_reason: str, wait_s: float) -> str:
    when = duration(wait_s)
    return f"{capacity_reason}; may preempt in about {when}, when the jobs it needs have run their minimum time"


# ---------------------------------------------------------------- failures and migration


def gpu_unhealthy(index: int, node: str) -> str:
    return f"GPU {index} on {node} is unhealthy"


def node_down(node: str) -> str:
    return f"node {node} is down"


def gpu_gone(gpu_id: int) -> str:
    return f"GPU {gpu_id} is no longer in the inventory"


def node_off_fabric(node: str) -> str:
    return f"node {node} lost its fabric links"


def requeued(why: str) -> str:
    return f"requeued: {why}"


def failed(why: str) -> str:
    return f"failed: {why} (the job opted out of requeueing)"


def migration(trigger: str, old: float, new: float, gain_s: float, cost_s: float) -> str:
    return (
        f"{trigger}; step {old:.2f}x -> {new:.2f}x ideal saves {duration(gain_s)} of the remaining run, "
        f"moving costs {duration(cost_s)}"
    )
