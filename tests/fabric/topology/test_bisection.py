import dataclasses

import pytest

from fabric.topology.bisection import BisectionReport, bisection_bandwidth
from fabric.topology.graph import FabricGraph
from fabric.topology.maxflow import EPS, MaxFlow
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


def test_one_gbps_ports_still_carry_and_give_a_ratio():
    # One 1 Gb/s server on each of two leaves under a 100 Gb/s spine: half A (leaf1's port) pushes its 1 Gb/s
    # across; the smaller half holds 1 Gb/s, so the ratio is 1 / 1 = 1.0.
    b = FabricBuilder()
    spine = b.switch("spine1")
    for n in (1, 2):
        leaf = b.switch(f"leaf{n}")
        b.link(b.host(f"h{n}"), leaf, 1.0)
        b.link(leaf, spine, 100.0)
    r = bisect(b)
    assert (r.gbps, r.ratio, r.half_a_gbps, r.half_b_gbps) == (1.0, 1.0, 1.0, 1.0)


def _interleaved_pods() -> FabricBuilder:
    # Pod 0 = leafa + leafc under spx, pod 1 = leafb + leafd under spy (pods are numbered by their first leaf
    # by name); one 100 Gb/s server per leaf; the spines reach each other only through core1, at 50 Gb/s each.
    b = FabricBuilder()
    core = b.switch("core1")
    for spine, leaves in (("spx", ("leafa", "leafc")), ("spy", ("leafb", "leafd"))):
        sp = b.switch(spine)
        b.link(sp, core, 50.0)
        for name in leaves:
            leaf = b.switch(name)
            b.link(b.host(f"h-{name}"), leaf, 100.0)
            b.link(leaf, sp, 100.0)
    return b


def test_the_halves_follow_the_pods_not_the_switch_names():
    # Ports in tree order: pod 0 (leafa, leafc) then pod 1 (leafb, leafd): half A is pod 0, and all 200 Gb/s of
    # it must cross the 50 Gb/s core links: 50 (spx -> core1 is the narrowest cut), ratio 50 / 200.
    r = bisect(_interleaved_pods())
    assert r.half_a_switches == ["leafa", "leafc"]
    assert r.half_b_switches == ["leafb", "leafd"]
    assert (r.gbps, r.ratio) == (50.0, 0.25)


def test_leaves_come_before_a_spine_that_carries_hosts_whatever_their_names():
    # aspine (cabled to both leaves) carries two storage ports; by name it would come first, by tier it comes
    # after leaf1 and leaf2: half A = the two leaves' servers, half B = aspine's two ports; 2 x 100 cross.
    b = FabricBuilder()
    spine = b.switch("aspine")
    for n in (1, 2):
        leaf = b.switch(f"leaf{n}")
        b.link(b.host(f"h{n}"), leaf, 100.0)
        b.link(leaf, spine, 100.0)
        b.link(b.host(f"s{n}", role="storage"), spine, 100.0)
    r = bisect(b)
    assert r.half_a_switches == ["leaf1", "leaf2"]
    assert r.half_b_switches == ["aspine"]
    assert r.gbps == 200.0


def test_a_core_switch_s_own_host_comes_after_every_pod():
    # core1 (an operator's core, so in no pod) carries one server; pod 0 = leafa (1 port) under spa, pod 1 =
    # leafb (2 ports) under spb. Tree order: leafa's port, leafb's two, core1's last; 4 ports, half A = the first
    # 2: leafa's and leafb's first (h-b1), half B = h-b2 on leafb and core1's. A -> B: leafa's 100 goes up spa,
    # core1 (to its own host); h-b1's 100 stays in leafb (to h-b2): 200.
    b = FabricBuilder()
    core = b.switch("core1", role="core")
    b.link(b.host("h-core"), core, 100.0)
    for spine, leaf_name, hosts in (("spa", "leafa", ("h-a1",)), ("spb", "leafb", ("h-b1", "h-b2"))):
        sp = b.switch(spine)
        b.link(sp, core, 100.0)
        leaf = b.switch(leaf_name)
        b.link(leaf, sp, 100.0)
        for h in hosts:
            b.link(b.host(h), leaf, 100.0)
    r = bisect(b)
    assert r.half_a_switches == ["leafa", "leafb"]
    assert r.half_b_switches == ["core1", "leafb"]
    assert r.gbps == 200.0


def test_maxflow_sends_flow_back_over_a_used_arc():
    # Unit arcs; source 0, sink 5. Two disjoint paths exist (0-3-2-5 and 0-4-1-5) and the two arcs into 5 are a
    # cut of 2, so the answer is 2. The first phase's blocking flow takes 0-3-1-5 (arcs in the order added) and
    # stops at 1; the second phase needs the residual of 3->1 to send 0-4-1-3-2-5.
    net = MaxFlow(6)
    for u, v in [(0, 3), (0, 4), (1, 0), (1, 5), (2, 1), (2, 5), (3, 1), (3, 2), (4, 0), (4, 1)]:
        net.add_edge(u, v, 1)
    assert net.max_flow(0, 5) == 2


def test_maxflow_from_a_vertex_to_itself_is_zero():
    net = MaxFlow(2)
    net.add_edge(0, 1, 5.0)
    assert net.max_flow(0, 0) == 0.0


def test_maxflow_an_arc_that_only_runs_backwards():
    # cap 0 forwards, 0.5 backwards: 1 -> 0 carries 0.5, 0 -> 1 nothing.
    net = MaxFlow(2)
    net.add_edge(0, 1, 0.0, 0.5)
    assert (net.max_flow(0, 1), net.max_flow(1, 0)) == (0.0, 0.5)


def test_maxflow_carries_on_from_the_arc_before_the_saturated_one():
    # s=0 -> a=1 (10), a -> b=2 (3), b -> t=3 over three parallel arcs of 1: the cut is a -> b, 3. After each
    # push along s-a-b-t the search resumes at b (the head of a -> b), not at a, so a -> b is used once a push.
    net = MaxFlow(4)
    net.add_edge(0, 1, 10)
    net.add_edge(1, 2, 3)
    for _ in range(3):
        net.add_edge(2, 3, 1)
    assert net.max_flow(0, 3) == 3


def test_maxflow_a_residue_of_eps_counts_as_nothing():
    # f is just above EPS and s -> a holds f + EPS exactly: after f goes along s-a-t, s -> a keeps EPS, which is
    # treated as saturated, so the second a -> t arc gets nothing.
    f, cap = 1.0000000000000005e-09, 2.0000000000000005e-09
    assert cap - f == EPS
    net = MaxFlow(3)
    net.add_edge(0, 1, cap)
    net.add_edge(1, 2, f)
    net.add_edge(1, 2, f)
    assert net.max_flow(0, 2) == f
