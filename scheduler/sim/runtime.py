"""The communication-aware runtime model of the replay: how fast a job runs where it was placed. PURE.

Every constant of the model is here: the bandwidths and latencies come from the engine's own cost model
(`scheduler.core.types.CostParams`, docs/scheduler.md), the per-model compute and gradient sizes from
`MODEL_PROFILES` below, the checkpoint and restart costs from `RuntimeParams`.

A data-parallel job does, per step, its compute and then a ring all-reduce of its gradients
(DESIGN.md, NCCL's model):

    step      = compute + comm
    compute   = step_compute_s(model, on a V100) * strength(V100) / strength(GPU)
    comm      = 2 (n - 1) / n * S / B  +  2 (n - 1) * alpha[level]         (S = gradient bytes, n ranks)

B is the bus bandwidth of the job's ring (GB/s): what every link of the ring carries while it runs.
It is the smaller of what the job could use alone and its share of the links it shares with others:

* alone: inside a node with k > 1 of its GPUs, NVLink x efficiency when they are one island, else PCIe;
  between nodes, the HCA bandwidth its k GPUs reach (k/G of a rail-optimised node's rails, all of a
  single-HCA node's HCA) x net_efficiency;
* shared (only a ring over two or more nodes): the ring is a flow through every HCA it uses and, when it
  spans leaves, through the uplinks of every leaf it touches (and the pod uplinks one tier up). The
  launcher orders hosts by name, which follows the cabling, so a ring leaves and enters each leaf once:
  one flow on the leaf's uplinks however many of its nodes are there. A ring inside one leaf loads no
  uplink. The rates are the max-min fair share of those resources (progressive filling,
  `max_min_share`): a ring that needs less than an even share (its HCA is slower, it is limited
  elsewhere) keeps what it needs and leaves the rest to the others. Capacities: an HCA its data rate x
  net_efficiency; a leaf's uplinks together the same x spine_factor (core_factor for a pod) once two
  or more rings share them (static ECMP routing spreads several flows unevenly; one flow alone
  collides with nobody).

So a 2-node job of 8-GPU nodes across two leaves of a 2:1 fabric alone gets the full HCA rate (only the
extra switch hop's latency is paid), while a leaf whose 8 nodes all run crossing rings gives each
50 / 8 x 0.96 x 0.9 = 5.4 of its 12 GB/s: a busy 2:1 uplink halves a crossing job's bandwidth. The
jobs' all-reduces on a shared link are taken to overlap in time ("at that moment": uncoordinated jobs'
bursts collide, CASSINI's premise); the telemetry's link utilisation is the time average (busbw x duty).

The job's trace duration is its run time on an *ideal* placement (the engine's definition: one NVLink
island when it fits one, else whole nodes of one leaf, nothing else on the links), so it progresses at

    rate = ideal_step / step      (<= 1; 1 for a one-GPU job or a model with no gradients)

A compute-only job (one GPU, or `compute-only`) never slows down; AlexNet or VGG (hundreds of MB of
gradients per tenth of a second of compute) lose a third of their speed through a busy 2:1 leaf.

Preemption and migration cost `checkpoint_s + restart_s` seconds of no progress (the job holds GPUs
and does no work): checkpoint = base + model state (weights and optimiser, `state_factor` x gradient
bytes) at `checkpoint_gbs`; restart = the engine's `Config.restart_overhead_s`. With the network model
off (Tiresias' assumptions) every rate is 1 and moving is free.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.costmodel import intra_node_gbs, ring_allreduce_s, ring_latency_s
from scheduler.core.topology import LEVEL_FABRIC, LEVEL_ISLAND, LEVEL_LEAF_GROUP, LEVEL_NODE, LEVEL_POD_GROUP
from scheduler.core.types import Config, CostParams

REFERENCE_GPU = "V100"  # step_compute_s in MODEL_PROFILES is on this GPU
MB = 1e6


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """Compute and communication of one model, every number from a published source (docs/policy-lab.md,
    "Model profiles", cites each). `params_m`: millions of fp32 parameters (gradient bytes = 4 x params,
    all-reduced every step). Compute on the reference GPU (a V100), either one number for the trace's
    fixed batch (`step_compute_s`) or measured points (local batch, seconds) interpolated linearly
    (`batch_steps`); past `max_local_batch` a step accumulates gradients over several micro-batches, the
    Pollux artifact's rule (`simulator/applications.py`)."""

    name: str
    params_m: float
    step_compute_s: float | None = None
    batch_steps: tuple[tuple[int, float], ...] = ()
    max_local_batch: int | None = None
    note: str = ""

    @property
    def grad_bytes(self) -> float:
        return self.params_m * 4 * MB

    @property
    def samples_per_s(self) -> float | None:
        """Throughput at the largest measured batch (None for a fixed-batch profile)."""
        if not self.batch_steps:
            return None
        b, t = self.batch_steps[-1]
        return b / t

    def compute_s(self, local_batch: float | None = None) -> float:
        """Seconds of compute of one step at `local_batch` samples per GPU (the profile's own batch if None)."""
        if not self.batch_steps:
            return self.step_compute_s if self.step_compute_s is not None else _DEFAULT_STEP_S
        if local_batch is None:
            return self.batch_steps[-1][1]
        cap = self.max_local_batch or self.batch_steps[-1][0]
        if local_batch > cap:  # gradient accumulation: accum + 1 micro-batches of `atomic` samples
            micro = math.ceil(local_batch / cap - 1e-8)
            return micro * self._interpolate(math.ceil(local_batch / micro - 1e-8))
        return self._interpolate(local_batch)

    def _interpolate(self, b: float) -> float:
        pts = self.batch_steps
        if b <= pts[0][0]:
            return pts[0][1]  # below the smallest measured batch: no faster than it (fixed per-step costs)
        for (b0, t0), (b1, t1) in itertools.pairwise(pts):
            if b <= b1:
                return t0 + (t1 - t0) * (b - b0) / (b1 - b0)
        b1, t1 = pts[-1]
        return t1 * b / b1  # past the last point (only with max_local_batch above it): its per-sample time


_DEFAULT_STEP_S = 0.1

# Tiresias (NSDI '19) models. Parameters: torchvision's model docs (num_params of the ImageNet weights;
# Inception-v4 from timm's inception_v4.tf_in1k card). Compute: the Tiresias trace itself
# (SymbioticLab/Tiresias simulator/60_job.csv): a 1-GPU job's duration / iterations is one step on the
# paper's testbed (P100 GPUs, TensorFlow), converted to a V100 by Gavel's measured V100 / P100 throughput
# ratio of ResNet-50 at batch 32 (scheduler/physical_cluster_throughputs.json: 7.930 / 4.888 steps/s =
# 1.622), one ratio for every CNN (an assumption: the ratio of one model).
_P100_TO_V100 = 7.930372537553422 / 4.888323684976709


def _tiresias(name: str, params: float, p100_step_s: float, what: str) -> ModelProfile:
    return ModelProfile(name, params, p100_step_s / _P100_TO_V100, note=f"{what}; {p100_step_s} s/step on a P100")


_TIRESIAS_CNNS = (
    _tiresias("alexnet", 61.100840, 0.0545, "AlexNet"),
    _tiresias("vgg11", 132.863336, 0.156, "VGG-11"),
    _tiresias("vgg16", 138.357544, 0.236, "VGG-16"),
    _tiresias("vgg19", 143.667240, 0.271, "VGG-19"),
    _tiresias("googlenet", 6.624904, 0.140, "GoogLeNet"),
    _tiresias("inception3", 27.161264, 0.232, "Inception-v3 (with its auxiliary head)"),
    _tiresias("inception4", 42.7, 0.478, "Inception-v4"),
    _tiresias("resnet50", 25.557032, 0.153, "ResNet-50"),
    _tiresias("resnet101", 44.549160, 0.260, "ResNet-101"),
    _tiresias("resnet152", 60.192808, 0.371, "ResNet-152"),
)

# Pollux (OSDI '21) applications: compute = step_time - sync_time of one GPU ("placement 1") at each
# measured local batch, petuum/adaptdl branch osdi21-artifact simulator/traces/<app>/placements.csv,
# taken as V100 seconds as they are (an assumption: the artifact's testbed GPU is slower than a V100, so
# these steps are if anything long and the network's share of a step a lower bound); max_local_batch from
# simulator/applications.py (yolov3 8; the others their largest measured batch). Parameters: counted from
# the artifact's model code (benchmark/models/<app>/) or the models' papers, see docs/policy-lab.md.
_POLLUX_APPS = (
    ModelProfile(
        "cifar10",
        11.173962,
        batch_steps=(
            (32, 0.0423),
            (45, 0.0500),
            (64, 0.0593),
            (91, 0.0754),
            (129, 0.1033),
            (182, 0.1367),
            (257, 0.1866),
            (363, 0.2590),
            (513, 0.3548),
            (725, 0.4956),
            (1024, 0.7015),
        ),
        note="ResNet-18 (CIFAR variant) on CIFAR-10",
    ),
    ModelProfile(
        "imagenet",
        25.557032,
        batch_steps=(
            (20, 0.1462),
            (28, 0.2069),
            (40, 0.2523),
            (57, 0.3227),
            (81, 0.4195),
            (115, 0.5590),
            (163, 0.7612),
            (200, 0.9223),
        ),
        note="ResNet-50 on ImageNet",
    ),
    ModelProfile(
        "bert",
        110.0,
        batch_steps=((4, 0.4416), (6, 0.5557), (8, 0.6896), (11, 0.8416), (12, 0.9078)),
        note="BERT-base (uncased) fine-tuned on SQuAD",
    ),
    ModelProfile(
        "deepspeech2",
        41.187968,
        batch_steps=(
            (10, 0.4649),
            (14, 0.5570),
            (20, 0.6797),
            (28, 0.8494),
            (40, 1.1202),
            (57, 1.6627),
            (80, 2.5391),
        ),
        note="DeepSpeech2 (5 x 800 bidirectional GRU) on CMU-ARCTIC",
    ),
    ModelProfile(
        "yolov3",
        61.9,
        batch_steps=((4, 0.2645), (6, 0.4481), (8, 0.3237), (11, 0.5691), (16, 0.5701)),
        max_local_batch=8,
        note="YOLOv3 (Darknet-53) on PASCAL VOC",
    ),
    ModelProfile(
        "ncf",
        1.602657,
        batch_steps=(
            (32, 0.0070),
            (45, 0.0070),
            (64, 0.0070),
            (91, 0.0073),
            (129, 0.0070),
            (182, 0.0071),
            (257, 0.0071),
            (363, 0.0072),
            (513, 0.0072),
            (725, 0.0074),
            (1025, 0.0083),
            (1450, 0.0084),
            (2051, 0.0087),
            (2901, 0.0091),
            (4103, 0.0096),
            (5803, 0.0102),
            (8207, 0.0110),
            (11606, 0.0133),
            (16413, 0.0146),
            (23211, 0.0172),
            (32768, 0.0210),
        ),
        note="NeuMF (32 factors, 3 MLP layers) on MovieLens-1M",
    ),
)


def _gavel(name: str, params: float, steps_per_s: dict[int, float], what: str) -> ModelProfile:
    pts = tuple((b, 1.0 / v) for b, v in sorted(steps_per_s.items()))
    return ModelProfile(name, params, batch_steps=pts, note=what)


# Gavel (OSDI '20) job types: one V100 running the job alone, steps/s by batch size (per GPU), from
# stanford-futuredata/gavel scheduler/physical_cluster_throughputs.json ("v100", (job type, 1), "null").
# Parameters counted from Gavel's workloads/pytorch/ code with its defaults (docs/policy-lab.md); the
# three job types Gavel never runs distributed (Recommendation, A3C, CycleGAN) exchange no gradients in
# any trace, their sizes only set checkpoint costs and are assumptions.
_GAVEL = (
    _gavel(
        "ResNet-18",
        11.173962,
        {16: 32.353384, 32: 29.947157, 64: 24.093232, 128: 22.371570, 256: 11.949277},
        "CIFAR-10",
    ),
    _gavel("ResNet-50", 25.557032, {16: 12.216915, 32: 7.930373, 64: 4.525762, 128: 2.530113}, "ImageNet"),
    _gavel(
        "Transformer",
        49.0,
        {16: 11.064087, 32: 9.682863, 64: 8.209556, 128: 5.642202, 256: 1.595141},
        "Multi30k; parameters an estimate (vocabularies not counted exactly)",
    ),
    _gavel(
        "LM", 13.987678, {5: 114.110929, 10: 81.651635, 20: 64.742451, 40: 50.048988, 80: 31.689597}, "WikiText-2 LSTM"
    ),
    _gavel(
        "Recommendation",
        20.0,
        {512: 253.629975, 1024: 150.539376, 2048: 88.206993, 4096: 45.849898, 8192: 22.246823},
        "ML-20M autoencoder; parameters an assumption",
    ),
    _gavel("A3C", 1.0, {1: 7.479620}, "Pong; parameters an assumption"),
    _gavel("CycleGAN", 11.4, {1: 4.735589}, "monet2photo; parameters an assumption"),
)
MODEL_PROFILES: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        *_TIRESIAS_CNNS,
        *_POLLUX_APPS,
        *_GAVEL,
        ModelProfile("compute-only", 0.0, 0.1, note="no gradient exchange"),
        # A model the trace does not name: ResNet-50 at batch 32 on a V100 (Gavel, measured, 7.930 steps/s).
        ModelProfile("default", 25.557032, 1.0 / 7.930373, note="unknown model: ResNet-50, batch 32 (Gavel)"),
    )
}


def profile(name: str | None) -> ModelProfile:
    """The profile of a model name (case-insensitive); unknown names get the ResNet-50-like default."""
    if name:
        p = MODEL_PROFILES.get(name) or _LOWER.get(name.strip().lower())
        if p is not None:
            return p
    return MODEL_PROFILES["default"]


_LOWER = {k.lower(): v for k, v in MODEL_PROFILES.items()}


@dataclass(frozen=True, slots=True)
class RuntimeParams:
    cost: CostParams = field(default_factory=CostParams)  # the engine's bandwidth / latency constants
    checkpoint_base_s: float = 10.0  # writing a checkpoint: fixed part
    checkpoint_gbs: float = 1.0  # GB/s to shared storage
    state_factor: float = 3.0  # weights + optimiser moments ~ 3 x gradient bytes
    restart_s: float = Config().restart_overhead_s  # relaunch (the engine's restart_overhead_s)
    reference_gpu: str = REFERENCE_GPU

    def checkpoint_s(self, grad_bytes: float) -> float:
        return self.checkpoint_base_s + self.state_factor * grad_bytes / (self.checkpoint_gbs * 1e9)

    def move_cost_s(self, grad_bytes: float) -> float:
        """Seconds without progress for one preemption or migration (checkpoint, then restart)."""
        return self.checkpoint_s(grad_bytes) + self.restart_s


@dataclass(frozen=True, slots=True)
class Work:
    """What the runtime model needs of a job: its ranks, step compute (reference GPU) and gradient bytes."""

    gpus: int
    step_compute_s: float
    grad_bytes: float


def reference_ideal_step(
    work: Work,
    gpus_per_node: int = 4,
    nvlink_gbps: float = 300.0,
    nic_gbs: float = 12.5,
    params: RuntimeParams | None = None,
) -> float:
    """Ideal step time on the reference cluster (V100 nodes of 4 GPUs in one NVLink island, one EDR HCA):
    the yardstick trace loaders use to turn steps into a duration."""
    P = (params or RuntimeParams()).cost
    return work.step_compute_s + _ideal_comm(
        work.gpus, work.grad_bytes, gpus_per_node, gpus_per_node, nvlink_gbps, nic_gbs, P
    )


def _ideal_comm(n: int, S: float, G: int, island: int, nv: float, nic: float, P: CostParams) -> float:
    """The engine's ideal placement (`Placer._ideal_step`): one island, else one node, else whole nodes of
    one leaf at the nominal HCA rate with nothing else on the links."""
    if n <= 1 or S <= 0:
        return 0.0
    if n <= island:
        return ring_allreduce_s(n, S, intra_node_gbs(n, True, nv, P)) + ring_latency_s(n, LEVEL_ISLAND, P)
    if n <= G:
        return ring_allreduce_s(n, S, intra_node_gbs(n, False, nv, P)) + ring_latency_s(n, LEVEL_NODE, P)
    per = min(G, n)
    net = nic * min(1.0, per / G) * P.net_efficiency
    b = min(net, intra_node_gbs(per, True, nv, P))
    return ring_allreduce_s(n, S, b) + ring_latency_s(n, LEVEL_LEAF_GROUP, P)


def max_min_share(
    capacity: Mapping[Hashable, float], flows: Mapping[int, tuple[float, Sequence[Hashable]]]
) -> dict[int, float]:
    """Max-min fair rates of `flows` (id -> (demand cap, resources it crosses)) over resources of the given
    `capacity` (GB/s), by progressive filling: every unfrozen flow grows at the same pace; a flow stops at
    its own cap (what it cannot use is left to the others) or when one of its resources is full (then
    every flow still growing through that resource stops there). A resource missing from `capacity` is
    unlimited. Deterministic: flows and resources are visited in sorted order."""
    users: dict[Hashable, list[int]] = {}
    for fid in sorted(flows):
        for r in flows[fid][1]:
            if r in capacity:
                users.setdefault(r, []).append(fid)
    resources = sorted(users, key=repr)
    used = dict.fromkeys(resources, 0.0)
    alloc: dict[int, float] = {}
    active = set(flows)
    while active:
        fill: dict[Hashable, float] = {}  # the common level at which each resource would be full
        for r in resources:
            n = sum(1 for f in users[r] if f in active)
            if n:
                fill[r] = max(0.0, capacity[r] - used[r]) / n
        level = min(min(fill.values(), default=math.inf), min(flows[f][0] for f in active))
        top = level * (1 + _REL_EPS)
        frozen = {f for f in active if flows[f][0] <= top}
        for r, t in fill.items():
            if t <= top:
                frozen.update(f for f in users[r] if f in active)
        for f in sorted(frozen):
            a = min(flows[f][0], level)
            alloc[f] = a
            for r in flows[f][1]:
                if r in used:
                    used[r] += a
        active -= frozen
    return alloc


_REL_EPS = 1e-12  # equal up to rounding: flows reaching a resource's fill level together stop together


@dataclass(frozen=True, slots=True)
class _Ring:
    """One job's ring as the network sees it: its GPUs per node, the fabric resources it crosses, its
    bottleneck bus bandwidth once shared (GB/s) and the level its farthest hop reaches."""

    by_node: dict[int, list[int]]
    resources: tuple[tuple[str, int], ...]
    busbw: float
    level: int


class RuntimeModel:
    """Progress rates of the running jobs of one cluster, all at once (they share HCAs and leaf uplinks)."""

    def __init__(self, cluster, params: RuntimeParams | None = None) -> None:
        self.c = cluster
        self.params = params or RuntimeParams()
        P = self.params.cost
        strength = P.gpu_strength
        ref = strength.get(self.params.reference_gpu, P.unknown_strength)
        models = set(cluster.gpu_model)
        gpu = next(iter(models)) if models else self.params.reference_gpu
        self.compute_scale = ref / strength.get(gpu.upper(), P.unknown_strength)  # V100 seconds -> this GPU
        self.G = cluster.max_gpus_per_node
        islands: dict[int, int] = {}
        for isl in cluster.gpu_island:
            islands[isl] = islands.get(isl, 0) + 1
        self.max_island = max(islands.values(), default=1)
        self.nvlink = max(cluster.gpu_nvlink, default=0.0)
        self.nominal_nic = max(cluster.node_nic_gbs, default=0.0)
        self._ideal: dict[tuple[int, float, float], float] = {}
        self._rails = [max(1, len(cluster.host_links.get(ni, ()))) for ni in range(cluster.n_nodes)]
        self._cache_key: tuple | None = None
        self._cache: dict[int, _Ring] = {}

    # ------------------------------------------------------------------ single job

    def compute_s(self, work: Work) -> float:
        return work.step_compute_s * self.compute_scale

    def ideal_step(self, work: Work) -> float:
        key = (work.gpus, work.step_compute_s, work.grad_bytes)
        v = self._ideal.get(key)
        if v is None:
            comm = _ideal_comm(
                work.gpus, work.grad_bytes, self.G, self.max_island, self.nvlink, self.nominal_nic, self.params.cost
            )
            v = self._ideal[key] = max(self.compute_s(work) + comm, 1e-12)
        return v

    def layout(self, positions: Sequence[int]) -> dict[int, list[int]]:
        by_node: dict[int, list[int]] = {}
        node_of = self.c.gpu_node
        for p in positions:
            by_node.setdefault(node_of[p], []).append(p)
        return by_node

    def _capacity(self, flows: Mapping[int, tuple[float, tuple[tuple[str, int], ...]]]) -> dict[tuple[str, int], float]:
        """What each resource the rings cross carries at most, GB/s of ring traffic in one direction (a ring
        loads both directions of every link it crosses alike, so one stands for both): an HCA its data rate
        x net_efficiency; a leaf's (pod's) uplinks together the same, less the ECMP loss (spine_factor,
        core_factor) once two or more rings share them: static routing cannot spread several flows evenly
        over the uplinks, but one flow alone collides with nobody. A leaf without uplinks (the whole
        cluster on one switch) limits nothing."""
        c, P = self.c, self.params.cost
        count: dict[tuple[str, int], int] = {}
        for _cap, res in flows.values():
            for r in res:
                count[r] = count.get(r, 0) + 1
        eff = P.net_efficiency
        cap: dict[tuple[str, int], float] = {}
        for (kind, owner), k in count.items():
            if kind == "hca":
                cap[(kind, owner)] = c.node_nic_gbs[owner] * eff
                continue
            gbs = c.group_uplink_gbs.get(owner, 0.0) if kind == "leaf" else c.pod_uplink_gbs.get(owner, 0.0)
            if gbs > 0:
                loss = (P.spine_factor if kind == "leaf" else P.core_factor) if k >= 2 else 1.0
                cap[(kind, owner)] = gbs * eff * loss
        return cap

    def rail_gbs(self, node: int, k: int) -> float:
        """Nominal HCA bandwidth k of a node's GPUs can drive, GB/s: NCCL runs a ring per rail and a GPU uses
        the HCA of its own PCIe switch, so k GPUs reach k/G of a node's rails, but never less than one rail
        (one HCA for the whole node: every GPU reaches all of it)."""
        c = self.c
        G = max(1, len(c.node_gpus[node]))
        return c.node_nic_gbs[node] * min(1.0, max(k / G, 1.0 / self._rails[node]))

    # ------------------------------------------------------------------ all running jobs

    def _rings(self, jobs: Mapping[int, tuple[Work, Sequence[int]]]) -> dict[int, _Ring]:
        """Every communicating job's ring and its max-min fair share of the HCAs and uplinks it crosses."""
        key = tuple((jid, jobs[jid][0], tuple(jobs[jid][1])) for jid in sorted(jobs))
        if key == self._cache_key:
            return self._cache
        c, P = self.c, self.params.cost
        layouts: dict[int, tuple[dict[int, list[int]], int, float]] = {}
        flows: dict[int, tuple[float, tuple[tuple[str, int], ...]]] = {}
        for jid in sorted(jobs):
            work, pos = jobs[jid]
            if work.gpus <= 1 or work.grad_bytes <= 0 or len(pos) <= 1:
                continue
            by_node = self.layout(pos)
            level = c.level_of(pos)
            cap = math.inf  # what the job could use with nobody else on its links
            for ni in sorted(by_node):
                ps = by_node[ni]
                if len(ps) > 1:
                    one = len({c.gpu_island[p] for p in ps}) == 1
                    cap = min(cap, intra_node_gbs(len(ps), one, c.gpu_nvlink[ps[0]], P))
            layouts[jid] = (by_node, level, cap)
            if len(by_node) < 2:
                continue  # NVLink / PCIe only: nothing shared with other jobs
            res: list[tuple[str, int]] = []
            for ni in sorted(by_node):
                cap = min(cap, self.rail_gbs(ni, len(by_node[ni])) * P.net_efficiency)
                res.append(("hca", ni))
            # The ring visits the nodes leaf by leaf (launchers order hosts by name, which follows the
            # cabling), so it leaves and enters each leaf it touches once: one flow on the leaf's uplinks
            # however many of its nodes are there. A ring inside one leaf never loads an uplink.
            if level >= LEVEL_POD_GROUP:
                res.extend(("leaf", g) for g in sorted({c.node_group[ni] for ni in by_node}))
                if level >= LEVEL_FABRIC:
                    res.extend(("pod", p) for p in sorted({c.node_pod[ni] for ni in by_node}))
            flows[jid] = (cap, tuple(res))
            layouts[jid] = (by_node, level, cap)
        share = max_min_share(self._capacity(flows), flows)
        rings: dict[int, _Ring] = {}
        for jid, (by_node, level, cap) in layouts.items():
            res = flows[jid][1] if jid in flows else ()
            rings[jid] = _Ring(by_node, res, share.get(jid, cap), level)
        self._cache_key, self._cache = key, rings
        return rings

    def rates(self, jobs: Mapping[int, tuple[Work, Sequence[int]]]) -> dict[int, tuple[float, float]]:
        """job id -> (rate, duty) for every job: rate = ideal / actual step, duty = the share of a step spent
        in the all-reduce (what its links carry, for the engine's telemetry)."""
        P = self.params.cost
        rings = self._rings(jobs)
        out: dict[int, tuple[float, float]] = {}
        for jid in jobs:
            work = jobs[jid][0]
            ring = rings.get(jid)
            if ring is None:
                out[jid] = (1.0, 0.0)  # one GPU or no gradients: nothing to exchange
                continue
            n = work.gpus
            lat_level = LEVEL_ISLAND if ring.level == 0 else ring.level
            comm = ring_allreduce_s(n, work.grad_bytes, ring.busbw) + ring_latency_s(n, lat_level, P)
            step = self.compute_s(work) + comm
            out[jid] = (min(1.0, self.ideal_step(work) / step), comm / step if step > 0 else 0.0)
        return out

    def busbw(self, jobs: Mapping[int, tuple[Work, Sequence[int]]]) -> dict[int, float]:
        """job id -> the bus bandwidth its ring gets (GB/s) for every communicating job (tests, reports)."""
        return {jid: r.busbw for jid, r in self._rings(jobs).items()}

    def link_utilisation(
        self, jobs: Mapping[int, tuple[Work, Sequence[int]]], rates: Mapping[int, tuple[float, float]]
    ) -> dict[str, float]:
        """Per fabric link, the utilisation the engine's telemetry would report (a counter averages over
        seconds, many steps): the ring traffic through it (its bus bandwidth x duty cycle) over the
        link's capacity. A ring in one node loads no fabric link."""
        c = self.c
        rings = self._rings(jobs)
        traffic: dict[tuple[str, int], float] = {}
        for jid in sorted(rings):
            ring = rings[jid]
            duty = rates.get(jid, (1.0, 0.0))[1]
            if duty <= 0 or not ring.resources:
                continue
            for r in ring.resources:
                traffic[r] = traffic.get(r, 0.0) + ring.busbw * duty
        util: dict[str, float] = {}
        for (kind, owner), load in sorted(traffic.items()):
            if kind == "hca":
                cap, keys = c.node_nic_gbs[owner], c.host_links.get(owner, ())
            elif kind == "leaf":
                cap, keys = c.group_uplink_gbs.get(owner, 0.0), c.group_links.get(owner, ())
            else:
                cap, keys = c.pod_uplink_gbs.get(owner, 0.0), c.pod_links.get(owner, ())
            if cap > 0:
                for k in keys:
                    util[k] = min(1.0, load / cap)
        return util
