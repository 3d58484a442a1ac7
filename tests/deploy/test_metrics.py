"""/metrics: Prometheus text with the HTTP metrics and the cluster-state families, right values, access control,
and a query count that does not grow with the cluster."""

from __future__ import annotations

import time

import pytest
from django.core import checks
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from clusterctl import metrics
from fabric import actions as fabric_actions
from fabric.choices import AlertSeverity, GpuHealth, NodeState
from fabric.collectors.samples import FABRIC_SOURCE, NodeSample, PortSample
from fabric.ingest import ingest_sample
from fabric.latest import latest_key, load_key, seen_key
from fabric.models import GPU, Alert, Node, Port
from scheduler import actions as scheduler_actions
from scheduler.choices import JobStatus
from scheduler.models import PriorityClass
from scheduler.rounds import run_round
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-for-tests-0123456789"


def scrape(client, **extra) -> dict:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def samples(families: dict, name: str, cluster: str) -> dict[tuple, float]:
    """(label values other than cluster, sorted by label name) -> value, for one cluster's samples of a family."""
    found = {}
    for s in families[name].samples:
        if s.labels.get("cluster") != cluster:
            continue
        labels = tuple(v for k, v in sorted(s.labels.items()) if k != "cluster")
        found[(s.name, *labels)] = s.value
    return found


def forget_telemetry(cluster) -> None:
    hosts = [*Node.objects.filter(cluster=cluster).values_list("hostname", flat=True), FABRIC_SOURCE]
    cache.delete_many([seen_key(cluster.pk), *(k(cluster.pk, h) for h in hosts for k in (latest_key, load_key))])


@pytest.fixture
def cluster():
    """4 servers x 8 GPUs: gpu0 with a failed and a degraded GPU, gpu1 drained, one 8-GPU job running, one
    16-GPU job pending (14 usable GPUs left), one cancelled; two open alerts and a cleared one; one link at 50 %
    and one server that reported 5 s ago."""
    cluster = fat_tree("metrics", nodes=4, gpus_per_node=8, leaf_ports=16)
    nodes = list(Node.objects.filter(cluster=cluster).order_by("hostname"))
    sick = list(GPU.objects.filter(node=nodes[0]).order_by("index")[:2])
    fabric_actions.update_inventory_object(sick[0], {"health": GpuHealth.FAILED})
    fabric_actions.update_inventory_object(sick[1], {"health": GpuHealth.DEGRADED})
    fabric_actions.set_node_state([nodes[1]], NodeState.DRAIN, reason="maintenance")

    pool = scheduler_actions.ensure_scheduler(cluster)
    tenant = scheduler_actions.create_tenant("acme")
    normal = PriorityClass.objects.get(name="normal")
    scheduler_actions.submit_job(tenant, pool, normal, name="runs", gpus=8)
    scheduler_actions.submit_job(tenant, pool, normal, name="waits", gpus=16)
    cancelled = scheduler_actions.submit_job(tenant, pool, normal, name="gone", gpus=1)
    scheduler_actions.cancel_job(cancelled, actor="test")
    run_round(cluster.pk, "test")

    now = timezone.now()
    alert = {"cluster": cluster, "object_kind": "gpu", "message": "m", "first_seen": now, "last_seen": now}
    Alert.objects.create(rule="gpu_xid_critical", severity=AlertSeverity.CRITICAL, object_key="a", **alert)
    Alert.objects.create(rule="port_congested", severity=AlertSeverity.WARNING, object_key="b", **alert)
    Alert.objects.create(rule="port_errors", severity=AlertSeverity.WARNING, object_key="c", cleared_at=now, **alert)

    # 400 Gb/s link, 25 GB/s in one second = 50 % (6.25e9 four-octet units).
    port = Port.objects.filter(cluster=cluster, hca__node=nodes[2]).select_related("hca__node", "link").first()
    t = time.time() - 5.0
    for at, units in ((t - 1.0, 0), (t, 6_250_000_000)):
        counters = {"port_xmit_data": units, "port_rcv_data": units // 2}
        p = PortSample(device=port.hca.device, port=port.number, state="ACTIVE", counters=counters)
        ingest_sample(cluster.pk, NodeSample(node=nodes[2].hostname, collected_at=at, collector="test", ports=[p]))
    yield cluster
    forget_telemetry(cluster)


def test_metrics_parse_and_hold_the_http_and_cluster_families(client, cluster):
    client.get("/healthz")
    families = scrape(client)
    for name in (
        "django_http_requests_total_by_method",
        "django_http_responses_total_by_status",
        "django_http_requests_latency_seconds_by_view_method",
        "django_http_requests_latency_including_middlewares_seconds",
        "clusterctl_gpus",
        "clusterctl_nodes",
        "clusterctl_link_utilisation",
        "clusterctl_alerts_open",
        "clusterctl_poll_lag_seconds",
        "clusterctl_nodes_stale",
        "clusterctl_jobs",
        "clusterctl_metrics_up",
    ):
        assert name in families, name
    assert families["clusterctl_link_utilisation"].type == "histogram"
    assert families["clusterctl_metrics_up"].samples[0].value == 1
    # The healthz request above was counted, under its view name.
    by_view = [s for s in families["django_http_requests_latency_seconds_by_view_method"].samples]
    assert any(s.labels.get("view") == "healthz" and s.name.endswith("_count") and s.value >= 1 for s in by_view)


def test_cluster_values(client, cluster):
    families = scrape(client)
    gpus = samples(families, "clusterctl_gpus", "metrics")
    # label order: allocation, health
    assert gpus[("clusterctl_gpus", "allocated", GpuHealth.HEALTHY)] == 8
    assert gpus[("clusterctl_gpus", "free", GpuHealth.HEALTHY)] == 22
    assert gpus[("clusterctl_gpus", "free", GpuHealth.FAILED)] == 1
    assert gpus[("clusterctl_gpus", "free", GpuHealth.DEGRADED)] == 1
    assert sum(gpus.values()) == 32 and len(gpus) == len(GpuHealth.values) * 2  # every series, zeros included

    assert samples(families, "clusterctl_nodes", "metrics") == {
        ("clusterctl_nodes", NodeState.UP): 3,
        ("clusterctl_nodes", NodeState.DRAIN): 1,
        ("clusterctl_nodes", NodeState.DOWN): 0,
    }
    jobs = samples(families, "clusterctl_jobs", "metrics")
    assert jobs[("clusterctl_jobs", JobStatus.RUNNING)] == 1
    assert jobs[("clusterctl_jobs", JobStatus.PENDING)] == 1
    assert ("clusterctl_jobs", JobStatus.CANCELLED) not in jobs  # finished jobs are history
    assert sum(jobs.values()) == 2

    alerts = samples(families, "clusterctl_alerts_open", "metrics")
    assert alerts[("clusterctl_alerts_open", "gpu_xid_critical", AlertSeverity.CRITICAL)] == 1
    assert alerts[("clusterctl_alerts_open", "port_congested", AlertSeverity.WARNING)] == 1
    assert not any(key[1] == "port_errors" for key in alerts)  # cleared

    links = samples(families, "clusterctl_link_utilisation", "metrics")
    assert links[("clusterctl_link_utilisation_count",)] == 1
    assert links[("clusterctl_link_utilisation_sum",)] == pytest.approx(0.5)
    assert links[("clusterctl_link_utilisation_bucket", "0.4")] == 0
    assert links[("clusterctl_link_utilisation_bucket", "0.5")] == 1
    assert links[("clusterctl_link_utilisation_bucket", "1.0")] == 1
    assert links[("clusterctl_link_utilisation_bucket", "+Inf")] == 1

    lag = samples(families, "clusterctl_poll_lag_seconds", "metrics")[("clusterctl_poll_lag_seconds",)]
    assert 4.0 <= lag < 60.0
    # Three polled servers never reported (the drained one is still polled); the fourth did, 5 s ago.
    assert samples(families, "clusterctl_nodes_stale", "metrics") == {("clusterctl_nodes_stale",): 3}


def test_down_nodes_are_neither_stale_nor_lagging(cluster):
    fabric_actions.set_node_state(Node.objects.filter(cluster=cluster), NodeState.DOWN, reason="power")
    families = {f.name: f for f in metrics.cluster_families()}
    assert [s.value for s in families["clusterctl_nodes_stale"].samples] == [0]
    assert families["clusterctl_poll_lag_seconds"].samples == []


def test_a_failing_read_still_serves_the_process_metrics(client, monkeypatch):
    def broken(now=None):
        raise RuntimeError("database away")

    monkeypatch.setattr(metrics, "cluster_families", broken)
    families = scrape(client)
    assert families["clusterctl_metrics_up"].samples[0].value == 0
    assert "django_http_responses_total_by_status" in families


def test_an_outage_is_one_warning_not_a_traceback_per_scrape(client, monkeypatch, caplog):
    import logging

    from redis.exceptions import ConnectionError as RedisConnectionError

    from clusterctl import outages

    def away(now=None):
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    outages.forget()
    monkeypatch.setattr(metrics, "cluster_families", away)
    with caplog.at_level(logging.WARNING):
        ups = [scrape(client)["clusterctl_metrics_up"].samples[0].value for _ in range(3)]
    assert ups == [0, 0, 0]
    logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "clusterctl.outages"]
    assert len(logged) == 1 and logged[0][0] == "WARNING" and "/metrics" in logged[0][1]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


#
# Access
#


def test_loopback_is_allowed_by_default(client, settings):
    assert settings.METRICS_ALLOWED_IPS == ["127.0.0.1", "::1"]
    for addr in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
        assert client.get("/metrics", REMOTE_ADDR=addr).status_code == 200, addr


def test_other_addresses_are_refused_without_a_token(client, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer anything").status_code == 403


def test_allowed_networks(client, settings):
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8", "192.0.2.7"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.8").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_bearer_token(client, settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_IPS = []
    remote = {"REMOTE_ADDR": "203.0.113.5"}
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **remote).status_code == 200
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token", **remote)
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"] == 'Bearer realm="metrics", error="invalid_token"'
    missing = client.get("/metrics", **remote)
    assert missing.status_code == 401 and missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}", **remote).status_code == 401


def test_proxied_requests_need_the_token(client, settings):
    """Behind a reverse proxy on the same host every request comes from 127.0.0.1: the address proves nothing."""
    settings.METRICS_TOKEN = TOKEN
    proxied = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "198.51.100.4"}
    assert client.get("/metrics", **proxied).status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_FORWARDED="for=198.51.100.4").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **proxied).status_code == 200


def test_only_get(client):
    assert client.post("/metrics").status_code == 405


def test_bad_allowed_address_fails_the_system_check(settings):
    settings.METRICS_ALLOWED_IPS = ["127.0.0.1", "10.0.0.300"]
    errors = checks.run_checks(tags=[checks.Tags.security])
    assert [e.id for e in errors if e.id.startswith("clusterctl.")] == ["clusterctl.E001"]


#
# Cost
#


def _scrape_queries(client) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/metrics").status_code == 200
    return len(ctx.captured_queries)


def test_query_count_does_not_grow_with_the_cluster(client, django_assert_max_num_queries):
    small = fat_tree("small", nodes=2, gpus_per_node=8, leaf_ports=16)
    with django_assert_max_num_queries(5):
        assert client.get("/metrics").status_code == 200
    few = _scrape_queries(client)
    big = fat_tree("big", nodes=64, gpus_per_node=8, leaf_ports=16)
    assert GPU.objects.count() == 16 + 512
    assert _scrape_queries(client) == few
    forget_telemetry(small)
    forget_telemetry(big)
