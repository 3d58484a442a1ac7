"""manage.py plan_fabric: the comparison table, JSON, a price file, bad input, and a design built as a cluster."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from fabric.models import Cluster, Link, Node, Port, Switch


def run(*args: str) -> str:
    out = StringIO()
    call_command("plan_fabric", *args, stdout=out)
    return out.getvalue()


def test_the_table_has_one_row_per_design_with_the_counts():
    text = run("--gpus", "1024")
    row = next(line for line in text.splitlines() if line.startswith("2t-1:1-rail"))
    # leaves, spines, cores, host, leaf-spine, spine-core cables, bisection Tb/s, GPUs under one leaf domain
    assert row.split()[:9] == ["2t-1:1-rail", "32", "16", "0", "1024", "1024", "0", "204.8", "256"]
    assert "3t-1:1-rail  -- not needed: 1,024 endpoints fit two tiers" in text


def test_json_carries_every_design_and_its_all_reduce_times():
    doc = json.loads(run("--gpus", "4096", "--json"))
    d = next(x for x in doc["designs"] if x["id"] == "3t-1:1-rail")
    assert (doc["request"]["endpoints"], d["leaves"], d["spines"], d["cores"]) == (4096, 128, 128, 64)
    assert [a["gpus"] for a in d["allreduce"]] == [64, 512]
    assert d["allreduce"][0]["best_s"] < d["allreduce"][0]["worst_s"]  # inside one leaf vs across the core


def test_a_price_file_adds_a_cost_column(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("switch: 20000\ncable: 100\noptic: 500\n")
    doc = json.loads(run("--gpus", "1024", "--prices", str(prices), "--json"))
    assert next(x for x in doc["designs"] if x["id"] == "2t-1:1-rail")["cost"] == 3_212_800


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "1024", "--radix", "48"], "radix 48 is not a switch radix"),
        (["--gpus", "1024", "--prices", "/nonexistent/p.yaml"], "--prices /nonexistent/p.yaml"),
        (["--gpus", "64", "--create-cluster", "x"], "--create-cluster NAME and --design ID go together"),
        (["--gpus", "64", "--create-cluster", "x", "--design", "9t"], "--design '9t' is not one of"),
        (["--gpus", "64", "--create-cluster", "x", "--design", "3t-1:1-flat"], "not feasible: not needed"),
    ],
)
def test_bad_arguments_name_what_is_wrong(args, message, db):
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_a_bad_price_file_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("switch: 1\ncable: 1\n")
    with pytest.raises(CommandError, match="'optic' must be a number"):
        run("--gpus", "64", "--prices", str(bad))


def test_a_rail_design_opens_as_a_cluster_with_the_planned_switches(db):
    # 64 GPUs = 8 servers x 8 HCAs on 64-port leaves: one unit of 8 servers, 8 leaves (one per rail), 8 uplinks each
    # over 2 spines (the generator's minimum): 10 switches, 8 servers.
    doc = json.loads(run("--gpus", "64", "--json"))
    planned = next(x for x in doc["designs"] if x["id"] == "2t-1:1-rail")
    assert (planned["leaves"], planned["spines"]) == (8, 2)
    text = run("--gpus", "64", "--create-cluster", "planned", "--design", "2t-1:1-rail")
    cluster = Cluster.objects.get(name="planned")
    assert Switch.objects.filter(cluster=cluster).count() == planned["switches"] == 10
    assert Node.objects.filter(cluster=cluster).count() == 8
    assert "design 2t-1:1-rail, 10 switches, 8 servers" in text


def test_a_flat_design_opens_as_a_cluster_with_every_hca_of_a_server_on_one_leaf(db):
    # 128 GPUs = 16 servers x 8 HCAs, 64-port leaves at 2:1: a leaf keeps 21 uplinks and 42 host ports, so 5 servers
    # (40 HCAs) per leaf and 4 leaves (the last with one server); 2 tiers, 84 uplinks over the spines.
    doc = json.loads(run("--gpus", "128", "--json"))
    planned = next(x for x in doc["designs"] if x["id"] == "2t-2:1-flat")
    assert (planned["leaves"], planned["host_cables"], planned["leaf_spine_cables"]) == (4, 128, 84)
    run("--gpus", "128", "--create-cluster", "flat", "--design", "2t-2:1-flat")
    cluster = Cluster.objects.get(name="flat")
    assert Switch.objects.filter(cluster=cluster).count() == planned["switches"]
    assert Switch.objects.filter(cluster=cluster, role="leaf").count() == 4
    leaves_of = {}
    for host, leaf in Port.objects.filter(cluster=cluster, hca__isnull=False, link__isnull=False).values_list(
        "hca__node__hostname", "link__ports__switch__name"
    ):
        if leaf:
            leaves_of.setdefault(host, set()).add(leaf)
    assert len(leaves_of) == 16 and all(len(v) == 1 for v in leaves_of.values())
    assert sorted(h for h, v in leaves_of.items() if v == leaves_of["gpu0001"]) == [f"gpu{i:04d}" for i in range(1, 6)]
    assert Link.objects.filter(cluster=cluster).count() == planned["host_cables"] + planned["leaf_spine_cables"]
