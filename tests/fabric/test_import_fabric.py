"""Importing real fabrics through the command: counts, idempotent re-import, vanished links, tiers."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from fabric.choices import LinkState, PortState
from fabric.models import HCA, Cluster, ImportRecord, Link, Node, Port, Switch

FIXTURES = Path(__file__).parent.parent / "fixtures"
SX6036 = str(FIXTURES / "ibnetdiscover_sx6036_8switch.topo")

pytestmark = pytest.mark.django_db


def run_import(*args: str) -> dict:
    out = StringIO()
    call_command("import_fabric", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_sx6036_summary_counts():
    summary = run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    assert (summary["switches"], summary["hosts"], summary["links"]) == (8, 144, 192)


def test_sx6036_rows_stored():
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    cluster = Cluster.objects.get(name="lab")
    assert cluster.switches.count() == 8
    assert cluster.nodes.count() == 144
    assert cluster.hcas.count() == 144
    assert cluster.links.count() == 192
    assert Port.objects.filter(cluster=cluster, link__isnull=False).count() == 384


def test_sx6036_link_rates_and_capacity():
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    host_links = Link.objects.filter(ports__hca__isnull=False).distinct()
    switch_links = Link.objects.exclude(pk__in=host_links)
    assert {(link.width, link.speed, link.capacity_gbps) for link in host_links} == {(4, "QDR", 32.0)}
    assert {(link.width, link.speed, link.capacity_gbps) for link in switch_links} == {(4, "FDR10", 40.0)}
    assert host_links.count() == 145  # 144 CAs, tank1 dual-ported, 143 + 2
    assert switch_links.count() == 47  # 6 leaves x 8 uplinks, ib1 one fewer


def test_sx6036_tiers_detected():
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    roles = dict(Switch.objects.values_list("name", "role"))
    assert roles == {
        "ib1": "leaf", "ib2": "leaf", "ib3": "leaf", "ib4": "leaf", "ib5": "leaf", "ib6": "leaf",
        "ib7": "spine", "ib8": "spine",
    }  # fmt: skip


def test_sx6036_switch_facts():
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    ib5 = Switch.objects.get(name="ib5")
    assert (ib5.guid, ib5.lid, ib5.port_count, ib5.model) == ("f4521403001165a0", 128, 36, "SX6036")
    assert ib5.description == "MF0;ib5:SX6036/U1"


def test_tank1_has_both_ports_on_ib7():
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    tank1 = HCA.objects.get(node__hostname="tank1")
    peers = set()
    for port in tank1.ports.all():
        other = port.link.ports.exclude(pk=port.pk).get()
        peers.add((other.switch.name, port.number))
    assert peers == {("ib7", 1), ("ib7", 2)}


def test_reimport_updates_in_place():
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    ids = set(Link.objects.values_list("pk", flat=True))
    second = run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    assert set(Link.objects.values_list("pk", flat=True)) == ids
    assert Switch.objects.count() == 8 and Node.objects.count() == 144 and Port.objects.count() == 384
    assert second["changes"]["links"] == {
        "created": 0, "updated": 0, "unchanged": 192, "marked_down": 0, "recabled": 0,
    }  # fmt: skip
    assert second["changes"]["switches"]["created"] == 0


def test_vanished_link_marked_down_not_deleted(tmp_path):
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    text = Path(SX6036).read_text()
    # stage114's cable to ib5 port 1 disappears from both ends of the output.
    lines = [
        line
        for line in text.splitlines()
        if '"H-24be05ffff980030"' not in line and not line.startswith("[1](24be05ffff980031)")
    ]
    edited = tmp_path / "topo"
    edited.write_text("\n".join(lines) + "\n")
    summary = run_import("--cluster", "lab", "--format", "ibnetdiscover", str(edited))
    assert summary["changes"]["links"]["marked_down"] == 1
    assert Link.objects.count() == 192
    gone = Link.objects.get(ports__hca__node__hostname="stage114")
    assert gone.state == LinkState.DOWN
    assert "not found by the import" in gone.state_reason


def test_recabled_port_moves_to_new_link(tmp_path):
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    text = Path(SX6036).read_text()
    # Move stage114 (ib5 port 1) to ib5's free port 17: both ends of the output say so.
    text = text.replace('[1]\t"H-24be05ffff980030"', '[17]\t"H-24be05ffff980030"')
    text = text.replace('"S-f4521403001165a0"[1]\t', '"S-f4521403001165a0"[17]\t')
    edited = tmp_path / "topo"
    edited.write_text(text)
    summary = run_import("--cluster", "lab", "--format", "ibnetdiscover", str(edited))
    assert summary["changes"]["links"]["recabled"] == 1
    link = Link.objects.get(ports__hca__node__hostname="stage114", state=LinkState.UP)
    assert link.ports.get(switch__isnull=False).number == 17
    assert Port.objects.get(switch__name="ib5", number=1).link is None


def test_import_is_recorded():
    run_import("--cluster", "lab", "--format", "ibnetdiscover", SX6036)
    record = ImportRecord.objects.get()
    assert record.format == "ibnetdiscover"
    assert record.summary["links"] == 192


def test_ports_format_keeps_down_ports():
    summary = run_import(
        "--cluster", "ufm", "--format", "ibnetdiscover-ports", str(FIXTURES / "ibnetdiscover_ports_test2.out")
    )
    assert summary["down_ports"] == Port.objects.filter(state=PortState.DOWN).count() > 0
    assert len(summary["warnings"]) == 1 and "test2.out:5" in summary["warnings"][0]
    assert HCA.objects.filter(kind="aggregation").exists()
    assert not Node.objects.filter(hostname__icontains="aggregation").exists()


def test_text_output_names_counts():
    out = StringIO()
    call_command("import_fabric", "--cluster", "lab", "--format", "ibnetdiscover", SX6036, stdout=out)
    assert "8 switches, 144 hosts" in out.getvalue()
    assert "192 links" in out.getvalue()
