"""Database rows -> the engine's Snapshot, in bulk (a fixed number of queries whatever the cluster size).

Live link utilisation and GPU load come from telemetry's latest state (fabric.ingest); links whose error
counters climb come from open health alerts.
"""

from __future__ import annotations

import time
from collections import defaultdict, namedtuple
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from operator import attrgetter
from time import perf_counter  # the laps' clock; tests replace `time` to set the round's now

from django.db.models import Count, Q
from django.db.models.functions import TruncHour
from django.utils import timezone

from fabric.choices import GpuHealth, NodeRole
from fabric.choices import NodeState as NodeStatus
from fabric.graph_from_db import fabric_for_cluster
from fabric.latest import latest_utilisation
from fabric.models import GPU, Alert, Node, NodeTopology
from fabric.selectors import fabric_version, link_for_alert_key
from fabric.topology.types import Fabric
from scheduler.choices import ACTIVE_STATUSES, JobStatus, SharingMode
from scheduler.core.topology import Topology, build_topology
from scheduler.core.types import (
    GpuState,
    JobRequest,
    NodeState,
    PoolState,
    RequestClass,
    RunningJob,
    Share,
    Snapshot,
    TenantState,
)
from scheduler.core.types import (
    Quota as QuotaState,
)
from scheduler.models import Allocation, Job, Pool, PoolNode, PriorityClass, Quota, Tenant

USAGE_HALF_LIFE_S = 24 * 3600.0  # fair share forgets half of past usage per day
# The fragmentation term's request mix (scheduler.core.fragmentation): shared-GPU submissions of the last day,
# each weighing half as much per 6 h of age; pending jobs count whatever their age.
REQUEST_MIX_WINDOW_S = 24 * 3600.0
REQUEST_MIX_HALF_LIFE_S = 6 * 3600.0


JOB_FIELDS = (
    "pk", "tenant_id", "tenant__name", "pool_id", "name", "gpus", "nodes", "gpus_per_node", "gpu_model",
    "gpu_memory_mib", "sharing", "mps_compute_pct", "mps_memory_mib", "mig_profile", "priority_class__value",
    "preemptible", "workload", "dataset_node_id", "est_runtime_s", "checkpoint_cost_s", "submitted_at",
    "attained_gpu_s", "queue_seq", "requeue_opt_out", "status", "version", "held", "pending_reason", "started_at",
    "last_migrated_at", "borrowed", "preempted_for", "preempted_at", "preempted_gpus", "require", "allreduce_mb",
    "step_compute_ms", "host_cpu_milli", "host_memory_mib", "observed_slurm_id",
)  # fmt: skip


# A job as the round reads it: one values_list row as a named tuple (no model instances for tens of
# thousands of pending jobs). `tenant__name` reads as `tenant_name`, the class value as `priority`.
JobRow = namedtuple(
    "JobRow", [{"tenant__name": "tenant_name", "priority_class__value": "priority"}.get(f, f) for f in JOB_FIELDS]
)


@dataclass
class SnapshotIndex:
    """What the apply step needs besides the decisions: the rows the snapshot was read from."""

    cluster_id: int
    jobs: dict[int, JobRow] = field(default_factory=dict)
    pools: dict[int, Pool] = field(default_factory=dict)
    gpu_memory: dict[int, int] = field(default_factory=dict)
    gpu_model: dict[int, str] = field(default_factory=dict)
    load_ms: dict[str, float] = field(default_factory=dict)  # the build's steps, in order (they add up to it)

    def job(self, job_id: int) -> Job:
        """The full row, for the few decisions that go through the per-job actions."""
        return Job.objects.select_related("pool").get(pk=job_id)


_ISLANDS: dict[tuple, tuple[tuple[int, ...], ...]] = {}  # a few distinct server designs per cluster


def _islands(indexes: list[int], topology: dict | None, nvlink: bool) -> tuple[tuple[int, ...], ...]:
    """GPU groups joined by NVLink, from `nvidia-smi topo -m` codes when stored, else by the GPU model. Servers of
    one design have the same matrix: it is worked out once per distinct one, not for each server every round."""
    key = (tuple(indexes), nvlink, tuple(topology.items()) if topology is not None else None)
    found = _ISLANDS.get(key)
    if found is None:
        if len(_ISLANDS) > 4096:  # bound the memory whatever the inventory holds
            _ISLANDS.clear()
        found = _ISLANDS[key] = _islands_of(indexes, topology, nvlink)
    return found


def _islands_of(indexes: list[int], topology: dict | None, nvlink: bool) -> tuple[tuple[int, ...], ...]:
    if topology is None:
        return (tuple(indexes),) if nvlink and indexes else tuple((i,) for i in indexes)
    parent = {i: i for i in indexes}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for pair, code in topology.items():
        a, b = (int(x) for x in pair.split("-"))
        if code.startswith("NV") and a in parent and b in parent:
            parent[find(a)] = find(b)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in indexes:
        groups[find(i)].append(i)
    return tuple(tuple(sorted(g)) for g in sorted(groups.values()))


def _pools(cluster_id: int, index: SnapshotIndex, hostnames: list[str]) -> list[PoolState]:
    pools = list(Pool.objects.filter(cluster_id=cluster_id))
    members: dict[int, set[str]] = defaultdict(set)
    for pool_id, hostname in PoolNode.objects.filter(pool__cluster_id=cluster_id).values_list(
        "pool_id", "node__hostname"
    ):
        members[pool_id].add(hostname)
    claimed = set().union(*members.values()) if members else set()
    states = []
    for pool in pools:
        index.pools[pool.pk] = pool
        hosts = set(hostnames) - claimed if pool.is_default else members[pool.pk]
        states.append(
            PoolState(
                id=pool.pk,
                name=pool.name,
                sharing=pool.sharing,
                timeslice_replicas=pool.timeslice_replicas,
                hostnames=frozenset(hosts),
            )
        )
    return states


def _request(job: JobRow, hostname_of: dict[int, str], now_ts: float) -> JobRequest:
    return JobRequest(
        id=job.pk,
        tenant=job.tenant_name,
        pool=job.pool_id,
        gpus=job.gpus,
        nodes=job.nodes,
        gpus_per_node=job.gpus_per_node,
        gpu_model=job.gpu_model or None,
        gpu_memory_mib=job.gpu_memory_mib,
        sharing=job.sharing,
        mps_compute_pct=job.mps_compute_pct,
        mps_memory_mib=job.mps_memory_mib,
        mig_profile=job.mig_profile or None,
        priority=job.priority,
        preemptible=job.preemptible and job.observed_slurm_id is None,
        movable=job.observed_slurm_id is None,
        workload=job.workload,
        dataset_node=hostname_of.get(job.dataset_node_id) if job.dataset_node_id else None,
        est_runtime_s=float(job.est_runtime_s) if job.est_runtime_s else None,
        require=job.require or None,
        allreduce_bytes=job.allreduce_mb * 1e6 if job.allreduce_mb is not None else None,
        step_compute_s=job.step_compute_ms / 1000 if job.step_compute_ms is not None else None,
        host_cpu_milli=job.host_cpu_milli or 0,
        host_memory_mib=job.host_memory_mib or 0,
        checkpoint_cost_s=float(job.checkpoint_cost_s),
        submitted_at=job.submitted_at.timestamp(),
        attained_gpu_s=job.attained_gpu_s,
        queue_seq=job.queue_seq,
        requeue_opt_out=job.requeue_opt_out,
        name=job.name,
        preempted_for=job.preempted_for,
        preempted_at=job.preempted_at.timestamp() if job.preempted_at else None,
        preempted_gpus=tuple(job.preempted_gpus or ()),
    )


_REQUEST_FIELDS = tuple(f.name for f in fields(JobRequest))
_ATTAINED = _REQUEST_FIELDS.index("attained_gpu_s")
_REQUEST_VALUES = attrgetter(*_REQUEST_FIELDS)  # every field's value, in one call


def _with_attained(request: JobRequest, attained_gpu_s: float) -> JobRequest:
    """`replace(request, attained_gpu_s=...)` without its per-call introspection (every running job, every round)."""
    values = list(_REQUEST_VALUES(request))
    values[_ATTAINED] = attained_gpu_s
    return JobRequest(*values)


def _tenants(jobs: list[JobRow], now_ts: float) -> list[TenantState]:
    normal = PriorityClass.objects.filter(name="normal").values_list("value", flat=True).first() or 50
    quotas: dict[int, dict[int, QuotaState]] = defaultdict(dict)
    for q in Quota.objects.all():
        quotas[q.tenant_id][q.pool_id] = QuotaState(guaranteed_gpus=q.guaranteed_gpus, borrow_limit=q.borrow_limit)
    usage: dict[int, float] = defaultdict(float)
    for job in jobs:
        if job.status in ACTIVE_STATUSES and job.started_at:
            usage[job.tenant_id] += job.gpus * (now_ts - job.started_at.timestamp()) / 3600
    cutoff = timezone.now() - timezone.timedelta(seconds=7 * USAGE_HALF_LIFE_S)
    for tenant_id, attained, finished in Job.objects.filter(finished_at__gte=cutoff).values_list(
        "tenant_id", "attained_gpu_s", "finished_at"
    ):
        age = now_ts - finished.timestamp()
        usage[tenant_id] += attained / 3600 * 0.5 ** (age / USAGE_HALF_LIFE_S)
    return [
        TenantState(
            name=t.name,
            quotas=quotas.get(t.pk, {}),
            usage_decayed=usage.get(t.pk, 0.0),
            max_priority=t.max_priority.value if t.max_priority else normal,
        )
        for t in Tenant.objects.select_related("max_priority")
    ]


_FABRIC_CACHE: dict[int, tuple[tuple, Fabric, Topology]] = {}


def fabric_and_topology(cluster_id: int) -> tuple[Fabric, Topology]:
    """The fabric graph and the engine's index of it, rebuilt only when the fabric changed (tens of ms saved
    per round at 10,000 GPUs, and the whole graph load)."""
    version = fabric_version(cluster_id)
    cached = _FABRIC_CACHE.get(cluster_id)
    if cached is None or cached[0] != version:
        fabric = fabric_for_cluster(cluster_id)
        cached = (version, fabric, build_topology(fabric))
        _FABRIC_CACHE[cluster_id] = cached
    return cached[1], cached[2]


# Per cluster: job id -> (version, JobRow) and (version, JobRequest) from earlier rounds. Every change of a job
# row goes through scheduler.actions and bumps `version`, so an unchanged version means an unchanged row:
# a round then reads only (id, version) for the tens of thousands of waiting jobs, and full rows for the rest.
_ROWS: dict[int, dict[int, JobRow]] = {}
_REQUESTS: dict[int, dict[int, tuple[int, JobRequest]]] = {}


def _job_rows(cluster_id: int) -> list[JobRow]:
    live = Job.objects.filter(pool__cluster_id=cluster_id).filter(
        # A preempted job holds its GPUs until its nodes stopped it (scheduler.actions.lifecycle): it is passed
        # as a stopping running job, so its preemptor waits for it instead of preempting more.
        # Slurm's own jobs (observed, scheduler.actions.slurm_observed) wait in Slurm's queue, not ours; running,
        # they hold their GPUs and are never preempted or moved (movable=False).
        Q(status=JobStatus.PENDING, held=False, observed_slurm_id__isnull=True)
        | Q(status__in=(*ACTIVE_STATUSES, JobStatus.PREEMPTED))
    )
    versions = dict(live.values_list("pk", "version"))
    cache = _ROWS.setdefault(cluster_id, {})
    for gone in cache.keys() - versions.keys():
        del cache[gone]
        _REQUESTS.get(cluster_id, {}).pop(gone, None)
    stale = [pk for pk, version in versions.items() if pk not in cache or cache[pk].version != version]
    for chunk in (stale[i : i + 10_000] for i in range(0, len(stale), 10_000)):
        for row in Job.objects.filter(pk__any_of=chunk).order_by().values_list(*JOB_FIELDS):
            cache[row[0]] = JobRow._make(row)
    return [cache[pk] for pk in versions if pk in cache]


# Per cluster: job id -> (version, its active shares, their creation times) from earlier rounds. A job's allocations
# change only with the job (placed, released, moved: every one of these moves it, which bumps `version`), so a
# round reads the allocations of the jobs that changed, not the whole cluster's (10,000 rows at 10,000 GPUs). A
# snapshot that is still wrong somehow costs a stale decision, never a double allocation: apply re-checks the
# locked ledgers.
_SHARES: dict[int, dict[int, tuple[int, tuple[Share, ...], tuple[float, ...]]]] = {}


def _job_shares(cluster_id: int, jobs: list[JobRow]) -> dict[int, tuple[int, tuple[Share, ...], tuple[float, ...]]]:
    holders = {j.pk: j.version for j in jobs if j.status != JobStatus.PENDING}
    cache = _SHARES.setdefault(cluster_id, {})
    for gone in cache.keys() - holders.keys():
        del cache[gone]
    stale = [pk for pk, version in holders.items() if pk not in cache or cache[pk][0] != version]
    found: dict[int, list] = {pk: [] for pk in stale}
    for chunk in (stale[i : i + 10_000] for i in range(0, len(stale), 10_000)):
        rows = (
            Allocation.objects.filter(active=True, job_id__any_of=chunk)
            .order_by("gpu__node__hostname", "gpu__index")  # a job's shares by host, then GPU index
            .values_list(
                "job_id", "gpu_id", "kind", "compute_pct", "memory_mib", "mig_profile", "mig_start", "replica",
                "created",
            )
        )  # fmt: skip
        for job_id, gpu_id, kind, compute_pct, memory_mib, mig_profile, mig_start, replica, created in rows:
            share = Share(gpu_id, kind, compute_pct, memory_mib, mig_profile or None, mig_start, replica)
            found[job_id].append((share, created.timestamp()))
    for pk, held in found.items():
        cache[pk] = (holders[pk], tuple(sh for sh, _ in held), tuple(c for _, c in held))
    return {pk: cache[pk] for pk in holders}


MIX_FIELDS = (
    "pool_id", "sharing", "gpus", "mps_compute_pct", "mps_memory_mib", "mig_profile", "gpu_model", "host_cpu_milli",
    "host_memory_mib",
)  # fmt: skip


def _request_mix(cluster_id: int, now_ts: float) -> list[RequestClass]:
    """The recent mix of shared-GPU requests: the cluster's shared jobs submitted in the last
    REQUEST_MIX_WINDOW_S (whatever became of them) and every pending one, counted per shape (host CPU and memory
    per node included) and hour of submission in one grouped query, each count weighed
    2^(-age / REQUEST_MIX_HALF_LIFE_S) (age from the hour's start, at most the window)."""
    since = datetime.fromtimestamp(now_ts - REQUEST_MIX_WINDOW_S, tz=UTC)
    rows = (
        Job.objects.filter(pool__cluster_id=cluster_id)
        .exclude(sharing=SharingMode.EXCLUSIVE)
        .filter(Q(submitted_at__gte=since) | Q(status=JobStatus.PENDING))
        .annotate(hour=TruncHour("submitted_at"))
        .order_by()
        .values(*MIX_FIELDS, "hour")
        .annotate(n=Count("pk"))
    )
    out = []
    for r in rows:
        age = min(REQUEST_MIX_WINDOW_S, max(0.0, now_ts - r["hour"].timestamp()))
        out.append(
            RequestClass(
                pool=r["pool_id"],
                sharing=r["sharing"],
                gpus=r["gpus"],
                mps_compute_pct=r["mps_compute_pct"] or 0,
                mps_memory_mib=r["mps_memory_mib"] or 0,
                mig_profile=r["mig_profile"] or None,
                gpu_model=r["gpu_model"] or None,
                weight=r["n"] * 0.5 ** (age / REQUEST_MIX_HALF_LIFE_S),
                host_cpu_milli=r["host_cpu_milli"] or 0,
                host_memory_mib=r["host_memory_mib"] or 0,
            )
        )
    return out


def _erroring_links(cluster_id: int) -> dict[str, bool]:
    """Links whose error counters are climbing (an open alert) are priced as erroring until it clears."""
    keys = Alert.objects.filter(cluster_id=cluster_id, cleared_at__isnull=True, rule="port_errors").values_list(
        "object_key", flat=True
    )
    links = (link_for_alert_key(cluster_id, key) for key in keys)
    return {str(link.pk): True for link in links if link is not None}


def build_snapshot(cluster_id: int) -> tuple[Snapshot, SnapshotIndex]:
    now_ts = time.time()
    index = SnapshotIndex(cluster_id=cluster_id)
    lap = _Laps(index.load_ms)
    fabric, topology = fabric_and_topology(cluster_id)
    lap("fabric")

    node_rows = list(
        Node.objects.filter(cluster_id=cluster_id)
        .order_by("hostname")  # the engine's node order (ties), as the default order gives it, without its join
        .values("pk", "hostname", "role", "state", "cpu_milli", "memory_mib")
    )
    hostname_of = {n["pk"]: n["hostname"] for n in node_rows}
    # Live load from telemetry's latest state (fabric.ingest); zero where no sample has arrived yet.
    link_util, gpu_util = latest_utilisation(cluster_id, list(hostname_of.values()))
    topologies = dict(NodeTopology.objects.filter(node__cluster_id=cluster_id).values_list("node_id", "gpu_links"))
    hca_gbps: dict[str, float] = defaultdict(float)
    hosts = set(hostname_of.values())
    for link in fabric.links:
        for end in (link.a, link.b):
            if end in hosts and link.up:
                hca_gbps[end] += link.capacity_gbps

    lap("nodes_live_load")
    jobs = _job_rows(cluster_id)
    index.jobs = {j.pk: j for j in jobs}
    lap("job_rows")
    held: dict[int, dict] = defaultdict(lambda: {"exclusive": None, "pct": 0, "mem": 0, "mig": [], "ts": 0})
    # The service a running job has had in its current run (GPU-seconds: a second per share held); its earlier
    # runs are in Job.attained_gpu_s (scheduler.actions.allocations.release_allocations adds each at release).
    serving: dict[int, float] = {}
    shares = _job_shares(cluster_id, jobs)
    for job_id, (_version, held_shares, created) in shares.items():
        serving[job_id] = sum(max(0.0, now_ts - c) for c in created)
        for sh in held_shares:
            h = held[sh.gpu_id]
            if sh.kind == "whole":
                h["exclusive"] = job_id
            elif sh.kind == "mps":
                h["pct"] += sh.compute_pct
                h["mem"] += sh.memory_mib
            elif sh.kind == "mig":
                h["mig"].append((sh.mig_profile, sh.mig_start))
            else:
                h["ts"] += 1

    lap("allocations")
    gpus_by_node: dict[int, list[GpuState]] = defaultdict(list)
    usable = (GpuHealth.HEALTHY, GpuHealth.UNKNOWN)
    gpu_rows = (
        GPU.objects.filter(node__cluster_id=cluster_id)
        .order_by()  # sorted per node below
        .values_list("pk", "node_id", "index", "model", "memory_mib", "health", "nvlink_gbps")
    )
    for pk, node_id, gpu_index, model, memory_mib, health, nvlink_gbps in gpu_rows:
        index.gpu_memory[pk] = memory_mib
        index.gpu_model[pk] = model
        h = held.get(pk)
        gpus_by_node[node_id].append(
            GpuState(
                id=pk,
                index=gpu_index,
                model=model,
                memory_mib=memory_mib,
                healthy=health in usable,
                nvlink_gbps=nvlink_gbps,
                utilisation=gpu_util.get(pk, 0.0),
                exclusive_job=h["exclusive"] if h else None,
                mps_compute_pct_used=h["pct"] if h else 0,
                mps_memory_mib_used=h["mem"] if h else 0,
                mig_used=tuple(h["mig"]) if h else (),
                timeslice_used=h["ts"] if h else 0,
            )
        )
    nodes = []
    for n in node_rows:
        gpus = sorted(gpus_by_node.get(n["pk"], []), key=lambda g: g.index)
        nvlink = any(g.nvlink_gbps > 0 for g in gpus)
        nodes.append(
            NodeState(
                hostname=n["hostname"],
                schedulable=n["state"] == NodeStatus.UP and n["role"] == NodeRole.COMPUTE,
                storage=n["role"] == NodeRole.STORAGE,
                gpus=tuple(gpus),
                nvlink_islands=_islands([g.index for g in gpus], topologies.get(n["pk"]), nvlink),
                hca_gbps=hca_gbps.get(n["hostname"], 0.0),
                up=n["state"] != NodeStatus.DOWN,
                # What jobs may take of the host (the agent's report or the operator's value); 0: not tracked.
                # What running jobs hold of it the engine subtracts from their requests (ClusterState).
                cpu_milli=n["cpu_milli"],
                memory_mib=n["memory_mib"],
            )
        )

    lap("gpus_nodes")
    pending, running = [], []
    requests = _REQUESTS.setdefault(cluster_id, {})
    for job in sorted(jobs, key=lambda j: j.queue_seq):
        cached = requests.get(job.pk)
        if cached is None or cached[0] != job.version:
            cached = requests[job.pk] = (job.version, _request(job, hostname_of, now_ts))
        request = cached[1]
        if job.status == JobStatus.PENDING:
            pending.append(request)
        elif job.pk in shares and shares[job.pk][1]:
            running.append(
                RunningJob(
                    request=_with_attained(request, job.attained_gpu_s + serving[job.pk]),
                    shares=shares[job.pk][1],
                    started_at=job.started_at.timestamp() if job.started_at else now_ts,
                    last_migrated_at=job.last_migrated_at.timestamp() if job.last_migrated_at else None,
                    borrowed=job.borrowed,
                    stopping=job.status in (JobStatus.MIGRATING, JobStatus.PREEMPTED),
                )
            )
    lap("requests")
    pools = _pools(cluster_id, index, list(hostname_of.values()))
    tenants = _tenants(jobs, now_ts)
    lap("pools_tenants")
    link_errors = _erroring_links(cluster_id)
    request_mix = _request_mix(cluster_id, now_ts)
    snapshot = Snapshot(
        now=now_ts,
        fabric=fabric,
        nodes=nodes,
        pools=pools,
        tenants=tenants,
        pending=pending,
        running=running,
        priority_classes=dict(PriorityClass.objects.values_list("name", "value")),
        topology=topology,
        link_errors=link_errors,
        link_utilisation=link_util,
        request_mix=request_mix,
    )
    lap("errors_mix")
    return snapshot, index


class _Laps:
    """Milliseconds since the previous lap, under the name of the step that just ended."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into
        self.t = perf_counter()

    def __call__(self, name: str) -> None:
        now = perf_counter()
        self.into[name] = round((now - self.t) * 1000, 3)
        self.t = now
