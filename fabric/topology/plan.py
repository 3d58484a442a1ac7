"""Fabric designs side by side, before they are bought (issue 18, part 2). PURE.

Given the GPUs to connect, the GPUs and HCAs per server, the link rate and the switch radix, `plan_designs` lays
out every design of the comparison: leaf oversubscription 1:1, 2:1, 3:1; rail-optimised or not; two or three tiers.
The switch and cable counts are the fat-tree generator's own (`fabric.importers.fattree.plan_fat_tree`, and
`plan_flat_fat_tree` for designs that are not rail-optimised), so every design opens as a real cluster
(`manage.py plan_fabric --create-cluster`) with exactly these counts.

Conventions (the generator's):

- A leaf of radix k at r:1 keeps `up = floor(k / (1 + r))` uplinks and `down = min(k - up, floor(up * r))` host
  ports: 64 ports give 32/32 at 1:1, 42/21 at 2:1 (one port unused), 48/16 at 3:1; 36 ports give 18/18, 24/12, 27/9.
- Rail-optimised: a scalable unit is `down` servers and one leaf per rail; HCA i of every server of the unit is on
  leaf i of the unit, so a job on the unit's servers keeps each rail's traffic inside one leaf. Not rail-optimised:
  all HCAs of a server on one leaf, `floor(down / hcas)` servers per leaf.
- Above the leaves the tree is non-blocking: a spine (a core) has as many ports up as down. Two tiers join at most
  k leaves (a spine has one port per leaf); beyond that a third tier joins pods of k/2 leaves, at most k pods.
- Bisection: the capacity across a cut of the leaves into two halves, `leaves x up / 2` links at the link's data rate.
- The largest job under one leaf domain: the most GPUs whose all-reduce never leaves a leaf (a whole scalable unit
  when rail-optimised, the servers of one leaf when not).
- Cost only from a price file (`prices`: switch, cable and optic prices, one each); an optic at each end of every
  cable. Nothing is priced that the file does not price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from fabric.importers.fattree import FatTreePlan, plan_fat_tree, plan_flat_fat_tree
from fabric.topology.link_speeds import RateError, parse_rate

RADIXES = (36, 40, 64, 128)
OVERSUBSCRIPTIONS = (1.0, 2.0, 3.0)
TIERS = (2, 3)
PRICE_KEYS = ("switch", "cable", "optic")


class PlanError(ValueError):
    """An argument no design can be laid out from (naming it and its value)."""


@dataclass(frozen=True, slots=True)
class PlanRequest:
    gpus: int
    gpus_per_server: int = 8
    hcas_per_server: int = 8
    rate: str = "4xNDR"
    radix: int = 64

    @property
    def servers(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_server)

    @property
    def endpoints(self) -> int:
        return self.servers * self.hcas_per_server

    @property
    def link_gbps(self) -> float:
        return parse_rate(self.rate).data_gbps


@dataclass(frozen=True, slots=True)
class Design:
    id: str  # "2t-1:1-rail": tiers, oversubscription, rail-optimised or not
    tiers: int
    oversubscription: float
    rail_optimised: bool
    feasible: bool
    why_not: str = ""
    down: int = 0  # host ports per leaf
    up: int = 0  # uplinks per leaf
    leaves: int = 0
    spines: int = 0
    cores: int = 0
    host_cables: int = 0
    leaf_spine_cables: int = 0
    spine_core_cables: int = 0
    bisection_gbps: float = 0.0
    leaf_domain_servers: int = 0  # servers whose all-reduce stays under one leaf (per rail when rail-optimised)
    leaf_domain_gpus: int = 0
    spofs: tuple[str, ...] = ()
    cost: float | None = None
    plan: FatTreePlan | None = field(default=None, compare=False)

    @property
    def switches(self) -> int:
        return self.leaves + self.spines + self.cores

    @property
    def cables(self) -> int:
        return self.host_cables + self.leaf_spine_cables + self.spine_core_cables

    def as_dict(self) -> dict:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "plan"}
        return {**values, "switches": self.switches, "spofs": list(self.spofs)}


def check_request(req: PlanRequest) -> None:
    for name in ("gpus", "gpus_per_server", "hcas_per_server"):
        value = getattr(req, name)
        if not isinstance(value, int) or value < 1:
            raise PlanError(f"{name} must be a whole number >= 1, got {value!r}")
    if req.radix not in RADIXES:
        raise PlanError(
            f"radix {req.radix!r} is not a switch radix sold today: use one of {', '.join(map(str, RADIXES))}"
        )
    try:
        rate = parse_rate(req.rate)
    except RateError as exc:
        raise PlanError(f"rate: {exc}") from None
    if not rate.known:
        raise PlanError(f"rate {req.rate!r} has no known speed")


def check_prices(prices: Mapping[str, object] | None) -> dict[str, float] | None:
    """The price file's three prices as numbers; PlanError naming a missing, unknown or bad entry."""
    if prices is None:
        return None
    if not isinstance(prices, Mapping):
        raise PlanError("the price file must be a mapping of switch, cable and optic to a price")
    unknown = sorted(set(prices) - set(PRICE_KEYS))
    if unknown:
        raise PlanError(f"the price file has unknown entries {unknown}; it prices {', '.join(PRICE_KEYS)}")
    out = {}
    for key in PRICE_KEYS:
        value = prices.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise PlanError(f"the price file's {key!r} must be a number >= 0, got {value!r}")
        out[key] = float(value)
    return out


def _design(req: PlanRequest, r: float, rail: bool, tiers: int, prices: dict[str, float] | None) -> Design:
    did = f"{tiers}t-{r:g}:1-{'rail' if rail else 'flat'}"
    base = {"id": did, "tiers": tiers, "oversubscription": r, "rail_optimised": rail}
    servers, hcas, k = req.servers, req.hcas_per_server, req.radix
    try:
        if rail:
            plan = plan_fat_tree(servers, hcas, leaf_ports=k, oversubscription=r)
        else:
            plan, _ = plan_flat_fat_tree(servers, hcas, leaf_ports=k, oversubscription=r)
    except ValueError as exc:
        return Design(**base, feasible=False, why_not=str(exc))
    if plan.tiers != tiers:
        if tiers == 2:
            why = (f"two tiers of {k}-port switches at {r:g}:1 join at most {k} leaves "
                   f"({k * plan.down:,} host ports); {req.endpoints:,} endpoints need three")  # fmt: skip
        else:
            why = f"not needed: {req.endpoints:,} endpoints fit two tiers (a third adds switches and hops)"
        return Design(**base, feasible=False, why_not=why)
    gbps = req.link_gbps
    leaf_spine = plan.leaves * plan.up
    spine_core = leaf_spine if plan.tiers == 3 else 0
    if rail:
        domain = min(plan.down, servers)
    else:
        domain = min(plan.down // hcas, servers)
    spofs = []
    if hcas == 1:
        spofs.append("one HCA per server: a lost HCA, cable or leaf port cuts its server off")
    elif not rail:
        spofs.append(f"all {hcas} HCAs of a server on one leaf: a lost leaf cuts off its {plan.down // hcas} servers")
    design = Design(
        **base,
        feasible=True,
        down=plan.down,
        up=plan.up,
        leaves=plan.leaves,
        spines=plan.spines,
        cores=plan.cores,
        host_cables=servers * hcas,
        leaf_spine_cables=leaf_spine,
        spine_core_cables=spine_core,
        bisection_gbps=plan.leaves * plan.up / 2 * gbps,
        leaf_domain_servers=domain,
        leaf_domain_gpus=domain * req.gpus_per_server,
        spofs=tuple(spofs),
        plan=plan,
    )
    if prices is not None:
        cost = design.switches * prices["switch"] + design.cables * (prices["cable"] + 2 * prices["optic"])
        design = replace(design, cost=cost)
    return design


def plan_designs(req: PlanRequest, prices: Mapping[str, object] | None = None) -> list[Design]:
    """Every design of the comparison, feasible or not (then with the reason), in a fixed order."""
    check_request(req)
    checked = check_prices(prices)
    return [
        _design(req, r, rail, tiers, checked) for tiers in TIERS for r in OVERSUBSCRIPTIONS for rail in (True, False)
    ]
