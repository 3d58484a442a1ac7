"""Fabric designs side by side (fabric.topology.plan): the counts of standard cases, worked out by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fabric.topology.plan import PlanError, PlanRequest, plan_designs


def design(req: PlanRequest, did: str, prices=None):
    return next(d for d in plan_designs(req, prices) if d.id == did)


K1024 = PlanRequest(gpus=1024, gpus_per_server=8, hcas_per_server=8, rate="4xNDR", radix=64)  # 1,024 endpoints


def test_1024_endpoints_on_64_ports_non_blocking_two_tiers():
    # 32 host ports per leaf -> 1,024 / 32 = 32 leaves; 32 x 32 uplinks = 1,024 leaf-spine cables over 64-port
    # spines = 16 spines; one cable per endpoint.
    d = design(K1024, "2t-1:1-rail")
    assert (d.down, d.up, d.leaves, d.spines, d.cores) == (32, 32, 32, 16, 0)
    assert (d.host_cables, d.leaf_spine_cables, d.spine_core_cables) == (1024, 1024, 0)


def test_1024_endpoints_at_2_to_1():
    # floor(64 / 3) = 21 uplinks, 42 host ports. Units of 42 servers: ceil(128 / 42) = 4 units x 8 rails = 32 leaves;
    # 32 x 21 = 672 uplinks; spines: the smallest divisor of 21 that is >= ceil(672 / 64) = 11 -> 21.
    d = design(K1024, "2t-2:1-rail")
    assert (d.down, d.up, d.leaves, d.spines, d.leaf_spine_cables) == (42, 21, 32, 21, 672)


def test_a_64_port_leaf_at_3_to_1_keeps_48_host_ports_and_16_uplinks():
    d = design(K1024, "2t-3:1-rail")
    assert (d.down, d.up) == (48, 16)


def test_4096_endpoints_on_64_ports_need_three_tiers():
    # Two tiers join at most 64 leaves of 32 hosts = 2,048 endpoints. Three: 4,096 / 32 = 128 leaves in pods of 32,
    # 4 pods of 32 spines = 128 spines, each with 32 cables up: 4,096 cables to 64-port cores = 64 cores.
    req = PlanRequest(gpus=4096)
    two = design(req, "2t-1:1-rail")
    assert (two.feasible, two.why_not) == (
        False,
        "two tiers of 64-port switches at 1:1 join at most 64 leaves (2,048 host ports); 4,096 endpoints need three",
    )
    d = design(req, "3t-1:1-rail")
    assert (d.leaves, d.spines, d.cores) == (128, 128, 64)
    assert (d.host_cables, d.leaf_spine_cables, d.spine_core_cables) == (4096, 4096, 4096)


def test_36_port_switches_hold_648_endpoints_in_two_tiers_and_11664_in_three():
    # 36 leaves x 18 hosts = 648; three tiers: 36 pods x 18 leaves x 18 hosts = 11,664.
    def one(n: int) -> PlanRequest:
        return PlanRequest(gpus=n, gpus_per_server=1, hcas_per_server=1, radix=36)

    assert design(one(648), "2t-1:1-rail").feasible
    assert (design(one(648), "2t-1:1-rail").leaves, design(one(648), "2t-1:1-rail").spines) == (36, 18)
    assert not design(one(649), "2t-1:1-rail").feasible
    assert design(one(11664), "3t-1:1-rail").feasible
    too_big = design(one(11665), "3t-1:1-rail")
    assert not too_big.feasible and "more than a 3-tier fat tree" in too_big.why_not


def test_a_design_that_fits_two_tiers_is_not_built_with_three():
    d = design(K1024, "3t-1:1-rail")
    assert (d.feasible, d.why_not) == (
        False,
        "not needed: 1,024 endpoints fit two tiers (a third adds switches and hops)",
    )


def test_rail_optimised_keeps_a_whole_unit_under_one_leaf_per_rail_flat_keeps_one_leafs_servers():
    # Rail: a unit is 32 servers = 256 GPUs. Flat: 32 host ports / 8 HCAs = 4 servers = 32 GPUs per leaf.
    assert design(K1024, "2t-1:1-rail").leaf_domain_gpus == 256
    flat = design(K1024, "2t-1:1-flat")
    assert (flat.leaf_domain_gpus, flat.leaves) == (32, 32)
    assert flat.spofs == ("all 8 HCAs of a server on one leaf: a lost leaf cuts off its 4 servers",)
    assert design(K1024, "2t-1:1-rail").spofs == ()


def test_a_single_hca_server_is_a_spof():
    d = design(PlanRequest(gpus=64, gpus_per_server=8, hcas_per_server=1), "2t-1:1-rail")
    assert d.spofs == ("one HCA per server: a lost HCA, cable or leaf port cuts its server off",)


def test_bisection_is_half_the_uplinks_at_the_data_rate():
    # 32 leaves x 32 uplinks / 2 = 512 links x 400 Gb/s; at 3:1, 24 leaves x 16 / 2 = 192 x 400.
    assert design(K1024, "2t-1:1-rail").bisection_gbps == 204_800
    assert design(K1024, "2t-3:1-rail").bisection_gbps == 76_800


def test_cost_only_from_a_price_file():
    # 32 + 16 switches x 20,000 + 2,048 cables x (100 + 2 optics x 500) = 960,000 + 2,252,800.
    assert design(K1024, "2t-1:1-rail").cost is None
    priced = design(K1024, "2t-1:1-rail", {"switch": 20000, "cable": 100, "optic": 500})
    assert priced.cost == 3_212_800


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        ({"switch": 1, "cable": 1}, "the price file's 'optic' must be a number >= 0, got None"),
        ({"switch": 1, "cable": 1, "optic": 1, "rack": 5}, "unknown entries ['rack']"),
        ({"switch": -1, "cable": 1, "optic": 1}, "'switch' must be a number >= 0, got -1"),
        ({"switch": "cheap", "cable": 1, "optic": 1}, "'switch' must be a number >= 0, got 'cheap'"),
    ],
)
def test_a_bad_price_file_is_refused_naming_the_entry(prices, message):
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("]", r"\]")):
        plan_designs(K1024, prices)


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (PlanRequest(gpus=1024, radix=48), "radix 48 is not a switch radix sold today: use one of 36, 40, 64, 128"),
        (PlanRequest(gpus=1024, rate="4xFOO"), "rate: link speed 'FOO'"),
        (PlanRequest(gpus=0), "gpus must be a whole number >= 1, got 0"),
    ],
)
def test_a_bad_request_names_the_argument(req, message):
    with pytest.raises(PlanError, match=message):
        plan_designs(req)


def test_every_design_of_the_comparison_is_listed_in_a_fixed_order():
    ids = [d.id for d in plan_designs(K1024)]
    assert ids == [f"{t}t-{r}:1-{kind}" for t in (2, 3) for r in (1, 2, 3) for kind in ("rail", "flat")]


def test_a_design_not_built_counts_nothing():
    assert design(K1024, "3t-1:1-rail").as_dict() == {
        "id": "3t-1:1-rail", "tiers": 3, "oversubscription": 1.0, "rail_optimised": True, "feasible": False,
        "why_not": "not needed: 1,024 endpoints fit two tiers (a third adds switches and hops)", "down": 0, "up": 0,
        "leaves": 0, "spines": 0, "cores": 0, "host_cables": 0, "leaf_spine_cables": 0, "spine_core_cables": 0,
        "bisection_gbps": 0.0, "leaf_domain_servers": 0, "leaf_domain_gpus": 0, "cost": None, "switches": 0,
        "spofs": [],
    }  # fmt: skip


def test_a_design_is_a_value_that_cannot_change():
    d = design(K1024, "2t-1:1-rail")
    with pytest.raises(AttributeError):
        d.leaves = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        K1024.gpus = 1  # type: ignore[misc]
    assert replace(d, plan=None) == d  # the generator's plan rides along, it is not part of the design's value


def test_a_free_item_is_a_price():
    priced = design(K1024, "2t-1:1-rail", {"switch": 0, "cable": 0, "optic": 0})
    assert priced.cost == 0


def test_a_flat_server_whose_hcas_do_not_fit_a_leaf_is_refused_and_one_that_just_fits_is_built():
    # 36 ports at 1:1: 18 host ports. 20 HCAs do not fit; 10 HCAs: one server per leaf.
    wide = design(PlanRequest(gpus=80, gpus_per_server=8, hcas_per_server=20, radix=36), "2t-1:1-flat")
    assert (wide.feasible, wide.why_not) == (False, "a server's 20 HCAs do not fit one leaf's 18 host ports at 1:1")
    one = design(PlanRequest(gpus=80, gpus_per_server=8, hcas_per_server=10, radix=36), "2t-1:1-flat")
    assert (one.feasible, one.leaves, one.leaf_domain_servers) == (True, 10, 1)
