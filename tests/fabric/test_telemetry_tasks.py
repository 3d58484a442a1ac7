"""poll_cluster -> poll_node (node queue) -> ingest, in-process (eager); samples cross as JSON and back."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fabric import tasks
from fabric.collectors.samples import GpuSample, NodeSample, PortSample, sample_from_dict
from fabric.models import GpuMetric, PortMetric
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def static_collector():
    return "static"  # registered in clusterctl/test_settings.py


def test_sample_survives_json_round_trip():
    s = NodeSample(node="n1", collected_at=1.5, collector="x", gpus=[GpuSample(index=0, xid_events=[79])],
                   ports=[PortSample(device="mlx5_0", port=1, counters={"port_xmit_data": 7})])  # fmt: skip
    assert sample_from_dict(json.loads(json.dumps(dataclasses.asdict(s)))) == s


def test_poll_cluster_ingests_every_node(static_collector, settings):
    # Polls run inline here: no node queue to look at (a shared test broker may hold another run's node.gpu0001).
    settings.TELEMETRY_NODE_QUEUES = False
    cluster = fat_tree("poll", nodes=2, gpus_per_node=8, leaf_ports=16)
    assert tasks.poll_cluster(cluster.pk, static_collector) == 2
    tasks.poll_cluster(cluster.pk, static_collector)  # a second poll gives rates
    assert GpuMetric.objects.filter(gpu__node__cluster=cluster).count() == 4
    assert PortMetric.objects.filter(port__cluster=cluster).count() == 2
    assert all(m.tx_bytes_per_s > 0 for m in PortMetric.objects.all())


def test_poll_all_is_off_without_a_collector(settings, static_collector):
    settings.TELEMETRY_COLLECTOR = ""
    fat_tree("off", nodes=2, gpus_per_node=8, leaf_ports=16)
    tasks.poll_all()
    assert not GpuMetric.objects.exists()


def test_poll_node_needs_no_database(static_collector, django_assert_num_queries):
    with django_assert_num_queries(0):
        body = tasks.poll_node("gpu0001", static_collector)
    assert body["node"] == "gpu0001" and body["ports"][0]["device"] == "mlx5_0"


def test_a_slow_run_does_not_release_the_lock_that_a_later_run_took(monkeypatch):
    """Run A outlives its lock; run B takes the lapsed lock; A finishing must leave B's lock held."""
    import threading
    import time

    monkeypatch.setattr(tasks, "SERIES_LOCK_S", 0.5)
    b_holds, b_may_end = threading.Event(), threading.Event()

    def run_b():
        b_holds.set()
        b_may_end.wait(10)
        return {"run": "b"}

    a = threading.Thread(target=tasks._exclusive, args=("rollup", lambda: time.sleep(1.0)))
    a.start()
    time.sleep(0.7)  # A's lock lapsed at 0.5 s; A is still running
    b = threading.Thread(target=tasks._exclusive, args=("rollup", run_b))
    b.start()
    assert b_holds.wait(5), "run B did not get the lapsed lock"
    a.join(5)  # A ends at 1.0 s and releases
    try:
        assert tasks._exclusive("rollup", lambda: {"run": "c"}) is None  # B still holds it: a third run skips
    finally:
        b_may_end.set()
        b.join(5)
    assert tasks._exclusive("rollup", lambda: {"run": "d"}) == {"run": "d"}  # released by B itself
