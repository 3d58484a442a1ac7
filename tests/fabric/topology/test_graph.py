import pytest

from fabric.topology.graph import HOST_HOST, HOST_SWITCH, LOOPBACK, SWITCH_SWITCH, FabricGraph, natural_key
from fabric.topology.types import Fabric, THost, TLink, TSwitch
from tests.fabric.topology.factories import FabricBuilder


def test_natural_key_orders_numbers_by_value():
    assert sorted(["ib10", "ib2", "ib1"], key=natural_key) == ["ib1", "ib2", "ib10"]


def test_host_link_is_indexed_switch_first_whatever_the_order_given():
    b = FabricBuilder()
    leaf = b.switch("leaf1")
    b.link(leaf, b.host("h1"))
    b.link(b.host("h2"), leaf)
    g = FabricGraph.build(b.fabric)
    assert g.link_kind == [HOST_SWITCH, HOST_SWITCH]
    assert g.end_a == [0, 0]
    assert g.end_b == [0, 1]
    assert [h for h, _ in g.sw_hosts[0]] == [0, 1]


def test_parallel_links_are_kept_one_entry_each():
    b = FabricBuilder()
    a, c = b.switch("a"), b.switch("c")
    b.link(a, c, count=3)
    g = FabricGraph.build(b.fabric)
    assert g.link_kind == [SWITCH_SWITCH] * 3
    assert len(g.sw_adj[0]) == 3


def test_down_links_are_structure_but_not_state():
    b = FabricBuilder()
    leaf = b.switch("leaf1")
    b.link(b.host("h1"), leaf, up=False)
    g = FabricGraph.build(b.fabric)
    assert len(g.sw_hosts_all[0]) == 1
    assert g.sw_hosts[0] == []
    assert g.host_links[0] == []


def test_host_to_host_cable_is_not_a_fabric_path():
    b = FabricBuilder()
    b.link(b.host("h1"), b.host("h2"))
    g = FabricGraph.build(b.fabric)
    assert g.link_kind == [HOST_HOST]
    assert g.host_links == [[], []]


def test_link_to_an_unknown_vertex_is_rejected_by_name():
    fabric = Fabric(switches=[TSwitch("s1", "leaf1")], links=[TLink("l1", "s1", "ghost", 400.0)])
    with pytest.raises(ValueError, match="'ghost'"):
        FabricGraph.build(fabric)


def test_duplicate_switch_key_is_rejected():
    with pytest.raises(ValueError, match="twice"):
        FabricGraph.build(Fabric(switches=[TSwitch("s1", "a"), TSwitch("s1", "b")]))


def test_key_used_for_switch_and_host_is_rejected():
    with pytest.raises(ValueError, match="both a switch and a host"):
        FabricGraph.build(Fabric(switches=[TSwitch("x", "a")], hosts=[THost("x")]))


def test_switch_self_loop_is_a_loopback_outside_every_path():
    # A switch cabled to itself (issue 13): kept and flagged, never a neighbour of anything.
    fabric = Fabric(switches=[TSwitch("s1", "a")], links=[TLink("l1", "s1", "s1", 400.0)])
    graph = FabricGraph.build(fabric)
    assert (graph.link_kind, graph.loopbacks) == ([LOOPBACK], [0])
    assert (graph.sw_adj_all, graph.sw_adj) == ([[]], [[]])


def test_switch_order_is_natural_by_name():
    b = FabricBuilder()
    for name in ("ib10", "ib2", "ib1"):
        b.switch(name)
    g = FabricGraph.build(b.fabric)
    assert [g.switch_names[i] for i in g.switch_order()] == ["ib1", "ib2", "ib10"]


def _graph_of(a: str, b: str) -> FabricGraph:
    fb = FabricBuilder()
    fb.switch("sw1")
    fb.host("h1")
    fb.link(a, b)
    return FabricGraph.build(fb.fabric)


def test_a_link_from_a_host_to_an_unknown_end_names_that_end():
    with pytest.raises(ValueError) as err:
        _graph_of("h1", "ghost")
    assert str(err.value) == "link 'l1' names 'ghost', which is neither a switch nor a host"


def test_a_link_from_an_unknown_end_to_a_host_names_that_end():
    with pytest.raises(ValueError, match="names 'ghost', which is neither"):
        _graph_of("ghost", "h1")


def test_a_link_from_a_switch_to_an_unknown_end_names_that_end():
    with pytest.raises(ValueError, match="names 'ghost', which is neither"):
        _graph_of("guid-sw1", "ghost")


def test_a_link_between_two_unknown_ends_names_the_first():
    with pytest.raises(ValueError, match="names 'ghost-a', which is neither"):
        _graph_of("ghost-a", "ghost-b")


def test_the_four_link_kinds():
    fb = FabricBuilder()
    s1, s2 = fb.switch("s1"), fb.switch("s2")
    h1, h2 = fb.host("h1"), fb.host("h2")
    for a, b in ((s1, s2), (h1, s1), (s2, h2), (h1, h2), (s1, s1)):
        fb.link(a, b)
    g = FabricGraph.build(fb.fabric)
    assert g.link_kind == [SWITCH_SWITCH, HOST_SWITCH, HOST_SWITCH, HOST_HOST, LOOPBACK]
    assert len({SWITCH_SWITCH, HOST_SWITCH, HOST_HOST, LOOPBACK}) == 4
