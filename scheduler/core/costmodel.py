"""The placement cost model: what a candidate set of GPUs costs a job, in modelled seconds per step. PURE.

Every candidate placement is priced as the time of one training (or serving) step there, relative to
the same step on an ideal placement of the same job, plus a small fragmentation penalty:

    step        = compute + comm + io
    slowdown    = step / ideal_step                                   (>= 1 in practice)
    score       = slowdown + fragmentation                            (lower is better)

Communication: ring all-reduce of S bytes over n ranks (NCCL's model, nccl-tests PERFORMANCE.md)

    comm = 2 (n - 1) / n * S / B  +  2 (n - 1) * alpha[level]

B is the bottleneck bus bandwidth per rank, in GB/s, the minimum over the nodes the job touches of

    intra(node)  k_i = 1: unlimited; all k_i GPUs in one NVLink island: nvlink_gbps * nvlink_efficiency
                 (900 * 0.53 = 476 GB/s on H100, measured); otherwise pcie_gbps (20)
    net(node)    only when the job spans nodes:
                 net_gbs(node) * (k_i / G_node) * net_efficiency           (NDR: 50 * 0.96 = 48 GB/s a rail)
                 net_gbs(node) = sum over its live HCA links of capacity/8 * avail(link)
                 / max(1, oversubscription of its leaf group) * spine_factor   when the ring crosses a spine
                 / max(1, oversubscription of its pod)        * core_factor    when it crosses the core
    avail(link)  = max(min_available, 1 - utilisation) * (error_factor if the link logs errors)
    oversubscription(group) = capacity of its host links / sum of capacity * avail over its uplinks
                 (a 2:1 leaf halves B, a hot uplink lowers it further)

So 8 ranks in one H100 island get B = 476 GB/s, the same 8 ranks on 8 nodes over NDR 48 GB/s (the 10x
cliff), and behind a 2:1 spine 24 GB/s. A multi-node job's B grows with the GPUs it has per node (NCCL
runs one ring per rail), so 8+8 beats 8+7+1.

Compute: the slowest rank sets the pace (a straggler holds the whole ring):

    compute = C / (strength(model) * max(min_available, 1 - max_i(utilisation_i) * interference[mode]))

C is the step's compute seconds on an idle H100 (strength 1.0; A100 0.4, H200 1.1, B200 2.2 ...);
utilisation is the GPU's live utilisation by others (a free GPU that is busy runs someone else's work);
interference is 1 for exclusive and time-sliced GPUs, 0.25 under MPS, 0 under MIG.

Storage (data-intensive jobs with a dataset node d): each node reads its share of D bytes per step

    io = max_i (D * k_i / n) / B_io(i),   B_io(i) = min(net(i) share, net_gbs(d)) * net_efficiency,
    lowered across a spine/core exactly as for `net` (oversubscription and live utilisation of the uplinks
    of *both* groups), so jobs go near their data, behind leaves whose uplinks are not hot.

Fragmentation (best fit, in slowdown units; weights in CostParams):

    + w_break_island (0.02) per NVLink island that was wholly free and is left partly used
    + w_break_node   (0.02) per node that was wholly free and is left partly used
    + w_break_leaf   (0.05) per leaf group that was wholly free and is left partly used
    + w_leftover     (0.01) * mean fraction of the touched nodes' GPUs left free
    + w_spread_nodes (0.005) per node beyond the fewest the job could use

A 2 % slower placement therefore loses to keeping an island whole, but a 10 % slower one does not.
The ideal step uses the same formulas with the best GPU model on offer, NVLink when the job fits one
island, otherwise whole nodes on one leaf at their nominal HCA rate, and storage on the same leaf.
"""

from __future__ import annotations

from scheduler.core.topology import LEVEL_FABRIC, LEVEL_POD_GROUP
from scheduler.core.types import CostParams

GB = 1e9


def ring_allreduce_s(n: int, size_bytes: float, busbw_gbs: float) -> float:
    """Seconds for a ring all-reduce of `size_bytes` over `n` ranks at bus bandwidth `busbw_gbs` GB/s."""
    if n <= 1 or size_bytes <= 0:
        return 0.0
    if busbw_gbs <= 0:
        return float("inf")
    return 2.0 * (n - 1) / n * size_bytes / (busbw_gbs * GB)


def ring_latency_s(n: int, level: int, params: CostParams) -> float:
    """2(n-1) ring steps, each paying the per-hop latency of the highest level crossed."""
    if n <= 1:
        return 0.0
    return 2.0 * (n - 1) * params.latency_s[min(level, len(params.latency_s) - 1)]


def link_available(utilisation: float, erroring: bool, params: CostParams) -> float:
    """Fraction of a link's capacity left to a new job: (1 - utilisation), floored, cut when erroring."""
    a = max(params.min_available, 1.0 - utilisation)
    return a * params.error_factor if erroring else a


def oversubscription(host_gbps: float, uplink_available_gbps: float) -> float:
    """Effective oversubscription of a leaf (group): host-facing capacity over what its uplinks have left."""
    if host_gbps <= 0:
        return 1.0
    if uplink_available_gbps <= 0:
        return float("inf")
    return max(1.0, host_gbps / uplink_available_gbps)


def intra_node_gbs(k: int, one_island: bool, nvlink_gbps: float, params: CostParams) -> float:
    """Bus bandwidth among k GPUs of one node: NVLink when they share an island, else PCIe."""
    if k <= 1:
        return float("inf")
    if one_island and nvlink_gbps > 0:
        return nvlink_gbps * params.nvlink_efficiency
    return params.pcie_gbps


def network_gbs(
    net_gbs: float,
    k: int,
    gpus_on_node: int,
    level: int,
    group_oversub: float,
    pod_oversub: float,
    params: CostParams,
) -> float:
    """Bus bandwidth a node gives a multi-node ring: its share of the HCAs (k of its G GPUs), lowered by
    the oversubscription and ECMP losses of the levels the ring crosses."""
    share = net_gbs * min(1.0, k / gpus_on_node) if gpus_on_node > 0 else net_gbs
    b = share * params.net_efficiency
    if level >= LEVEL_POD_GROUP:
        b /= max(1.0, group_oversub)
        if level >= LEVEL_FABRIC:
            b = b / max(1.0, pod_oversub) * params.core_factor
        else:
            b *= params.spine_factor
    return b


def compute_s(
    step_compute_s: float, strength: float, utilisation: float, interference: float, params: CostParams
) -> float:
    """Compute seconds per step on the slowest GPU of the placement."""
    free = max(params.min_available, 1.0 - utilisation * interference)
    return step_compute_s / (max(strength, 1e-6) * free)


def io_s(bytes_per_step: float, busbw_gbs: float) -> float:
    if bytes_per_step <= 0:
        return 0.0
    if busbw_gbs <= 0:
        return float("inf")
    return bytes_per_step / (busbw_gbs * GB)


def fragmentation(
    broken_islands: int,
    broken_nodes: int,
    broken_leaves: int,
    leftover_fraction: float,
    extra_nodes: int,
    params: CostParams,
) -> float:
    return (
        params.w_break_island * broken_islands
        + params.w_break_node * broken_nodes
        + params.w_break_leaf * broken_leaves
        + params.w_leftover * leftover_fraction
        + params.w_spread_nodes * max(0, extra_nodes)
    )
