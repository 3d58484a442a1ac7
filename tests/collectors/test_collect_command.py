"""`manage.py collect`: one poll of one node, printed for an operator, through the configured collector class."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

FIXTURES = Path(__file__).parent.parent / "fixtures"


def run(*args: str) -> str:
    out = StringIO()
    call_command("collect", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_sysfs_ib_json_has_ports_in_4_octet_units():
    root = FIXTURES / "sysfs_infiniband_node_exporter" / "class" / "infiniband"
    body = json.loads(run("--collector", "sysfs-ib", "--root", str(root), "--node", "n1", "--once", "--json"))
    assert body["collector"] == "sysfs-ib" and body["node"] == "n1"
    assert any(p["counters"].get("port_xmit_data") for p in body["ports"])


def test_prometheus_file_text_output():
    text = run("--collector", "prometheus", "--file", str(FIXTURES / "dcgm_exporter_metrics_L4_kops.prom"),
               "--node", "n1", "--once")  # fmt: skip
    assert text.startswith("n1 via prometheus") and "gpu0" in text


def test_unknown_collector_names_the_configured_ones():
    with pytest.raises(CommandError, match="configured: nvml"):
        run("--collector", "ufm", "--node", "n1", "--once")


def test_option_the_collector_does_not_take():
    with pytest.raises(CommandError, match="takes no --url"):
        run("--collector", "sysfs-ib", "--url", "http://x", "--node", "n1", "--once")


def test_missing_root_is_an_error_not_a_traceback(tmp_path):
    with pytest.raises(CommandError, match="nothing read"):
        run("--collector", "sysfs-ib", "--root", str(tmp_path / "absent"), "--node", "n1", "--once")
