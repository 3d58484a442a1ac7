"""The node agent's hostname attaches an unnamed HCA (issue 13): the agent reads its HCAs' GUIDs from sysfs, ingest
puts an HCA the fabric named no host for on the reporting node (fabric.actions.claim_hcas), and never takes one off
another named host (an `hca_elsewhere` warning instead).

The fabric is PSMN's real X5 capture (89 HCAs, all with the firmware-default description); the agent's sysfs is
tests/fixtures/sysfs_infiniband_x5_gluster1 (node_exporter's real mlx4_0 port, with the node GUID of the X5 HCA that
X5.map calls r510gluster1: 0x0002c90300080e84, system image 0x0002c90300080e87)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from django.core.cache import cache

from fabric import actions, events, tasks
from fabric.actions.imports import import_text
from fabric.collectors.samples import HcaSample, NodeSample, PortSample, sample_from_dict
from fabric.ingest import HCA_ELSEWHERE, ingest_samples
from fabric.latest import latest_key
from fabric.models import HCA, Alert, Cluster, Node, PortMetric
from fabric.selectors import fabric_version

FIXTURES = Path(__file__).parent.parent / "fixtures"
X5 = (FIXTURES / "ibnetdiscover_psmn_x5_unnamed_hcas.topo").read_text()
SYSFS = FIXTURES / "sysfs_infiniband_x5_gluster1" / "class" / "infiniband"
GLUSTER1 = "0002c90300080e84"
GLUSTER1_PLACEHOLDER = "unnamed-0002c90300080e87"
OTHER = "0002c90300080d28"  # another X5 HCA (the one on the next port of the same leaf)

# Minimal synthetic fabric: one system (system image GUID ...b2c4) with two firmware-default ConnectX-7 HCAs.
TWO_HCA_SYSTEM = """\
vendid=0x2c9
devid=0xd2f0
sysimgguid=0xfc6a1c0300aa0000
switchguid=0xfc6a1c0300aa0000(fc6a1c0300aa0000)
Switch	64 "S-fc6a1c0300aa0000"		# "MF0;leaf1:MQM9700/U1" enhanced port 0 lid 1 lmc 0
[1]	"H-b8cef60300a1b2c4"[1](b8cef60300a1b2c4) 		# "MT4129 ConnectX7   Mellanox Technologies" lid 2 4xNDR
[2]	"H-b8cef60300a1b2c6"[1](b8cef60300a1b2c6) 		# "MT4129 ConnectX7   Mellanox Technologies" lid 3 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xb8cef60300a1b2c4
caguid=0xb8cef60300a1b2c4
Ca	1 "H-b8cef60300a1b2c4"		# "MT4129 ConnectX7   Mellanox Technologies"
[1](b8cef60300a1b2c4) 	"S-fc6a1c0300aa0000"[1]		# lid 2 lmc 0 "MF0;leaf1:MQM9700/U1" lid 1 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xb8cef60300a1b2c4
caguid=0xb8cef60300a1b2c6
Ca	1 "H-b8cef60300a1b2c6"		# "MT4129 ConnectX7   Mellanox Technologies"
[1](b8cef60300a1b2c6) 	"S-fc6a1c0300aa0000"[2]		# lid 3 lmc 0 "MF0;leaf1:MQM9700/U1" lid 1 4xNDR
"""

pytestmark = pytest.mark.django_db


def load(text: str = X5, name: str = "x5") -> Cluster:
    import_text(name, "ibnetdiscover", text, source=f"{name}.topo")
    return Cluster.objects.get(name=name)


def named(text: str, guid: str, description: str) -> str:
    """The capture as it reads once the HCA `guid` has its node description set (its block and its peer's line)."""
    return "\n".join(
        line.replace("MT25408 ConnectX Mellanox Technologies", description) if f"H-{guid}" in line else line
        for line in text.split("\n")
    )


def report(node: str, *hcas: tuple[str, str], at: float = 1000.0) -> NodeSample:
    """What an agent sends, through the broker's JSON and back."""
    sample = NodeSample(
        node=node, collected_at=at, collector="sysfs-ib", hcas=[HcaSample(device=d, node_guid=g) for g, d in hcas]
    )
    return sample_from_dict(json.loads(json.dumps(dataclasses.asdict(sample))))


@pytest.fixture
def fabric_events():
    seen: list[tuple[int, dict]] = []

    def listener(cluster_id: int, payload: dict) -> None:
        seen.append((cluster_id, payload))

    events.subscribe(listener)
    yield seen
    events._listeners["fabric"].remove(listener)


@pytest.fixture
def agent(settings):
    """The agent of r510gluster1, polled inline, reading the fixture's sysfs."""
    settings.TELEMETRY_NODE_QUEUES = False
    settings.COLLECTOR_OPTIONS = {**settings.COLLECTOR_OPTIONS, "sysfs-ib": {"root": str(SYSFS)}}
    cluster = load()
    Node.objects.create(cluster=cluster, hostname="r510gluster1")  # the operator added the server (admin, spec)
    yield cluster
    for host in ("r510gluster1", GLUSTER1_PLACEHOLDER):
        cache.delete(latest_key(cluster.pk, host))


# --- the whole path: agent payload -> ingest -> HCA attached ------------------------------------------------------


def test_agent_payload_carries_its_hca_guids_and_needs_no_database(agent, django_assert_num_queries):
    with django_assert_num_queries(0):
        body = tasks.poll_node("r510gluster1", "sysfs-ib")
    assert body["hcas"] == [
        {"device": "mlx4_0", "node_guid": GLUSTER1, "system_guid": "0002c90300080e87", "node_type": "CA"}
    ]


def test_poll_attaches_the_unnamed_hca_to_the_agents_node(agent, django_capture_on_commit_callbacks, fabric_events):
    with django_capture_on_commit_callbacks(execute=True):
        # The 89 placeholders have no agent to ask: only r510gluster1 is polled.
        assert tasks.poll_cluster(agent.pk, "sysfs-ib") == 1
    hca = HCA.objects.select_related("node").get(guid=GLUSTER1)
    assert (hca.node.hostname, hca.node.unnamed, hca.device) == ("r510gluster1", False, "mlx4_0")
    assert not Node.objects.filter(hostname=GLUSTER1_PLACEHOLDER).exists()
    assert agent.nodes.filter(unnamed=True).count() == 88
    causes = [p["cause"] for cid, p in fabric_events if cid == agent.pk and p.get("kind") == "inventory_changed"]
    assert causes == [f"node agent of r510gluster1: {GLUSTER1} attached"]


def test_after_the_attach_the_agents_port_samples_reach_the_hcas_port(agent):
    tasks.poll_cluster(agent.pk, "sysfs-ib")  # attaches
    tasks.poll_cluster(agent.pk, "sysfs-ib")  # rates need two samples; the port map has rebuilt
    tasks.poll_cluster(agent.pk, "sysfs-ib")
    port = HCA.objects.get(guid=GLUSTER1).ports.get(number=1)
    assert PortMetric.objects.filter(port=port).exists()


def test_a_second_report_changes_nothing(agent, django_capture_on_commit_callbacks, fabric_events):
    tasks.poll_cluster(agent.pk, "sysfs-ib")
    version = fabric_version(agent.pk)
    with django_capture_on_commit_callbacks(execute=True):
        again = actions.claim_hcas(agent.pk, "r510gluster1", [(GLUSTER1, "mlx4_0")])
        tasks.poll_cluster(agent.pk, "sysfs-ib")
    assert (again.attached, again.devices, again.elsewhere, again.changed) == ([], [], {}, False)
    assert fabric_version(agent.pk) == version
    assert not [p for _, p in fabric_events if p.get("kind") == "inventory_changed"]


# --- never stealing -----------------------------------------------------------------------------------------------


def test_an_hca_on_another_named_host_stays_there_and_warns():
    cluster = load(named(X5, GLUSTER1, "r510gluster1 mlx4_0"))
    Node.objects.create(cluster=cluster, hostname="intruder")
    result = ingest_samples(cluster.pk, [report("intruder", (GLUSTER1, "mlx4_0"))], hold_down_s=60)
    assert HCA.objects.get(guid=GLUSTER1).node.hostname == "r510gluster1"
    alert = Alert.objects.get(cluster=cluster, rule=HCA_ELSEWHERE, cleared_at__isnull=True)
    assert (alert.object_key, alert.severity, alert.removes_capacity) == (f"intruder/hca/{GLUSTER1}", "warning", False)
    assert "inventory has on r510gluster1: not moved" in alert.message
    assert result.hcas_attached == {}
    cache.delete(latest_key(cluster.pk, "intruder"))


def test_the_warning_clears_once_the_agent_stops_reporting_that_hca():
    cluster = load(named(X5, GLUSTER1, "r510gluster1 mlx4_0"))
    Node.objects.create(cluster=cluster, hostname="intruder")
    ingest_samples(cluster.pk, [report("intruder", (GLUSTER1, "mlx4_0"), at=1000.0)], hold_down_s=60)
    ingest_samples(cluster.pk, [report("intruder", at=1030.0)], hold_down_s=60)  # within the hold-down: still open
    assert Alert.objects.filter(rule=HCA_ELSEWHERE, cleared_at__isnull=True).count() == 1
    ingest_samples(cluster.pk, [report("intruder", at=1100.0)], hold_down_s=60)
    assert Alert.objects.filter(rule=HCA_ELSEWHERE, cleared_at__isnull=True).count() == 0
    cache.delete(latest_key(cluster.pk, "intruder"))


def test_two_agents_reporting_one_unnamed_hca_in_one_batch_give_it_to_the_first_and_warn_the_second():
    cluster = load()
    for host in ("a1", "a2"):
        Node.objects.create(cluster=cluster, hostname=host)
    ingest_samples(cluster.pk, [report("a1", (GLUSTER1, "mlx4_0")), report("a2", (GLUSTER1, "mlx4_0"))])
    assert HCA.objects.get(guid=GLUSTER1).node.hostname == "a1"
    assert list(Alert.objects.filter(rule=HCA_ELSEWHERE).values_list("object_key", flat=True)) == [f"a2/hca/{GLUSTER1}"]
    for host in ("a1", "a2"):
        cache.delete(latest_key(cluster.pk, host))


def test_attach_hca_by_hand_refuses_to_move_an_hca_off_a_named_host_unless_forced():
    cluster = load(named(X5, GLUSTER1, "r510gluster1 mlx4_0"))
    with pytest.raises(actions.ActionError, match=f"HCA {GLUSTER1} is on host r510gluster1, not moved to n2"):
        actions.attach_hca(cluster, GLUSTER1, "n2")
    assert HCA.objects.get(guid=GLUSTER1).node.hostname == "r510gluster1"
    assert actions.attach_hca(cluster, GLUSTER1, "n2", force=True).hostname == "n2"
    assert HCA.objects.get(guid=GLUSTER1).node.hostname == "n2"


# --- what else a report does and does not do -----------------------------------------------------------------------


def test_a_placeholders_other_hca_of_the_same_system_comes_along():
    cluster = load(TWO_HCA_SYSTEM, "ndr")
    assert cluster.nodes.get(unnamed=True).hostname == "unnamed-b8cef60300a1b2c4"
    Node.objects.create(cluster=cluster, hostname="dgx01")
    result = ingest_samples(cluster.pk, [report("dgx01", ("b8cef60300a1b2c4", "mlx5_0"))])
    assert result.hcas_attached == {"dgx01": ["b8cef60300a1b2c4", "b8cef60300a1b2c6"]}
    assert dict(HCA.objects.filter(cluster=cluster).values_list("guid", "device")) == {
        "b8cef60300a1b2c4": "mlx5_0",  # reported
        "b8cef60300a1b2c6": "",  # not reported (yet): its device name stays unknown
    }
    assert set(HCA.objects.filter(cluster=cluster).values_list("node__hostname", flat=True)) == {"dgx01"}
    assert not cluster.nodes.filter(unnamed=True).exists()
    cache.delete(latest_key(cluster.pk, "dgx01"))


def test_an_unknown_guid_and_a_node_not_in_the_inventory_change_nothing():
    cluster = load()
    before = fabric_version(cluster.pk)
    ingest_samples(cluster.pk, [report("stranger", (GLUSTER1, "mlx4_0")), report(GLUSTER1_PLACEHOLDER)])
    ingest_samples(cluster.pk, [report("stranger", ("00000000deadbeef", "mlx5_0"), at=1001.0)])
    assert HCA.objects.get(guid=GLUSTER1).node.hostname == GLUSTER1_PLACEHOLDER
    assert fabric_version(cluster.pk) == before
    with pytest.raises(actions.ActionError, match="no node 'stranger' in this cluster"):
        actions.claim_hcas(cluster.pk, "stranger", [(GLUSTER1, "mlx4_0")])
    for host in ("stranger", GLUSTER1_PLACEHOLDER):
        cache.delete(latest_key(cluster.pk, host))


def test_a_sample_of_an_older_agent_without_hcas_still_parses():
    body = {"node": "n1", "collected_at": 1.0, "collector": "sysfs-ib", "gpus": [], "ports": [], "errors": []}
    assert sample_from_dict(body).hcas == []


# --- later imports ------------------------------------------------------------------------------------------------


def test_a_reimport_still_saying_the_firmware_default_keeps_the_agents_host_and_device(agent):
    tasks.poll_cluster(agent.pk, "sysfs-ib")
    summary = import_text("x5", "ibnetdiscover", X5, source="x5.topo")
    hca = HCA.objects.select_related("node").get(guid=GLUSTER1)
    assert (hca.node.hostname, hca.device) == ("r510gluster1", "mlx4_0")
    assert (summary["hosts"], summary["unnamed_hosts"]) == (89, 89)  # the file still names none of them


def test_a_later_import_naming_the_hca_after_the_agents_host_changes_no_node(agent):
    tasks.poll_cluster(agent.pk, "sysfs-ib")
    node = HCA.objects.get(guid=GLUSTER1).node
    summary = import_text("x5", "ibnetdiscover", named(X5, GLUSTER1, "r510gluster1 mlx4_0"), source="x5.topo")
    assert HCA.objects.get(guid=GLUSTER1).node_id == node.pk
    assert summary["changes"]["nodes"]["created"] == 0 and summary["changes"]["nodes"]["renamed"] == 0
    assert (summary["hosts"], summary["unnamed_hosts"]) == (89, 88)


def test_the_kernels_device_name_replaces_the_imported_one_and_the_port_samples_follow():
    cluster = load(named(X5, GLUSTER1, "r510gluster1 HCA-1"))  # the description's device is not the kernel's
    hca = HCA.objects.get(guid=GLUSTER1)
    assert hca.device == "HCA-1"
    port = PortSample(device="mlx4_0", port=1, state="ACTIVE", counters={"port_xmit_data": 0, "port_rcv_data": 0})
    first = report("r510gluster1", (GLUSTER1, "mlx4_0"), at=1000.0)
    first.ports = [port]
    ingest_samples(cluster.pk, [first])
    assert HCA.objects.get(guid=GLUSTER1).device == "mlx4_0"
    second = report("r510gluster1", (GLUSTER1, "mlx4_0"), at=1001.0)
    second.ports = [dataclasses.replace(port, counters={"port_xmit_data": 250_000_000, "port_rcv_data": 0})]
    ingest_samples(cluster.pk, [second])  # the port map rebuilt after the device changed (fabric_version)
    metric = PortMetric.objects.get(port=hca.ports.get(number=1))
    assert metric.tx_bytes_per_s == pytest.approx(1e9)  # 250e6 four-octet words in one second
    cache.delete(latest_key(cluster.pk, "r510gluster1"))
