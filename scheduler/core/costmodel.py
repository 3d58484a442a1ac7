"""The placement cost model: what a candidate set of GPUs costs a job, in modelled seconds per step. PURE.

Every candidate placement is priced as the time of one training (or serving) step there, relative to
the same step on an ideal placement of the same job, plus a small fragmentation penalty:

    step        = compute + comm + io
    slowdown    = step / ideal_step                                   (>= 1 in practice)
    score       = slowdown + fragmentation                            (lower is better)

Communication: ring all-reduce of S bytes over n ranks (NCCL's model, nccl-tests PERFORMANCE.md)

    comm = 2 (n - 1) / n * S / B  +  2 (n - 1) * alpha[level]

B is the bottleneck bus bandwidth of the ring, in GB/s: what the job predicts it will get, the way the
replay's network model (scheduler/sim/runtime.py) says it will. A multi-node ring is one flow through
the HCAs of its nodes and, when it spans leaves, through the uplinks of each leaf (and pod) it touches,
sharing each with the other rings there (max-min fair). B is the minimum of

    intra(node)  k_i = 1: unlimited; all k_i GPUs in one NVLink island: nvlink_gbps * nvlink_efficiency
                 (900 * 0.53 = 476 GB/s on H100, measured); otherwise pcie_gbps (20)
    hca(node)    only when the job spans nodes: shared_gbs(nominal * reach, live * reach, rings on the node)
                 * net_efficiency, reach = min(1, max(k_i / G_node, 1 / rails)): NCCL runs a ring per rail
                 and a GPU uses its own rail's HCA, so k of G GPUs reach k/G of a rail-optimised node's HCAs
                 but all of a single-HCA node's; live = sum over its HCA links of capacity/8 * avail(link)
    uplink(leaf) for each leaf group the ring touches when it crosses a spine:
                 shared_gbs(uplinks' capacity/8, what utilisation leaves of it, crossing rings there,
                 spine_factor) * net_efficiency; the same per pod through the core with core_factor
    shared_gbs(capacity, available, r, loss) = min(available, capacity / (r + 1)) * (loss if r >= 1)
                 a new ring's max-min fair share beside r rings the engine placed (they communicate at the
                 same time), never more than the live utilisation leaves; ECMP loses `loss` once two or
                 more rings share the uplinks (one flow alone collides with nobody)
    avail(link)  = max(min_available, 1 - utilisation) * (error_factor if the link logs errors)

So 8 ranks in one H100 island get B = 476 GB/s, the same 8 ranks on 8 nodes over NDR 48 GB/s (the 10x
cliff). A ring that crosses a 2:1 spine alone loses nothing but latency (its leaf's uplinks carry more than
one HCA); eight crossing rings from one leaf of eight NDR nodes share 400 * 0.96 * 0.9 = 346 GB/s, 43 each.
On a rail-optimised node a multi-node job's B grows with the GPUs it has per node, so 8+8 beats 8+7+1.

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


def shared_gbs(capacity_gbs: float, available_gbs: float, rings: int, loss: float = 1.0) -> float:
    """What a new ring gets on a link (or a leaf's pooled uplinks) of `capacity_gbs` beside `rings` other
    rings: its max-min fair share capacity / (rings + 1), never more than the live utilisation leaves
    (`available_gbs`), times `loss` (ECMP) once it shares the links with another ring."""
    share = min(available_gbs, capacity_gbs / (rings + 1))
    return share * loss if rings >= 1 else share


def hca_reach(k: int, gpus_on_node: int, rails: int) -> float:
    """Share of a node's HCA bandwidth k of its G GPUs can drive: k/G of a rail-optimised node's rails (a
    ring per rail, each GPU on its own rail's HCA), never less than one rail (one HCA: all of it)."""
    if gpus_on_node <= 0:
        return 1.0
    return min(1.0, max(k / gpus_on_node, 1.0 / max(1, rails)))


def network_gbs(
    hca_gbs: float,
    hca_live_gbs: float,
    reach: float,
    node_rings: int,
    uplinks: list[tuple[float, float, int, float]],
    params: CostParams,
) -> float:
    """Bus bandwidth a node gives a multi-node ring: its HCAs (nominal and live GB/s) x `reach`, shared
    with the `node_rings` other rings on them, and each (capacity, available, rings, ECMP loss) of the
    uplinks the ring crosses, all at net_efficiency."""
    b = shared_gbs(hca_gbs * reach, hca_live_gbs * reach, node_rings)
    for cap, avail, rings, loss in uplinks:
        u = shared_gbs(cap, avail, rings, loss)
        if u < b:
            b = u
    return b * params.net_efficiency


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
