"""Batch ingest of a whole poll, switch ports from the fabric agent, smoothing, the inbox (liveness:
test_liveness_pipeline.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.cache import cache

from fabric import inbox, tasks
from fabric.actions import TELEMETRY_REASON, set_node_state
from fabric.collectors.samples import FABRIC_SOURCE, GpuSample, NodeSample, PortSample
from fabric.ingest import ingest_samples
from fabric.latest import last_seen, latest_utilisation, node_loads
from fabric.models import GPU, Alert, Link, Node, Port, PortMetric
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

GB = 1_000_000_000 // 4  # four-octet units in one GB


@pytest.fixture
def cluster():
    c = fat_tree("batch", nodes=8, gpus_per_node=8, leaf_ports=16)
    yield c
    cache.clear()


def host_sample(node: Node, t: float, units: int, state: str = "ACTIVE") -> NodeSample:
    ports = [PortSample(device=d, port=n, state=state, counters={"port_xmit_data": units, "port_rcv_data": 0})
             for d, n in Port.objects.filter(hca__node=node).values_list("hca__device", "number")]  # fmt: skip
    gpus = [GpuSample(index=i, utilisation_gpu_pct=50.0) for i in range(8)]
    return NodeSample(node=node.hostname, collected_at=t, collector="test", gpus=gpus, ports=ports)


def poll(cluster, t: float, units: int, count: int | None = None) -> list[NodeSample]:
    return [host_sample(n, t, units) for n in Node.objects.filter(cluster=cluster)[:count]]


def test_one_batch_costs_the_same_queries_for_two_nodes_or_eight(cluster):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    ingest_samples(cluster.pk, poll(cluster, 1000.0, 0))  # builds the port map once
    two, eight = poll(cluster, 1001.0, GB, count=2), poll(cluster, 1002.0, 2 * GB)
    with CaptureQueriesContext(connection) as for_two:
        ingest_samples(cluster.pk, two)
    with CaptureQueriesContext(connection) as for_eight:
        ingest_samples(cluster.pk, eight)
    # fabric version check (5), open alerts (1), savepoints; COPY statements are not captured as queries
    assert len(for_eight.captured_queries) == len(for_two.captured_queries) <= 16


def test_a_batch_keeps_the_newer_of_two_samples_of_one_node(cluster):
    node = Node.objects.filter(cluster=cluster).first()
    result = ingest_samples(cluster.pk, [host_sample(node, 1001.0, GB), host_sample(node, 1000.0, 0)])
    assert result.stored == [node.hostname]
    assert last_seen(cluster.pk)[node.hostname] == 1001.0


def test_placement_reads_smoothed_load_and_the_heat_map_raw(cluster, settings):
    settings.TELEMETRY_EWMA_ALPHA = 0.5
    node = Node.objects.filter(cluster=cluster).first()
    link = Port.objects.filter(hca__node=node).first().link_id
    ingest_samples(cluster.pk, [host_sample(node, 1000.0, 0)])
    ingest_samples(cluster.pk, [host_sample(node, 1001.0, 50 * GB // 8)])  # 400 Gb/s link, 50 Gb/s = 1/8
    ingest_samples(cluster.pk, [host_sample(node, 1002.0, 50 * GB // 8 + 50 * GB)])  # 400 Gb/s = full
    raw, _ = latest_utilisation(cluster.pk, [node.hostname], smoothed=False)
    smooth, _ = latest_utilisation(cluster.pk, [node.hostname])
    assert raw[str(link)] == pytest.approx(1.0)
    assert smooth[str(link)] == pytest.approx(0.5 * 1.0 + 0.5 * 0.125)


def fabric_sample(cluster, t: float, units: int, state: str = "ACTIVE") -> tuple[NodeSample, Port]:
    port = Port.objects.filter(cluster=cluster, switch__isnull=False, link__isnull=False,
                               link__ports__switch__isnull=False, link__ports__hca__isnull=True).first()  # fmt: skip
    ps = PortSample(device="0x" + port.switch.guid, port=port.number, state=state,
                    counters={"port_xmit_data": units, "port_rcv_data": 0})  # fmt: skip
    return NodeSample(node=FABRIC_SOURCE, collected_at=t, collector="test", ports=[ps]), port


def test_switch_ports_from_the_fabric_agent_give_switch_link_load(cluster):
    first, port = fabric_sample(cluster, 1000.0, 0)
    ingest_samples(cluster.pk, [first])
    second, _ = fabric_sample(cluster, 1001.0, 25 * GB)  # 200 Gb/s on a 400 Gb/s leaf-spine link
    result = ingest_samples(cluster.pk, [second])
    assert result.link_utilisation == {port.link_id: pytest.approx(0.5)}
    assert PortMetric.objects.get(port=port).utilisation == pytest.approx(0.5)
    links, _ = latest_utilisation(cluster.pk, [])
    assert links[str(port.link_id)] == pytest.approx(0.5)


def test_a_switch_port_going_down_takes_its_link_down(cluster):
    first, port = fabric_sample(cluster, 1000.0, 0)
    ingest_samples(cluster.pk, [first])
    down, _ = fabric_sample(cluster, 1001.0, 0, state="DOWN")
    ingest_samples(cluster.pk, [down])
    alert = Alert.objects.get(rule="port_down")
    assert alert.object_key == f"{FABRIC_SOURCE}/0x{port.switch.guid}/{port.number}"
    assert Link.objects.get(pk=port.link_id).state == "down"


def test_inbox_keeps_order_and_takes_back_a_failed_batch(settings):
    inbox.drain(999)
    for i in range(3):
        inbox.push(999, {"i": i})
    taken = inbox.drain(999, limit=2)
    assert [s["i"] for s in taken] == [0, 1]
    inbox.push_front(999, taken)
    assert [s["i"] for s in inbox.drain(999)] == [0, 1, 2]


def test_ingest_batch_takes_the_whole_inbox_and_drops_a_malformed_result(cluster):
    import dataclasses

    for s in poll(cluster, 1000.0, 0):
        inbox.push(cluster.pk, dataclasses.asdict(s))
    inbox.push(cluster.pk, {"node": "x"})  # no collected_at
    assert tasks.ingest_batch(cluster.pk) == 8
    assert inbox.waiting(cluster.pk) == 0
    assert len(node_loads(cluster.pk)) == 8


def test_poll_asks_the_fabric_agent_for_switch_ports(cluster, settings):
    settings.TELEMETRY_FABRIC_AGENTS = ["auto"]
    settings.TELEMETRY_SWITCH_COLLECTOR = "static"
    tasks.poll_cluster(cluster.pk, "static")
    tasks.poll_cluster(cluster.pk, "static")
    assert PortMetric.objects.filter(port__switch__isnull=False).exists()
    assert FABRIC_SOURCE in last_seen(cluster.pk)


def test_poll_skips_nodes_an_operator_took_down_but_asks_those_liveness_did(cluster, settings):
    nodes = list(Node.objects.filter(cluster=cluster).order_by("hostname"))
    set_node_state([nodes[0]], "down", "maintenance")
    set_node_state([nodes[1]], "down", TELEMETRY_REASON + "no sample")
    assert tasks.poll_cluster(cluster.pk, "static") == 7
    assert GPU.objects.filter(node=nodes[0]).exists()


def test_a_link_that_stays_down_keeps_its_alert_open_past_the_hold_down(cluster):
    first, port = fabric_sample(cluster, 1000.0, 0)
    ingest_samples(cluster.pk, [first], hold_down_s=60)
    for t in (1001.0, 1100.0, 1200.0):
        down, _ = fabric_sample(cluster, t, 0, state="DOWN")
        ingest_samples(cluster.pk, [down], hold_down_s=60)
    alert = Alert.objects.get(rule="port_down")
    assert alert.cleared_at is None and alert.last_seen.timestamp() == 1200.0
    assert Link.objects.get(pk=port.link_id).state == "down"


def test_the_next_poll_in_the_same_worker_reads_no_previous_sample_from_the_cache(cluster, monkeypatch):
    ingest_samples(cluster.pk, poll(cluster, 1000.0, 0))
    asked: list[str] = []
    real = cache.get_many
    monkeypatch.setattr(cache, "get_many", lambda keys, *a, **kw: asked.extend(keys) or real(keys, *a, **kw))
    result = ingest_samples(cluster.pk, poll(cluster, 1001.0, GB))
    assert asked == []  # this worker wrote every node's previous sample: it still holds them
    node = Node.objects.filter(cluster=cluster).order_by("hostname").first()
    port = Port.objects.filter(hca__node=node).order_by("pk").first()
    rate = PortMetric.objects.get(port=port, at=datetime.fromtimestamp(1001, UTC)).tx_bytes_per_s
    assert rate == 4 * GB  # (GB units x 4 octets) in 1 s: rates from the held sample, as from the cache
    assert node.hostname in result.stored


def test_a_sample_another_worker_stored_since_is_read_from_the_cache(cluster):
    from fabric import latest

    node = Node.objects.filter(cluster=cluster).order_by("hostname").first()
    ingest_samples(cluster.pk, [host_sample(node, 1000.0, 0)])
    # Another worker ingests t=1001 for this node: the cache has it, this process's memory holds t=1000.
    latest._MEMO[cluster.pk].pop(node.hostname)
    ingest_samples(cluster.pk, [host_sample(node, 1001.0, GB)])
    latest._MEMO[cluster.pk][node.hostname] = (1000.0, host_sample(node, 1000.0, 0), {})
    ingest_samples(cluster.pk, [host_sample(node, 1002.0, 3 * GB)])
    port = Port.objects.filter(hca__node=node).order_by("pk").first()
    # From t=1001 (GB units): 2 GB units in 1 s. From the stale t=1000 it would be 3 GB units over 2 s.
    assert PortMetric.objects.get(port=port, at=datetime.fromtimestamp(1002, UTC)).tx_bytes_per_s == 2 * 4 * GB


def test_deleting_a_gpu_deletes_its_rows_without_a_database_constraint(cluster):
    from fabric.models import GpuMetric

    ingest_samples(cluster.pk, poll(cluster, 1000.0, 0))
    gpu = GPU.objects.filter(node__cluster=cluster).order_by("pk").first()
    assert GpuMetric.objects.filter(gpu=gpu).count() == 1
    gpu.delete()  # Django's CASCADE, as the cluster's deletion does
    assert GpuMetric.objects.filter(gpu_id=gpu.pk).count() == 0
    assert GpuMetric.objects.count() == 8 * 8 - 1


def test_a_port_rows_error_growth_is_stored_as_json_and_none_as_an_empty_object(cluster):
    node = Node.objects.filter(cluster=cluster).order_by("hostname").first()
    first = host_sample(node, 1000.0, 0)
    first.ports[0].counters["symbol_error"] = 0
    ingest_samples(cluster.pk, [first])
    later = host_sample(node, 1001.0, GB)
    later.ports[0].counters["symbol_error"] = 5
    ingest_samples(cluster.pk, [later])
    rows = PortMetric.objects.filter(port__hca__node=node, at=datetime.fromtimestamp(1001, UTC)).order_by("port_id")
    errors = [r.errors for r in rows]
    assert {"symbol_error": 5} in errors
    assert errors.count({}) == len(errors) - 1
