"""generate_fabric and fabric_report end to end: command -> actions -> database -> analysis."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from fabric.models import GPU, Cluster, Link, Node, NodeTopology, Switch

SX6036 = str(Path(__file__).parent.parent / "fixtures" / "ibnetdiscover_sx6036_8switch.topo")
DGX_A100 = str(Path(__file__).parent.parent / "fixtures" / "nvidia_smi_topo_m_dgx_a100.txt")

pytestmark = pytest.mark.django_db


def command_json(name: str, *args: str) -> dict:
    out = StringIO()
    call_command(name, *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def report(cluster: str) -> dict:
    return command_json("fabric_report", "--cluster", cluster)


def test_generate_small_tree_rows():
    summary = command_json(
        "generate_fabric", "--cluster", "ft", "--nodes", "16", "--gpus-per-node", "8", "--leaf-ports", "32"
    )
    assert summary["hosts"] == 16 and summary["gpus"] == 128
    assert Node.objects.count() == 16
    assert GPU.objects.filter(model="H100", nvlink_gbps=900.0, mig_capable=True).count() == 128
    assert NodeTopology.objects.count() == 16
    assert Link.objects.count() == summary["links"]
    assert set(Switch.objects.values_list("role", flat=True)) == {"leaf", "spine"}


def test_regenerate_is_idempotent():
    args = ("generate_fabric", "--cluster", "ft", "--nodes", "16", "--leaf-ports", "32")
    command_json(*args)
    counts = (Switch.objects.count(), Link.objects.count(), GPU.objects.count())
    second = command_json(*args)
    assert (Switch.objects.count(), Link.objects.count(), GPU.objects.count()) == counts
    assert second["changes"]["links"]["created"] == 0


def test_generated_non_blocking_report():
    command_json("generate_fabric", "--cluster", "ft", "--nodes", "16", "--leaf-ports", "32")
    body = report("ft")
    assert body["oversubscription"]["worst_ratio"] == pytest.approx(1.0)
    # 16 nodes x 8 HCAs x NDR 400 Gb/s, non-blocking: half the host ports can send to the other half at full rate.
    assert body["bisection"]["gbps"] == pytest.approx(16 * 8 * 400 / 2)


def test_generated_two_to_one_halves_bisection():
    command_json("generate_fabric", "--cluster", "ft", "--nodes", "16", "--leaf-ports", "32", "--oversubscription", "2")
    body = report("ft")
    assert body["oversubscription"]["worst_ratio"] == pytest.approx(2.0)
    assert body["bisection"]["gbps"] == pytest.approx(16 * 8 * 400 / 4)


def test_generate_rejects_bad_parameters():
    with pytest.raises(CommandError):
        call_command("generate_fabric", "--cluster", "ft", "--nodes", "0")
    with pytest.raises(CommandError):
        call_command("generate_fabric", "--cluster", "ft", "--nodes", "4", "--gpu-model", "Z999")
    assert not Cluster.objects.filter(name="ft").exists()


@pytest.fixture
def lab():
    call_command("import_fabric", SX6036, "--cluster", "lab", "--format", "ibnetdiscover", "--json")


def test_sx6036_oversubscription(lab):
    leaves = {row["name"]: row for row in report("lab")["oversubscription"]["leaves"]}
    assert set(leaves) == {"ib1", "ib2", "ib3", "ib4", "ib5", "ib6"}
    assert leaves["ib1"]["ratio"] == pytest.approx(24 * 32 / (7 * 40))  # one uplink fewer
    assert leaves["ib5"]["ratio"] == pytest.approx(24 * 32 / (8 * 40))
    assert leaves["ib6"]["ratio"] == pytest.approx(22 * 32 / (8 * 40))
    assert report("lab")["oversubscription"]["worst"] == "ib1"


def test_sx6036_spine_with_storage_is_a_spof_for_tank1(lab):
    body = report("lab")
    ib7 = next(s for s in body["spof"]["switches"] if s["name"] == "ib7")
    assert "tank1" in ib7["hosts"]
    assert "ib7" in body["tiers"]["non_leaf_with_hosts"]


def test_sx6036_drained_link_shows_as_down(lab):
    Link.objects.filter(ports__hca__node__hostname="stage100").update(state="down")
    body = report("lab")
    assert any(row["reason"] == "down" for row in body["degraded_links"])


def test_text_report_has_tables(lab):
    out = StringIO()
    call_command("fabric_report", "--cluster", "lab", stdout=out)
    text = out.getvalue()
    assert "ib1" in text and "bisection" in text.lower()


def test_unknown_cluster_names_the_known_ones(lab):
    with pytest.raises(CommandError, match="known: lab"):
        call_command("fabric_report", "--cluster", "nope")


def test_nvidia_topo_import_stores_affinity(lab):
    summary = command_json(
        "import_fabric", DGX_A100, "--cluster", "lab", "--format", "nvidia-topo", "--node", "stage100"
    )
    assert summary["gpus"] == 8 and summary["nvlink_pairs"] == 28
    topo = NodeTopology.objects.get(node__hostname="stage100")
    assert topo.code(0, 7) == "NV12"
    assert topo.closest_nics(0) == ["mlx5_0", "mlx5_1"]
    assert GPU.objects.get(node__hostname="stage100", index=2).numa_node == 1


def test_nvidia_topo_needs_node(lab):
    with pytest.raises(CommandError, match="--node"):
        call_command("import_fabric", DGX_A100, "--cluster", "lab", "--format", "nvidia-topo")
