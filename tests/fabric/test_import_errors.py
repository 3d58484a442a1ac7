"""Malformed input: non-zero exit, a message naming the line, the database exactly as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from fabric.actions.imports import import_text
from fabric.importers.types import ParseError
from fabric.models import Cluster, ImportRecord, Link, Port, Switch

ROOT = Path(__file__).resolve().parents[2]
SX6036 = ROOT / "tests" / "fixtures" / "ibnetdiscover_sx6036_8switch.topo"

pytestmark = pytest.mark.django_db


def snapshot() -> tuple:
    return (
        list(Switch.objects.order_by("pk").values_list("pk", "guid", "name", "role")),
        list(Link.objects.order_by("pk").values_list("pk", "state", "capacity_gbps")),
        list(Port.objects.order_by("pk").values_list("pk", "link_id", "link_end", "state")),
        ImportRecord.objects.count(),
    )


@pytest.fixture
def imported():
    call_command("import_fabric", str(SX6036), "--cluster", "lab", "--format", "ibnetdiscover", "--json")
    return snapshot()


def import_error(tmp_path, text: str | bytes) -> str:
    path = tmp_path / "bad.topo"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(CommandError) as err:
        call_command("import_fabric", str(path), "--cluster", "lab", "--format", "ibnetdiscover", "--json")
    return str(err.value)


def test_truncated_file_names_line_and_stores_nothing(tmp_path, imported):
    text = SX6036.read_text()
    cut = text[: text.index('"MF0;ib8:SX6036/U1" lid 1 4xFD') + 20]  # mid-line, mid-rate
    message = import_error(tmp_path, cut)
    assert f"bad.topo:{cut.count(chr(10)) + 1}" in message
    assert "nothing was stored" in message
    assert snapshot() == imported


def test_port_line_before_any_node(tmp_path, imported):
    message = import_error(tmp_path, '[1]\t"H-24be05ffff980030"[1](24be05ffff980031) \t\t# "x mlx4_0" lid 1 4xQDR\n')
    assert "bad.topo:1" in message
    assert snapshot() == imported


def test_garbled_rate(tmp_path, imported):
    text = SX6036.read_text().replace("4xQDR", "4xQXR", 1)
    line = text[: text.index("4xQXR")].count("\n") + 1
    message = import_error(tmp_path, text)
    assert f"bad.topo:{line}" in message and "QXR" in message
    assert snapshot() == imported


def test_binary_junk(tmp_path, imported):
    message = import_error(tmp_path, b"vendid=0x2c9\n\x00\x89PNG\xff\xfe junk\n")
    assert "bad.topo:2" in message
    assert snapshot() == imported


def test_empty_file(tmp_path, imported):
    message = import_error(tmp_path, "")
    assert "bad.topo" in message
    assert snapshot() == imported


def test_unknown_node_id(tmp_path, imported):
    # A switch's port points at a peer declared with the other type prefix.
    text = SX6036.read_text().replace('"S-f4521403007ea570"[26]', '"H-f4521403007ea570"[26]', 1)
    message = import_error(tmp_path, text)
    assert "bad.topo:" in message
    assert snapshot() == imported


def test_failed_import_into_new_cluster_creates_no_cluster(tmp_path):
    import_error(tmp_path, "garbage line\n")
    assert not Cluster.objects.exists()


def test_command_exits_non_zero_with_message(tmp_path):
    bad = tmp_path / "bad.topo"
    bad.write_text('[1]\t"H-24be05ffff980030"[1]\n')
    proc = subprocess.run(
        [sys.executable, "manage.py", "import_fabric", str(bad), "--cluster", "x", "--format", "ibnetdiscover"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "clusterctl.test_settings",
             "DATABASE_URL": "sqlite:///" + str(tmp_path / "cli.sqlite3")},
    )  # fmt: skip
    assert proc.returncode != 0
    assert "bad.topo:1" in proc.stderr


def test_missing_file(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_fabric", str(tmp_path / "nope"), "--cluster", "x", "--format", "ibnetdiscover")


def test_undeclared_switch_peer_is_refused_and_the_fabric_is_unchanged(imported):
    # ib5 port 17 names a switch with no block of its own; kept, it was a third "spine".
    text = SX6036.read_text()
    anchor = '[18]\t"H-24be05ffff9910f0"'
    at = text.index(anchor)
    ghost = '[17]\t"S-deadbeefdeadbeef"[1]\t\t# "MF0;ghost:SX6036/U1" lid 99 4xFDR10\n'
    with pytest.raises(ParseError) as err:
        import_text("lab", "ibnetdiscover", text[:at] + ghost + text[at:], source="ghost.topo")
    assert str(err.value).startswith("ghost.topo:27: peer 'S-deadbeefdeadbeef'")
    assert snapshot() == imported
    assert sorted(Switch.objects.filter(role="spine").values_list("name", flat=True)) == ["ib7", "ib8"]
