"""Imbalance and hottest links, per pool and per cluster, from telemetry's latest state."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from fabric.collectors.samples import GpuSample, NodeSample, PortSample
from fabric.ingest import ingest_samples
from fabric.models import Node, Port
from scheduler.actions import assign_nodes, create_pool
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db
GB = 1_000_000_000 // 4


@pytest.fixture
def loaded():
    cluster = fat_tree("load", nodes=4, gpus_per_node=8, leaf_ports=16)
    nodes = list(Node.objects.filter(cluster=cluster).order_by("hostname"))
    pool = create_pool(cluster, "hot", sharing="exclusive")
    assign_nodes(pool, nodes[:2])

    def sample(node, t, units, util):
        ports = [PortSample(device=d, port=n, state="ACTIVE", counters={"port_xmit_data": units, "port_rcv_data": 0})
                 for d, n in Port.objects.filter(hca__node=node).values_list("hca__device", "number")]  # fmt: skip
        gpus = [GpuSample(index=i, utilisation_gpu_pct=util) for i in range(8)]
        return NodeSample(node=node.hostname, collected_at=t, collector="test", gpus=gpus, ports=ports)

    ingest_samples(cluster.pk, [sample(n, 1000.0, 0, 0) for n in nodes])
    # gpu0001 busy with its links at 1/2, gpu0002 idle; the two others (default pool) evenly half busy
    utils = {0: 100.0, 1: 0.0, 2: 50.0, 3: 50.0}
    units = {0: 25 * GB, 1: 0, 2: 5 * GB, 3: 5 * GB}
    ingest_samples(cluster.pk, [sample(n, 1001.0, units[i], utils[i]) for i, n in enumerate(nodes)])
    yield cluster, pool, nodes
    cache.clear()


def test_pool_load_reports_the_spread_and_its_hottest_link(loaded, operator_api):
    _, pool, nodes = loaded
    body = operator_api.get(f"/api/v1/pools/{pool.pk}/load/").json()
    assert body["gpus_reporting"] == 16
    assert body["mean_utilisation"] == pytest.approx(0.5) and body["cv"] == pytest.approx(1.0)
    assert (body["idle_gpus"], body["busy_gpus"]) == (8, 8)
    top = body["hottest_links"][0]
    assert top["utilisation"] == pytest.approx(0.5) and nodes[0].hostname in top["label"]


def test_cluster_load_lists_hottest_links_and_every_pool(loaded, operator_api):
    cluster, _, _ = loaded
    body = operator_api.get(f"/api/v1/clusters/{cluster.pk}/load/", {"top": 2}).json()
    assert [h["utilisation"] for h in body["hottest_links"]] == [pytest.approx(0.5)] * 2  # gpu0001's rails
    spreads = {p["pool"]: p["cv"] for p in body["pools"]}
    assert spreads["hot"] == pytest.approx(1.0)
    assert spreads[next(k for k in spreads if k != "hot")] == pytest.approx(0.0)


def test_cluster_load_rejects_a_bad_top(loaded, operator_api):
    cluster, _, _ = loaded
    response = operator_api.get(f"/api/v1/clusters/{cluster.pk}/load/", {"top": "lots"})
    assert response.status_code == 400 and "top" in response.json()
