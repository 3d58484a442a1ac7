"""The fabric in the schedulers' formats (fabric/topology/export*.py): hierarchy, refusals and exact outputs.

Every expected file below is written by hand from the fabric drawn in the test; the real captures' figures come from
tests/fixtures/SOURCES.md (SX6036: leaves ib1-ib6, spines ib7/ib8, storage tank1 on ib7; topograph's NDR DGX: 31
leaves, 9 spines, 121 named hosts, 72 unnamed HCAs each its own system).
"""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from fabric.importers.fattree import generate_fat_tree
from fabric.importers.ibnetdiscover import parse_ibnetdiscover
from fabric.topology.convert import fabric_from_parsed
from fabric.topology.export import (
    ExportInput,
    ExportRefused,
    Group,
    Hierarchy,
    HostFacts,
    build_hierarchy,
    format_names,
    render,
)
from fabric.topology.export_slurm import blocks_of
from fabric.topology.types import Fabric, THost
from tests.fabric.topology.factories import FIXTURES, SX6036, FabricBuilder, two_tier

NDR_DGX = FIXTURES / "ibnetdiscover_topograph_ndr_dgx.topo"
HEAD = "written by clusterctl export_topology from its fabric."


def _capture(path) -> ExportInput:
    fabric = fabric_from_parsed(parse_ibnetdiscover(path.read_text()))
    facts = {h.key: HostFacts(unnamed=h.key.startswith("unnamed-")) for h in fabric.hosts}
    return ExportInput("lab", fabric, facts)


def _text(fabric: Fabric, fmt: str, hosts: dict[str, HostFacts] | None = None) -> str:
    return render(ExportInput("lab", fabric, hosts or {}), fmt).text


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def gb200(domains_per_leaf: int = 2, trays: int = 4) -> tuple[Fabric, dict[str, HostFacts]]:
    """Two leaves under two spines; per leaf `domains_per_leaf` NVLink domains of `trays` servers each
    (gb001.. in order), named nvl-1, nvl-2, ... leaf by leaf."""
    b = FabricBuilder()
    spines = [b.switch("spine1"), b.switch("spine2")]
    facts: dict[str, HostFacts] = {}
    n = 0
    for lf in (1, 2):
        leaf = b.switch(f"leaf{lf}")
        for sp in spines:
            b.link(leaf, sp)
        for d in range(domains_per_leaf):
            domain = f"nvl-{(lf - 1) * domains_per_leaf + d + 1}"
            for _ in range(trays):
                n += 1
                host = b.host(f"gb{n:03d}")
                b.link(host, leaf)
                facts[host] = HostFacts(nvlink_domain=domain, nvlink=True)
    return b.fabric, facts


#
# The hierarchy
#


def test_formats_are_listed_slurm_first():
    assert format_names() == ["slurm-tree", "slurm-block", "slurm-yaml", "kueue", "kueue-labels", "volcano"]


def test_unknown_format_names_the_formats():
    with pytest.raises(ValueError, match="unknown format 'pbs'; the formats are slurm-tree, slurm-block"):
        render(ExportInput("lab", two_tier().fabric), "pbs")


def test_two_tier_tree_exact():
    fabric = two_tier(leaves=2, spines=2, hosts_per_leaf=2).fabric
    assert _text(fabric, "slurm-tree") == (
        f"# Slurm topology.conf for TopologyPlugin=topology/tree of cluster lab: {HEAD}\n"
        "# 4 compute hosts: 4 under 2 leaves.\n"
        "# Above the leaves: 2 switches, 1 spine domain. Links that are down are left out.\n"
        "SwitchName=leaf1 Nodes=h1-[1-2]\n"
        "SwitchName=leaf2 Nodes=h2-[1-2]\n"
        "SwitchName=spine1 Switches=leaf[1-2]\n"
        "SwitchName=spine2 Switches=leaf[1-2]\n"
    )


def test_a_single_switch_is_one_leaf():
    b = FabricBuilder()
    sw = b.switch("sw1")
    for i in (1, 2, 3):
        b.link(b.host(f"n{i:02d}"), sw)
    assert _body(_text(b.fabric, "slurm-tree")) == ["SwitchName=sw1 Nodes=n[01-03]"]


def test_rail_leaves_are_one_group():
    # Each server has two HCAs, one on each rail leaf of its unit; unit 2's leaves are leaf3/leaf4.
    b = FabricBuilder()
    spine = b.switch("spine1")
    leaves = [b.switch(f"leaf{i}") for i in (1, 2, 3, 4)]
    for leaf in leaves:
        b.link(leaf, spine)
    for i in (1, 2):
        host = b.host(f"dgx{i}")
        b.link(host, leaves[0])
        b.link(host, leaves[1])
    host = b.host("dgx3")
    b.link(host, leaves[2])
    b.link(host, leaves[3])
    assert _body(_text(b.fabric, "slurm-tree")) == [
        "SwitchName=leaf1-leaf2 Nodes=dgx[1-2]",
        "SwitchName=leaf3-leaf4 Nodes=dgx3",
        "SwitchName=spine1 Switches=leaf1-leaf2,leaf3-leaf4",
    ]


def test_a_server_bridging_two_units_joins_them():
    # dgx2 is cabled to leaf2 and leaf3: its peers on either side reach it without a spine, one group.
    b = FabricBuilder()
    spine = b.switch("spine1")
    leaves = [b.switch(f"leaf{i}") for i in (1, 2, 3)]
    for leaf in leaves:
        b.link(leaf, spine)
    for name, on in (("dgx1", [0, 1]), ("dgx2", [1, 2]), ("dgx3", [2])):
        host = b.host(name)
        for i in on:
            b.link(host, leaves[i])
    assert _body(_text(b.fabric, "slurm-tree"))[0] == "SwitchName=leaf1-leaf3 Nodes=dgx[1-3]"


def test_hosts_on_a_spine_are_the_spines_own_group():
    b = two_tier(leaves=2, spines=2, hosts_per_leaf=1)
    b.link(b.host("nas1"), "guid-spine1")
    assert _body(_text(b.fabric, "slurm-tree")) == [
        "SwitchName=leaf1 Nodes=h1-1",
        "SwitchName=leaf2 Nodes=h2-1",
        "SwitchName=spine1-hosts Nodes=nas1",
        "SwitchName=spine1 Switches=leaf[1-2],spine1-hosts",
        "SwitchName=spine2 Switches=leaf[1-2]",
    ]


def test_a_host_on_a_leaf_and_a_spine_stays_under_its_leaf():
    b = two_tier(leaves=2, spines=2, hosts_per_leaf=1)
    b.link("h1-1", "guid-spine2")
    text = _text(b.fabric, "slurm-tree")
    assert (
        "#   the links of 1 host straight to a switch above their leaf (a tree places a server under one leaf): h1-1"
        in text
    )
    assert _body(text)[0] == "SwitchName=leaf1 Nodes=h1-1"


def test_a_host_whose_links_are_down_is_left_out():
    b = two_tier(leaves=2, spines=2, hosts_per_leaf=2)
    b.fabric.links = [dataclasses.replace(lk, up=False) if lk.a == "h2-2" else lk for lk in b.fabric.links]
    text = _text(b.fabric, "slurm-tree")
    assert "#   1 host with no live link to the fabric: h2-2" in text
    assert "SwitchName=leaf2 Nodes=h2-1" in text


def test_a_down_uplink_is_not_a_child():
    b = two_tier(leaves=2, spines=2, hosts_per_leaf=1, links_per_pair=1)
    b.fabric.links = [
        dataclasses.replace(lk, up=False) if {lk.a, lk.b} == {"guid-leaf2", "guid-spine2"} else lk
        for lk in b.fabric.links
    ]
    assert _body(_text(b.fabric, "slurm-tree"))[2:] == [
        "SwitchName=spine1 Switches=leaf[1-2]",
        "SwitchName=spine2 Switches=leaf1",
    ]


def test_a_spine_with_every_link_down_is_left_out():
    b = two_tier(leaves=2, spines=2, hosts_per_leaf=1, links_per_pair=1)
    b.fabric.links = [
        dataclasses.replace(lk, up=False) if "guid-spine2" in (lk.a, lk.b) else lk for lk in b.fabric.links
    ]
    text = _text(b.fabric, "slurm-tree")
    assert "#   1 switch above the leaves with no live link down to a compute host: spine2" in text
    assert "SwitchName=spine2" not in text


def test_storage_and_unnamed_hosts_are_left_out_with_the_reason():
    b = two_tier(leaves=1, spines=2, hosts_per_leaf=2)
    b.link(b.host("stor1", role="storage"), "guid-leaf1")
    b.link(b.host("unnamed-e09d730300858468"), "guid-leaf1")
    text = _text(b.fabric, "slurm-tree", {"unnamed-e09d730300858468": HostFacts(unnamed=True)})
    assert "#   1 storage server (run no jobs): stor1\n" in text
    assert "#   1 unnamed host (HCAs whose node description names no host" in text
    assert "SwitchName=leaf1 Nodes=h1-[1-2]\n" in text


def test_three_tiers_nest_pods_under_the_core():
    # 16 servers, 8-port switches, 2 HCAs each: 4 units of 2 rail leaves, 2 pods of 4 spines, 8 cores
    # (fabric/importers/fattree.py's plan); the 2 storage servers' unit is left out with its pod.
    fabric = fabric_from_parsed(generate_fat_tree(16, leaf_ports=8, hcas_per_node=2, storage_nodes=2))
    h = build_hierarchy(ExportInput("gen", fabric))
    assert [g.name for g in h.groups] == ["leaf001-leaf002", "leaf003-leaf004", "leaf005-leaf006", "leaf007-leaf008"]
    assert [(d.name, d.children) for d in h.domains[0]] == [
        ("spine01-spine04", ["leaf001-leaf002", "leaf003-leaf004"]),
        ("spine05-spine08", ["leaf005-leaf006", "leaf007-leaf008"]),
    ]
    assert [(d.name, d.children) for d in h.domains[1]] == [("core01-core08", ["spine01-spine04", "spine05-spine08"])]
    assert h.host_domains["gpu0009"] == ["spine05-spine08", "core01-core08"]
    assert (
        "#   2 storage servers (run no jobs): stor01, stor02" in render(ExportInput("gen", fabric), "slurm-tree").text
    )


#
# Refusals: nothing is written that the fabric does not say
#


def test_a_fabric_without_switches_is_refused():
    fabric = Fabric(hosts=[THost("a"), THost("b")])
    with pytest.raises(ExportRefused, match="cluster lab has no switches: there is no fabric to export"):
        _text(fabric, "slurm-tree")


def test_two_leaves_cabled_to_each_other_have_no_clear_tiers():
    b = FabricBuilder()
    a, c = b.switch("swA"), b.switch("swB")
    b.link(b.host("h1"), a)
    b.link(b.host("h2"), c)
    b.link(a, c)
    with pytest.raises(ExportRefused) as err:
        _text(b.fabric, "slurm-tree")
    assert str(err.value) == (
        "cluster lab: the fabric has no clear tiers: switches of the same tier are cabled to each other (swA - swB "
        "(both leaf)), which a tree of leaves and spines cannot say. If one of them is a spine, set its role (admin, "
        "or PATCH /api/v1/switches/<id>/ with role) and export again."
    )


def test_a_mesh_of_switches_with_hosts_is_refused():
    # Three switches, each with a host, each cabled to the other two: whichever is the spine, two leaves touch.
    b = FabricBuilder()
    sws = [b.switch(f"s{i}") for i in (1, 2, 3)]
    for i, sw in enumerate(sws):
        b.link(b.host(f"h{i}"), sw)
    b.link(sws[0], sws[1])
    b.link(sws[1], sws[2])
    b.link(sws[0], sws[2])
    with pytest.raises(ExportRefused, match="no clear tiers"):
        _text(b.fabric, "kueue")


def test_a_spine_spine_cable_is_refused():
    b = two_tier(leaves=2, spines=2, hosts_per_leaf=1)
    b.link("guid-spine1", "guid-spine2")
    with pytest.raises(ExportRefused, match=r"spine1 - spine2 \(both spine\)"):
        _text(b.fabric, "volcano")


def test_the_operators_role_settles_a_lateral_cable():
    b = FabricBuilder()
    a, c = b.switch("swA"), b.switch("swB", role="spine")
    b.link(b.host("h1"), a)
    b.link(b.host("h2"), c)
    b.link(a, c)
    assert _body(_text(b.fabric, "slurm-tree")) == [
        "SwitchName=swA Nodes=h1",
        "SwitchName=swB-hosts Nodes=h2",
        "SwitchName=swB Switches=swA,swB-hosts",
    ]


def test_no_leaf_with_a_compute_host_is_refused():
    b = two_tier(leaves=1, spines=2, hosts_per_leaf=0)
    b.link(b.host("stor1", role="storage"), "guid-leaf1")
    with pytest.raises(ExportRefused, match="no leaf switch has a live link to a named compute host"):
        _text(b.fabric, "slurm-tree")


def test_two_switches_of_one_name_are_refused():
    b = FabricBuilder()
    s1 = b.switch("leaf")
    b.fabric.switches.append(dataclasses.replace(b.fabric.switches[0], key="guid-other"))
    b.link(b.host("h1"), s1)
    b.link(b.host("h2"), "guid-other")
    with pytest.raises(ExportRefused, match=r"1 name would stand for two different switches or leaf groups \(leaf\)"):
        _text(b.fabric, "slurm-tree")


def test_a_host_name_slurm_cannot_read_is_refused():
    b = FabricBuilder()
    sw = b.switch("sw1")
    b.link(b.host("node[7]"), sw)
    with pytest.raises(
        ExportRefused, match=r"host 'node\[7\]' cannot be a Slurm node name: it holds the character '\['"
    ):
        _text(b.fabric, "slurm-tree")


def test_a_switch_name_of_exactly_64_characters_is_written_for_slurm():
    b = FabricBuilder()
    sw = b.switch("x" * 64)
    b.link(b.host("h1"), sw)
    assert f"SwitchName={'x' * 64} Nodes=h1" in _text(b.fabric, "slurm-tree")


def test_a_switch_name_over_64_characters_is_refused_for_slurm():
    b = FabricBuilder()
    sw = b.switch("x" * 65)
    b.link(b.host("h1"), sw)
    with pytest.raises(ExportRefused, match="has 65 characters, more than the 64 Slurm takes"):
        _text(b.fabric, "slurm-tree")


#
# The real captures
#


def test_sx6036_tree_exact():
    text = render(_capture(SX6036), "slurm-tree").text
    assert text == (
        f"# Slurm topology.conf for TopologyPlugin=topology/tree of cluster lab: {HEAD}\n"
        "# 144 compute hosts: 142 under 6 leaves, 2 on switches above the leaves (ib7-hosts).\n"
        "# Above the leaves: 2 switches, 1 spine domain. Links that are down are left out.\n"
        "SwitchName=ib1 Nodes=stage[1-24]\n"
        "SwitchName=ib2 Nodes=stage[25-48]\n"
        "SwitchName=ib3 Nodes=stage[49-72]\n"
        "SwitchName=ib4 Nodes=stage[73-96]\n"
        "SwitchName=ib5 Nodes=stage[97-120]\n"
        "SwitchName=ib6 Nodes=atlas,booster[1-4],rocket,sputnik1,stage[121-135]\n"
        "SwitchName=ib7-hosts Nodes=tank[1-2]\n"
        "SwitchName=ib7 Switches=ib[1-6],ib7-hosts\n"
        "SwitchName=ib8 Switches=ib[1-6]\n"
    )


def test_ndr_dgx_rail_groups():
    h = build_hierarchy(_capture(NDR_DGX))
    # 8 scalable units; unit 1's capture lacks leaf A09-P1-IBLEAF-03-01, so its group has 3 rail leaves.
    assert [len(g.switches) for g in h.groups] == [3, 4, 4, 4, 4, 4, 4, 4]
    assert h.groups[0].name == "A09-P1-IBLEAF-01-01-A09-P1-IBLEAF-04-01"
    assert h.groups[0].switches == ["A09-P1-IBLEAF-01-01", "A09-P1-IBLEAF-02-01", "A09-P1-IBLEAF-04-01"]
    assert len(h.hosts) == 121
    assert h.notes == [
        "72 unnamed hosts (HCAs whose node description names no host; name them in the admin, or import again once "
        "named)"
    ]
    # Every one of the 9 spines reaches all 8 units: one spine domain.
    assert [u.name for u in h.upper] == [f"A10-P1-IBSPINE-0{i}" for i in (1, 2, 3, 4)] + [
        f"B10-P1-IBSPINE-0{i}" for i in (5, 6, 7, 8, 9)
    ]
    assert all(u.children == [g.name for g in h.groups] for u in h.upper)
    assert [d.name for d in h.domains[0]] == ["A10-P1-IBSPINE-01-B10-P1-IBSPINE-09"]
    # The UFM server and a host named ubuntu share unit 8's last two rail leaves: they join its group.
    assert h.host_group["B11-P1-CUFM-02"] == h.host_group["ubuntu"] == "B09-P1-IBLEAF-01-08-B09-P1-IBLEAF-04-08"


def test_ndr_dgx_unit_hosts_compress():
    text = render(_capture(NDR_DGX), "slurm-tree").text
    assert "SwitchName=A09-P1-IBLEAF-01-03-A09-P1-IBLEAF-04-03 Nodes=a07-p1-dgx-03-c[01-18]\n" in text
    assert (
        "SwitchName=B09-P1-IBLEAF-01-08-B09-P1-IBLEAF-04-08 Nodes=b08-p1-dgx-08-c[01,04-06,08,10-18],"
        "B11-P1-CUFM-02,ubuntu\n"
    ) in text


#
# Blocks: the multi-node NVLink domains
#


def test_blocks_exact():
    fabric, facts = gb200()
    assert _text(fabric, "slurm-block", facts) == (
        f"# Slurm topology.conf for TopologyPlugin=topology/block of cluster lab: {HEAD}\n"
        "# 16 compute hosts: 16 under 2 leaves.\n"
        "# Above the leaves: 2 switches, 1 spine domain. Links that are down are left out.\n"
        "# 4 blocks: the multi-node NVLink domains, in fabric order (adjacent blocks are close on InfiniBand, for the "
        "aggregated block sizes).\n"
        "BlockName=nvl-1 Nodes=gb[001-004]\n"
        "BlockName=nvl-2 Nodes=gb[005-008]\n"
        "BlockName=nvl-3 Nodes=gb[009-012]\n"
        "BlockName=nvl-4 Nodes=gb[013-016]\n"
        "BlockSizes=4,8,16\n"
    )


def test_blocks_follow_the_fabric_not_the_names():
    # nvl-z's servers hang off leaf1, nvl-a's off leaf2: nvl-z is listed first, beside leaf1's other block.
    fabric, facts = gb200()
    rename = {"nvl-1": "nvl-z", "nvl-2": "nvl-y", "nvl-3": "nvl-a", "nvl-4": "nvl-b"}
    facts = {h: dataclasses.replace(f, nvlink_domain=rename[f.nvlink_domain]) for h, f in facts.items()}
    assert [line.split()[0] for line in _body(_text(fabric, "slurm-block", facts))[:4]] == [
        "BlockName=nvl-y", "BlockName=nvl-z", "BlockName=nvl-a", "BlockName=nvl-b"
    ]  # fmt: skip


def test_block_sizes_start_at_the_smallest_block():
    # Three blocks of 4 and one of 3 (a tray out): base 3; floor(log2 4) = 2 levels above it.
    fabric, facts = gb200()
    facts["gb016"] = HostFacts()
    text = _text(fabric, "slurm-block", facts)
    assert "BlockSizes=3,6,12\n" in text
    assert "#   1 compute host in no multi-node NVLink domain: gb016\n" in text


def test_three_blocks_take_two_levels():
    fabric, facts = gb200()
    facts = {h: f for h, f in facts.items() if f.nvlink_domain != "nvl-4"}
    assert _body(_text(fabric, "slurm-block", facts))[-1] == "BlockSizes=4,8"


def test_block_refused_where_nvlink_stays_inside_the_servers():
    fabric = two_tier(leaves=2, spines=2, hosts_per_leaf=2).fabric
    facts = {h.key: HostFacts(nvlink=True) for h in fabric.hosts}
    with pytest.raises(ExportRefused) as err:
        _text(fabric, "slurm-block", facts)
    assert str(err.value) == (
        "cluster lab: no NVLink domain spans more than one server (4 of the 4 compute hosts have GPUs joined by "
        "NVLink inside the server), so topology/block has no block to write: use slurm-tree. A multi-node NVLink "
        "system (GB200 NVL72) names each server's domain in its nvlink_domain (cluster spec, admin, or PATCH "
        "/api/v1/nodes/<id>/)."
    )


def test_a_domain_of_one_exported_server_is_no_block():
    fabric, facts = gb200(domains_per_leaf=1, trays=2)
    facts["gb004"] = HostFacts(nvlink_domain="nvl-9")
    facts["gb003"] = HostFacts()
    text = _text(fabric, "slurm-block", facts)
    assert "#   1 NVLink domain with one exported host only (no block of servers): nvl-9\n" in text
    assert _body(text) == ["BlockName=nvl-1 Nodes=gb[001-002]", "BlockSizes=2"]


def test_slurm_yaml_exact_with_blocks():
    fabric, facts = gb200(domains_per_leaf=1, trays=2)
    text = _text(fabric, "slurm-yaml", facts)
    assert text.split("---\n")[1] == (
        "- topology: fabric\n"
        "  cluster_default: true\n"
        "  tree:\n"
        "    switches:\n"
        "    - switch: leaf1\n"
        "      nodes: gb[001-002]\n"
        "    - switch: leaf2\n"
        "      nodes: gb[003-004]\n"
        "    - switch: spine1\n"
        "      children: leaf[1-2]\n"
        "    - switch: spine2\n"
        "      children: leaf[1-2]\n"
        "- topology: nvlink\n"
        "  cluster_default: false\n"
        "  block:\n"
        "    block_sizes:\n"
        "    - 2\n"
        "    - 4\n"
        "    blocks:\n"
        "    - block: nvl-1\n"
        "      nodes: gb[001-002]\n"
        "    - block: nvl-2\n"
        "      nodes: gb[003-004]\n"
    )
    assert "# domains, topology/block) is for the partitions that name it: PartitionName=... Topology=nvlink.\n" in text


def test_slurm_yaml_without_blocks_is_the_tree_alone():
    doc = yaml.safe_load(render(_capture(SX6036), "slurm-yaml").text)
    assert [t["topology"] for t in doc] == ["fabric"]
    assert doc[0]["tree"]["switches"][6] == {"switch": "ib7-hosts", "nodes": "tank[1-2]"}
    # No NVLink domain, so no note about hosts outside one: the header is the tree's alone.
    assert "in no multi-node NVLink domain" not in render(_capture(SX6036), "slurm-yaml").text


#
# Kueue and Volcano
#


def test_kueue_levels_two_tier():
    doc = yaml.safe_load(_text(two_tier(leaves=2, spines=2, hosts_per_leaf=2).fabric, "kueue"))
    assert doc == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "lab", "labels": {"app.kubernetes.io/managed-by": "clusterctl"}},
        "spec": {
            "levels": [
                {"nodeLabel": "fabric.clusterctl.io/spine"},
                {"nodeLabel": "fabric.clusterctl.io/leaf"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]
        },
    }


def test_kueue_levels_of_a_single_switch():
    b = FabricBuilder()
    b.link(b.host("n1"), b.switch("sw1"))
    levels = yaml.safe_load(_text(b.fabric, "kueue"))["spec"]["levels"]
    assert levels == [{"nodeLabel": "fabric.clusterctl.io/leaf"}, {"nodeLabel": "kubernetes.io/hostname"}]


def test_kueue_labels_exact():
    assert _body(_text(two_tier(leaves=2, spines=2, hosts_per_leaf=1).fabric, "kueue-labels")) == [
        "set -e",
        "kubectl label node h1-1 --overwrite fabric.clusterctl.io/spine=spine1-spine2 fabric.clusterctl.io/leaf=leaf1",
        "kubectl label node h2-1 --overwrite fabric.clusterctl.io/spine=spine1-spine2 fabric.clusterctl.io/leaf=leaf2",
    ]


def test_kueue_nvlink_level_where_domains_nest_in_leaf_groups():
    fabric, facts = gb200(domains_per_leaf=1, trays=2)
    facts["gb004"] = HostFacts()  # its own NVLink domain: the server itself
    text = _text(fabric, "kueue-labels", facts)
    assert "fabric.clusterctl.io/leaf=leaf1 fabric.clusterctl.io/nvlink-domain=nvl-1\n" in text
    assert "kubectl label node gb004 --overwrite fabric.clusterctl.io/spine=spine1-spine2 " in text
    assert text.endswith("fabric.clusterctl.io/leaf=leaf2 fabric.clusterctl.io/nvlink-domain=gb004\n")
    levels = [lv["nodeLabel"] for lv in yaml.safe_load(_text(fabric, "kueue", facts))["spec"]["levels"]]
    assert levels[2:] == ["fabric.clusterctl.io/nvlink-domain", "kubernetes.io/hostname"]


def test_kueue_leaves_out_nvlink_domains_that_span_leaf_groups():
    fabric, facts = gb200(domains_per_leaf=1, trays=2)
    facts = {h: HostFacts(nvlink_domain="nvl-1") for h in facts}
    text = _text(fabric, "kueue", facts)
    assert (
        "#   the NVLink domains as a level: 1 of them span more than one leaf group (nvl-1), and Kueue's levels "
        "must nest\n"
    ) in text
    assert "nvlink-domain" not in text.split("---\n")[1]


def test_volcano_hypernodes_two_tier():
    docs = list(yaml.safe_load_all(_text(two_tier(leaves=2, spines=2, hosts_per_leaf=2).fabric, "volcano")))

    def node(name):
        return {"type": "Node", "selector": {"exactMatch": {"name": name}}}

    def hyper(name):
        return {"type": "HyperNode", "selector": {"exactMatch": {"name": name}}}

    assert [(d["metadata"]["name"], d["spec"]) for d in docs] == [
        ("leaf1", {"tier": 1, "tierName": "leaf", "members": [node("h1-1"), node("h1-2")]}),
        ("leaf2", {"tier": 1, "tierName": "leaf", "members": [node("h2-1"), node("h2-2")]}),
        ("spine1-spine2", {"tier": 2, "tierName": "spine", "members": [hyper("leaf1"), hyper("leaf2")]}),
    ]
    assert {d["apiVersion"] for d in docs} == {"topology.volcano.sh/v1alpha1"}


def test_volcano_three_tiers():
    # As in test_three_tiers_nest_pods_under_the_core: the storage unit makes it 10 leaves, more than 8 ports.
    fabric = fabric_from_parsed(generate_fat_tree(16, leaf_ports=8, hcas_per_node=2, storage_nodes=2))
    docs = list(yaml.safe_load_all(_text(fabric, "volcano")))
    assert [(d["metadata"]["name"], d["spec"]["tier"]) for d in docs] == [
        ("leaf001-leaf002", 1), ("leaf003-leaf004", 1), ("leaf005-leaf006", 1), ("leaf007-leaf008", 1),
        ("spine01-spine04", 2), ("spine05-spine08", 2), ("core01-core08", 3),
    ]  # fmt: skip
    assert [m["selector"]["exactMatch"]["name"] for m in docs[-1]["spec"]["members"]] == [
        "spine01-spine04", "spine05-spine08"
    ]  # fmt: skip


def test_volcano_leaf_with_no_live_uplink_stands_alone():
    b = two_tier(leaves=2, spines=2, hosts_per_leaf=1, links_per_pair=1)
    b.fabric.links = [
        dataclasses.replace(lk, up=False) if "guid-leaf2" in (lk.a, lk.b) and "h2-1" not in (lk.a, lk.b) else lk
        for lk in b.fabric.links
    ]
    docs = list(yaml.safe_load_all(_text(b.fabric, "volcano")))
    assert [(d["metadata"]["name"], d["spec"]["tier"]) for d in docs] == [
        ("leaf1", 1),
        ("leaf2", 1),
        ("spine1-spine2", 2),
    ]
    assert [m["selector"]["exactMatch"]["name"] for m in docs[2]["spec"]["members"]] == ["leaf1"]
    labels = _text(b.fabric, "kueue-labels")
    assert (
        "kubectl label node h2-1 --overwrite fabric.clusterctl.io/spine=leaf2 fabric.clusterctl.io/leaf=leaf2" in labels
    )


def test_kubernetes_names_are_the_hosts_in_lower_case():
    text = render(_capture(NDR_DGX), "volcano").text
    assert "        name: b11-p1-cufm-02\n" in text
    assert "  name: a09-p1-ibleaf-01-01-a09-p1-ibleaf-04-01\n" in text


def test_two_hosts_one_node_name_in_kubernetes_are_refused():
    b = FabricBuilder()
    sw = b.switch("sw1")
    b.link(b.host("GPU1"), sw)
    b.link(b.host("gpu1"), sw)
    with pytest.raises(ExportRefused, match="hosts 'GPU1' and 'gpu1' are both node 'gpu1' in Kubernetes"):
        _text(b.fabric, "volcano")


def test_a_host_name_kubernetes_cannot_take_is_refused():
    b = FabricBuilder()
    b.link(b.host("gpu_01"), b.switch("sw1"))
    with pytest.raises(ExportRefused, match="host 'gpu_01' cannot be a Kubernetes node name"):
        _text(b.fabric, "kueue-labels")


def test_block_sizes_stop_at_slurm_s_sixteen_levels():
    # 65,536 blocks of 2 would aggregate over 17 levels (2^16 blocks: bit_length 17); Slurm's block plugin takes
    # 16 (block_record.h), so the sizes run 2, 4, ..., 2 * 2^15 = 65,536 and stop there.
    hosts = [f"n{i:06d}" for i in range(2 * 65_536)]
    h = Hierarchy(
        cluster="big",
        groups=[Group(name="leaf1", switches=["leaf1"], hosts=hosts, level=0)],
        upper=[],
        domains=[],
        host_group=dict.fromkeys(hosts, "leaf1"),
        host_domains={x: [] for x in hosts},
        nvlink={f"nvl-{i}": hosts[2 * i : 2 * i + 2] for i in range(65_536)},
        hosts_nvlink_inside=0,
        notes=[],
        summary=[],
    )
    blocks, sizes = blocks_of(h)
    assert len(blocks) == 65_536
    assert sizes == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
