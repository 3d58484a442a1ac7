"""Is a job request possible at all in its pool? Field errors for the API (400), before anything is stored."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.db.models import Min

from scheduler.choices import SharingMode, TopologyRequirement, Workload
from scheduler.core.mig import validate_profile
from scheduler.models import Pool, PriorityClass, Tenant
from scheduler.selectors import pool_capacity, pool_gpus, priority_class_names, priority_limit
from scheduler.snapshot_from_db import fabric_and_topology


def check_request(tenant: Tenant, pool: Pool, priority: PriorityClass, data: dict[str, Any]) -> dict[str, list[str]]:
    """Return {field: [problem]}, the API's 400 shape (docs/api.md); empty when the request can run in this pool
    some day.

    What a default completes is filled in `data` here, so that a request accepted is one the engine can place:
    an MPS job without `mps_memory_mib` gets `mps_memory_default` (the engine refuses an MPS share without a
    memory limit, and the node pins it as CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)."""
    return {field: [problem] for field, problem in _problems(tenant, pool, priority, data).items()}


def _problems(tenant: Tenant, pool: Pool, priority: PriorityClass, data: dict[str, Any]) -> dict[str, str]:
    errors: dict[str, str] = {}
    capacity = pool_capacity(pool)
    models = capacity["models"]
    model = data.get("gpu_model") or ""
    if model and model not in models:
        errors["gpu_model"] = f"pool {pool.name} has no {model} GPUs (it has: {', '.join(sorted(models)) or 'none'})"
        return errors
    candidates = [models[model]] if model else list(models.values())
    total = sum(m["total"] for m in candidates)
    gpus = data["gpus"]
    sharing = data.get("sharing", SharingMode.EXCLUSIVE)

    if sharing != pool.sharing:
        errors["sharing"] = f"pool {pool.name} shares GPUs as {pool.sharing}; this job asks for {sharing}"
    shared = sharing in (SharingMode.MPS, SharingMode.MIG, SharingMode.TIMESLICE)
    if gpus > total and not (shared and gpus == 1):
        errors["gpus"] = f"asks for {gpus} GPUs; pool {pool.name} has {total}{f' {model}' if model else ''} in all"
    nodes, per_node = data.get("nodes"), data.get("gpus_per_node")
    if (nodes is None) != (per_node is None):
        errors["nodes"] = "a gang needs both nodes and gpus_per_node"
    elif nodes is not None:
        if nodes * per_node != gpus:
            errors["gpus"] = f"gang of {nodes} nodes x {per_node} GPUs is {nodes * per_node} GPUs, not {gpus}"
        if per_node > capacity["gpus_per_node_max"]:
            errors["gpus_per_node"] = (
                f"asks for {per_node} GPUs per node; the largest node of pool {pool.name} has "
                f"{capacity['gpus_per_node_max']}"
            )
    require = data.get("require") or ""
    if require and "gpus" not in errors:
        errors.update(_check_require(pool, require, gpus, nodes, capacity, model))
    memory = data.get("gpu_memory_mib")
    if memory is not None and not any(m["memory_mib"] >= memory for m in candidates):
        errors["gpu_memory_mib"] = f"no GPU of pool {pool.name} has {memory} MiB"
    if total:
        errors.update(_check_host(pool, data.get("host_cpu_milli"), data.get("host_memory_mib"), nodes, model))

    if sharing == SharingMode.MPS:
        pct = data.get("mps_compute_pct")
        if pct is None:
            errors["fraction"] = "an MPS job needs a fraction of a GPU (0 < fraction <= 1)"
        mps_memory = data.get("mps_memory_mib")
        if mps_memory is not None and not any(m["memory_mib"] >= mps_memory for m in candidates):
            errors["mps_memory_mib"] = f"{mps_memory} MiB is more than any GPU of pool {pool.name} has"
        elif mps_memory is None and pct is not None and total:
            data["mps_memory_mib"] = mps_memory_default(pool, pct, model)
    elif data.get("mps_compute_pct") is not None:
        errors["fraction"] = "a fraction applies to MPS sharing only"
    if sharing == SharingMode.MIG:
        errors.update(_check_mig(data.get("mig_profile") or "", models if not model else {model: models[model]}))
    elif data.get("mig_profile"):
        errors["mig_profile"] = "a MIG profile applies to MIG sharing only"

    allowed = priority_limit(tenant)
    if priority.value > allowed:
        usable = [c for c in PriorityClass.objects.all() if c.value <= allowed]
        errors["priority_class"] = (
            f"tenant {tenant.name} may ask for priority up to {allowed} ({priority_class_names(usable)}), "
            f"not {priority.name} ({priority.value})"
        )
    if priority.always_preemptible and data.get("preemptible") is False:
        errors["preemptible"] = (
            f"jobs of priority class {priority.name} are always preemptible: leave preemptible out or set it true "
            "(a job that must not be preempted asks for a higher class)"
        )
    dataset = data.get("dataset_node")
    if dataset is not None and dataset.cluster_id != pool.cluster_id:
        errors["dataset_node"] = f"{dataset.hostname} is not in cluster {pool.cluster}"
    if data.get("workload") == Workload.DATA_INTENSIVE and dataset is None:
        errors["dataset_node"] = "a data-intensive job names the storage node that holds its dataset"
    return errors


def cpus_text(milli: int) -> str:
    """Milli-CPUs in the API's unit: 64000 -> "64 CPUs", 500 -> "0.5 CPUs", 1000 -> "1 CPU"."""
    whole, part = divmod(milli, 1000)
    number = f"{whole}.{part:03d}".rstrip("0") if part else str(whole)
    return f"{number} CPU" + ("" if milli == 1000 else "s")


def _check_host(pool: Pool, cpu: int | None, mem: int | None, gang: int | None, model: str) -> dict[str, str]:
    """Host CPU and memory asked for on each node, against the pool's nodes with GPUs (of `model`) in one query: a
    node fits when it has both in all (a node that does not track one, 0, always has it); refused when no node fits,
    naming the largest figures there are, or for a gang, when fewer nodes fit than it needs."""
    if not cpu and not mem:
        return {}
    gpus = pool_gpus(pool).filter(model=model) if model else pool_gpus(pool)
    nodes = list(gpus.order_by().values_list("node_id", "node__cpu_milli", "node__memory_mib").distinct())
    if not nodes:
        return {}
    cpu_ok = [not cpu or c == 0 or c >= cpu for _, c, _ in nodes]
    mem_ok = [not mem or m == 0 or m >= mem for _, _, m in nodes]
    fitting = sum(1 for a, b in zip(cpu_ok, mem_ok, strict=True) if a and b)
    needed = gang or 1
    if fitting >= needed:
        return {}
    where = f"pool {pool.name}" + (f" with {model} GPUs" if model else "")
    asked = " and ".join([*([cpus_text(cpu)] if cpu else []), *([f"{mem} MiB of host memory"] if mem else [])])
    fields = [f for f, given in (("cpus", cpu), ("host_memory_mib", mem)) if given]
    if fitting:  # a gang: some nodes have it, too few
        have = "node of {} has" if fitting == 1 else "nodes of {} have"
        problem = f"a gang of {gang} nodes asks for {asked} on each; only {fitting} {have.format(where)} that much"
        return dict.fromkeys(fields, problem)
    errors: dict[str, str] = {}
    if cpu and not any(cpu_ok):
        largest = max(c for _, c, _ in nodes)
        errors["cpus"] = f"asks for {cpus_text(cpu)} on each node; the largest node of {where} has {cpus_text(largest)}"
    if mem and not any(mem_ok):
        largest = max(m for _, _, m in nodes)
        errors["host_memory_mib"] = (
            f"asks for {mem} MiB of host memory on each node; the largest node of {where} has {largest} MiB"
        )
    if not errors:  # each fits on some node, never both on one (an untracked amount counts as the most)
        most_cpu = max(nodes, key=lambda n: (n[1] or HOST_UNTRACKED, n[2] or HOST_UNTRACKED))
        most_mem = max(nodes, key=lambda n: (n[2] or HOST_UNTRACKED, n[1] or HOST_UNTRACKED))
        problem = (
            f"asks for {asked} on each node; no node of {where} has both (the one with the most CPUs has "
            f"{_host_text(*most_cpu[1:])}, the one with the most memory {_host_text(*most_mem[1:])})"
        )
        errors = dict.fromkeys(fields, problem)
    return errors


HOST_UNTRACKED = 1 << 62  # what a node that does not track CPU or memory (0) has, for comparisons


def _host_text(cpu_milli: int, memory_mib: int) -> str:
    cpus = cpus_text(cpu_milli) if cpu_milli else "CPUs not tracked"
    return f"{cpus} and " + (f"{memory_mib} MiB" if memory_mib else "memory not tracked")


def mps_memory_default(pool: Pool, compute_pct: int, model: str = "") -> int:
    """An MPS job's memory limit when it names none: its compute share of the memory of the smallest GPU of the pool
    (of its gpu_model when given), in whole MiB rounded down, so the share fits on any GPU it may be placed on
    (25 % of an 80 GiB H100: 20480 MiB)."""
    gpus = pool_gpus(pool).filter(model=model) if model else pool_gpus(pool)
    smallest = gpus.aggregate(smallest=Min("memory_mib"))["smallest"] or 0
    return max(1, smallest * compute_pct // 100)


def _check_require(pool: Pool, require: str, gpus: int, nodes: int | None, capacity: dict, model: str) -> dict:
    """A job that must be on one node, leaf or pod, larger than any such domain of its pool, would never start."""
    if require == TopologyRequirement.NODE:
        if nodes is not None and nodes > 1:
            return {"require": f"a gang of {nodes} nodes cannot be on one node"}
        largest, what = capacity["gpus_per_node_max"], "node"
    else:
        largest, what = _largest_domain(pool, require, model), require
    if gpus > largest:
        return {
            "require": f"asks for {gpus} GPUs in one {what}; the largest {what} of pool {pool.name} has {largest}"
            + (f" {model}" if model else "")
        }
    return {}


def _largest_domain(pool: Pool, require: str, model: str) -> int:
    """GPUs (of `model` when given) of the pool's compute nodes under its fullest leaf, or pod, of the fabric."""
    gpus = pool_gpus(pool)
    per_host = Counter(gpus.filter(model=model).values_list("node__hostname", flat=True) if model else
                       gpus.values_list("node__hostname", flat=True))  # fmt: skip
    topology = fabric_and_topology(pool.cluster_id)[1]
    per_domain: Counter = Counter()
    for host, n in per_host.items():
        group = topology.group_of.get(host)
        if group is None:
            continue  # no live link: it is in no leaf, so it can hold no job that needs one
        key = group if require == TopologyRequirement.LEAF else topology.groups[group].pod
        per_domain[key] += n
    return max(per_domain.values(), default=0)


def _check_mig(profile: str, models: dict[str, dict]) -> dict[str, str]:
    if not profile:
        return {"mig_profile": "a MIG job names a profile, e.g. 1g.10gb"}
    problems = [validate_profile(name, m["memory_mib"], profile) for name, m in models.items()]
    if all(problems):
        return {"mig_profile": problems[0]}
    return {}
