"""The communication-aware runtime model of the replay: how fast a job runs where it was placed. PURE.

Every constant of the model is here: the bandwidths and latencies come from the engine's own cost model
(`scheduler.core.types.CostParams`, docs/scheduler.md), the per-model compute and gradient sizes from
`MODEL_PROFILES` below, the checkpoint and restart costs from `RuntimeParams`.

A data-parallel job does, per step, its compute and then a ring all-reduce of its gradients
(DESIGN.md, NCCL's model):

    step      = compute + comm
    compute   = step_compute_s(model, on a V100) * strength(V100) / strength(GPU)
    comm      = 2 (n - 1) / n * S / B  +  2 (n - 1) * alpha[level]         (S = gradient bytes, n ranks)

B, the bottleneck bus bandwidth per rank (GB/s), is the minimum over the job's nodes of
* inside a node (k > 1 GPUs there): NVLink x efficiency when the k GPUs are one island, else PCIe;
* between nodes: the node's HCA bandwidth x k/G (its share of the rails) x efficiency; when the ring
  leaves its leaf it is divided by the leaf's *live* oversubscription and the spine (or core) ECMP factor:

      load(leaf)  = sum over the jobs whose ring leaves the leaf, over their nodes in the leaf, of HCA x k/G
      oversub     = max(1, load(leaf) / uplink capacity(leaf))           (pods: the same one tier up)

  so a job that crosses a 2:1 leaf alone pays only the ECMP factor, while a leaf full of crossing jobs
  halves everybody's bandwidth (the "other jobs sharing its links"). Traffic is taken at its nominal
  demand (all-reduce bursts of neighbouring jobs are assumed to collide), not at the duty cycle.

The job's trace duration is its run time on an *ideal* placement (the engine's definition: one NVLink
island when it fits one, else whole nodes of one leaf, nothing else on the links), so it progresses at

    rate = ideal_step / step      (<= 1; 1 for a one-GPU job or a model with no gradients)

A compute-only job (one GPU, or `compute-only`) never slows down; AlexNet or VGG (hundreds of MB of
gradients per tenth of a second of compute) lose half their speed across an oversubscribed spine.

Preemption and migration cost `checkpoint_s + restart_s` seconds of no progress (the job holds GPUs
and does no work): checkpoint = base + model state (weights and optimiser, `state_factor` x gradient
bytes) at `checkpoint_gbs`; restart = the engine's `Config.restart_overhead_s`. With the network model
off (Tiresias' assumptions) every rate is 1 and moving is free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.costmodel import intra_node_gbs, network_gbs, ring_allreduce_s, ring_latency_s
from scheduler.core.topology import LEVEL_FABRIC, LEVEL_ISLAND, LEVEL_LEAF_GROUP, LEVEL_NODE, LEVEL_POD_GROUP
from scheduler.core.types import Config, CostParams

REFERENCE_GPU = "V100"  # step_compute_s in MODEL_PROFILES is on this GPU
MB = 1e6


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """Compute and communication of one model. `params_m`: millions of fp32 parameters (gradient bytes =
    4 x params). Fixed-batch models give `step_compute_s` (one step on a V100 at the trace's batch);
    Pollux applications give `samples_per_s` (per V100) and the step follows the job's local batch."""

    name: str
    params_m: float
    step_compute_s: float | None = None
    samples_per_s: float | None = None
    note: str = ""

    @property
    def grad_bytes(self) -> float:
        return self.params_m * 4 * MB

    def compute_s(self, local_batch: float | None = None) -> float:
        if self.samples_per_s is not None and local_batch:
            return local_batch / self.samples_per_s
        return self.step_compute_s if self.step_compute_s is not None else 0.1


# Parameter counts: the models' papers / torchvision. Step times: V100 fp32, 32 images per GPU, from
# public tf_cnn_benchmarks throughputs (rounded; approximate by design, they set the compute/comm ratio).
_TIRESIAS_CNNS = (
    ModelProfile("alexnet", 61.1, 0.016, note="~2000 img/s"),
    ModelProfile("vgg11", 132.9, 0.074, note="~430 img/s"),
    ModelProfile("vgg16", 138.4, 0.107, note="~300 img/s"),
    ModelProfile("vgg19", 143.7, 0.123, note="~260 img/s"),
    ModelProfile("googlenet", 6.6, 0.029, note="~1100 img/s"),
    ModelProfile("inception3", 23.8, 0.110, note="~290 img/s"),
    ModelProfile("inception4", 42.7, 0.229, note="~140 img/s"),
    ModelProfile("resnet50", 25.6, 0.086, note="~370 img/s"),
    ModelProfile("resnet101", 44.5, 0.149, note="~215 img/s"),
    ModelProfile("resnet152", 60.2, 0.213, note="~150 img/s"),
)
# Pollux (OSDI '21) applications: per-GPU throughput calibrated so that each application's ideal run time
# at its most common replica count is close to the shortest JCT the Pollux artifact's Tiresias run
# reports for it on workload-6 (see traces/pollux.py).
_POLLUX_APPS = (
    ModelProfile("cifar10", 11.2, samples_per_s=900.0, note="ResNet-18 on CIFAR-10"),
    ModelProfile("imagenet", 25.6, samples_per_s=86.0, note="ResNet-50 on ImageNet"),
    ModelProfile("bert", 110.0, samples_per_s=10.2, note="BERT-base fine-tuned on SQuAD"),
    ModelProfile("deepspeech2", 26.0, samples_per_s=21.5, note="DeepSpeech2 on CMU-ARCTIC"),
    ModelProfile("yolov3", 61.9, samples_per_s=14.7, note="YOLOv3 on PASCAL VOC"),
    ModelProfile("ncf", 2.0, samples_per_s=645000.0, note="NeuMF on MovieLens"),
)
# Gavel (OSDI '20) job types, single V100 (approximate; the batch size is per GPU).
_GAVEL = (
    ModelProfile("ResNet-18", 11.2, samples_per_s=2800.0, note="CIFAR-10"),
    ModelProfile("ResNet-50", 25.6, samples_per_s=370.0, note="ImageNet"),
    ModelProfile("Transformer", 65.0, samples_per_s=1000.0, note="Multi30k"),
    ModelProfile("LM", 28.0, samples_per_s=1600.0, note="WikiText-2 LSTM"),
    ModelProfile("Recommendation", 20.0, samples_per_s=100000.0, note="ML-20M autoencoder"),
    ModelProfile("A3C", 1.0, samples_per_s=400.0, note="Pong"),
    ModelProfile("CycleGAN", 11.4, samples_per_s=5.0, note="monet2photo"),
)
MODEL_PROFILES: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        *_TIRESIAS_CNNS,
        *_POLLUX_APPS,
        *_GAVEL,
        ModelProfile("compute-only", 0.0, 0.1, note="no gradient exchange"),
        ModelProfile("default", 25.6, 0.086, note="unknown model: ResNet-50-like"),
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


class RuntimeModel:
    """Progress rates of the running jobs of one cluster, all at once (they share the leaves' uplinks)."""

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

    # ------------------------------------------------------------------ all running jobs

    def rates(self, jobs: Mapping[int, tuple[Work, Sequence[int]]]) -> dict[int, tuple[float, float]]:
        """job id -> (rate, duty) for every job: rate = ideal / actual step, duty = the share of a step spent
        in the all-reduce (what its links carry, for the engine's telemetry)."""
        c, P = self.c, self.params.cost
        G_of = [len(g) for g in c.node_gpus]
        geo: dict[int, tuple[dict[int, list[int]], int]] = {}
        group_load: dict[int, float] = {}
        pod_load: dict[int, float] = {}
        for jid, (work, pos) in jobs.items():
            by_node = self.layout(pos)
            level = c.level_of(pos) if work.gpus > 1 else LEVEL_ISLAND
            geo[jid] = (by_node, level)
            if level >= LEVEL_POD_GROUP and work.grad_bytes > 0:
                for ni, ps in by_node.items():
                    d = c.node_nic_gbs[ni] * min(1.0, len(ps) / max(1, G_of[ni]))
                    g = c.node_group[ni]
                    group_load[g] = group_load.get(g, 0.0) + d
                    if level >= LEVEL_FABRIC:
                        pod = c.node_pod[ni]
                        pod_load[pod] = pod_load.get(pod, 0.0) + d
        out: dict[int, tuple[float, float]] = {}
        for jid, (work, _pos) in jobs.items():
            n = work.gpus
            comp = self.compute_s(work)
            if n <= 1 or work.grad_bytes <= 0:
                out[jid] = (1.0, 0.0)
                continue
            by_node, level = geo[jid]
            bw = math.inf
            for ni, ps in by_node.items():
                k = len(ps)
                if k > 1:
                    one = len({c.gpu_island[p] for p in ps}) == 1
                    b = intra_node_gbs(k, one, c.gpu_nvlink[ps[0]], P)
                    bw = min(bw, b)
                if len(by_node) > 1:
                    g = c.node_group[ni]
                    cap = c.group_uplink_gbs.get(g, 0.0)
                    g_over = max(1.0, group_load.get(g, 0.0) / cap) if cap > 0 else 1.0
                    pod = c.node_pod[ni]
                    pcap = c.pod_uplink_gbs.get(pod, 0.0)
                    p_over = max(1.0, pod_load.get(pod, 0.0) / pcap) if pcap > 0 else 1.0
                    b = network_gbs(c.node_nic_gbs[ni], k, max(1, G_of[ni]), level, g_over, p_over, P)
                    bw = min(bw, b)
            lat_level = LEVEL_ISLAND if level == 0 else level
            comm = ring_allreduce_s(n, work.grad_bytes, bw) + ring_latency_s(n, lat_level, P)
            step = comp + comm
            out[jid] = (min(1.0, self.ideal_step(work) / step), comm / step if step > 0 else 0.0)
        return out

    def link_utilisation(
        self, jobs: Mapping[int, tuple[Work, Sequence[int]]], rates: Mapping[int, tuple[float, float]]
    ) -> dict[str, float]:
        """Per fabric link, the utilisation the engine's telemetry would report: the all-reduce traffic of
        the jobs through it (their HCA share x duty cycle), over the link's capacity."""
        c = self.c
        host: dict[int, float] = {}
        group: dict[int, float] = {}
        pod: dict[int, float] = {}
        for jid, (_work, pos) in jobs.items():
            duty = rates.get(jid, (1.0, 0.0))[1]
            if duty <= 0:
                continue
            by_node = self.layout(pos)
            if len(by_node) < 2:
                continue
            level = c.level_of(pos)
            for ni, ps in by_node.items():
                share = min(1.0, len(ps) / max(1, len(c.node_gpus[ni]))) * duty
                host[ni] = host.get(ni, 0.0) + share
                if level >= LEVEL_POD_GROUP:
                    d = c.node_nic_gbs[ni] * share
                    g = c.node_group[ni]
                    group[g] = group.get(g, 0.0) + d
                    if level >= LEVEL_FABRIC:
                        pod[c.node_pod[ni]] = pod.get(c.node_pod[ni], 0.0) + d
        util: dict[str, float] = {}
        for ni, u in host.items():
            for key in c.host_links.get(ni, ()):
                util[key] = min(1.0, u)
        for g, load in group.items():
            cap = c.group_uplink_gbs.get(g, 0.0)
            if cap > 0:
                for key in c.group_links.get(g, ()):
                    util[key] = min(1.0, load / cap)
        for p, load in pod.items():
            cap = c.pod_uplink_gbs.get(p, 0.0)
            if cap > 0:
                for key in c.pod_links.get(p, ()):
                    util[key] = min(1.0, load / cap)
        return util
