import dataclasses

import pytest

from fabric.topology.bisection import BisectionReport, bisection_bandwidth
from fabric.topology.graph import FabricGraph
from fabric.topology.maxflow import MaxFlow
from fabric.topology.tiers import detect_tiers
from tests.fabric.topology.factories import FabricBuilder, three_tier, two_tier


def bisect(b: FabricBuilder) -> BisectionReport:
    g = FabricGraph.build(b.fabric)
    return bisection_bandwidth(g, detect_tiers(g))


def test_maxflow_textbook_example():
    # CLRS figure 26.1: max flow 23.
    net = MaxFlow(6)
    for u, v, c in [
        (0, 1, 16),
        (0, 2, 13),
        (1, 3, 12),
        (2, 1, 4),
        (2, 4, 14),
        (3, 2, 9),
        (3, 5, 20),
        (4, 3, 7),
        (4, 5, 4),
    ]:
        net.add_edge(u, v, c)
    assert net.max_flow(0, 5) == 23


def test_maxflow_undirected_pair_carries_either_way():
    net = MaxFlow(2)
    net.add_edge(1, 0, 5.0, 5.0)
    assert net.max_flow(0, 1) == 5.0


def test_non_blocking_tree_gives_half_the_ports_at_full_rate():
    # 4 leaves x 4 hosts x 400 = 16 ports; each leaf 2 spines x 2 cables x 400 = 1600 up (1:1).
    # Halves: leaves 1-2 (8 ports) vs leaves 3-4: bisection = 8 x 400 = 3200.
    r = bisect(two_tier(leaves=4, spines=2, hosts_per_leaf=4, links_per_pair=2))
    assert r.half_a_ports == r.half_b_ports == 8
    assert r.half_a_switches == ["leaf1", "leaf2"]
    assert r.half_b_switches == ["leaf3", "leaf4"]
    assert r.gbps == 3200.0
    assert r.ratio == 1.0


def test_two_to_one_tree_halves_the_bisection():
    # Same tree with 1 cable per leaf-spine pair: 800 up per leaf for 1600 down.
    # Leaves 1-2 can push 2 x 800 = 1600 across: half of the 3200 of the 1:1 tree.
    r = bisect(two_tier(leaves=4, spines=2, hosts_per_leaf=4, links_per_pair=1))
    assert r.gbps == 1600.0
    assert r.ratio == 0.5


def test_three_tier_non_blocking_is_full():
    # 2 pods x 2 leaves x 2 hosts; each leaf 2 up, each spine 2 down / 2 up: non-blocking.
    # Halves = pod 1 (4 ports) vs pod 2: 4 x 400 = 1600.
    r = bisect(three_tier(pods=2, leaves_per_pod=2, spines_per_pod=2, cores=2, hosts_per_leaf=2))
    assert r.gbps == 1600.0
    assert r.ratio == 1.0


def test_three_tier_thin_core_is_the_cut():
    # Same, with one core: each spine has 1 core cable, so at most 2 x 400 leave a pod.
    r = bisect(three_tier(pods=2, leaves_per_pod=2, spines_per_pod=2, cores=1, hosts_per_leaf=2))
    assert r.gbps == 800.0


def test_single_switch_is_split_inside_the_switch():
    b = FabricBuilder()
    leaf = b.switch("leaf1")
    for i in range(6):
        b.link(b.host(f"h{i}"), leaf, 100.0)
    r = bisect(b)
    assert r.gbps == 300.0
    assert r.half_a_switches == r.half_b_switches == ["leaf1"]


def test_down_spine_cable_lowers_bisection():
    b = two_tier(leaves=2, spines=1, hosts_per_leaf=2, links_per_pair=2)
    b.fabric.links[-1] = dataclasses.replace(b.fabric.links[-1], up=False)  # leaf2 keeps 1 x 400 up
    r = bisect(b)
    assert r.gbps == 400.0


def test_disconnected_halves_have_zero_bisection():
    b = FabricBuilder()
    for n in (1, 2):
        leaf = b.switch(f"leaf{n}")
        b.link(b.host(f"h{n}"), leaf)
    r = bisect(b)
    assert r.gbps == 0.0
    assert r.ratio == 0.0


def test_no_hosts_means_no_ratio():
    b = FabricBuilder()
    b.switch("leaf1")
    r = bisect(b)
    assert r.gbps == 0.0
    assert r.ratio is None


def test_odd_port_count_puts_the_extra_port_in_half_b():
    r = bisect(two_tier(leaves=1, spines=1, hosts_per_leaf=3))
    assert (r.half_a_ports, r.half_b_ports) == (1, 2)
    assert r.gbps == pytest.approx(400.0)
