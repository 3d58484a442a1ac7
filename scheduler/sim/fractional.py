"""Fractional-GPU packing replay (Alibaba 2023 OpenB trace): unallocated GPUs when the cluster saturates.
PURE: no Django, no I/O (the trace is read by `scheduler.sim.traces.alibaba`).

    from scheduler.sim.traces.alibaba import load_openb
    from scheduler.sim.fractional import run_fractional, format_fractional
    pods, nodes = load_openb("../shared/data/traces/alibaba_v2023_openb_pod_list_default.csv")
    result = run_fractional(pods, nodes, ["best-fit", "fgd", "default"])
    print(format_fractional(result))

The measurement is the one of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
with Fragmentation Gradient Descent" (USENIX ATC '23), and of their simulator
(github.com/hkust-adsl/kubernetes-scheduler-simulator): pods arrive one after the other and stay (no
departures); a pod that fits nowhere fails and the next one comes. The trace's own pods come first (in
trace order, or shuffled as the paper does), then pods drawn at random (seeded) from the trace are
appended until the GPUs requested so far reach `inflate_to` x the cluster's GPU capacity (the paper's
"workload inflation", 130 %). After every arrival: arrived = GPUs requested so far / capacity,
unallocated = GPUs not allocated / capacity, and the cluster's fragmentation (below) / capacity. The
figures are read when arrivals first reach 90, 95, 100, ... 130 % of capacity; the curve has a point per
1 % of arrivals.

Fragmentation (the paper's definitions; `node_frag_milli`). For a node n and a task m of the target
workload, F_n(m) = the GPU resources (milli-GPU) of n that m cannot use:
* m cannot run on n (too little CPU, no GPU of a model it accepts, or fewer than its num_gpu GPUs with
  gpu_milli free each) -> all of n's unallocated GPU;
* m runs on n -> the unallocated GPU of the GPUs that have less than m's per-GPU request free;
* m asks for no GPU -> all of n's unallocated GPU.
The target workload M is the trace's pod types (cpu_milli, gpu_milli, num_gpu, gpu_spec) with their
frequencies, the most frequent ones covering 95 % of the pods (the simulator's "typical pods":
popularity threshold 95, CPU-only pods included). F_n(M) = sum_m p_m F_n(m); the cluster's is the sum
over nodes.

Policies (each sees the same arrivals and the same CPU / memory / GPU-model checks from the node list):
* `best-fit`: the simulator's BestFit: the node with the least weighted leftover,
  0.5 (cpu_left - cpu) / 128 cores + 0.5 (gpu_left - gpu) / 8 GPUs; inside it a sharing pod takes the
  GPU with the least room that fits, whole GPUs are the lowest-numbered free ones.
* `fgd`: Fragmentation Gradient Descent: the node, and for a sharing pod the GPU, whose F_n(M) grows
  least (or shrinks most) by the placement; whole and multi-GPU pods take free GPUs packed as the
  simulator's `NodeResource.Sub` does. The simulator turns the change into an integer score
  (sigmoid x 100) and lets the Kubernetes framework break ties at random; here the exact change is
  compared (integers) and ties go to the first node of the node list, then the lowest GPU index.
* `default`: ours, the production engine. Every pod becomes a `JobRequest` of one MPS pool holding all
  nodes and is placed by `scheduler.core.placement.Placer` (context / find / commit) on a
  `ClusterState` built once, exactly the engine's search and scoring. The mapping (see ENGINE_MAPPING):
  a share of gpu_milli becomes MPS gpu_milli/10 % compute (rounded up) and the same fraction of the
  GPU's memory; a whole GPU becomes a 100 % share with all its memory, so nothing else fits beside it:
  exclusive in effect (the engine ties the sharing mode to the pool and a node is in one pool, so
  "exclusive" and "mps" GPUs cannot be mixed on a node); several whole GPUs are an MPS job of num_gpu
  GPUs on one node. A pod's CPU and memory are the job's host request (`JobRequest.host_cpu_milli`,
  `host_memory_mib`) on nodes that track them (`NodeState.cpu_milli`, `memory_mib`, from the node list),
  so the engine itself refuses a node without them. A node of a GPU model the pod does not accept (a
  list of several models, which a job cannot name) is masked for the pod by holding its GPUs
  (`ClusterState.hold`) and searched again; masks are lifted as soon as a later pod fits there. CPU-only
  pods (no GPU: the engine does not place those) go to the node with the fewest unallocated GPUs that
  has the CPU and memory (then the least CPU left), so they strand as few GPUs as possible; their CPU and
  memory are taken from the engine's node too (`ClusterState.hold_host`).
  The engine's fragmentation term (`scheduler.core.fragmentation`) sees the request mix a production
  snapshot would carry: the GPU pods arrived so far (the one being placed included, each class with its
  CPU), handed to the placer at every arrival as every round reads its snapshot's; never a pod still to
  come.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from math import ceil
from typing import Any

from fabric.topology.types import Fabric
from scheduler.core.placement import Placer
from scheduler.core.state import ClusterState
from scheduler.core.topology import build_topology
from scheduler.core.types import GpuState, JobRequest, NodeState, PoolState, RequestClass, Share, Snapshot
from scheduler.sim.traces.alibaba import AlibabaNode, AlibabaPod

MILLI = 1000
POLICIES = ("best-fit", "fgd", "default")
DEFAULT_CHECKPOINTS = (80, 90, 95, 100, 105, 110, 120, 130)
DEFAULT_INFLATE_TO = 1.3  # the paper's workload inflation: arrivals up to 130 % of GPU capacity
DEFAULT_SEED = 42  # the first of the artifact's seeds (42..51)
TYPICAL_THRESHOLD = 0.95  # typical pods cover this share of the pods (simulator default)
MAX_SPEC_CPU = 128_000  # best-fit normalisation (simulator's MaxSpecCpu, milli-CPU)
MAX_SPEC_GPU = 8_000  # ... MaxSpecGpu, milli-GPU

# GPU memory per model (MiB) for the engine's MPS memory shares. The node list does not give it; shares
# take the same fraction of memory as of compute, so the value never decides a placement. G2 / G3 are
# anonymised models in the trace.
GPU_MEMORY_MIB = {
    "P100": 16384,
    "T4": 16384,
    "V100M16": 16384,
    "V100M32": 32768,
    "A10": 24576,
    "A100": 81920,
}
DEFAULT_GPU_MEMORY_MIB = 16384

ENGINE_MAPPING = (
    "one MPS pool of all nodes; gpu_milli -> MPS ceil(gpu_milli/10) % compute and that fraction of GPU "
    "memory; a whole GPU -> a 100 % share with all its memory (exclusive in effect); num_gpu > 1 -> an MPS "
    "job of num_gpu GPUs on one node; cpu_milli / memory_mib -> the job's host request on nodes that track "
    "the node list's CPU and memory; a list of several gpu_spec models checked by masking nodes; request mix "
    "of the fragmentation term = the GPU pods arrived so far (with their CPU); CPU-only pods (not engine "
    "jobs) -> the node with the fewest free GPUs that has the CPU and memory"
)

Progress = Callable[[str, int, int], None]  # (policy, arrivals done, arrivals in all)


# --------------------------------------------------------------------------------------- workload


@dataclass(frozen=True, slots=True)
class TypicalPod:
    """One pod type of the target workload and how many pods of the trace have it."""

    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    models: tuple[str, ...]  # accepted GPU models; () = any
    count: int


def typical_pods(pods: Iterable[AlibabaPod], threshold: float = TYPICAL_THRESHOLD) -> list[TypicalPod]:
    """The most frequent pod types, until they cover `threshold` of the pods (the simulator's
    `GetTypicalPods` with step 1: the type that crosses the threshold is included). Order: most
    frequent first, ties by the larger request (cpu, gpu_milli, num_gpu, models)."""
    counts: dict[tuple, int] = {}
    for p in pods:
        k = (p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec)
        counts[k] = counts.get(k, 0) + 1
    total = sum(counts.values())
    if not total:
        return []
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], *kv[0]), reverse=True)
    out: list[TypicalPod] = []
    cum = 0
    for (cpu, milli, num, spec), c in ranked:
        if cum >= threshold * total:
            break
        out.append(TypicalPod(cpu, milli, num, spec, c))
        cum += c
    return out


def node_frag_milli(model: str, cpu_left: int, gpu_left: Sequence[int], workload: Sequence[TypicalPod]) -> float:
    """F_n(M) in milli-GPU: the expected GPU resources of a node (GPU model, CPU left, milli-GPU left per
    GPU) that a task drawn from the workload could not use."""
    total = sum(c.count for c in workload)
    return _frag_num(model, cpu_left, tuple(gpu_left), workload) / total if total else 0.0


def task_frag_milli(model: str, cpu_left: int, gpu_left: Sequence[int], task: TypicalPod) -> int:
    """F_n(m) in milli-GPU for one task type m (see the module docstring)."""
    return _frag_num(model, cpu_left, tuple(gpu_left), (TypicalPod(*_spec(task), 1),))


def _spec(t: TypicalPod) -> tuple:
    return (t.cpu_milli, t.gpu_milli, t.num_gpu, t.models)


def _frag_num(model: str, cpu_left: int, lefts: tuple[int, ...], workload: Sequence[TypicalPod]) -> int:
    """sum_m count_m F_n(m) (an integer: exact comparisons)."""
    total = sum(lefts)
    if total == 0:
        return 0
    f = 0
    for t in workload:
        milli = t.gpu_milli
        if milli == 0 or (t.models and model not in t.models):
            f += t.count * total
            continue
        fits = 0
        small = 0
        for x in lefts:
            if x >= milli:
                fits += 1
            else:
                small += x
        if fits >= t.num_gpu and cpu_left >= t.cpu_milli:
            f += t.count * small
        else:
            f += t.count * total
    return f


class FragMeter:
    """F_n(M) per node state (model, CPU left, sorted milli-GPU left), memoised."""

    __slots__ = ("denominator", "memo", "workload")

    def __init__(self, workload: Sequence[TypicalPod]) -> None:
        self.workload = tuple(workload)
        self.denominator = max(1, sum(t.count for t in self.workload))  # F = num / denominator
        self.memo: dict[tuple, int] = {}

    def num(self, key: tuple) -> int:
        v = self.memo.get(key)
        if v is None:
            model, cpu, lefts = key
            v = self.memo[key] = _frag_num(model, cpu, lefts, self.workload)
        return v


# --------------------------------------------------------------------------------------- cluster


def _accepts(pod: AlibabaPod, model: str) -> bool:
    return not pod.gpu_spec or model in pod.gpu_spec


class Cluster:
    """What is left on every node (CPU, memory, milli-GPU per GPU), the allocated GPU total and the
    cluster's fragmentation, kept up to date. Nodes with the same (model, CPU left, memory left,
    sorted GPU left) form a group: policies look at groups, not at every node."""

    def __init__(self, nodes: Sequence[AlibabaNode], meter: FragMeter) -> None:
        self.names = [n.name for n in nodes]
        self.model = [n.model for n in nodes]
        self.cpu = [n.cpu_milli for n in nodes]
        self.mem = [n.memory_mib for n in nodes]
        self.gpu: list[list[int]] = [[MILLI] * n.gpus for n in nodes]
        self.capacity_milli = MILLI * sum(n.gpus for n in nodes)
        self.allocated_milli = 0
        self.meter = meter
        self.frag_num = 0
        self.key: list[tuple] = []
        self.groups: dict[tuple, set[int]] = {}
        for i in range(len(nodes)):
            k = self._key(i)
            self.key.append(k)
            self.groups.setdefault(k, set()).add(i)
            self.frag_num += meter.num(_frag_key(k))

    def _key(self, i: int) -> tuple:
        return (self.model[i], self.cpu[i], self.mem[i], tuple(sorted(self.gpu[i], reverse=True)))

    def fits_host(self, i: int, pod: AlibabaPod) -> bool:
        """CPU, memory and GPU model (not GPU room) allow the pod on node i."""
        return self.cpu[i] >= pod.cpu_milli and self.mem[i] >= pod.memory_mib and _accepts(pod, self.model[i])

    def assign(self, i: int, pod: AlibabaPod, shares: Sequence[tuple[int, int]]) -> None:
        """Hold the pod's CPU, memory and GPU shares (gpu index, milli) on node i."""
        old = self.key[i]
        self.cpu[i] -= pod.cpu_milli
        self.mem[i] -= pod.memory_mib
        g = self.gpu[i]
        for idx, milli in shares:
            g[idx] -= milli
            self.allocated_milli += milli
        if self.cpu[i] < 0 or self.mem[i] < 0 or any(x < 0 for x in g):
            raise AssertionError(f"over-allocated node {self.names[i]} with pod {pod.name}")
        new = self._key(i)
        self.key[i] = new
        grp = self.groups[old]
        grp.discard(i)
        if not grp:
            del self.groups[old]
        self.groups.setdefault(new, set()).add(i)
        self.frag_num += self.meter.num(_frag_key(new)) - self.meter.num(_frag_key(old))

    @property
    def frag_milli(self) -> float:
        return self.frag_num / self.meter.denominator


def _frag_key(k: tuple) -> tuple:
    return (k[0], k[1], k[3])


def _group_fits(key: tuple, pod: AlibabaPod) -> bool:
    model, cpu, mem, lefts = key
    if cpu < pod.cpu_milli or mem < pod.memory_mib:
        return False
    n = pod.num_gpu
    if n == 0:
        return True
    if pod.gpu_spec and model not in pod.gpu_spec:
        return False
    return n <= len(lefts) and lefts[n - 1] >= pod.gpu_milli  # sorted descending


def _pack(gpu: Sequence[int], pod: AlibabaPod) -> list[tuple[int, int]]:
    """GPUs for a pod the way the simulator's NodeResource.Sub takes them: least room first (index
    order for equal room), each with at least gpu_milli free."""
    out: list[tuple[int, int]] = []
    for idx in sorted(range(len(gpu)), key=lambda j: gpu[j]):
        if gpu[idx] >= pod.gpu_milli:
            out.append((idx, pod.gpu_milli))
            if len(out) == pod.num_gpu:
                break
    return out


def _lowest_free(gpu: Sequence[int], pod: AlibabaPod) -> list[tuple[int, int]]:
    """The lowest-numbered GPUs with gpu_milli free (the simulator's AllocateExclusiveGpuId for whole GPUs)."""
    out = [(j, pod.gpu_milli) for j, x in enumerate(gpu) if x >= pod.gpu_milli]
    return out[: pod.num_gpu]


# --------------------------------------------------------------------------------------- policies

Choice = tuple[int, list[tuple[int, int]]]  # node index, [(gpu index, milli)]


class BestFitPolicy:
    """The simulator's BestFitScore + Open-Gpu-Share's best-fit GPU selection."""

    name = "best-fit"

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster

    def place(self, pod: AlibabaPod) -> Choice | None:
        c = self.c
        req = pod.total_milli
        best: tuple[int, int] | None = None  # (score, node)
        for key, group in c.groups.items():
            if not _group_fits(key, pod):
                continue
            # 0.5 (cpu_left - cpu)/MAX_SPEC_CPU + 0.5 (gpu_left - gpu)/MAX_SPEC_GPU, scaled to an integer
            score = (key[1] - pod.cpu_milli) * MAX_SPEC_GPU + (sum(key[3]) - req) * MAX_SPEC_CPU
            if best is None or score < best[0]:
                best = (score, min(group))
            elif score == best[0]:
                m = min(group)
                if m < best[1]:
                    best = (score, m)
        if best is None:
            return None
        i = best[1]
        gpu = c.gpu[i]
        if pod.num_gpu == 0:
            return i, []
        if pod.gpu_milli < MILLI and pod.num_gpu == 1:
            cand = -1
            for j, x in enumerate(gpu):
                if x >= pod.gpu_milli and (cand < 0 or x < gpu[cand]):
                    cand = j
            return i, [(cand, pod.gpu_milli)]
        return i, _lowest_free(gpu, pod)


class FgdPolicy:
    """Fragmentation Gradient Descent: the placement that increases F(M) the least."""

    name = "fgd"

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.meter = cluster.meter

    def _delta(self, key: tuple, pod: AlibabaPod) -> tuple[int, tuple[int, ...]]:
        """(increase of F_n(M) numerator, GPU room values that achieve it) for a node in state key."""
        num = self.meter.num
        model, cpu, _, lefts = key
        old = num((model, cpu, lefts))
        cpu2 = cpu - pod.cpu_milli
        if pod.num_gpu == 0:
            return num((model, cpu2, lefts)) - old, ()
        milli = pod.gpu_milli
        if pod.num_gpu == 1 and milli < MILLI:
            best_d: int | None = None
            best_vals: list[int] = []
            seen: set[int] = set()
            for pos, x in enumerate(lefts):
                if x < milli:
                    break  # sorted descending
                if x in seen:
                    continue
                seen.add(x)
                new = list(lefts)
                new[pos] = x - milli
                new.sort(reverse=True)
                d = num((model, cpu2, tuple(new))) - old
                if best_d is None or d < best_d:
                    best_d, best_vals = d, [x]
                elif d == best_d:
                    best_vals.append(x)
            assert best_d is not None
            return best_d, tuple(best_vals)
        # Whole / several GPUs: least room first among those with enough (NodeResource.Sub).
        asc = sorted(lefts)
        taken = 0
        new_asc = []
        for x in asc:
            if taken < pod.num_gpu and x >= milli:
                new_asc.append(x - milli)
                taken += 1
            else:
                new_asc.append(x)
        new_asc.sort(reverse=True)
        return num((model, cpu2, tuple(new_asc))) - old, ()

    def place(self, pod: AlibabaPod) -> Choice | None:
        c = self.c
        best: tuple[int, int, tuple[int, ...]] | None = None  # (delta, node, room values)
        for key, group in c.groups.items():
            if not _group_fits(key, pod):
                continue
            d, vals = self._delta(key, pod)
            if best is None or d < best[0]:
                best = (d, min(group), vals)
            elif d == best[0]:
                m = min(group)
                if m < best[1]:
                    best = (d, m, vals)
        if best is None:
            return None
        _, i, vals = best
        gpu = c.gpu[i]
        if pod.num_gpu == 0:
            return i, []
        if pod.num_gpu == 1 and pod.gpu_milli < MILLI:
            j = next(j for j, x in enumerate(gpu) if x in vals)  # lowest index among the best choices
            return i, [(j, pod.gpu_milli)]
        return i, _pack(gpu, pod)


class EnginePolicy:
    """Ours: the production placement code (`scheduler.core.placement.Placer`) on an MPS pool."""

    name = "default"

    def __init__(self, cluster: Cluster, nodes: Sequence[AlibabaNode]) -> None:
        self.c = cluster
        node_states: list[NodeState] = []
        self.gpu_at: dict[int, tuple[int, int]] = {}
        self.node_gpu_ids: list[list[int]] = []
        gid = 0
        for i, n in enumerate(nodes):
            mem = GPU_MEMORY_MIB.get(n.model, DEFAULT_GPU_MEMORY_MIB)
            gpus = []
            ids = []
            for j in range(n.gpus):
                gid += 1
                gpus.append(GpuState(id=gid, index=j, model=n.model, memory_mib=mem))
                self.gpu_at[gid] = (i, j)
                ids.append(gid)
            self.node_gpu_ids.append(ids)
            node_states.append(
                NodeState(hostname=n.name, gpus=tuple(gpus), cpu_milli=n.cpu_milli, memory_mib=n.memory_mib)
            )
        self.node_of = {n.name: i for i, n in enumerate(nodes)}
        pool = PoolState(id=1, name="openb", sharing="mps", hostnames=frozenset(n.name for n in nodes if n.gpus))
        fabric = Fabric()
        snap = Snapshot(now=0.0, fabric=fabric, nodes=node_states, pools=[pool], topology=build_topology(fabric))
        self.state = ClusterState(snap, snap.topology)
        self.placer = Placer(self.state)
        self.mem_of = [GPU_MEMORY_MIB.get(n.model, DEFAULT_GPU_MEMORY_MIB) for n in nodes]
        self.low_mem: dict[str | None, int] = {}
        self.masked: set[int] = set()
        self.ctx_cache: dict[tuple, Any] = {}
        self.next_id = 0
        self.masks = 0  # nodes masked for a GPU model list, in all
        # The request mix the engine's fragmentation term sees: every GPU pod arrived so far (the one
        # being placed included: it is pending in its own round), as a production snapshot's histogram of
        # recent submissions would hold it; nothing about pods still to come.
        self.mix: dict[tuple, int] = {}

    # -- masking nodes the engine cannot judge (a list of GPU models)

    def _mask(self, i: int) -> None:
        st = self.state
        for gid in self.node_gpu_ids[i]:
            st.hold(st.gpus[gid], Share(gid, "whole", 100, 0))
        self.masked.add(i)
        self.masks += 1

    def _unmask(self, i: int) -> None:
        st = self.state
        for gid in self.node_gpu_ids[i]:
            st.release(st.gpus[gid], Share(gid, "whole", 100, 0))
        self.masked.discard(i)

    def job_for(self, pod: AlibabaPod) -> JobRequest:
        pct = min(100, ceil(pod.gpu_milli / 10))
        models = pod.gpu_spec
        self.next_id += 1
        return JobRequest(
            id=self.next_id,
            tenant="openb",
            pool=1,
            gpus=pod.num_gpu,
            sharing="mps",
            mps_compute_pct=pct,
            mps_memory_mib=0,  # set per partition below (the fraction of the GPU's memory)
            gpu_model=models[0] if len(models) == 1 else None,
            workload="training" if pod.num_gpu > 1 else "inference",
            name=pod.name,
            host_cpu_milli=pod.cpu_milli,
            host_memory_mib=pod.memory_mib,
        )

    def place(self, pod: AlibabaPod) -> Choice | None:
        c = self.c
        if pod.num_gpu == 0:
            return self._place_cpu_only(pod)
        for i in [i for i in self.masked if c.fits_host(i, pod)]:
            self._unmask(i)
        job = self.job_for(pod)
        pct = job.mps_compute_pct or 100
        # The memory share: the same fraction of the GPU's memory as of compute (whole GPU: all of it).
        # Partitions differ in memory, so the job asks for the smallest GPU's fraction; each share then
        # fits the GPU it lands on.
        mem = self._mps_memory(pct, job.gpu_model)
        job = replace(job, mps_memory_mib=mem)
        key = (job.gpus, pct, mem, job.gpu_model, pod.cpu_milli, pod.memory_mib)
        self._arrive(key)
        ctx = self.ctx_cache.get(key)
        if ctx is None:
            ctx, _err = self.placer.context(job)
            self.ctx_cache[key] = ctx
        if ctx is None:
            return None
        while True:
            cand = self.placer.find(ctx)
            if cand is None:
                return None
            assert cand.shares is not None
            i = self.node_of[cand.shares[0][0].node.name]
            if c.fits_host(i, pod):
                break
            self._mask(i)
        placement = self.placer.commit(job, ctx, cand)
        out = []
        for sh in placement.shares:
            node_i, j = self.gpu_at[sh.gpu_id]
            assert node_i == i
            out.append((j, sh.compute_pct * 10))
        return i, out

    def _arrive(self, key: tuple) -> None:
        """Count the pod's request class and hand the mix to the placer (as a round reads its snapshot's)."""
        self.mix[key] = self.mix.get(key, 0) + 1
        self.placer.use_request_mix(
            RequestClass(
                pool=1,
                sharing="mps",
                gpus=g,
                mps_compute_pct=p,
                mps_memory_mib=m,
                gpu_model=mo,
                weight=w,
                host_cpu_milli=cpu,
                host_memory_mib=hm,
            )
            for (g, p, m, mo, cpu, hm), w in self.mix.items()
        )

    def _mps_memory(self, pct: int, model: str | None) -> int:
        low = self.low_mem.get(model)
        if low is None:
            mems = [m for m, mo in zip(self.mem_of, self.c.model, strict=True) if model is None or mo == model]
            low = self.low_mem[model] = min(mems) if mems else DEFAULT_GPU_MEMORY_MIB
        return max(1, low * pct // 100)

    def _place_cpu_only(self, pod: AlibabaPod) -> Choice | None:
        c = self.c
        best: tuple[int, int, int] | None = None  # (free milli-GPU, CPU left after, node)
        for key, group in c.groups.items():
            if not _group_fits(key, pod):
                continue
            cand = (sum(key[3]), key[1] - pod.cpu_milli, min(group))
            if best is None or cand < best:
                best = cand
        if best is None:
            return None
        self.state.hold_host(self.c.names[best[2]], pod.cpu_milli, pod.memory_mib)
        return best[2], []


def make_policy(name: str, cluster: Cluster, nodes: Sequence[AlibabaNode]):
    if name == "best-fit":
        return BestFitPolicy(cluster)
    if name == "fgd":
        return FgdPolicy(cluster)
    if name == "default":
        return EnginePolicy(cluster, nodes)
    raise ValueError(f"unknown policy {name!r} for the fractional trace; choose from {', '.join(POLICIES)}")


# --------------------------------------------------------------------------------------- replay


def arrivals(
    pods: Sequence[AlibabaPod],
    capacity_milli: int,
    inflate_to: float = DEFAULT_INFLATE_TO,
    seed: int = DEFAULT_SEED,
    order: str = "trace",
) -> list[AlibabaPod]:
    """The arrival sequence: the trace's pods (in trace order, or shuffled), then pods drawn uniformly
    at random from the trace until the GPUs requested reach inflate_to x capacity (the pod that crosses
    it included); a trace that already asks for more is cut where it crosses."""
    if order not in ("trace", "shuffled"):
        raise ValueError(f"order must be 'trace' or 'shuffled', not {order!r}")
    rng = random.Random(seed)
    seq = list(pods)
    if order == "shuffled":
        rng.shuffle(seq)
    target = inflate_to * capacity_milli
    out: list[AlibabaPod] = []
    arrived = 0
    for p in seq:
        if arrived >= target:
            return out
        out.append(p)
        arrived += p.total_milli
    if not any(p.total_milli for p in pods):
        return out
    while arrived < target:
        p = pods[rng.randrange(len(pods))]
        out.append(p)
        arrived += p.total_milli
    return out


def run_fractional(
    pods: Sequence[AlibabaPod],
    nodes: Sequence[AlibabaNode],
    policies: Iterable[str] | str = POLICIES,
    progress: Progress | None = None,
    *,
    inflate_to: float = DEFAULT_INFLATE_TO,
    seed: int = DEFAULT_SEED,
    order: str = "trace",
    checkpoints: Sequence[float] = DEFAULT_CHECKPOINTS,
    typical_threshold: float = TYPICAL_THRESHOLD,
) -> dict[str, Any]:
    """Replay the pods on the nodes under each policy; unallocated GPUs and fragmentation as arrivals
    grow (see the module docstring). `progress(policy, done, total)` is called every 256 arrivals and
    at the end of each policy. Returns a JSON-serialisable dict."""
    names = [p.strip() for p in policies.split(",")] if isinstance(policies, str) else [p.strip() for p in policies]
    names = [n for n in names if n]
    for n in names:
        if n not in POLICIES:
            raise ValueError(f"unknown policy {n!r} for the fractional trace; choose from {', '.join(POLICIES)}")
    if not pods:
        raise ValueError("no pods to replay")
    if not nodes or not any(n.gpus for n in nodes):
        raise ValueError("no GPU nodes to replay on")
    capacity_milli = MILLI * sum(n.gpus for n in nodes)
    cps = sorted({float(x) for x in checkpoints if 0 < x <= inflate_to * 100 + 1e-9})
    seq = arrivals(pods, capacity_milli, inflate_to, seed, order)
    workload = typical_pods(pods, typical_threshold)
    result: dict[str, Any] = {
        "kind": "fractional",
        "metric": "unallocated GPUs (% of capacity) when arrivals reach X % of capacity; no departures",
        "cluster": _cluster_info(nodes),
        "workload": {
            "pods": len(pods),
            "gpu_pods": sum(1 for p in pods if p.num_gpu),
            "sharing_pods": sum(1 for p in pods if p.sharing),
            "cpu_only_pods": sum(1 for p in pods if not p.num_gpu),
            "requested_gpus": round(sum(p.total_milli for p in pods) / MILLI, 3),
            "requested_pct_of_capacity": round(100 * sum(p.total_milli for p in pods) / capacity_milli, 2),
            "arrivals": len(seq),
            "arrived_gpus": round(sum(p.total_milli for p in seq) / MILLI, 3),
            "inflate_to": inflate_to,
            "seed": seed,
            "order": order,
            "typical_pod_types": len(workload),
            "typical_threshold": typical_threshold,
        },
        "checkpoints": cps,
        "policies": {},
    }
    for name in names:
        result["policies"][name] = _replay(name, seq, nodes, workload, cps, progress)
    result["summary"] = _summary(result)
    return result


def _cluster_info(nodes: Sequence[AlibabaNode]) -> dict[str, Any]:
    models: dict[str, int] = {}
    for n in nodes:
        if n.gpus:
            models[n.model] = models.get(n.model, 0) + n.gpus
    return {
        "nodes": len(nodes),
        "gpus": sum(n.gpus for n in nodes),
        "cpu_cores": sum(n.cpu_milli for n in nodes) / 1000,
        "memory_gib": round(sum(n.memory_mib for n in nodes) / 1024, 1),
        "gpus_by_model": dict(sorted(models.items(), key=lambda kv: -kv[1])),
    }


def _replay(
    name: str,
    seq: Sequence[AlibabaPod],
    nodes: Sequence[AlibabaNode],
    workload: Sequence[TypicalPod],
    cps: Sequence[float],
    progress: Progress | None,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    cluster = Cluster(nodes, FragMeter(workload))
    policy = make_policy(name, cluster, nodes)
    cap = cluster.capacity_milli
    total = len(seq)
    arrived = 0
    placed = failed = failed_gpu = failed_sharing = 0
    failed_milli = 0
    first_fail: float | None = None
    curve_a: list[float] = []
    curve_u: list[float] = []
    curve_f: list[float] = []
    next_pct = 1
    at: dict[str, dict[str, float]] = {}
    cp_i = 0

    def point() -> tuple[float, float, float]:
        return (
            100.0 * arrived / cap,
            100.0 * (cap - cluster.allocated_milli) / cap,
            100.0 * cluster.frag_milli / cap,
        )

    for k, pod in enumerate(seq, 1):
        arrived += pod.total_milli
        choice = policy.place(pod)
        if choice is None:
            failed += 1
            if pod.num_gpu:
                failed_gpu += 1
                failed_milli += pod.total_milli
                failed_sharing += pod.sharing
                if first_fail is None:
                    first_fail = 100.0 * arrived / cap
        else:
            i, shares = choice
            cluster.assign(i, pod, shares)
            placed += 1
        a_pct = 100.0 * arrived / cap
        if a_pct >= next_pct:
            a, u, f = point()
            curve_a.append(round(a, 3))
            curve_u.append(round(u, 3))
            curve_f.append(round(f, 3))
            next_pct = int(a_pct) + 1
        while cp_i < len(cps) and a_pct >= cps[cp_i] - 1e-9:
            a, u, f = point()
            at[checkpoint_label(cps[cp_i])] = {
                "arrived_pct": round(a, 3),
                "unallocated_pct": round(u, 3),
                "unallocated_gpus": round((cap - cluster.allocated_milli) / MILLI, 3),
                "fragmentation_pct": round(f, 3),
                "fragmentation_gpus": round(cluster.frag_milli / MILLI, 3),
            }
            cp_i += 1
        if progress is not None and (k % 256 == 0 or k == total):
            progress(name, k, total)
    a, u, f = point()
    out: dict[str, Any] = {
        "placed": placed,
        "failed": failed,
        "failed_gpu_pods": failed_gpu,
        "failed_sharing_pods": failed_sharing,
        "failed_gpus": round(failed_milli / MILLI, 3),
        "first_failure_arrived_pct": None if first_fail is None else round(first_fail, 3),
        "at": at,
        "final": {
            "arrived_pct": round(a, 3),
            "allocated_gpus": round(cluster.allocated_milli / MILLI, 3),
            "unallocated_pct": round(u, 3),
            "unallocated_gpus": round((cap - cluster.allocated_milli) / MILLI, 3),
            "fragmentation_pct": round(f, 3),
        },
        "curve": {"arrived_pct": curve_a, "unallocated_pct": curve_u, "fragmentation_pct": curve_f},
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    if isinstance(policy, EnginePolicy):
        out["mapping"] = ENGINE_MAPPING
        out["masked_nodes"] = policy.masks
    return out


def checkpoint_label(x: float) -> str:
    """A checkpoint as the result's `at` keys it: 100.0 -> "100", 97.5 -> "97.5"."""
    return str(int(x)) if float(x).is_integer() else str(x)


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """Per policy the unallocated share at each checkpoint, and how much lower than best-fit's it is."""
    pols = result["policies"]
    base = pols.get("best-fit")
    out: dict[str, Any] = {}
    for name, r in pols.items():
        row: dict[str, Any] = {"unallocated_pct": {k: v["unallocated_pct"] for k, v in r["at"].items()}}
        if base is not None and name != "best-fit":
            red = {}
            for k, v in r["at"].items():
                b = base["at"].get(k, {}).get("unallocated_pct")
                if b:
                    red[k] = round(100.0 * (b - v["unallocated_pct"]) / b, 1)
            row["fewer_unallocated_than_best_fit_pct"] = red
        out[name] = row
    return out


def format_fractional(result: dict[str, Any]) -> str:
    """A plain-text table of a `run_fractional` result."""
    w = result["workload"]
    cl = result["cluster"]
    cps = [checkpoint_label(x) for x in result["checkpoints"]]
    lines = [
        f"Alibaba OpenB fractional replay: {w['pods']} pods ({w['sharing_pods']} sharing, "
        f"{w['cpu_only_pods']} CPU-only) asking {w['requested_gpus']:.1f} GPUs = "
        f"{w['requested_pct_of_capacity']:.1f} % of {cl['gpus']} GPUs on {cl['nodes']} nodes; "
        f"{w['arrivals']} arrivals up to {100 * w['inflate_to']:.0f} % (order {w['order']}, seed {w['seed']})",
        "unallocated GPUs, % of capacity, when arrivals reach X % of capacity (no departures):",
    ]
    head = f"{'policy':<10}" + "".join(f"{'@' + c:>8}" for c in cps) + f"{'1st fail':>10}{'frag@100':>10}{'wall s':>8}"
    lines.append(head)
    for name, r in result["policies"].items():
        row = f"{name:<10}"
        for c in cps:
            v = r["at"].get(c)
            row += f"{v['unallocated_pct']:>8.2f}" if v else f"{'-':>8}"
        ff = r["first_failure_arrived_pct"]
        row += f"{ff:>9.1f}%" if ff is not None else f"{'none':>10}"
        f100 = r["at"].get("100")
        row += f"{f100['fragmentation_pct']:>9.2f}%" if f100 else f"{'-':>10}"
        row += f"{r['wall_s']:>8.1f}"
        lines.append(row)
    for name, row in result.get("summary", {}).items():
        red = row.get("fewer_unallocated_than_best_fit_pct")
        if red:
            parts = ", ".join(f"@{k}: {v:+.1f} %" for k, v in red.items() if k in ("100", cps[-1]))
            lines.append(f"{name}: fewer unallocated GPUs than best-fit ({parts})")
    return "\n".join(lines)
