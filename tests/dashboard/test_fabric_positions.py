"""The fabric snapshot carries where the page draws things (fabric.topology.layout): spines above leaves above
nodes, every node under its leaf; groups when aggregated."""

from __future__ import annotations

import pytest

from dashboard import selectors
from dashboard.selectors import fabric_topic
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


def test_switches_and_nodes_have_positions_by_tier(site):
    data = selectors.build(site.cluster.pk, ["fabric"])["fabric"]
    y = {s["role"]: s["y"] for s in data["switches"]}
    assert y["spine"] < y["leaf"] < min(n["y"] for n in data["nodes"])
    leaves = {s["id"]: s for s in data["switches"] if s["role"] == "leaf"}
    for n in data["nodes"]:
        others = [abs(n["x"] - leaf["x"]) for leaf in leaves.values()]
        assert abs(n["x"] - leaves[n["leaf"]]["x"]) == min(others)


def test_aggregated_groups_carry_positions_and_their_hosts(monkeypatch):
    monkeypatch.setattr(fabric_topic, "AGGREGATE_ABOVE", 4)
    cluster = fat_tree("agg", nodes=8, gpus_per_node=8, leaf_ports=8, hcas_per_node=1)
    data = selectors.build(cluster.pk, ["fabric"])["fabric"]
    assert data["aggregated"] is True
    hosts = sorted(h for g in data["nodes"] for h in g["hosts"])
    assert len(hosts) == 8 and all({"x", "y", "storage"} <= set(g) for g in data["nodes"])
