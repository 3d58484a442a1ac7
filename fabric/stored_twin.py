"""The twin of a stored cluster: `TwinModel` built from the database and driven by the scheduler's placements.

Real node agents never touch the database: they read NVML and sysfs on their own node. The twin stands in for
the hardware of every node at once, so it runs where the database is: in the embedded demo that is the one
process; elsewhere run `TELEMETRY_COLLECTOR=twin` with node queues off (TELEMETRY_NODE_QUEUES=0) so the polls
reach a central worker. The simulated cluster is held in process memory, one model per cluster:

* fabric: `fabric.graph_from_db.fabric_for_cluster`, every link taken as physically up. The twin is the hardware;
  the database's link states are what the control plane believes, written by the alerts the twin's own samples
  raise, so reading them back would keep a flapped link down for good. The twin's faults take links down.
  HCA ports are named as stored (`HCA.device`, `Port.number`), switch ports by switch GUID and port number.
* GPUs: `fabric.models.GPU` rows (index, UUID, model, memory; board power from TDP_W by model).
* jobs: what the scheduler's provider (`fabric.providers.job_demand`, registered by the scheduler app:
  `scheduler.fabric_feed.twin_jobs`) says holds GPUs: each job's GPUs, its workload, its dataset's storage
  node, its share of each GPU (MPS compute %, MIG slices / 7, 1 / time-slice replicas), and for a job on
  several nodes a ring all-reduce of ALLREDUCE_GBPS_PER_GPU[workload] per GPU of a node, scaled by 0.5-1.5 per
  job (a fixed hash of its id) so jobs differ as real ones do.

The database is read at most once per JOB_REFRESH_S per cluster (so a poll of 130 nodes reads the jobs once):
the fabric's version (a few aggregates), then the jobs, then `advance`. When the fabric changed the model is
rebuilt and inherits clock, faults and counters from the old one (`TwinModel.inherit`); a change of seed or
fault rate starts a fresh model. Seed and fault rate come from the collector's options, else TWIN_SEED and
TWIN_FAULT_RATE (faults per simulated hour); a cluster's model is seeded with (seed, cluster id), so two clusters
do not fail in step. `schedule_fault` adds a fault by hand (the demo's first one, tests).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Max, Sum

from fabric import providers
from fabric.choices import CaKind
from fabric.collectors.samples import NodeSample
from fabric.collectors.twin_model import XID, TwinFault, TwinGpu, TwinJob, TwinModel
from fabric.graph_from_db import fabric_for_cluster
from fabric.models import GPU, HCA, Cluster, ImportRecord, Link, Node, Port, Switch

JOB_REFRESH_S = 1.0
# Gb/s each GPU of a multi-node job adds to its node's all-reduce ring traffic, by workload.
ALLREDUCE_GBPS_PER_GPU: dict[str, float] = {"training": 100.0, "data-intensive": 50.0, "inference": 5.0}
MIG_SLICES = 7  # compute slices of a MIG-capable GPU (A100, H100, H200)
TDP_W: dict[str, float] = {"V100": 300.0, "A100": 400.0, "A800": 400.0, "H100": 700.0, "H200": 700.0, "B200": 1000.0}
DEFAULT_TDP_W = 700.0
HOST_CACHE_S = 30.0  # how long a hostname -> cluster answer is reused


class TwinError(LookupError):
    """The twin cannot say which cluster a node or switch belongs to."""


@dataclass
class _Twin:
    model: TwinModel
    version: tuple
    seed: int
    fault_rate: float
    checked_at: float = float("-inf")
    jobs: int = 0
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


_TWINS: dict[int, _Twin] = {}
_TWINS_LOCK = threading.Lock()
_HOSTS: dict[str, tuple[float, int | None, str]] = {}  # hostname -> (when, cluster id, error)


def forget_twins() -> None:
    """Drop every model held in memory (tests; a fresh demo)."""
    with _TWINS_LOCK:
        _TWINS.clear()
        _HOSTS.clear()


def twin_fabric_version(cluster_id: int) -> tuple:
    """Changes when what the twin is built from changes: imports, links and their capacity, switches, nodes,
    HCAs, GPUs. Not link or GPU states (those are the control plane's view of the twin, see the module doc)."""
    links = Link.objects.filter(cluster_id=cluster_id).aggregate(n=Count("pk"), m=Max("pk"), cap=Sum("capacity_gbps"))
    nodes = Node.objects.filter(cluster_id=cluster_id).aggregate(n=Count("pk"), m=Max("pk"))
    gpus = GPU.objects.filter(node__cluster_id=cluster_id).aggregate(n=Count("pk"), m=Max("pk"))
    switches = Switch.objects.filter(cluster_id=cluster_id).aggregate(n=Count("pk"), m=Max("pk"))
    hcas = HCA.objects.filter(cluster_id=cluster_id).aggregate(n=Count("pk"), m=Max("pk"))
    last_import = ImportRecord.objects.filter(cluster_id=cluster_id).aggregate(m=Max("pk"))["m"]
    created = Cluster.objects.filter(pk=cluster_id).values_list("created", flat=True).first()
    return (
        created, last_import, links["n"], links["m"], links["cap"], nodes["n"], nodes["m"], gpus["n"], gpus["m"],
        switches["n"], switches["m"], hcas["n"], hcas["m"],
    )  # fmt: skip


def build_twin(cluster_id: int, *, seed: int = 0, fault_rate: float = 6.0) -> TwinModel:
    """A fresh model of the stored cluster (no jobs yet: `advance` gives them)."""
    fabric = fabric_for_cluster(cluster_id)
    fabric.links = [link if link.up else dataclasses.replace(link, up=True) for link in fabric.links]
    gpus = [
        TwinGpu(host, index, uuid, model, float(memory or 81559), TDP_W.get(model, DEFAULT_TDP_W))
        for host, index, uuid, model, memory in GPU.objects.filter(node__cluster_id=cluster_id).values_list(
            "node__hostname", "index", "uuid", "model", "memory_mib"
        )
    ]
    devices = {
        str(link_id): device
        for link_id, device in Port.objects.filter(
            cluster_id=cluster_id, link__isnull=False, hca__kind=CaKind.HOST, hca__node__isnull=False
        ).values_list("link_id", "hca__device")
        if device
    }
    return TwinModel(fabric, gpus, seed=seed, fault_rate=fault_rate, host_devices=devices)


def running_jobs(cluster_id: int) -> list[TwinJob]:
    """The jobs holding GPUs of the cluster now, from the provider the scheduler registers
    (`fabric.providers`; `scheduler.fabric_feed.twin_jobs`): the fabric does not read jobs itself."""
    return providers.job_demand(cluster_id)


def _options(seed: int | None, fault_rate: float | None) -> tuple[int, float]:
    return (
        int(seed if seed is not None else getattr(settings, "TWIN_SEED", 0)),
        float(fault_rate if fault_rate is not None else getattr(settings, "TWIN_FAULT_RATE", 6.0)),
    )


def _twin(cluster_id: int, seed: int, fault_rate: float) -> _Twin:
    with _TWINS_LOCK:
        twin = _TWINS.get(cluster_id)
        if twin is None or (twin.seed, twin.fault_rate) != (seed, fault_rate):
            version = twin_fabric_version(cluster_id)
            model = build_twin(cluster_id, seed=cluster_seed(seed, cluster_id), fault_rate=fault_rate)
            twin = _TWINS[cluster_id] = _Twin(model, version, seed, fault_rate)
        return twin


def cluster_seed(seed: int, cluster_id: int) -> int:
    """The seed of one cluster's model: fixed by (seed, cluster id)."""
    return zlib.crc32(f"{seed}/{cluster_id}".encode())


def _refresh(twin: _Twin, cluster_id: int, now: float, refresh_s: float) -> None:
    """With twin.lock held: at most once per `refresh_s`, follow fabric changes and run the current jobs."""
    if now - twin.checked_at < refresh_s:
        return
    version = twin_fabric_version(cluster_id)
    if version != twin.version:
        model = build_twin(cluster_id, seed=cluster_seed(twin.seed, cluster_id), fault_rate=twin.fault_rate)
        model.inherit(twin.model)
        twin.model, twin.version = model, version
    jobs = running_jobs(cluster_id)
    twin.model.advance(now, jobs)
    twin.checked_at, twin.jobs = now, len(jobs)


def twin_for_cluster(
    cluster_id: int,
    *,
    seed: int | None = None,
    fault_rate: float | None = None,
    now: float | None = None,
    refresh_s: float = JOB_REFRESH_S,
) -> TwinModel:
    """The cluster's model, advanced to `now` (default: the clock) with the jobs running now."""
    twin = _twin(cluster_id, *_options(seed, fault_rate))
    with twin.lock:
        _refresh(twin, cluster_id, time.time() if now is None else now, refresh_s)
        return twin.model


def sample_node(
    node: str, *, cluster: int | str | None = None, seed: int | None = None, fault_rate: float | None = None,
    refresh_s: float = JOB_REFRESH_S,
) -> NodeSample:  # fmt: skip
    """What an agent on `node` would read now. `cluster` (id or name) where the hostname is in several."""
    cluster_id = resolve_cluster(cluster=cluster, node=node)
    twin = _twin(cluster_id, *_options(seed, fault_rate))
    with twin.lock:
        now = time.time()
        _refresh(twin, cluster_id, now, refresh_s)
        return twin.model.sample(node, now)


def sample_switches(
    node: str, guids: list[str], *, cluster: int | str | None = None, seed: int | None = None,
    fault_rate: float | None = None, refresh_s: float = JOB_REFRESH_S,
) -> NodeSample:  # fmt: skip
    """What a fabric agent on `node` would read now from the ports of switches `guids` ("0x..." or bare)."""
    cluster_id = resolve_cluster(cluster=cluster, node=node, guids=guids)
    twin = _twin(cluster_id, *_options(seed, fault_rate))
    with twin.lock:
        now = time.time()
        _refresh(twin, cluster_id, now, refresh_s)
        return twin.model.switch_sample(node, guids, now)


def schedule_fault(
    cluster_id: int, kind: str, *, in_s: float = 30.0, duration: float = 30.0, **target: object
) -> TwinFault:
    """Add a fault to the cluster's twin `in_s` seconds from now (TwinModel.schedule_fault's kinds and targets).
    Without a target: the first host link, or first GPU, of a node running a job (of any node when none runs)."""
    twin = _twin(cluster_id, *_options(None, None))
    with twin.lock:
        now = time.time()
        _refresh(twin, cluster_id, now, JOB_REFRESH_S)
        model = twin.model
        if not target:
            jobs = running_jobs(cluster_id)
            if kind == XID:
                gpus = [gpu for job in jobs for gpu in job.gpus] or [(gpu.node, gpu.index) for gpu in model.gpus]
                if not gpus:
                    raise TwinError("the twin has no GPU to fail")
                target = {"node": gpus[0][0], "gpu_index": gpus[0][1]}
            else:
                g = model.graph
                hosts = [h for h in [n for job in jobs for n in job.nodes] + g.host_keys if h in g.host_index]
                link = next((g.host_links[g.host_index[h]][0][1] for h in hosts if g.host_links[g.host_index[h]]), None)
                if link is None:
                    raise TwinError("the twin has no host link to fail")
                target = {"link_key": g.links[link].key}
        return model.schedule_fault(kind, now + in_s, duration, **target)  # type: ignore[arg-type]


def _learn_hosts() -> None:
    """hostname -> (now, its cluster id or None, why not) for every stored node, in one query (one a node was a
    query per node and poll once HOST_CACHE_S had passed: a fifth of a poll of 2,000 nodes)."""
    clusters: dict[str, set[int]] = {}
    for host, cluster_id in Node.objects.values_list("hostname", "cluster_id"):
        clusters.setdefault(host, set()).add(cluster_id)
    now = time.monotonic()
    for host in [h for h in _HOSTS if h not in clusters]:
        del _HOSTS[host]  # gone: asked again next time
    for host, ids in clusters.items():
        error = f"node {host!r} is in {len(ids)} clusters; set the twin collector's cluster option"
        _HOSTS[host] = (now, next(iter(ids)), "") if len(ids) == 1 else (now, None, error)


def resolve_cluster(*, cluster: int | str | None = None, node: str = "", guids: Iterable[str] = ()) -> int:
    """The cluster id: `cluster` (an id or a name) when given, else the one cluster that has a node called `node`,
    else the one that has the switches `guids`. Raises TwinError saying why none or several fit."""
    if cluster is not None and cluster != "":
        if isinstance(cluster, int) or str(cluster).isdigit():
            if Cluster.objects.filter(pk=int(cluster)).exists():
                return int(cluster)
        found = Cluster.objects.filter(name=str(cluster)).values_list("pk", flat=True).first()
        if found is None:
            raise TwinError(f"no cluster {cluster!r}")
        return found
    if node:
        cached = _HOSTS.get(node)
        if cached is None or time.monotonic() - cached[0] > HOST_CACHE_S:
            _learn_hosts()  # every hostname at once: a round asks for all of them within seconds
            cached = _HOSTS.setdefault(node, (time.monotonic(), None, ""))  # no such node, for a while
        if cached[1] is not None:
            return cached[1]
        if cached[2]:
            raise TwinError(cached[2])
    bare = sorted({g.strip().lower().removeprefix("0x") for g in guids})
    if bare:
        ids = sorted(set(Switch.objects.filter(guid__in=bare).values_list("cluster_id", flat=True)))
        if len(ids) == 1:
            return ids[0]
        if ids:
            raise TwinError(f"switches {', '.join(bare[:3])} ... are in {len(ids)} clusters; set the cluster option")
    raise TwinError(f"no cluster has a node {node!r}" + (" or these switches" if bare else ""))
