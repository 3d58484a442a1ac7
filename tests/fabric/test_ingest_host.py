"""Ingest records the node agents' host CPU and memory figures (NodeSample.host) on their Nodes, only when they change
(fabric.actions.record_host_resources); an operator's value stays (tests/fabric/test_host_resources.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric import actions, events
from fabric.collectors.samples import HostSample, NodeSample, sample_from_dict
from fabric.ingest import ingest_samples
from fabric.latest import forget_node, seen_key
from fabric.models import Node
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    cluster = fat_tree("hostres", nodes=2, gpus_per_node=8, leaf_ports=16)
    yield cluster
    for host in Node.objects.filter(cluster=cluster).values_list("hostname", flat=True):
        forget_node(cluster.pk, host)
    cache.delete(seen_key(cluster.pk))


def hosts(cluster) -> list[str]:
    return sorted(Node.objects.filter(cluster=cluster, role="compute").values_list("hostname", flat=True))


def report(host: str, at: float, cpu_milli, memory_mib) -> NodeSample:
    """What an agent sends, through the broker's JSON and back."""
    sample = NodeSample(node=host, collected_at=at, collector="nvml", host=HostSample(cpu_milli, memory_mib))
    return sample_from_dict(json.loads(json.dumps(dataclasses.asdict(sample))))


def node(host: str) -> Node:
    return Node.objects.get(hostname=host)


def figures(n: Node) -> tuple:
    return (n.cpu_milli, n.memory_mib, n.reported_cpu_milli, n.reported_memory_mib, n.cpu_milli_manual,
            n.memory_mib_manual)  # fmt: skip


def node_writes(queries) -> list[str]:
    return [q["sql"] for q in queries if "fabric_node" in q["sql"] and not q["sql"].lstrip().startswith("SELECT")]


def test_first_report_becomes_what_jobs_may_take(cluster):
    a, b = hosts(cluster)
    result = ingest_samples(cluster.pk, [report(a, 1000.0, 64000, 515_797), report(b, 1000.0, 128000, 1_031_594)])
    assert sorted(result.host_recorded) == [a, b]
    assert figures(node(a)) == (64000, 515_797, 64000, 515_797, False, False)
    assert figures(node(b)) == (128000, 1_031_594, 128000, 1_031_594, False, False)


def test_the_same_figures_again_write_nothing_and_query_no_node(cluster):
    a, _ = hosts(cluster)
    ingest_samples(cluster.pk, [report(a, 1000.0, 64000, 515_797)])
    with CaptureQueriesContext(connection) as queries:
        result = ingest_samples(cluster.pk, [report(a, 1001.0, 64000, 515_797)])
    assert result.stored == [a] and result.host_recorded == []
    assert [q["sql"] for q in queries if "fabric_node" in q["sql"] and "reported_cpu_milli" in q["sql"]] == []
    assert node_writes(queries) == []


def test_a_change_is_recorded(cluster):
    a, _ = hosts(cluster)
    ingest_samples(cluster.pk, [report(a, 1000.0, 64000, 515_797)])
    result = ingest_samples(cluster.pk, [report(a, 1001.0, 64000, 1_031_594)])  # a DIMM upgrade
    assert result.host_recorded == [a]
    assert figures(node(a)) == (64000, 1_031_594, 64000, 1_031_594, False, False)


def test_a_figure_not_read_leaves_the_stored_one(cluster):
    a, _ = hosts(cluster)
    ingest_samples(cluster.pk, [report(a, 1000.0, 64000, 515_797)])
    result = ingest_samples(cluster.pk, [report(a, 1001.0, 32000, None)])  # /proc/meminfo unreadable this time
    assert result.host_recorded == [a]
    assert figures(node(a)) == (32000, 515_797, 32000, 515_797, False, False)


@pytest.mark.parametrize("bad", [True, -4000, "64000", 64000.5, 2**31])
def test_an_implausible_figure_is_ignored(cluster, bad):
    a, _ = hosts(cluster)
    result = ingest_samples(cluster.pk, [report(a, 1000.0, bad, 515_797)])
    assert figures(node(a)) == (0, 515_797, 0, 515_797, False, False)
    assert result.host_recorded == [a]


def test_a_report_without_host_figures_changes_nothing(cluster):
    a, _ = hosts(cluster)
    result = ingest_samples(cluster.pk, [NodeSample(node=a, collected_at=1000.0, collector="twin")])
    assert result.stored == [a] and result.host_recorded == []
    assert figures(node(a)) == (0, 0, 0, 0, False, False)


def test_an_operators_value_is_kept_when_the_agent_reports(cluster):
    a, _ = hosts(cluster)
    ingest_samples(cluster.pk, [report(a, 1000.0, 64000, 515_797)])
    actions.set_host_resources(node(a), cpu_milli=56000)  # 8 cores kept for the system
    ingest_samples(cluster.pk, [report(a, 1001.0, 96000, 515_797)])  # more cores, say after a BIOS change
    assert figures(node(a)) == (56000, 515_797, 96000, 515_797, True, False)


def test_a_change_announces_the_nodes_changed(cluster, monkeypatch):
    a, _ = hosts(cluster)
    sent = []
    monkeypatch.setattr(events, "send_on_commit", lambda cluster_id, payload, topic="fabric": sent.append(payload))
    ingest_samples(cluster.pk, [report(a, 1000.0, 64000, 515_797)])
    ingest_samples(cluster.pk, [report(a, 1001.0, 64000, 515_797)])
    assert [p for p in sent if p.get("kind") == "nodes_changed"] == [
        {"kind": "nodes_changed", "cause": "host resources of 1 nodes"}
    ]


def test_another_workers_write_costs_one_check_not_a_write(cluster):
    """Two ingest workers each keep their map: the one whose map is stale finds the figures stored and writes none."""
    a, _ = hosts(cluster)
    ingest_samples(cluster.pk, [report(a, 1000.0, 64000, 515_797)])  # stored by another worker, say
    from fabric.ingest import _port_map

    _port_map(cluster.pk).host_reported[a] = (0, 0)  # this worker has not seen that write
    with CaptureQueriesContext(connection) as queries:
        result = ingest_samples(cluster.pk, [report(a, 1001.0, 64000, 515_797)])
    assert result.host_recorded == []
    assert node_writes(queries) == []
    with CaptureQueriesContext(connection) as queries:
        ingest_samples(cluster.pk, [report(a, 1002.0, 64000, 515_797)])
    assert [q["sql"] for q in queries if "reported_cpu_milli" in q["sql"]] == []
