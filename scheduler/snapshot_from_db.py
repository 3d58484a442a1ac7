"""Database rows -> the engine's Snapshot, in bulk (a fixed number of queries whatever the cluster size).

Live link utilisation and GPU load come from telemetry's latest state (fabric.ingest); links whose error
counters climb come from open health alerts. What earlier rounds read and built is kept per cluster (`_Seen`), so
a round's cost follows what changed since the last one: on PostgreSQL it reads only the jobs, GPUs and NVLink
matrices written since (fabric.change_feed), elsewhere every live job's version and every GPU row.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections import defaultdict, namedtuple
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from operator import itemgetter
from time import perf_counter  # the laps' clock; tests replace `time` to set the round's now

from django.conf import settings
from django.db import connections
from django.db.models import BooleanField, Count, ExpressionWrapper, Q, TextField
from django.db.models.functions import MD5, Cast, TruncHour

from fabric import change_feed
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
    Config,
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
from scheduler.finished_usage import FinishedUsage
from scheduler.finished_usage import Row as UsageRow
from scheduler.models import Allocation, Job, Pool, PoolNode, PriorityClass, Quota, Tenant
from scheduler.models.jobs import LIVE_JOB

USAGE_HALF_LIFE_S = 24 * 3600.0  # fair share forgets half of past usage per day
USAGE_WINDOW_S = 7 * USAGE_HALF_LIFE_S  # and a finished job's altogether after a week (under 1 % of it is left)
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
# What a placement's UPDATE changes of a row (placements_committed).
_STATUS, _VERSION, _STARTED_AT, _BORROWED = (
    JobRow._fields.index(f) for f in ("status", "version", "started_at", "borrowed")
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
    seen: _Seen | None = field(default=None, repr=False, compare=False)  # the kept state the build read and updated

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


def _tenants(active: list[tuple[int, int, float]], finished: dict[int, float], now_ts: float) -> list[TenantState]:
    """Quotas and decayed usage per tenant. `active`: (tenant id, GPUs, started at) of the started jobs of
    ACTIVE_STATUSES, in the jobs' default order (-id), the order their usage is summed in; `finished`: tenant id ->
    decayed GPU-hours of its jobs finished within USAGE_WINDOW_S (`_finished_usage`)."""
    normal = PriorityClass.objects.filter(name="normal").values_list("value", flat=True).first() or 50
    quotas: dict[int, dict[int, QuotaState]] = defaultdict(dict)
    for q in Quota.objects.all():
        quotas[q.tenant_id][q.pool_id] = QuotaState(guaranteed_gpus=q.guaranteed_gpus, borrow_limit=q.borrow_limit)
    usage: dict[int, float] = defaultdict(float)
    for tenant_id, gpus, started_at in active:
        usage[tenant_id] += gpus * (now_ts - started_at) / 3600
    for tenant_id, hours in finished.items():
        usage[tenant_id] += hours
    return [
        TenantState(
            name=t.name,
            quotas=quotas.get(t.pk, {}),
            usage_decayed=usage.get(t.pk, 0.0),
            max_priority=t.max_priority.value if t.max_priority else normal,
        )
        for t in Tenant.objects.select_related("max_priority")
    ]


_USAGE_FIELDS = ("pk", "tenant_id", "attained_gpu_s", "finished_at")


def _finished_usage(seen: _Seen, feed: _Feed, written: list[UsageRow] | None, now_ts: float) -> dict[int, float]:
    """Tenant id -> decayed GPU-hours of the jobs (of every cluster) finished within USAGE_WINDOW_S: kept between
    rounds (scheduler.finished_usage), from the jobs written since its own last read (`written`: what `_read_jobs`
    read of them, when it read from the same mark). It reads the week whole at the first round, on SQLite, after a
    deletion of jobs, and every FINISHED_FULL_READ_EVERY_S: not at the jobs' own whole read every FULL_READ_EVERY_S,
    which would cost one round in 300 s a read of the whole week's jobs."""
    kept = seen.finished
    since = seen.finished_from
    deleted = feed.deleted
    if feed.mark is not None and since is not None and since != feed.since:  # the jobs are read whole this time
        deleted = change_feed.deleted_since(connections[Job.objects.db], ("scheduler_job",), since)[1]
    if (
        feed.mark is None
        or since is None
        or "scheduler_job" in deleted
        or perf_counter() - seen.finished_read_at >= FINISHED_FULL_READ_EVERY_S
    ):
        start = datetime.fromtimestamp(now_ts - USAGE_WINDOW_S, tz=UTC)
        rows = Job.objects.filter(finished_at__gte=start).order_by().values_list(*_USAGE_FIELDS)
        kept.reset(((pk, t, a, f.timestamp()) for pk, t, a, f in rows.iterator(chunk_size=10_000)), now_ts)
        seen.finished_read_at = perf_counter()
    elif written is not None and since == feed.since:
        kept.update(written, now_ts)
    else:
        rows = Job.objects.filter(change_xid__gte=since).order_by().values_list(*_USAGE_FIELDS)
        kept.update(((pk, t, a, f.timestamp() if f is not None else None) for pk, t, a, f in rows), now_ts)
    seen.finished_from = feed.mark
    return kept.usage(now_ts)


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


# ---------------------------------------------------------------------------- what earlier rounds read
#
# A churn round changes a few dozen of the tens of thousands of jobs and a few dozen GPUs. Each cluster keeps what
# its earlier rounds read and built (`_Seen`), and rebuilds only the engine objects whose inputs changed. What changed
# it learns from the change feed (`_feed`: the rows written since its last read) or, reading a table whole, from the
# jobs' `version` (every job change goes through scheduler.actions and bumps it) and by comparing GPU rows and NVLink
# digests. A job's allocations change only with the job (placed, released, moved: each bumps it). What is kept is
# exactly what a build from empty state gives: `clear_caches()` then `build_snapshot` is the reference the tests
# compare with. A snapshot that is still wrong somehow costs a stale decision, never a double allocation: apply
# re-checks the locked ledgers and job versions.

_EMPTY_HELD = (None, 0, 0, (), 0)  # (exclusive job, MPS %, MPS MiB, MIG (profile, start)s, time-slice replicas)


def _queue_key(job: JobRow) -> tuple[int, int]:
    """The engine's queue order: by queue_seq, ties to the newer job (the jobs' default order, -id, sorted stably)."""
    return (job.queue_seq, -job.pk)


class _Line:
    """Values kept in queue order by key; a round moves the few that changed (bisect), many at once are resorted."""

    RESORT = 512

    def __init__(self) -> None:
        self.keys: list[tuple[int, int]] = []
        self.values: list = []

    def update(self, drop: list[tuple[int, int]], put: dict[tuple[int, int], object]) -> None:
        if len(drop) + len(put) > self.RESORT:
            items = dict(zip(self.keys, self.values, strict=True))
            for key in drop:
                items.pop(key, None)
            items.update(put)
            ordered = sorted(items.items(), key=itemgetter(0))
            self.keys = [k for k, _ in ordered]
            self.values = [v for _, v in ordered]
            return
        for key in drop:
            i = bisect_left(self.keys, key)
            if i < len(self.keys) and self.keys[i] == key:
                del self.keys[i], self.values[i]
        for key, value in put.items():
            i = bisect_left(self.keys, key)
            if i < len(self.keys) and self.keys[i] == key:
                self.values[i] = value
            else:
                self.keys.insert(i, key)
                self.values.insert(i, value)


@dataclass
class _Seen:
    """One cluster's rows as its last round read them, and the engine objects built from them."""

    hostname_of: dict[int, str]  # the hosts the requests were built with (a job's dataset node); others: start over
    versions: dict[int, int] = field(default_factory=dict)  # live job id -> version, as last read
    feed_from: int | None = None  # the change feed's mark at the last read (_feed); None: read the fed tables whole
    full_read_at: float = 0.0  # perf_counter() at the last whole read of them
    rows: dict[int, JobRow] = field(default_factory=dict)
    requests: dict[int, JobRequest] = field(default_factory=dict)
    pending: _Line = field(default_factory=_Line)  # their JobRequests, in queue order
    holders: _Line = field(default_factory=_Line)  # ids of the live jobs that are not pending, in queue order
    shares: dict[int, tuple[Share, ...]] = field(default_factory=dict)  # holder -> its shares (created at: `running`)
    # Holder -> its RunningJob (started_at None: not started yet), serving since its shares' creation times.
    running: dict[int, RunningJob] = field(default_factory=dict)
    active: dict[int, tuple[int, int, float]] = field(default_factory=dict)  # started holder -> _tenants' inputs
    on_gpu: dict[int, dict[int, list[Share]]] = field(default_factory=dict)  # GPU -> holder -> its shares there
    held: dict[int, tuple] = field(default_factory=dict)  # GPU -> _EMPTY_HELD's fields, where anything is held
    gpu_rows: dict[int, tuple] = field(default_factory=dict)  # GPU_FIELDS
    gpu_memory: dict[int, int] = field(default_factory=dict)
    gpu_model: dict[int, str] = field(default_factory=dict)
    gpu_util: dict[int, float] = field(default_factory=dict)
    gpus: dict[int, GpuState] = field(default_factory=dict)
    node_gpus: dict[int, list[int]] = field(default_factory=dict)  # node -> its GPU ids by index
    topology_digest: dict[int, tuple[int, str]] = field(default_factory=dict)  # node -> (its matrix's id, digest)
    topology_node: dict[int, int] = field(default_factory=dict)  # NVLink matrix id -> its node
    topologies: dict[int, dict] = field(default_factory=dict)
    hca_of: tuple | None = None  # (fabric, hosts) hca_gbps was summed for
    hca_gbps: dict[str, float] = field(default_factory=dict)
    node_inputs: dict[int, tuple] = field(default_factory=dict)
    nodes: dict[int, NodeState] = field(default_factory=dict)
    # Decayed usage of the jobs finished lately (`_finished_usage`), the change feed's mark it read to, and when it
    # last read the week whole (perf_counter()).
    finished: FinishedUsage = field(default_factory=lambda: FinishedUsage(USAGE_HALF_LIFE_S, USAGE_WINDOW_S))
    finished_from: int | None = None
    finished_read_at: float = 0.0
    # Placements this process committed since the last build (placements_committed): (the rows the round read,
    # the status and start it wrote, [(job id, borrowed, its shares as scheduler.actions.allocations.ShareSpec,
    # {GPU: created at} of those created apart)]).
    committed: list[tuple] = field(default_factory=list)


_SEEN: dict[int, _Seen] = {}
# One build at a time per cluster: a round and, say, the policy lab may build at once in one process.
_BUILDING: dict[int, threading.Lock] = {}


def clear_caches() -> None:
    """Forget what earlier rounds read of jobs, GPUs and nodes: the next build reads and builds all of it (tests
    compare with it). The fabric's cache stays: it is keyed by fabric_version."""
    _SEEN.clear()  # a build under way keeps updating the state it took, which nothing reads again


def _live_jobs(cluster_id: int):
    return Job.objects.filter(pool__cluster_id=cluster_id).filter(LIVE_JOB)  # its own index: job_live_by_pool


def _fetch_rows(queryset) -> list[tuple]:
    """A values_list queryset's rows straight from the cursor, without the ORM's per-row iteration (a few ms for
    tens of thousands of rows). Only for columns the database driver already returns as Python wants them:
    integers, floats and strings, no converters."""
    sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# A round reads every fed table whole at least this often, whatever the change feed says: the feed misses nothing
# written through the database, but a backup restored under a running worker, or triggers turned off by hand, would.
FULL_READ_EVERY_S = 300.0
# Fair share's usage of finished jobs has a safety net of its own (`_finished_usage`): its whole read is a week of jobs.
FINISHED_FULL_READ_EVERY_S = 3600.0


@dataclass(frozen=True)
class _Feed:
    """What this build reads of the fed tables (fabric.change_feed): `since` None reads every table whole (SQLite, the
    first build, every FULL_READ_EVERY_S), else the rows written since that mark, but in `deleted`'s tables."""

    mark: int | None  # to read from next time (None: no feed here)
    since: int | None = None
    deleted: frozenset[str] = frozenset()

    def whole(self, table: str) -> bool:
        return self.since is None or table in self.deleted


_FED = ("scheduler_job", "fabric_gpu", "fabric_nodetopology")


def _feed(seen: _Seen) -> _Feed:
    """Taken before anything the feed reads: rows written by transactions open now are read again next time."""
    connection = connections[Job.objects.db]
    if not change_feed.supported(connection):
        return _Feed(None)
    since = seen.feed_from
    if since is not None and perf_counter() - seen.full_read_at >= FULL_READ_EVERY_S:
        since = None
    mark, deleted = change_feed.deleted_since(connection, _FED, since)
    return _Feed(mark, since, frozenset(deleted))


def _feed_read(seen: _Seen, feed: _Feed) -> None:
    """After the build's reads: where the next one reads from."""
    if feed.mark is not None:
        seen.feed_from = feed.mark
        if feed.since is None:
            seen.full_read_at = perf_counter()


def _read_jobs(cluster_id: int, seen: _Seen, feed: _Feed) -> tuple[dict, list[UsageRow] | None]:
    """(job id -> (its row as last read or None, its row now or None) for the live jobs that came, went or changed;
    what fair share's usage reads of each job written since, None on a whole read): from every live job's version, or
    from the jobs written since the last read (`feed`), in one read that `_finished_usage` shares."""
    if feed.whole("scheduler_job"):
        return _read_versions(_live_jobs(cluster_id), cluster_id, seen, every=True), None
    written = Job.objects.filter(change_xid__gte=feed.since).annotate(live=ExpressionWrapper(LIVE_JOB, BooleanField()))
    usage: list[UsageRow] = []
    return _read_versions(written, cluster_id, seen, every=False, usage=usage), usage


def _read_versions(jobs, cluster_id: int, seen: _Seen, every: bool, usage: list[UsageRow] | None = None) -> dict:
    """`_read_jobs` from (id, version) of `jobs`: every live job of the cluster (`every`; unordered, the queue order is
    kept in `_Line`s), or the jobs written since the last read (any cluster, live or not; `usage` takes what fair
    share's usage reads of each). Full rows of the changed."""
    known = seen.versions
    changed: dict[int, tuple[JobRow | None, JobRow | None]] = {}
    if every:
        versions = dict(_fetch_rows(jobs.order_by().values_list("pk", "version")))
        stale = [pk for pk, version in versions.items() if known.get(pk) != version]
        changed.update((pk, (seen.rows.get(pk), None)) for pk in known.keys() - versions.keys())
    else:
        versions, stale = known, []
        rows = _fetch_rows(jobs.order_by().values_list("pk", "version", "pool__cluster_id", "live", *_USAGE_FIELDS[1:]))
        if usage is not None:
            usage.extend((pk, t, a, f.timestamp() if f is not None else None) for pk, _, _, _, t, a, f in rows)
        for pk, version, cluster, live, *_ in rows:
            if live and cluster == cluster_id:
                if known.get(pk) != version:
                    stale.append(pk)
                    versions[pk] = version
            elif pk in versions:  # no longer live here: ended, held, or moved to another cluster's pool
                del versions[pk]
                changed[pk] = (seen.rows.get(pk), None)
    for chunk in (stale[i : i + 10_000] for i in range(0, len(stale), 10_000)):
        for row in Job.objects.filter(pk__any_of=chunk).order_by().values_list(*JOB_FIELDS):
            changed[row[0]] = (seen.rows.get(row[0]), JobRow._make(row))
    for pk in stale:
        if pk not in changed:  # deleted since its version was read: read it as new if it is back
            del versions[pk]
            changed[pk] = (seen.rows.get(pk), None)
    seen.versions = versions
    return changed


def _update_jobs(seen: _Seen, changed: dict, hostname_of: dict[int, str], now_ts: float) -> None:
    """Rows, requests and both queue lines for the jobs that changed."""
    drop_pending, drop_holders = [], []
    put_pending, put_holders = {}, {}
    for pk, (old, new) in changed.items():
        if old is not None:
            (drop_pending if old.status == JobStatus.PENDING else drop_holders).append(_queue_key(old))
        seen.active.pop(pk, None)
        if new is None:
            seen.rows.pop(pk, None)
            seen.requests.pop(pk, None)
            continue
        seen.rows[pk] = new
        request = seen.requests[pk] = _request(new, hostname_of, now_ts)
        if new.status in ACTIVE_STATUSES and new.started_at:
            seen.active[pk] = (new.tenant_id, new.gpus, new.started_at.timestamp())
        if new.status == JobStatus.PENDING:
            put_pending[_queue_key(new)] = request
        else:
            put_holders[_queue_key(new)] = pk
    seen.pending.update(drop_pending, put_pending)
    seen.holders.update(drop_holders, put_holders)


def _read_shares(jobs: list[int]) -> dict[int, tuple[tuple[Share, ...], tuple[float, ...]]]:
    """The active shares of these jobs (each job's by host, then GPU index) and their creation times."""
    found: dict[int, list] = {pk: [] for pk in jobs}
    for chunk in (jobs[i : i + 10_000] for i in range(0, len(jobs), 10_000)):
        rows = (
            Allocation.objects.filter(active=True, job_id__any_of=chunk)
            .order_by("gpu__node__hostname", "gpu__index")
            .values_list(
                "job_id", "gpu_id", "kind", "compute_pct", "memory_mib", "mig_profile", "mig_start", "replica",
                "created",
            )
        )  # fmt: skip
        for job_id, gpu_id, kind, compute_pct, memory_mib, mig_profile, mig_start, replica, created in rows:
            share = _share(gpu_id, kind, compute_pct, memory_mib, mig_profile, mig_start, replica)
            found[job_id].append((share, created.timestamp()))
    return {pk: (tuple(sh for sh, _ in held), tuple(c for _, c in held)) for pk, held in found.items()}


def _share(gpu_id: int, kind: str, compute_pct: int, memory_mib: int, mig_profile: str, mig_start, replica) -> Share:
    """An allocation's fields as the engine's Share (no MIG profile: None, where the row has "")."""
    return Share(gpu_id, kind, compute_pct, memory_mib, mig_profile or None, mig_start, replica)


def _update_shares(seen: _Seen, changed: dict, written: dict | None = None) -> set[int]:
    """Shares of the jobs that changed, and what each GPU they touch holds; returns those GPUs. `written`: the
    holders' shares as `_read_shares` gives them, known without reading them."""
    touched: set[int] = set()
    for pk in changed:
        seen.running.pop(pk, None)
        for sh in seen.shares.pop(pk, ()):
            touched.add(sh.gpu_id)
            there = seen.on_gpu[sh.gpu_id]
            there.pop(pk, None)
            if not there:
                del seen.on_gpu[sh.gpu_id]
    if written is None:
        holders = [pk for pk, (_, new) in changed.items() if new is not None and new.status != JobStatus.PENDING]
        written = _read_shares(holders)
    for pk, (held_shares, created) in written.items():
        seen.shares[pk] = held_shares
        if held_shares:
            seen.running[pk] = _running_job(seen.rows[pk], seen.requests[pk], held_shares, created)
        for sh in held_shares:
            touched.add(sh.gpu_id)
            seen.on_gpu.setdefault(sh.gpu_id, {}).setdefault(pk, []).append(sh)
    for gpu_id in touched:
        there = seen.on_gpu.get(gpu_id)
        if there:
            seen.held[gpu_id] = _held_on(there)
        else:
            seen.held.pop(gpu_id, None)
    return touched


def placements_committed(index: SnapshotIndex, status: str, started_at: datetime, placed: list[tuple]) -> None:
    """After the COMMIT of a round's placements (scheduler.actions.apply): what they wrote, for the next build to take
    as read. `placed`: (job id, borrowed, its shares as ShareSpecs, {GPU id: created at} of the shares not created at
    `started_at`). After a round that fills a cluster, reading its 5,893 jobs and 10,000 allocations back was most of
    the next build (330 of 470 ms, mostly parsing their times and making their rows and shares again)."""
    seen = index.seen
    if seen is None or not placed:
        return
    with _BUILDING.setdefault(index.cluster_id, threading.Lock()):
        if _SEEN.get(index.cluster_id) is seen:  # not started over since (clear_caches, hosts changed)
            seen.committed.append((index.jobs, str(status), started_at, placed))


def _take_committed(seen: _Seen, now_ts: float) -> set[int]:
    """The placements committed since the last build (placements_committed), taken into the kept rows, lines and
    shares as a read of them would give them; returns the GPUs they hold. The changes are the placement UPDATE's
    (status, version, started_at, borrowed). A job whose kept row is no longer the one its round read (a build in
    between read it again), or that holds a GPU the kept rows lack, is left to the read: its version differs from the
    kept one.

    Its objects are made in the order a read makes them, the shares by host and GPU index, the requests and running
    jobs by job id, not kept or made in the placements' order: every later round's engine walks the running jobs
    and the nodes' shares, and objects strewn over memory made each of those rounds 8-10 ms slower (the placed
    jobs' old requests lie among the 50,000 waiting ones')."""
    committed, seen.committed = seen.committed, []
    changed: dict[int, tuple[JobRow, JobRow]] = {}
    rows, versions, gpu_rows, host = seen.rows, seen.versions, seen.gpu_rows, seen.hostname_of
    held: list[tuple[str, int, int, object, float]] = []  # (host, GPU index, job, its share there, created at)
    for jobs, status, started_at, placed in committed:
        started_ts = started_at.timestamp()
        for pk, borrowed, specs, created_apart in placed:
            was = jobs[pk]
            if rows.get(pk) is not was or versions.get(pk) != was.version:
                continue
            if not all(s.gpu_id in gpu_rows for s in specs):
                continue
            for s in specs:
                row = gpu_rows[s.gpu_id]
                held.append((host[row[1]], row[2], pk, s, created_apart.get(s.gpu_id, started_ts)))
            new = list(was)  # as _replace does, without its keyword handling (4 us a row)
            new[_STATUS], new[_STARTED_AT], new[_BORROWED] = status, started_at, borrowed
            new[_VERSION] = was.version + 1
            changed[pk] = (was, JobRow._make(new))
    if not changed:
        return set()
    held.sort(key=itemgetter(0, 1))  # one share per job and GPU: each job's come in that order too
    changed = dict(sorted(changed.items()))
    by_job: dict[int, tuple[list[Share], list[float]]] = {pk: ([], []) for pk in changed}
    for _, _, pk, s, created in held:
        shares, times = by_job[pk]
        shares.append(_share(s.gpu_id, str(s.kind), s.compute_pct, s.memory_mib, s.mig_profile, s.mig_start, s.replica))
        times.append(created)
    written = {pk: (tuple(shares), tuple(times)) for pk, (shares, times) in by_job.items()}
    _update_jobs(seen, changed, host, now_ts)
    touched = _update_shares(seen, changed, written)
    # Last: should anything above fail, the versions left as they were make the next read read these jobs again.
    versions.update((pk, new.version) for pk, (_, new) in changed.items())
    return touched


def _held_on(jobs: dict[int, list[Share]]) -> tuple:
    """What the jobs' shares take of one GPU, as _EMPTY_HELD. The jobs go in their default order (-id), the order
    a full read meets them in: MIG slices are listed in it."""
    exclusive, pct, mem, mig, ts = None, 0, 0, [], 0
    for job_id in sorted(jobs, reverse=True) if len(jobs) > 1 else jobs:
        for sh in jobs[job_id]:
            if sh.kind == "whole":
                exclusive = job_id
            elif sh.kind == "mps":
                pct += sh.compute_pct
                mem += sh.memory_mib
            elif sh.kind == "mig":
                mig.append((sh.mig_profile, sh.mig_start))
            else:
                ts += 1
    return (exclusive, pct, mem, tuple(mig), ts)


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


GPU_FIELDS = ("pk", "node_id", "index", "model", "memory_mib", "health", "nvlink_gbps")
_USABLE = (GpuHealth.HEALTHY, GpuHealth.UNKNOWN)


def _gpu_state(row: tuple, utilisation: float, held: tuple) -> GpuState:
    pk, _node_id, gpu_index, model, memory_mib, health, nvlink_gbps = row
    exclusive, pct, mem, mig, ts = held
    return GpuState(
        id=pk,
        index=gpu_index,
        model=model,
        memory_mib=memory_mib,
        healthy=health in _USABLE,
        nvlink_gbps=nvlink_gbps,
        utilisation=utilisation,
        exclusive_job=exclusive,
        mps_compute_pct_used=pct,
        mps_memory_mib_used=mem,
        mig_used=mig,
        timeslice_used=ts,
    )


def _gpu_rows(seen: _Seen, feed: _Feed) -> dict[int, tuple]:
    """The cluster's GPU rows (GPU_FIELDS) by id: all of them read, or those written since the last read (`feed`)."""
    if feed.whole("fabric_gpu"):
        # By the round's node ids rather than a join on the cluster: a third of the query's time at 10,000 GPUs.
        gpus = GPU.objects.filter(node_id__any_of=list(seen.hostname_of)).order_by().values_list(*GPU_FIELDS)
        return {r[0]: r for r in _fetch_rows(gpus)} if seen.hostname_of else {}
    written = _fetch_rows(GPU.objects.filter(change_xid__gte=feed.since).order_by().values_list(*GPU_FIELDS))
    rows = seen.gpu_rows
    if any(rows.get(r[0]) != (r if r[1] in seen.hostname_of else None) for r in written):
        rows = dict(rows)
        for r in written:
            if r[1] in seen.hostname_of:
                rows[r[0]] = r
            else:  # moved to another cluster's node
                rows.pop(r[0], None)
    return rows


def _update_gpus(seen: _Seen, touched: set[int], gpu_util: dict[int, float], feed: _Feed) -> set[int]:
    """GpuStates of the GPUs whose row, live load or holders changed; returns the nodes they are on."""
    rows = _gpu_rows(seen, feed)
    dirty = set(touched)
    nodes: set[int] = set()
    if rows is not seen.gpu_rows and rows != seen.gpu_rows:  # an import, a health change, an admin edit
        for pk in rows.keys() | seen.gpu_rows.keys():
            old, new = seen.gpu_rows.get(pk), rows.get(pk)
            if old != new:
                dirty.add(pk)
                nodes.update(r[1] for r in (old, new) if r is not None)
        seen.gpu_rows = rows
        by_node: dict[int, list[tuple]] = defaultdict(list)
        for r in rows.values():
            by_node[r[1]].append(r)
        seen.node_gpus = {node: [r[0] for r in sorted(rs, key=itemgetter(2))] for node, rs in by_node.items()}
        seen.gpu_memory = {pk: r[4] for pk, r in rows.items()}
        seen.gpu_model = {pk: r[3] for pk, r in rows.items()}
    if gpu_util != seen.gpu_util:
        dirty.update(pk for pk in gpu_util.keys() | seen.gpu_util.keys() if gpu_util.get(pk) != seen.gpu_util.get(pk))
        seen.gpu_util = gpu_util
    for pk in dirty:
        row = rows.get(pk)
        if row is None:
            seen.gpus.pop(pk, None)
            continue
        seen.gpus[pk] = _gpu_state(row, gpu_util.get(pk, 0.0), seen.held.get(pk, _EMPTY_HELD))
        nodes.add(row[1])
    return nodes


def _update_topologies(cluster_id: int, seen: _Seen, feed: _Feed) -> set[int]:
    """NVLink matrices (`nvidia-smi topo -m`), read again where written since the last read (`feed`), else where
    their digest, read every round, changed; returns those nodes."""
    if not feed.whole("fabric_nodetopology"):
        changed: set[int] = set()
        fed = NodeTopology.objects.filter(change_xid__gte=feed.since).order_by()
        for pk, node_id, links in fed.values_list("pk", "node_id", "gpu_links"):
            was_on = seen.topology_node.pop(pk, None)
            if was_on is not None and was_on != node_id:  # moved to another node: the first has none now
                seen.topologies.pop(was_on, None)
                changed.add(was_on)
            if node_id in seen.hostname_of:
                seen.topology_node[pk] = node_id
                if seen.topologies.get(node_id) != links:
                    seen.topologies[node_id] = links
                    changed.add(node_id)
        for node in changed:  # the next whole read compares digests: unknown for these, so it reads them again
            seen.topology_digest.pop(node, None)
        return changed
    digests = {
        node_id: (pk, digest)
        for pk, node_id, digest in NodeTopology.objects.filter(node__cluster_id=cluster_id)
        .annotate(digest=MD5(Cast("gpu_links", TextField())))
        .values_list("pk", "node_id", "digest")
    }
    if digests == seen.topology_digest:
        return set()
    old = seen.topology_digest
    changed = {pk for pk in digests.keys() | old.keys() if digests.get(pk) != old.get(pk)}
    for pk in changed:
        seen.topologies.pop(pk, None)
    # Read after the digests: a matrix changed in between is read new and its digest differs again next round.
    seen.topologies.update(NodeTopology.objects.filter(node_id__in=changed).values_list("node_id", "gpu_links"))
    seen.topology_digest = digests
    seen.topology_node = {pk: node_id for node_id, (pk, _) in digests.items()}
    return changed


def _hca_gbps(seen: _Seen, fabric: Fabric, hosts: set[str]) -> dict[str, float]:
    """Each host's injection bandwidth (its HCAs' up links), summed again only when the fabric or hosts changed."""
    if seen.hca_of is None or seen.hca_of[0] is not fabric or seen.hca_of[1] != hosts:
        hca: dict[str, float] = defaultdict(float)
        for link in fabric.links:
            for end in (link.a, link.b):
                if end in hosts and link.up:
                    hca[end] += link.capacity_gbps
        seen.hca_of, seen.hca_gbps = (fabric, hosts), dict(hca)
    return seen.hca_gbps


def _update_nodes(seen: _Seen, node_rows: list[dict], dirty: set[int], hca_gbps: dict[str, float]) -> list[NodeState]:
    """NodeStates in the engine's order, rebuilt where the row, a GPU, the NVLink matrix or the HCAs changed."""
    out = []
    for n in node_rows:
        pk = n["pk"]
        inputs = (*n.values(), hca_gbps.get(n["hostname"], 0.0))
        if pk in dirty or seen.node_inputs.get(pk) != inputs:
            seen.node_inputs[pk] = inputs
            seen.nodes[pk] = _node_state(n, [seen.gpus[g] for g in seen.node_gpus.get(pk, ())], seen, inputs[-1])
        out.append(seen.nodes[pk])
    if len(seen.nodes) > len(out):  # nodes removed
        present = {n["pk"] for n in node_rows}
        for gone in seen.nodes.keys() - present:
            del seen.nodes[gone], seen.node_inputs[gone]
    return out


def _node_state(n: dict, gpus: list[GpuState], seen: _Seen, hca_gbps: float) -> NodeState:
    nvlink = any(g.nvlink_gbps > 0 for g in gpus)
    return NodeState(
        hostname=n["hostname"],
        schedulable=n["state"] == NodeStatus.UP and n["role"] == NodeRole.COMPUTE,
        storage=n["role"] == NodeRole.STORAGE,
        gpus=tuple(gpus),
        nvlink_islands=_islands([g.index for g in gpus], seen.topologies.get(n["pk"]), nvlink),
        hca_gbps=hca_gbps,
        up=n["state"] != NodeStatus.DOWN,
        # What jobs may take of the host (the agent's report or the operator's value); 0: not tracked.
        # What running jobs hold of it the engine subtracts from their requests (ClusterState).
        cpu_milli=n["cpu_milli"],
        memory_mib=n["memory_mib"],
    )


def _running_job(job: JobRow, request: JobRequest, shares: tuple[Share, ...], created: tuple[float, ...]) -> RunningJob:
    """A holder as the engine sees it, kept while its row and allocations are unchanged: the service of its current
    run (GPU-seconds, a second per share held, since each share's creation) grows with the clock, and the engine adds
    it (RunningJob.attained_at); its earlier runs are in Job.attained_gpu_s (scheduler.actions.allocations.
    release_allocations adds each at release)."""
    return RunningJob(
        request=request,
        shares=shares,
        started_at=job.started_at.timestamp() if job.started_at else None,
        last_migrated_at=job.last_migrated_at.timestamp() if job.last_migrated_at else None,
        borrowed=job.borrowed,
        stopping=job.status in (JobStatus.MIGRATING, JobStatus.PREEMPTED),
        serving_since=created,
    )


def _running(seen: _Seen, now_ts: float) -> list[RunningJob]:
    """The jobs holding GPUs, in queue order: the same objects round after round (one not started yet starts now)."""
    running, kept = [], seen.running
    for pk in seen.holders.values:
        job = kept.get(pk)
        if job is None:  # holds nothing (stopped, or its allocations not yet written)
            continue
        running.append(job if job.started_at is not None else replace(job, started_at=now_ts))
    return running


def build_snapshot(cluster_id: int) -> tuple[Snapshot, SnapshotIndex]:
    with _BUILDING.setdefault(cluster_id, threading.Lock()):
        return _build_snapshot(cluster_id)


def _build_snapshot(cluster_id: int) -> tuple[Snapshot, SnapshotIndex]:
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
    seen = _SEEN.get(cluster_id)
    if seen is None or seen.hostname_of != hostname_of:  # hosts added, removed or renamed: start over
        seen = _SEEN[cluster_id] = _Seen(hostname_of=hostname_of)
    # Live load from telemetry's latest state (fabric.ingest); zero where no sample has arrived yet.
    feed = _feed(seen)
    link_util, gpu_util = latest_utilisation(cluster_id, list(hostname_of.values()))
    dirty_nodes = _update_topologies(cluster_id, seen, feed)
    hca_gbps = _hca_gbps(seen, fabric, set(hostname_of.values()))
    lap("nodes_live_load")

    index.seen = seen
    committed_gpus = _take_committed(seen, now_ts)
    lap("placements_kept")
    changed, written = _read_jobs(cluster_id, seen, feed)
    _update_jobs(seen, changed, hostname_of, now_ts)
    index.jobs = dict(seen.rows)
    lap("job_rows")
    touched = _update_shares(seen, changed) | committed_gpus
    lap("allocations")
    dirty_nodes |= _update_gpus(seen, touched, gpu_util, feed)
    _feed_read(seen, feed)
    nodes = _update_nodes(seen, node_rows, dirty_nodes, hca_gbps)
    # Shared, not copied: _update_gpus replaces these two whole, never edits them (the job rows it does edit).
    index.gpu_memory, index.gpu_model = seen.gpu_memory, seen.gpu_model
    lap("gpus_nodes")
    pending = list(seen.pending.values)
    running = _running(seen, now_ts)
    lap("requests")
    pools = _pools(cluster_id, index, list(hostname_of.values()))
    finished = _finished_usage(seen, feed, written, now_ts)
    tenants = _tenants([seen.active[pk] for pk in sorted(seen.active, reverse=True)], finished, now_ts)
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
        config=_config(settings.SCHEDULER_MAX_PLACEMENTS_PER_ROUND),
    )
    lap("errors_mix")
    return snapshot, index


@cache
def _config(max_placements_per_round: int) -> Config:
    """The engine's configuration, one object while the settings stay: a kept cluster index compares it with the last
    round's (ClusterState.advance), at once when it is the same object."""
    return Config(max_placements_per_round=max_placements_per_round)


class _Laps:
    """Milliseconds since the previous lap, under the name of the step that just ended."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into
        self.t = perf_counter()

    def __call__(self, name: str) -> None:
        now = perf_counter()
        self.into[name] = round((now - self.t) * 1000, 3)
        self.t = now
