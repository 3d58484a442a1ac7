"""Each term of the cost model (scheduler/core/costmodel.py), with DESIGN.md's published figures."""

import pytest

from scheduler.core.costmodel import (
    compute_s,
    fragmentation,
    intra_node_gbs,
    io_s,
    link_available,
    network_gbs,
    oversubscription,
    ring_allreduce_s,
    ring_latency_s,
)
from scheduler.core.topology import LEVEL_FABRIC, LEVEL_ISLAND, LEVEL_LEAF_GROUP, LEVEL_POD_GROUP
from scheduler.core.types import CostParams

P = CostParams()
GIB = float(1 << 30)


def test_ring_allreduce_formula():
    # t = 2(n-1)/n * S / B: 8 ranks, 1 GB at 476 GB/s is 3.68 ms (performance.md's worked example).
    assert ring_allreduce_s(8, 1e9, 476.0) == pytest.approx(2 * 7 / 8 * 1e9 / 476e9)
    assert ring_allreduce_s(8, 1e9, 476.0) == pytest.approx(0.003676, rel=1e-3)


def test_ring_allreduce_single_rank_is_free():
    assert ring_allreduce_s(1, GIB, 1.0) == 0.0


def test_ring_allreduce_without_bandwidth_is_infinite():
    assert ring_allreduce_s(2, GIB, 0.0) == float("inf")


def test_nvlink_island_bandwidth_matches_measured_h100():
    assert intra_node_gbs(8, True, 900.0, P) == pytest.approx(477.0)


def test_gpus_across_islands_fall_back_to_pcie():
    assert intra_node_gbs(2, False, 900.0, P) == P.pcie_gbps
    assert intra_node_gbs(2, True, 0.0, P) == P.pcie_gbps  # an "island" without NVLink is PCIe too


def test_single_gpu_has_no_intra_node_bottleneck():
    assert intra_node_gbs(1, True, 900.0, P) == float("inf")


def test_one_ndr_rail_gives_48_gbs():
    # 8 ranks on 8 nodes, one GPU each, one NDR HCA (50 GB/s) each: 48 GB/s, the 10x cliff.
    assert network_gbs(50.0, 1, 1, LEVEL_LEAF_GROUP, 1.0, 1.0, P) == pytest.approx(48.0)
    ratio = intra_node_gbs(8, True, 900.0, P) / network_gbs(50.0, 1, 1, LEVEL_LEAF_GROUP, 1.0, 1.0, P)
    assert 9.5 < ratio < 10.5


def test_network_share_grows_with_gpus_per_node():
    dgx = 400.0  # 8 NDR HCAs
    assert network_gbs(dgx, 8, 8, LEVEL_LEAF_GROUP, 1.0, 1.0, P) == pytest.approx(384.0)
    assert network_gbs(dgx, 1, 8, LEVEL_LEAF_GROUP, 1.0, 1.0, P) == pytest.approx(48.0)


def test_two_to_one_spine_halves_bandwidth():
    same_leaf = network_gbs(50.0, 1, 1, LEVEL_LEAF_GROUP, 2.0, 1.0, P)
    via_spine = network_gbs(50.0, 1, 1, LEVEL_POD_GROUP, 2.0, 1.0, P)
    assert via_spine == pytest.approx(same_leaf / 2 * P.spine_factor)


def test_core_level_pays_pod_oversubscription_and_core_factor():
    b = network_gbs(50.0, 1, 1, LEVEL_FABRIC, 1.0, 2.0, P)
    assert b == pytest.approx(48.0 / 2 * P.core_factor)


def test_levels_are_strictly_ordered_on_an_idle_nonblocking_fabric():
    leaf = network_gbs(50.0, 1, 1, LEVEL_LEAF_GROUP, 1.0, 1.0, P)
    spine = network_gbs(50.0, 1, 1, LEVEL_POD_GROUP, 1.0, 1.0, P)
    core = network_gbs(50.0, 1, 1, LEVEL_FABRIC, 1.0, 1.0, P)
    assert intra_node_gbs(8, True, 900.0, P) > leaf > spine > core


def test_link_available_follows_utilisation():
    assert link_available(0.0, False, P) == 1.0
    assert link_available(0.75, False, P) == pytest.approx(0.25)


def test_saturated_link_keeps_a_floor():
    assert link_available(1.0, False, P) == P.min_available


def test_erroring_link_is_cut():
    assert link_available(0.0, True, P) == P.error_factor


def test_oversubscription_from_live_uplinks():
    assert oversubscription(800.0, 800.0) == 1.0
    assert oversubscription(800.0, 400.0) == 2.0  # a 2:1 leaf, or a 1:1 leaf whose uplinks are half busy
    assert oversubscription(800.0, 1600.0) == 1.0  # spare uplinks do not make it faster than 1:1
    assert oversubscription(800.0, 0.0) == float("inf")


def test_latency_grows_with_level():
    assert ring_latency_s(8, LEVEL_ISLAND, P) < ring_latency_s(8, LEVEL_FABRIC, P)
    assert ring_latency_s(8, LEVEL_ISLAND, P) == pytest.approx(14 * 2e-6)
    assert ring_latency_s(1, LEVEL_FABRIC, P) == 0.0


def test_compute_scales_with_strength():
    assert compute_s(0.1, 1.0, 0.0, 1.0, P) == pytest.approx(0.1)
    assert compute_s(0.1, 0.4, 0.0, 1.0, P) == pytest.approx(0.25)  # an A100 takes 2.5x an H100


def test_busy_gpu_slows_compute():
    assert compute_s(0.1, 1.0, 0.5, 1.0, P) == pytest.approx(0.2)


def test_mps_interference_is_partial_and_mig_none():
    assert compute_s(0.1, 1.0, 0.8, P.interference["mps"], P) == pytest.approx(0.1 / (1 - 0.2))
    assert compute_s(0.1, 1.0, 0.8, P.interference["mig"], P) == pytest.approx(0.1)


def test_io_time():
    assert io_s(1e9, 10.0) == pytest.approx(0.1)
    assert io_s(0.0, 0.0) == 0.0


def test_fragmentation_weights():
    assert fragmentation(0, 0, 0, 0.0, 0, P) == 0.0
    assert fragmentation(1, 1, 1, 0.5, 2, P) == pytest.approx(0.02 + 0.02 + 0.05 + 0.005 + 0.01)


def test_fragmentation_never_outweighs_a_ten_percent_slowdown():
    worst_single_node = fragmentation(1, 1, 1, 1.0, 0, P)
    assert worst_single_node < 0.1
