"""The hierarchy every export is written from (fabric/topology/export.py): its notes, refusals, order and tiers,
with each expected text worked out by hand from the fabric built in the test."""

import dataclasses

import pytest
import yaml

from fabric.topology import export_k8s, export_slurm
from fabric.topology.export import FORMATS, Export, ExportRefused, HostFacts, UpperSwitch, register
from tests.fabric.topology.factories import FabricBuilder, three_tier, two_tier
from tests.fabric.topology.test_export import _body, _text


def test_a_three_tier_fabric_labels_its_top_tier_core():
    levels = yaml.safe_load(_text(three_tier().fabric, "kueue"))["spec"]["levels"]
    assert [lv["nodeLabel"] for lv in levels] == [
        "fabric.clusterctl.io/core",
        "fabric.clusterctl.io/spine",
        "fabric.clusterctl.io/leaf",
        "kubernetes.io/hostname",
    ]


def test_a_fourth_tier_is_named_by_its_number_and_every_host_gets_its_chain():
    # h1 - p1leaf - p1spine - core1 - top1 - core2 - p2spine - p2leaf - h2: levels 0 (leaves) to 3 (top1).
    b = FabricBuilder()
    top = b.switch("top1")
    for p in (1, 2):
        core, spine, leaf = b.switch(f"core{p}"), b.switch(f"p{p}spine"), b.switch(f"p{p}leaf")
        b.link(core, top)
        b.link(spine, core)
        b.link(leaf, spine)
        b.link(b.host(f"h{p}"), leaf)
    assert _body(_text(b.fabric, "kueue-labels"))[1:] == [
        f"kubectl label node h{p} --overwrite fabric.clusterctl.io/tier3=top1 fabric.clusterctl.io/core=core{p} "
        f"fabric.clusterctl.io/spine=p{p}spine fabric.clusterctl.io/leaf=p{p}leaf"
        for p in (1, 2)
    ]


def test_hosts_with_nvlink_inside_the_server_are_counted_without_those_in_a_domain():
    # h1-1: NVLink inside; h2-1: in a domain of its own (no block); the two others: nothing known. 1 of 4.
    fabric = two_tier(leaves=2, spines=1, hosts_per_leaf=2).fabric
    facts = {"h1-1": HostFacts(nvlink=True), "h2-1": HostFacts(nvlink=True, nvlink_domain="nvl-9")}
    with pytest.raises(
        ExportRefused, match=r"\(1 of the 4 compute hosts have GPUs joined by NVLink inside the server\)"
    ):
        _text(fabric, "slurm-block", facts)


def test_hosts_without_facts_have_no_known_nvlink():
    with pytest.raises(ExportRefused, match=r"\(none of the 4 compute hosts has GPUs known to be joined by NVLink\)"):
        _text(two_tier(leaves=2, spines=1, hosts_per_leaf=2).fabric, "slurm-block")


def _with_storage(n: int) -> str:
    b = FabricBuilder()
    sw = b.switch("sw1")
    b.link(b.host("c1"), sw)
    for i in range(1, n + 1):
        b.link(b.host(f"s{i}", role="storage"), sw)
    return _text(b.fabric, "slurm-tree")


def test_six_names_are_all_shown():
    assert "#   6 storage servers (run no jobs): s1, s2, s3, s4, s5, s6\n" in _with_storage(6)


def test_a_seventh_name_is_counted_not_shown():
    assert "#   7 storage servers (run no jobs): s1, s2, s3, s4, s5, s6 and 1 more\n" in _with_storage(7)


def test_register_hands_the_writer_back():
    def writer(h):
        return Export("x", "", "text/plain", "x")

    try:
        assert register("test-only-format")(writer) is writer
        assert FORMATS["test-only-format"] is writer
    finally:
        FORMATS.pop("test-only-format", None)


def test_the_writers_stay_callable_under_their_own_names():
    assert FORMATS["slurm-tree"] is export_slurm.slurm_tree
    assert FORMATS["slurm-yaml"] is export_slurm.slurm_yaml
    assert FORMATS["volcano"] is export_k8s.volcano


def test_host_facts_and_exports_cannot_be_changed_in_place():
    with pytest.raises(dataclasses.FrozenInstanceError):
        HostFacts().nvlink = True
    with pytest.raises(dataclasses.FrozenInstanceError):
        Export("slurm-tree", "", "text/plain", "topology.conf").text = "x"


def test_an_upper_switch_has_no_graph_index_until_given_one():
    assert UpperSwitch("spine1", 1, ["leaf1"]).index == -1


def _spines_cabled_to_each_other(pairs: list[tuple[str, str]]) -> FabricBuilder:
    b = two_tier(leaves=2, spines=0, hosts_per_leaf=1)
    for n in range(1, 6):
        sp = b.switch(f"sp{n}")
        b.link("guid-leaf1", sp)
        b.link("guid-leaf2", sp)
    for x, y in pairs:
        b.link(f"guid-{x}", f"guid-{y}")
    return b


_NO_TIERS = (
    "cluster lab: the fabric has no clear tiers: switches of the same tier are cabled to each other ({}), which "
)
_NO_TIERS += "a tree of leaves and spines cannot say. If one of them is a spine, set its role (admin, or PATCH "
_NO_TIERS += "/api/v1/switches/<id>/ with role) and export again."


def test_three_pairs_of_one_tier_are_all_named_in_name_order():
    b = _spines_cabled_to_each_other([("sp1", "sp5"), ("sp4", "sp1"), ("sp2", "sp3")])
    with pytest.raises(ExportRefused) as err:
        _text(b.fabric, "slurm-tree")
    assert str(err.value) == _NO_TIERS.format("sp1 - sp4 (both spine); sp1 - sp5 (both spine); sp2 - sp3 (both spine)")


def test_a_fourth_pair_of_one_tier_is_counted():
    b = _spines_cabled_to_each_other([("sp1", "sp5"), ("sp1", "sp4"), ("sp2", "sp3"), ("sp3", "sp4")])
    with pytest.raises(ExportRefused) as err:
        _text(b.fabric, "slurm-tree")
    assert str(err.value) == _NO_TIERS.format(
        "sp1 - sp4 (both spine); sp1 - sp5 (both spine); sp2 - sp3 (both spine) and 1 more"
    )


def test_two_switches_no_leaf_reaches_are_a_note_not_a_tier_conflict():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1)
    b.link(b.switch("isl1"), b.switch("isl2"))
    text = _text(b.fabric, "slurm-tree")
    assert "#   2 switches no leaf reaches: isl1, isl2\n" in text
    assert _body(text) == ["SwitchName=leaf1 Nodes=h1-1", "SwitchName=spine1 Switches=leaf1"]


def test_the_refusal_without_a_leaf_lists_what_was_left_out():
    b = two_tier(leaves=1, spines=2, hosts_per_leaf=0)
    b.link(b.host("stor1", role="storage"), "guid-leaf1")
    with pytest.raises(ExportRefused) as err:
        _text(b.fabric, "slurm-tree")
    assert str(err.value) == (
        "cluster lab: no leaf switch has a live link to a named compute host, so no leaf can be identified to place "
        "servers under (left out: 1 storage server (run no jobs): stor1)"
    )


def test_the_refusal_without_a_leaf_and_nothing_left_out_ends_there():
    b = FabricBuilder()
    b.switch("sw1")
    with pytest.raises(ExportRefused) as err:
        _text(b.fabric, "slurm-tree")
    assert str(err.value) == (
        "cluster lab: no leaf switch has a live link to a named compute host, so no leaf can be identified to place "
        "servers under"
    )


def test_a_leaf_whose_only_server_is_down_is_an_empty_leaf():
    b = two_tier(leaves=2, spines=1, hosts_per_leaf=1)
    leaf3 = b.switch("leaf3")
    b.link(leaf3, "guid-spine1")
    b.link(b.host("h3"), leaf3, up=False)
    text = _text(b.fabric, "slurm-tree")
    assert "#   1 host with no live link to the fabric: h3\n" in text
    assert "#   1 leaf with no compute host: leaf3\n" in text


def test_servers_on_a_spine_come_after_the_leaves_whatever_the_names():
    # aspine joins leaf1 and leaf2 and carries compute host d1: its group "aspine-hosts" is listed after them.
    b = FabricBuilder()
    spine = b.switch("aspine")
    for n in (1, 2):
        leaf = b.switch(f"leaf{n}")
        b.link(b.host(f"h{n}"), leaf)
        b.link(leaf, spine)
    b.link(b.host("d1"), spine)
    assert _body(_text(b.fabric, "slurm-tree")) == [
        "SwitchName=leaf1 Nodes=h1",
        "SwitchName=leaf2 Nodes=h2",
        "SwitchName=aspine-hosts Nodes=d1",
        "SwitchName=aspine Switches=aspine-hosts,leaf[1-2]",
    ]


def test_the_summary_counts_groups_of_rail_leaves():
    # r1 and r2 each have an HCA on leaf1 and one on leaf2 (one group of rail leaves); h3 is on leaf3 alone.
    b = FabricBuilder()
    spine = b.switch("spine1")
    leaves = [b.switch(f"leaf{n}") for n in (1, 2, 3)]
    for leaf in leaves:
        b.link(leaf, spine)
    for r in ("r1", "r2"):
        b.host(r)
        b.link(r, leaves[0])
        b.link(r, leaves[1])
    b.link(b.host("h3"), leaves[2])
    assert "# 3 compute hosts: 3 under 3 leaves in 2 leaf groups (1 of rail leaves).\n" in _text(b.fabric, "slurm-tree")


def test_a_core_lists_only_the_spines_that_lead_down_to_servers():
    # p3spine1 hangs under core1 but its one leaf's server is down: it has no child, so core1 does not list it.
    b = three_tier(pods=2, leaves_per_pod=1, spines_per_pod=1, cores=1, hosts_per_leaf=1)
    p3spine, p3leaf = b.switch("p3spine1"), b.switch("p3leaf1")
    b.link(p3spine, "guid-core1")
    b.link(p3leaf, p3spine)
    b.link(b.host("p3h1-1"), p3leaf, up=False)
    assert _body(_text(b.fabric, "slurm-tree")) == [
        "SwitchName=p1leaf1 Nodes=p1h1-1",
        "SwitchName=p2leaf1 Nodes=p2h1-1",
        "SwitchName=p1spine1 Switches=p1leaf1",
        "SwitchName=p2spine1 Switches=p2leaf1",
        "SwitchName=core1 Switches=p1spine1,p2spine1",
    ]


def test_an_empty_leaf_does_not_join_two_spines_into_one_domain():
    # leafE (its server down) hangs under both sp1 and sp2; leafA is under sp1 only, leafB under sp2 only.
    b = FabricBuilder()
    sp1, sp2 = b.switch("sp1"), b.switch("sp2")
    for name, spines, up in (("A", [sp1], True), ("B", [sp2], True), ("E", [sp1, sp2], False)):
        leaf = b.switch(f"leaf{name}")
        b.link(b.host(f"h{name}"), leaf, up=up)
        for sp in spines:
            b.link(leaf, sp)
    assert _body(_text(b.fabric, "kueue-labels"))[1:] == [
        "kubectl label node ha --overwrite fabric.clusterctl.io/spine=sp1 fabric.clusterctl.io/leaf=leafA",
        "kubectl label node hb --overwrite fabric.clusterctl.io/spine=sp2 fabric.clusterctl.io/leaf=leafB",
    ]
