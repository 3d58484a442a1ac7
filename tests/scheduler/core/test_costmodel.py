"""Each term of the cost model (scheduler/core/costmodel.py), with DESIGN.md's published figures."""

import math

import pytest

from scheduler.core.costmodel import (
    compute_s,
    fragmentation,
    hca_reach,
    intra_node_gbs,
    io_s,
    link_available,
    network_gbs,
    oversubscription,
    ring_allreduce_s,
    ring_latency_s,
    shared_gbs,
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
    # 8 ranks on 8 nodes, one GPU each, one NDR HCA (50 GB/s) each: 50 x 0.96 = 48 GB/s, the 10x cliff.
    assert network_gbs(50.0, 50.0, 1.0, 0, [], P) == pytest.approx(48.0)
    ratio = intra_node_gbs(8, True, 900.0, P) / network_gbs(50.0, 50.0, 1.0, 0, [], P)
    assert 9.5 < ratio < 10.5


def test_hca_reach_of_k_gpus():
    assert hca_reach(8, 8, 8) == 1.0
    assert hca_reach(1, 8, 8) == pytest.approx(1 / 8)  # one GPU of a rail-optimised DGX: one rail of eight
    assert hca_reach(4, 8, 8) == pytest.approx(0.5)
    assert hca_reach(1, 8, 1) == 1.0  # one HCA for the node: every GPU reaches all of it
    assert hca_reach(1, 8, 2) == pytest.approx(0.5)  # two rails: never less than one of them


def test_network_share_grows_with_gpus_per_node_on_a_rail_optimised_node():
    dgx = 400.0  # 8 NDR HCAs: 8 x 50 GB/s
    assert network_gbs(dgx, dgx, hca_reach(8, 8, 8), 0, [], P) == pytest.approx(384.0)  # 400 x 0.96
    assert network_gbs(dgx, dgx, hca_reach(1, 8, 8), 0, [], P) == pytest.approx(48.0)  # 50 x 0.96


def test_shared_link_gives_the_max_min_fair_share_and_what_utilisation_leaves():
    assert shared_gbs(100.0, 100.0, 0) == 100.0  # alone, idle
    assert shared_gbs(100.0, 30.0, 0) == 30.0  # alone, 70 % busy with traffic the engine does not place
    assert shared_gbs(100.0, 100.0, 3) == pytest.approx(25.0)  # beside three rings: 100 / 4
    assert shared_gbs(100.0, 100.0, 0, loss=0.9) == 100.0  # one flow alone collides with nobody (ECMP)
    assert shared_gbs(100.0, 100.0, 1, loss=0.9) == pytest.approx(45.0)  # 100 / 2 x 0.9


def test_a_ring_crossing_a_two_to_one_spine_alone_keeps_its_hca_rate():
    # A leaf of 8 NDR nodes at 2:1: uplinks 8 x 400 / 2 = 1600 Gb/s = 200 GB/s. One crossing ring is limited by
    # its 50 GB/s HCA, not by them (the old model halved it statically: 48 / 2 x 0.9 = 21.6 GB/s whatever the
    # load, which the replay's network model, scheduler/sim/runtime.py, does not do).
    up = [(200.0, 200.0, 0, P.spine_factor)]
    assert network_gbs(50.0, 50.0, 1.0, 0, up, P) == pytest.approx(48.0)


def test_crossing_rings_of_one_leaf_share_its_uplinks():
    # Beside 7 other crossing rings of the same leaf: 200 / 8 x 0.9 (ECMP) x 0.96 = 21.6 GB/s < 48.
    up = [(200.0, 200.0, 7, P.spine_factor)]
    assert network_gbs(50.0, 50.0, 1.0, 0, up, P) == pytest.approx(200.0 / 8 * 0.9 * 0.96)


def test_the_core_adds_its_pod_uplinks_with_the_core_factor():
    # Leaf uplinks idle (200 GB/s), the pod's 100 GB/s to the core shared with 3 rings: 100 / 4 x 0.8 x 0.96.
    up = [(200.0, 200.0, 0, P.spine_factor), (100.0, 100.0, 3, P.core_factor)]
    assert network_gbs(50.0, 50.0, 1.0, 0, up, P) == pytest.approx(25.0 * 0.8 * 0.96)


def test_rings_on_one_hca_share_it():
    # Two 4-GPU jobs on one single-HCA node, each spanning nodes: 50 / 2 x 0.96 = 24 GB/s each.
    assert network_gbs(50.0, 50.0, hca_reach(4, 8, 1), 1, [], P) == pytest.approx(24.0)


def test_a_lone_crossing_ring_pays_only_latency():
    # Alone on an idle fabric the bandwidth is the HCA's at every level; each level adds per-hop latency.
    leaf = network_gbs(50.0, 50.0, 1.0, 0, [], P)
    spine = network_gbs(50.0, 50.0, 1.0, 0, [(200.0, 200.0, 0, P.spine_factor)], P)
    core = network_gbs(50.0, 50.0, 1.0, 0, [(200.0, 200.0, 0, P.spine_factor), (100.0, 100.0, 0, P.core_factor)], P)
    assert leaf == spine == core
    assert ring_latency_s(16, LEVEL_LEAF_GROUP, P) < ring_latency_s(16, LEVEL_POD_GROUP, P)
    assert ring_latency_s(16, LEVEL_POD_GROUP, P) < ring_latency_s(16, LEVEL_FABRIC, P)


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


def test_gb_is_the_decimal_gigabyte():
    # 10^9 bytes at 1 GB/s take exactly one second: GB/s here are 10^9 bytes per second, not GiB.
    assert io_s(1e9, 1.0) == 1.0


def test_a_single_rank_needs_no_bandwidth_to_all_reduce():
    # One rank has nobody to exchange with: free even where there is no bandwidth at all.
    assert ring_allreduce_s(1, GIB, 0.0) == 0.0


def test_nothing_to_all_reduce_needs_no_bandwidth():
    assert ring_allreduce_s(8, 0.0, 0.0) == 0.0


def test_even_one_byte_all_reduced_takes_time():
    # 2 ranks, 1 byte at 1e-9 GB/s (one byte per second): 2 x 1/2 x 1 B / (1 B/s) = 1 s.
    assert ring_allreduce_s(2, 1.0, 1e-9) == pytest.approx(1.0)


def test_two_ranks_pay_two_ring_steps_of_latency():
    # 2(n - 1) = 2 steps of the island's 2 us.
    assert ring_latency_s(2, LEVEL_ISLAND, P) == pytest.approx(2 * 2e-6)


def test_a_level_beyond_the_latency_table_pays_the_highest_latency():
    # Levels above the last one listed (the fabric's 7 us) cost the fabric's latency per step.
    assert ring_latency_s(2, LEVEL_FABRIC + 3, P) == pytest.approx(2 * 7e-6)


def test_a_leaf_without_host_capacity_is_not_oversubscribed():
    # Nothing faces the hosts, so nothing competes for the uplinks, whatever they have left.
    assert oversubscription(0.0, 100.0) == 1.0
    assert oversubscription(0.0, 0.0) == 1.0


def test_oversubscription_is_a_ratio_at_any_scale():
    # 1 Gb/s of hosts over 0.5 Gb/s of live uplinks is 2:1, as 800 over 400 is.
    assert oversubscription(1.0, 0.5) == 2.0
    assert oversubscription(0.5, 0.25) == 2.0


def test_a_node_reporting_no_gpus_reaches_all_of_its_hcas():
    assert hca_reach(1, 0, 8) == 1.0


def test_a_node_without_a_live_hca_counts_as_one_hca():
    # A host with no live HCA link (0 rails) is priced as a single-HCA node: all of it, not a crash.
    assert hca_reach(1, 8, 0) == 1.0


def test_hca_reach_is_at_most_the_whole_node():
    # Reach is a share of the node's HCAs: more GPUs than the node lists still reach all of them, no more.
    assert hca_reach(16, 8, 8) == 1.0


def test_a_little_nvlink_is_still_nvlink():
    # An island with 1 GB/s of NVLink gets 1 x 0.53, not the PCIe rate.
    assert intra_node_gbs(2, True, 1.0, P) == pytest.approx(0.53)


def test_a_gpu_of_zero_strength_is_very_slow_but_finite():
    # An unknown model of strength 0 must not divide by zero: it is priced as extremely slow instead.
    t = compute_s(0.1, 0.0, 0.0, 1.0, P)
    assert math.isfinite(t)
    assert t > 1000 * compute_s(0.1, 1.0, 0.0, 1.0, P)


def test_reading_without_bandwidth_never_finishes():
    assert io_s(GIB, 0.0) == float("inf")


def test_even_one_byte_read_takes_time():
    # 1 byte at 1e-9 GB/s (one byte per second): 1 s.
    assert io_s(1.0, 1e-9) == pytest.approx(1.0)


def test_fewer_nodes_than_the_minimum_earn_no_bonus():
    # extra_nodes below 0 (nodes beyond the fewest) is clamped: the spread term never lowers the score.
    assert fragmentation(0, 0, 0, 0.0, -1, P) == 0.0
