"""What a fabric design means for a job: the all-reduce time of a data-parallel job placed the best and the worst
way on it (issue 18, part 2). PURE.

The network model is the scheduler's and the policy lab's (scheduler.core.costmodel, CostParams; the runtime model of
scheduler/sim/runtime.py applies the same rules to every running job at once):

    t = 2 (n - 1) / n * S / B  +  2 (n - 1) * latency[level]

- S: the message, MESSAGE_BYTES (1 GiB of gradients: a 500M-parameter model in fp16);
- B, the ring's bus bandwidth between servers: costmodel.network_gbs, the engine's own, over a server's HCAs (a job
  of whole servers drives all of them: a ring per rail) and the pooled uplinks of its leaf domain (one leaf when flat,
  the rail group's leaves when rail-optimised), shared max-min with the other rings on them, with the ECMP loss
  (spine_factor, core_factor at three tiers) once it shares them, at net_efficiency;
- best: the job packed into as few leaf domains as it fits, on an otherwise idle fabric; a ring inside one leaf
  domain crosses no uplink;
- worst: one server per leaf domain on a busy fabric: the domain's other servers each run a ring over the same
  uplinks (`up` links for `down` hosts: 1/oversubscription of the rate each), with the ECMP loss.

A job of one server runs over NVLink and is not a fabric question: the design table shows its servers' count only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from fabric.topology.plan import Design, PlanRequest, plan_designs
from scheduler.core.costmodel import network_gbs, ring_allreduce_s, ring_latency_s
from scheduler.core.topology import LEVEL_FABRIC, LEVEL_LEAF_GROUP, LEVEL_POD_GROUP
from scheduler.core.types import CostParams

MESSAGE_BYTES = float(1 << 30)
JOB_SIZES = (64, 512)


@dataclass(frozen=True, slots=True)
class AllReduce:
    gpus: int
    servers: int
    best_s: float | None  # None: the job does not fit the design
    worst_s: float | None
    best_level: str = ""
    worst_level: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _level_name(level: int) -> str:
    return {LEVEL_LEAF_GROUP: "leaf", LEVEL_POD_GROUP: "spine", LEVEL_FABRIC: "core"}[level]


def allreduce(
    req: PlanRequest, design: Design, gpus: int, params: CostParams | None = None, size_bytes: float = MESSAGE_BYTES
) -> AllReduce:
    """The best and worst all-reduce time of a `gpus`-GPU job on `design` (seconds)."""
    P = params or CostParams()
    servers = math.ceil(gpus / req.gpus_per_server)
    if not design.feasible or servers > req.servers or servers < 2:
        return AllReduce(gpus, servers, None, None)
    # A job of whole servers drives every rail of each (NCCL runs a ring per rail): the server's HCAs together. The
    # uplinks a ring crosses are a leaf domain's, pooled as the engine pools a leaf group's (one leaf when flat, the
    # rail group's leaves when rail-optimised), each shared by the other rings on it with the ECMP loss of its level.
    hca = req.link_gbps / 8.0 * req.hcas_per_server
    pooled = req.link_gbps / 8.0 * design.up * (req.hcas_per_server if design.rail_optimised else 1)
    crossing = P.core_factor if design.tiers == 3 else P.spine_factor
    pod_leaves = design.plan.leaves_per_pod  # a feasible design always carries the generator's plan

    def bus_gbs(other_rings: int, loss: float, crosses: bool) -> float:
        uplinks = [(pooled, pooled, other_rings, loss)] if crosses else []
        return network_gbs(hca, hca, 1.0, 0, uplinks, P)

    # Best: inside one leaf domain when it fits; else whole leaf domains under one spine layer (one pod), else core,
    # on an otherwise idle fabric (no other ring on its uplinks).
    if servers <= design.leaf_domain_servers:
        best_level, best_bw = LEVEL_LEAF_GROUP, bus_gbs(0, 1.0, False)
    else:
        domains = math.ceil(servers / design.leaf_domain_servers)
        leaves_needed = domains * (req.hcas_per_server if design.rail_optimised else 1)
        best_level = LEVEL_POD_GROUP if design.tiers == 2 or leaves_needed <= pod_leaves else LEVEL_FABRIC
        best_bw = bus_gbs(0, P.spine_factor if best_level == LEVEL_POD_GROUP else P.core_factor, True)
    # Worst: one server per leaf domain on a busy fabric: every other server of that domain runs its own ring over the
    # same uplinks; at three tiers across pods.
    worst_level = LEVEL_FABRIC if design.tiers == 3 else LEVEL_POD_GROUP
    worst_bw = bus_gbs(max(0, design.leaf_domain_servers - 1), crossing, True)
    return AllReduce(
        gpus,
        servers,
        ring_allreduce_s(gpus, size_bytes, best_bw) + ring_latency_s(gpus, best_level, P),
        ring_allreduce_s(gpus, size_bytes, worst_bw) + ring_latency_s(gpus, worst_level, P),
        _level_name(best_level),
        _level_name(worst_level),
    )


def compare_designs(
    req: PlanRequest, prices: Mapping[str, object] | None = None
) -> list[tuple[Design, list[AllReduce]]]:
    """Every design of the comparison with the all-reduce of each JOB_SIZES job on it (the command's and the page's
    table)."""
    return [(d, [allreduce(req, d, n) for n in JOB_SIZES]) for d in plan_designs(req, prices)]
