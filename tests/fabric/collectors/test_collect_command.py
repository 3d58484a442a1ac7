"""`manage.py collect`: one poll of one node, printed for an operator, through the configured collector class."""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

FIXTURES = Path(__file__).parents[2] / "fixtures"


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


SWITCH = "0x7cfe9003009ce5b0"


def test_perfquery_switch_from_saved_output_json():
    body = json.loads(
        run("--collector", "perfquery", "--file", str(FIXTURES / "perfquery_lx_switch_0x7cfe9003009ce5b0.out"),
            "--switch", SWITCH.upper().replace("0X", "0x"), "--node", "ib-agent-1", "--once", "--json")
    )  # fmt: skip
    assert body["node"] == "ib-agent-1" and body["errors"] == []
    assert [(p["device"], p["guid"], p["port"]) for p in body["ports"]] == [(SWITCH, SWITCH, 1), (SWITCH, SWITCH, 2)]


def test_perfquery_switches_live_with_one_failing(tmp_path, monkeypatch):
    """--switch, repeatable, runs perfquery per switch; one that fails is a warning, not the end of the poll."""
    fake = tmp_path / "perfquery"
    fake.write_text(
        "#!/bin/sh\n"
        f'if [ "$5" = "{SWITCH}" ]; then cat {FIXTURES / "perfquery_lx_switch_0x7cfe9003009ce5b0.out"}; exit 0; fi\n'
        'echo "ibwarn: can\'t resolve destination port $5" >&2; exit 255\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    err = StringIO()
    out = StringIO()
    call_command("collect", "--collector", "perfquery", "--node", "ib-agent-1", "--switch", SWITCH,
                 "--switch", "0x0002c90300000bad", "--once", stdout=out, stderr=err)  # fmt: skip
    assert out.getvalue().count(f"{SWITCH} port ") == 2
    assert "switch 0x0002c90300000bad: " in err.getvalue() and "exit status 255" in err.getvalue()


def test_perfquery_bad_switch_guid_and_misuse():
    with pytest.raises(CommandError, match="not a switch node GUID"):
        run("--collector", "perfquery", "--switch", "leaf-1", "--node", "n1", "--once")
    with pytest.raises(CommandError, match="give it alone"):
        run("--collector", "perfquery", "--switch", "all", "--switch", SWITCH, "--node", "n1", "--once")
    with pytest.raises(CommandError, match="takes no --switches"):
        run("--collector", "sysfs-ib", "--switch", SWITCH, "--node", "n1", "--once")


def test_perfquery_directory(tmp_path):
    (tmp_path / f"{SWITCH}.out").write_text((FIXTURES / "perfquery_lx_switch_0x7cfe9003009ce5b0.out").read_text())
    body = json.loads(run("--collector", "perfquery", "--directory", str(tmp_path), "--node", "a", "--once", "--json"))
    assert [p["port"] for p in body["ports"]] == [1, 2] and body["errors"] == []


X5_GLUSTER1 = FIXTURES / "sysfs_infiniband_x5_gluster1" / "class" / "infiniband"


@pytest.fixture
def fake_gpus(settings):
    """The node's NVML is the fake library with one H100 (the collector's COLLECTOR_OPTIONS entry, as an agent's)."""
    from tests.fabric.collectors.fake_nvml import FakeNvml, h100

    settings.COLLECTOR_OPTIONS = {**settings.COLLECTOR_OPTIONS, "nvml": {"nvml": FakeNvml([h100(0)])}}


def test_several_collectors_print_one_merged_sample(fake_gpus):
    body = json.loads(
        run("--collector", "nvml,sysfs-ib", "--root", str(X5_GLUSTER1), "--node", "r510gluster1", "--once", "--json")
    )
    assert (body["collector"], body["errors"]) == ("nvml,sysfs-ib", [])
    assert [g["index"] for g in body["gpus"]] == [0] and [(p["device"], p["port"]) for p in body["ports"]] == [
        ("mlx4_0", 1)
    ]
    assert body["hcas"] == [
        {"device": "mlx4_0", "node_guid": "0002c90300080e84", "system_guid": "0002c90300080e87", "node_type": "CA"}
    ]


def test_the_text_output_names_each_hca_by_its_guids(fake_gpus):
    text = run("--collector", "nvml,sysfs-ib", "--root", str(X5_GLUSTER1), "--node", "r510gluster1", "--once")
    assert text.startswith("r510gluster1 via nvml,sysfs-ib")
    assert "  mlx4_0 node GUID 0002c90300080e84 system image 0002c90300080e87 CA\n" in text


def test_an_unknown_collector_in_a_list_is_named():
    with pytest.raises(CommandError, match=r"^unknown collector 'sysfs-ibb' in 'nvml,sysfs-ibb'; configured: nvml"):
        run("--collector", "nvml,sysfs-ibb", "--node", "n1", "--once")
