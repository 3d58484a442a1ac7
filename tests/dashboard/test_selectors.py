"""Snapshot builders of the live views: the shapes docs/dashboard.md promises, and query counts that do not grow
with the cluster."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard import selectors
from dashboard.selectors import fabric_topic
from fabric import actions as fabric_actions
from fabric.collectors.samples import GpuSample, NodeSample
from fabric.ingest import ingest_samples
from fabric.latest import forget_node
from fabric.models import GPU, Alert, Link, Node
from scheduler import actions
from scheduler.models import Allocation, PriorityClass
from scheduler.rounds import run_round
from scheduler.selectors import queue_info
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


def build(cluster_id: int, *topics: str) -> dict:
    return selectors.build(cluster_id, topics or selectors.TOPICS)


def test_unknown_cluster_builds_nothing():
    assert selectors.build(10**9, ["overview"]) is None


def test_fabric_snapshot_has_tiers_leaves_and_link_ends(site):
    data = build(site.cluster.pk, "fabric")["fabric"]
    assert data["aggregated"] is False
    roles = {s["role"]: s["tier"] for s in data["switches"]}
    assert roles == {"leaf": 0, "spine": 1}
    switch_ids = {s["id"] for s in data["switches"]}
    nodes = {n["hostname"]: n for n in data["nodes"]}
    assert len(nodes) == 4 and all(n["leaf"] in switch_ids and n["gpus"] == 8 for n in nodes.values())
    assert nodes["gpu0001"]["leaf"] == nodes["gpu0002"]["leaf"] != nodes["gpu0003"]["leaf"]
    assert len(data["links"]) == Link.objects.filter(cluster=site.cluster).count()
    host_links = [ln for ln in data["links"] if ln["b"][0] == "node" or ln["a"][0] == "node"]
    assert len(host_links) == 4
    assert {tuple(ln) for link in data["links"] for ln in (link["a"], link["b"])} <= {
        *(("switch", i) for i in switch_ids),
        *(("node", n["id"]) for n in nodes.values()),
    }
    link = data["links"][0]
    assert set(link) == {"id", "a", "b", "capacity_gbps", "state", "util", "errors"}
    assert link["capacity_gbps"] == 400.0 and link["util"] == 0.0 and link["errors"] is False


def test_fabric_reads_live_load_and_error_alerts(site):
    node = Node.objects.get(cluster=site.cluster, hostname="gpu0001")
    port = node.hcas.get().ports.get()
    Alert.objects.create(cluster=site.cluster, rule="port_errors", severity="warning", object_kind="port",
                         object_key=f"gpu0001/{port.hca.device}/{port.number}", message="symbol errors",
                         first_seen=timezone.now(), last_seen=timezone.now())  # fmt: skip
    import time

    from fabric import latest
    from fabric.collectors.samples import NodeSample

    load = {"links": {port.link_id: 0.423}, "gpus": {}, "gpu_metrics": {}}
    latest.store(site.cluster.pk, {"gpu0001": (NodeSample("gpu0001", time.time(), "nvml"), load)})  # as ingest does
    try:
        data = build(site.cluster.pk, "fabric")["fabric"]
    finally:
        forget_node(site.cluster.pk, "gpu0001")
    link = next(ln for ln in data["links"] if ln["id"] == port.link_id)
    assert link["util"] == 0.42 and link["errors"] is True
    leaf = next(s for s in data["switches"] if s["id"] == node_leaf(data, "gpu0001"))
    assert leaf["hottest"] == 0.42


def node_leaf(data: dict, hostname: str) -> int:
    return next(n["leaf"] for n in data["nodes"] if n["hostname"] == hostname)


def test_fabric_aggregates_nodes_per_leaf_above_the_limit(site, monkeypatch):
    monkeypatch.setattr(fabric_topic, "AGGREGATE_ABOVE", 2)
    data = build(site.cluster.pk, "fabric")["fabric"]
    assert data["aggregated"] is True
    assert len(data["nodes"]) == 2
    group = data["nodes"][0]
    assert group["role"] == "group" and group["members"] == 2 and group["gpus"] == 16 and group["state"] == "up"
    assert group["id"] == f"leaf:{group['leaf']}" and group["hostname"].endswith(": 2 nodes")
    folded = [ln for ln in data["links"] if ln["b"][0] == "node"]
    assert len(folded) == 2 and all(ln["capacity_gbps"] == 800.0 for ln in folded)
    assert {ln["id"] for ln in folded} == {n["id"] for n in data["nodes"]}


def test_gpus_in_leaf_node_index_order_with_metrics_and_jobs(site):
    job = site.submit(site.tenant_a, 8, name="llm")
    run_round(site.cluster.pk, "test")
    gpu_ids = list(Allocation.objects.filter(job=job, active=True).values_list("gpu_id", flat=True))
    host = GPU.objects.get(pk=gpu_ids[0]).node.hostname
    sample = NodeSample(node=host, collected_at=1000.0, collector="test", gpus=[
        GpuSample(index=i, utilisation_gpu_pct=93.04, memory_used_mib=69000, memory_total_mib=81559,
                  temperature_c=61, power_w=640.4) for i in range(8)
    ])  # fmt: skip
    ingest_samples(site.cluster.pk, [sample])
    try:
        data = build(site.cluster.pk, "gpus")["gpus"]
    finally:
        forget_node(site.cluster.pk, host)
    gpus = data["gpus"]
    assert len(gpus) == 32
    assert [(g["leaf"], g["node"], g["index"]) for g in gpus] == sorted(
        (g["leaf"], g["node"], g["index"]) for g in gpus
    )
    busy = [g for g in gpus if g["jobs"]]
    assert {g["id"] for g in busy} == set(gpu_ids)
    g = busy[0]
    assert g["jobs"] == [{"id": job.pk, "name": "llm"}]
    assert (g["util"], g["mem_used"], g["mem_total"], g["temp"], g["power"]) == (93.0, 69000, 81559, 61, 640)
    assert g["health"] == "healthy" and g["model"] == "H100"
    idle = next(g for g in gpus if g["node"] != host)
    assert idle["util"] is None and idle["mem_total"] == GPU.objects.get(pk=idle["id"]).memory_mib  # inventory
    assert data["metrics"] == {"util": "%", "mem_used": "MiB", "temp": "°C", "power": "W"}


def test_alerts_open_and_recently_cleared_newest_first(site):
    now = timezone.now()
    make = lambda key, seen, cleared=None: Alert.objects.create(  # noqa: E731
        cluster=site.cluster, rule="gpu_hot", severity="warning", object_kind="gpu", object_key=key,
        message="hot", first_seen=seen, last_seen=seen, cleared_at=cleared,
    )  # fmt: skip
    old = make("gpu0001/gpu0", now - timezone.timedelta(hours=30), now - timezone.timedelta(hours=25))
    recent = make("gpu0001/gpu1", now - timezone.timedelta(hours=2), now - timezone.timedelta(hours=1))
    open_ = make("gpu0001/gpu2", now)
    data = build(site.cluster.pk, "alerts")["alerts"]["alerts"]
    assert [a["id"] for a in data] == [open_.pk, recent.pk]
    assert old.pk not in {a["id"] for a in data}
    assert data[0]["cleared_at"] is None and data[0]["last_seen"].endswith("Z")
    assert set(data[0]) == {"id", "rule", "severity", "object_kind", "object_key", "message", "first_seen",
                            "last_seen", "cleared_at", "acknowledged_by", "group"}  # fmt: skip
    assert data[0]["group"] == "gpu_hot|warning|hot"


def test_queue_has_order_reasons_running_nodes_and_links(site):
    running = site.submit(site.tenant_a, 16, name="wide", nodes=2, gpus_per_node=8)
    run_round(site.cluster.pk, "test")
    first, second = site.submit(site.tenant_b, 32, name="too-big"), site.submit(site.tenant_a, 32, name="later")
    run_round(site.cluster.pk, "test")
    fresh = site.submit(site.tenant_a, 1, name="no-round-yet", held=False)
    data = build(site.cluster.pk, "queue")["queue"]
    assert [j["id"] for j in data["pending"]] == [*queue_info([site.cluster.pk]), fresh.pk]
    pending = {j["id"]: j for j in data["pending"]}
    assert {pending[first.pk]["position"], pending[second.pk]["position"]} == {1, 2}
    assert pending[first.pk]["reason"] and pending[fresh.pk]["reason"] == selectors.NO_ROUND_YET
    assert pending[fresh.pk]["position"] is None
    assert pending[first.pk]["tenant"] == "tenant-b" and pending[first.pk]["priority"] == "normal"
    assert pending[first.pk]["shape"] == "32 GPUs" and pending[first.pk]["wait_s"] >= 0
    assert set(pending[first.pk]) == {"id", "name", "tenant", "position", "gpus", "shape", "priority", "reason",
                                      "submitted_at", "wait_s", "start_at", "start_estimate"}  # fmt: skip
    (job,) = data["running"]
    assert job["id"] == running.pk and job["shape"] == "16 GPUs: 2 nodes x 8" and job["gpus"] == 16
    assert job["started_at"].endswith("Z") and len(job["nodes"]) == 2
    assert set(job["links"]) >= host_links_of(job["nodes"])


def host_links_of(hosts: list[str]) -> set[int]:
    return set(Link.objects.filter(ports__hca__node__hostname__in=hosts).values_list("pk", flat=True))


def test_job_links_stay_on_the_leaf_when_the_nodes_share_it(site):
    topology = selectors.cabling(site.cluster.pk).topology
    assert set(topology.job_links(["gpu0001", "gpu0002"])) == host_links_of(["gpu0001", "gpu0002"])
    across = set(topology.job_links(["gpu0001", "gpu0003"]))
    uplinks = set(Link.objects.filter(cluster=site.cluster, ports__switch__role="spine").values_list("pk", flat=True))
    assert len(uplinks) == 4  # two leaves, each cabled to both spines
    assert across == {*host_links_of(["gpu0001", "gpu0003"]), *uplinks}


def test_queue_recent_preemptions_and_tenant_filter(site):
    from scheduler.models import Job, JobEvent

    job = site.submit(site.tenant_b, 8, name="nb-2")
    JobEvent.objects.create(job=job, from_status="running", to_status="preempted", reason="for job 1")
    data = build(site.cluster.pk, "queue")["queue"]
    assert data["recent"][0] | {"at": None} == {"job": job.pk, "name": "nb-2", "tenant": "tenant-b",
                                               "kind": "preempted", "reason": "for job 1", "at": None}  # fmt: skip
    site.submit(site.tenant_a, 1, name="mine")
    data = build(site.cluster.pk, "queue")["queue"]
    mine = selectors.for_tenant(data, "tenant-a")
    assert [j["name"] for j in mine["pending"]] == ["mine"] and mine["recent"] == []
    assert Job.objects.count() == 2


def test_overview_counts(site):
    site.submit(site.tenant_a, 8, name="runs")
    run_round(site.cluster.pk, "test")
    high = PriorityClass.objects.get(name="high")
    actions.submit_job(site.tenant_b, site.pool, high, gpus=64, name="waits")
    gpu = GPU.objects.filter(node__cluster=site.cluster, allocations__isnull=True).first()
    fabric_actions.update_inventory_object(gpu, {"health": "failed"})
    data = build(site.cluster.pk, "overview")["overview"]
    assert data["cluster"] == {"id": site.cluster.pk, "name": "dash"}
    assert data["gpus"] == {"total": 32, "allocated": 8, "free": 23, "unhealthy": 1}
    assert data["queue"]["by_priority"] == {"high": 1, "normal": 0, "low": 0, "best-effort": 0}
    assert data["queue"]["running"] == 1
    assert data["last_round"]["placed"] == 1 and data["last_round"]["at"].endswith("Z")
    assert data["alerts"] == {"critical": 0, "warning": 0, "info": 0}
    assert data["utilisation"] == {"mean": None, "cv": None}  # nothing reported yet
    point = selectors.trend_point(data, datetime(2026, 11, 29, 19, tzinfo=UTC))
    assert point == {"at": "2026-11-29T19:00:00Z", "utilisation": None, "allocated": 8, "pending": 1}


def queries(cluster_id: int, topic: str) -> int:
    selectors._CABLING.clear()
    with CaptureQueriesContext(connection) as ctx:
        selectors.build(cluster_id, [topic])
    return len(ctx.captured_queries)


@pytest.mark.parametrize("topic", selectors.TOPICS)
def test_query_count_does_not_grow_with_the_cluster(topic, django_assert_max_num_queries):
    small = fat_tree("small", nodes=2, gpus_per_node=8, leaf_ports=16)
    big = fat_tree("big", nodes=40, gpus_per_node=8, leaf_ports=16, storage_nodes=2)
    for cluster in (small, big):
        pool = actions.ensure_scheduler(cluster)
        tenant = actions.create_tenant(f"t-{cluster.name}")
        normal = PriorityClass.objects.get(name="normal")
        for i in range(3 if cluster is small else 30):
            actions.submit_job(tenant, pool, normal, gpus=8, name=f"j{i}")
        run_round(cluster.pk, "test")
    # Cold: the cabling (tiers, link ends) is read too; warm: it is kept while fabric_version is unchanged. 15: the
    # change feed's one statement before fabric_version counts (here always: the test's transaction wrote the fabric;
    # where nothing was written since, it replaces the five counting statements).
    assert queries(small.pk, topic) == queries(big.pk, topic) <= 15
    with django_assert_max_num_queries(11):  # the same statement (10 before the change feed)
        selectors.build(big.pk, [topic])
