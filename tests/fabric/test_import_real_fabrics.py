"""Importing other sites' real captures (issue 13) into the database: unnamed HCAs, loopbacks, degraded cables,
SHARP aggregation nodes. Counts are the hand counts of tests/fabric/importers/test_real_fabrics.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric import actions
from fabric.actions.imports import import_text
from fabric.choices import CaKind, LinkState
from fabric.graph_from_db import fabric_for_cluster
from fabric.models import HCA, Cluster, Link, Node, Port
from fabric.topology.report import analyse

FIXTURES = Path(__file__).parent.parent / "fixtures"
X5 = (FIXTURES / "ibnetdiscover_psmn_x5_unnamed_hcas.topo").read_text()
LOOPS = (FIXTURES / "ibnetdiscover_nvidia_switchib_loopbacks.topo").read_text()
MANPAGE = (FIXTURES / "ibnetdiscover_manpage_example.topo").read_text()
NDR = (FIXTURES / "ibnetdiscover_topograph_ndr_dgx.topo").read_text()
GLUSTER1 = "0002c90300080e84"  # X5's HCA that X5.map calls r510gluster1; sysimgguid 0x2c90300080e87
GLUSTER1_PLACEHOLDER = "unnamed-0002c90300080e87"

pytestmark = pytest.mark.django_db


def load(text: str, name: str = "x5", fmt: str = "ibnetdiscover") -> dict:
    return import_text(name, fmt, text, source=f"{name}.topo")


def named(text: str, guid: str, description: str) -> str:
    """The capture as it would read once the HCA `guid` had its node description set: its block and its peer's line."""
    return "\n".join(
        line.replace("MT25408 ConnectX Mellanox Technologies", description) if f"H-{guid}" in line else line
        for line in text.split("\n")
    )


# --- unnamed HCAs ------------------------------------------------------------------------------------


def test_x5_imports_89_unnamed_hosts_instead_of_crashing():
    summary = load(X5)
    assert (summary["switches"], summary["hosts"], summary["unnamed_hosts"], summary["links"]) == (11, 89, 89, 159)
    cluster = Cluster.objects.get(name="x5")
    assert cluster.nodes.filter(unnamed=True).count() == 89
    assert cluster.hcas.filter(kind=CaKind.HOST, node__isnull=True).count() == 0
    node = Node.objects.get(cluster=cluster, hostname=GLUSTER1_PLACEHOLDER)
    assert (node.unnamed, node.system_guid, [h.guid for h in node.hcas.all()]) == (True, "0002c90300080e87", [GLUSTER1])


def test_x5_unnamed_hosts_are_hosts_of_the_topology():
    load(X5)
    report = analyse(fabric_for_cluster(Cluster.objects.get(name="x5")))
    assert report.counts.hosts == 89
    assert report.counts.switches_by_tier["leaf"] == 6  # the 6 switches with host ports


def test_x5_reimport_changes_nothing():
    load(X5)
    pks = set(Node.objects.values_list("pk", "hostname"))
    summary = load(X5)
    assert set(Node.objects.values_list("pk", "hostname")) == pks
    assert summary["changes"]["nodes"]["created"] == 0 and summary["changes"]["cas"]["updated"] == 0


def test_operator_names_a_placeholder_and_a_reimport_keeps_the_name():
    load(X5)
    node = Node.objects.get(hostname=GLUSTER1_PLACEHOLDER)
    actions.update_inventory_object(node, {"hostname": "r510gluster1"})
    assert Node.objects.get(pk=node.pk).unnamed is False
    load(X5)  # the fabric still reports the firmware default for that HCA
    assert HCA.objects.get(guid=GLUSTER1).node.hostname == "r510gluster1"
    assert not Node.objects.filter(hostname=GLUSTER1_PLACEHOLDER).exists()


def test_a_later_import_naming_the_hca_renames_its_placeholder_in_place():
    load(X5)
    placeholder = Node.objects.get(hostname=GLUSTER1_PLACEHOLDER)
    summary = load(named(X5, GLUSTER1, "r510gluster1 mlx4_0"))
    node = HCA.objects.get(guid=GLUSTER1).node
    assert (node.pk, node.hostname, node.unnamed) == (placeholder.pk, "r510gluster1", False)
    assert (summary["hosts"], summary["unnamed_hosts"]) == (89, 88)
    assert summary["changes"]["nodes"]["renamed"] == 1


def test_a_later_import_naming_the_hca_after_an_existing_node_moves_it_and_drops_the_placeholder():
    load(X5)
    Node.objects.create(cluster=Cluster.objects.get(name="x5"), hostname="r510gluster1")  # e.g. the node agent's
    summary = load(named(X5, GLUSTER1, "r510gluster1 mlx4_0"))
    assert HCA.objects.get(guid=GLUSTER1).node.hostname == "r510gluster1"
    assert not Node.objects.filter(hostname=GLUSTER1_PLACEHOLDER).exists()
    assert summary["changes"]["nodes"]["placeholders_removed"] == 1


def test_node_agent_hostname_attaches_the_unnamed_hca():
    load(X5)
    cluster = Cluster.objects.get(name="x5")
    node = actions.attach_hca(cluster, "0x0002C90300080E84", "r510gluster1")
    assert (node.hostname, node.unnamed) == ("r510gluster1", False)
    assert [h.guid for h in node.hcas.all()] == [GLUSTER1]
    assert cluster.nodes.filter(unnamed=True).count() == 88


def test_attach_hca_refuses_an_unknown_guid_and_a_bad_name():
    load(X5)
    cluster = Cluster.objects.get(name="x5")
    with pytest.raises(actions.ActionError, match="no HCA with node GUID 00000000deadbeef"):
        actions.attach_hca(cluster, "deadbeef", "n1")
    with pytest.raises(actions.ActionError, match="not a host name"):
        actions.attach_hca(cluster, GLUSTER1, "two words")


def test_unnamed_hca_shows_as_unnamed_in_the_api(tenant_api):
    load(X5)
    node = Node.objects.get(hostname=GLUSTER1_PLACEHOLDER)
    data = tenant_api.get(f"/api/v1/nodes/{node.pk}/").json()
    assert (data["hostname"], data["unnamed"], data["system_guid"]) == (GLUSTER1_PLACEHOLDER, True, "0002c90300080e87")


# --- loopbacks ----------------------------------------------------------------------------------------


def test_switchib_capture_imports_its_three_loopbacks_flagged():
    summary = load(LOOPS, "ufm")  # detect_switch_roles raised ValueError here before
    assert (summary["links"], summary["loopbacks"], summary["hosts"]) == (10, 3, 5)
    loops = Link.objects.filter(cluster__name="ufm", loopback=True)
    assert loops.count() == 3
    assert all(link.state_reason.startswith("loopback") for link in loops)
    assert {p.switch.guid for p in Port.objects.filter(link__in=loops)} == {"e41d2d030003e470"}
    assert any("diagnostic" in w and ":1: " in w for w in summary["warnings"])


def test_loopbacks_are_reported_and_never_routed():
    load(LOOPS, "ufm")
    report = analyse(fabric_for_cluster(Cluster.objects.get(name="ufm")))
    assert sum(1 for d in report.degraded_links if d.link_class == "loopback") == 3
    assert report.counts.unreachable_hosts == 0
    assert report.counts.switch_links == 1  # the SwitchIB-SX6012 cable; loopbacks are no inter-switch link


def test_loopback_is_shown_in_the_api(tenant_api):
    load(LOOPS, "ufm")
    link = Link.objects.filter(cluster__name="ufm", loopback=True).first()
    assert tenant_api.get(f"/api/v1/links/{link.pk}/").json()["loopback"] is True


# --- degraded cables ----------------------------------------------------------------------------------


def test_manpage_example_stores_its_two_disagreeing_cables_degraded_at_1x():
    summary = load(MANPAGE, "man")
    assert (summary["degraded_links"], summary["unnamed_hosts"], summary["hosts"]) == (2, 4, 4)
    degraded = Link.objects.filter(cluster__name="man", state=LinkState.DEGRADED)
    assert sorted((link.width, link.speed, link.capacity_gbps) for link in degraded) == [(1, "SDR", 2.0)] * 2
    assert {"(line 15)" in link.state_reason or "(line 18)" in link.state_reason for link in degraded} == {True}
    # Both ends' ports store the slower rate.
    assert set(Port.objects.filter(link__in=degraded).values_list("width", flat=True)) == {1}


# --- SHARP aggregation nodes --------------------------------------------------------------------------

SHARP = """\
switchguid=0xb8599f0300fc6de4(b8599f0300fc6de4)
Switch\t41 "S-b8599f0300fc6de4"\t\t# "MF0;leaf1:MQM8700/U1" enhanced port 0 lid 13 lmc 0
[1]\t"H-00000000000000a1"[1](00000000000000a1) \t\t# "gpu01 mlx5_0" lid 20 4xHDR
[41]\t"H-b8599f0300fc6dec"[1](b8599f0300fc6dec) \t\t# "Mellanox Technologies Aggregation Node" lid 14 4xHDR

caguid=0xa1
Ca\t1 "H-00000000000000a1"\t\t# "gpu01 mlx5_0"
[1](a1) \t"S-b8599f0300fc6de4"[1]\t\t# lid 20 lmc 0 "MF0;leaf1:MQM8700/U1" lid 13 4xHDR

caguid=0xb8599f0300fc6dec
Ca\t1 "H-b8599f0300fc6dec"\t\t# "Mellanox Technologies Aggregation Node"
[1](b8599f0300fc6dec) \t"S-b8599f0300fc6de4"[41]\t\t# lid 14 lmc 0 "MF0;leaf1:MQM8700/U1" lid 13 4xHDR
"""


def test_aggregation_node_is_no_host_no_spof_victim():
    summary = load(SHARP, "sharp")
    assert summary["hosts"] == 1
    cluster = Cluster.objects.get(name="sharp")
    assert list(cluster.nodes.values_list("hostname", flat=True)) == ["gpu01"]
    agg = HCA.objects.get(guid="b8599f0300fc6dec")
    assert (agg.kind, agg.node_id) == (CaKind.AGGREGATION, None)
    report = analyse(fabric_for_cluster(cluster))
    assert report.counts.hosts == 1
    victims = {h for spof in report.spof.switches for h in spof.hosts}
    assert victims == {"gpu01"}


# --- the NDR DGX fabric (NVIDIA topograph's example.out; hand counts in tests/fabric/importers/test_real_fabrics.py)


def test_ndr_dgx_fabric_imports_its_unnamed_hcas_and_aggregation_nodes():
    summary = load(NDR, "ndr")  # before issue 13: IntegrityError on host_hca_has_node at the first default CA
    keys = ("switches", "hosts", "unnamed_hosts", "cas", "links", "loopbacks", "degraded_links")
    assert tuple(summary[k] for k in keys) == (40, 193, 72, 582, 1114, 0, 0)
    cluster = Cluster.objects.get(name="ndr")
    assert (cluster.nodes.count(), cluster.nodes.filter(unnamed=True).count()) == (193, 72)
    assert cluster.hcas.filter(kind=CaKind.AGGREGATION, node__isnull=True).count() == 40


def test_ndr_dgx_report_31_leaves_9_spines_and_only_the_single_hca_placeholders_hang_on_one_leaf():
    load(NDR, "ndr")
    report = analyse(fabric_for_cluster(Cluster.objects.get(name="ndr")))
    assert report.counts.hosts == 193
    assert {k: v for k, v in report.counts.switches_by_tier.items() if v} == {"leaf": 31, "spine": 9}
    # Every named host has each HCA on another leaf (awk: 109 hosts on 4 leaves, 10 on 3, 2 on 2); each of the
    # 72 unnamed HCAs is a system of its own on one of 19 leaves: those are the SPOF victims, and only those.
    victims = [h for spof in report.spof.switches for h in spof.hosts]
    assert len(victims) == len(set(victims)) == 72 and all(h.startswith("unnamed-") for h in victims)
    assert len([spof for spof in report.spof.switches if spof.hosts]) == 19
