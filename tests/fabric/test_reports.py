"""fabric.reports: a cluster's report analysed once per report version, shared through the cache, warmed ahead.

The fabric: 8 servers with one HCA each on 8-port leaves, 1:1 (fabric.importers.fattree): 4 hosts and 4 uplinks per
leaf, so 2 leaves and 2 spines (the smallest divisor of 4 uplinks that is at least 2), each leaf cabled twice to each
spine: 8 host links and 8 leaf-spine links.
"""

from __future__ import annotations

from io import StringIO

import pytest
from celery import current_app
from django.core.management import call_command
from redis.exceptions import ConnectionError as RedisConnectionError

from clusterctl import outages
from fabric import events, reports
from fabric.tasks import warm_report
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_outage():
    """No Redis failure noted by another test holds back a send here, nor one noted here another test's."""
    outages.forget()
    yield
    outages.forget()


@pytest.fixture
def cluster():
    return fat_tree("small", nodes=8, gpus_per_node=8, leaf_ports=8, hcas_per_node=1)


@pytest.fixture
def sent(monkeypatch):
    """Tasks sent by name, as a worker would get them: tasks do not run eagerly here."""
    calls: list[tuple[str, tuple, dict]] = []
    eager = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = False
    monkeypatch.setattr(current_app, "send_task", lambda name, args=(), **options: calls.append((name, args, options)))
    yield calls
    current_app.conf.task_always_eager = eager


def test_the_report_counts_the_fabric(cluster):
    held = reports.cluster_report(cluster.pk)
    counts = held.report.counts
    assert (counts.switches, counts.hosts, counts.links, counts.host_links, counts.switch_links) == (4, 8, 16, 8, 8)
    assert [leaf.name for leaf in held.leaves_worst_first] == ["leaf001", "leaf002"]
    # Each leaf cuts off its 4 single-homed hosts: both are SPOFs, named by their switch ids.
    assert sorted(held.switch_ids.values()) == sorted(cluster.switches.filter(role="leaf").values_list("pk", flat=True))


def test_another_process_reads_the_report_from_the_cache(cluster, analyses):
    first = reports.cluster_report(cluster.pk)
    reports.forget()  # a second web process: no memo, the same cache
    second = reports.cluster_report(cluster.pk)
    assert analyses == [16]
    assert second.version == first.version and second.report.counts == first.report.counts


def test_a_new_import_is_a_new_version(cluster, analyses):
    reports.cluster_report(cluster.pk)
    fat_tree("small", nodes=8, gpus_per_node=8, leaf_ports=8, hcas_per_node=1)  # the same fabric, imported again
    reports.cluster_report(cluster.pk)
    assert analyses == [16, 16]


def test_an_inventory_edit_renews_the_stamp(cluster, analyses):
    reports.cluster_report(cluster.pk)
    reports.fabric_changed(cluster.pk, {"kind": "inventory_changed", "cause": "edit of a switch"})
    reports.cluster_report(cluster.pk)
    assert analyses == [16, 16]


def test_a_node_drained_keeps_the_report(cluster, analyses):
    reports.cluster_report(cluster.pk)
    reports.fabric_changed(cluster.pk, {"kind": "nodes_changed", "state": "drain"})
    reports.cluster_report(cluster.pk)
    assert analyses == [16]


def test_without_the_cache_each_reader_analyses(cluster, analyses, monkeypatch):
    def down(*args, **kwargs):
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(reports.cache, "get", down)
    assert reports.cluster_report(cluster.pk).report.counts.links == 16
    assert reports.cluster_report(cluster.pk).report.counts.links == 16
    assert analyses == [16, 16]


def test_the_warm_up_analyses_once_ahead_of_the_first_reader(cluster, analyses):
    assert warm_report.apply(args=(cluster.pk,)).get() is True
    assert reports.warm(cluster.pk) is False  # the cached report is current
    reports.cluster_report(cluster.pk)
    assert analyses == [16]


def test_no_warm_up_is_sent_where_tasks_run_eagerly(cluster, monkeypatch):
    calls = []
    monkeypatch.setattr(current_app, "send_task", lambda *args, **kwargs: calls.append(args))
    assert current_app.conf.task_always_eager
    assert reports.request_warm_up(cluster.pk) is False
    assert calls == []


def test_a_burst_of_changes_sends_one_warm_up(cluster, sent):
    reports.fabric_changed(cluster.pk, {"kind": "inventory_changed"})
    reports.fabric_changed(cluster.pk, {"kind": "health_changed"})
    assert sent == [("fabric.tasks.warm_report", (cluster.pk,), {"countdown": 2.0})]


def test_a_change_while_the_warm_up_runs_sends_another(cluster, sent):
    reports.request_warm_up(cluster.pk)
    reports.warm(cluster.pk)
    reports.request_warm_up(cluster.pk)
    assert [args for _, args, _ in sent] == [(cluster.pk,), (cluster.pk,)]


def test_the_listener_is_subscribed_to_the_fabric_topic():
    assert reports.fabric_changed in events._listeners["fabric"]


def test_the_api_report_reads_the_cached_report(operator_api, cluster, analyses):
    bodies = [operator_api.get(f"/api/v1/clusters/{cluster.pk}/report/").json() for _ in range(2)]
    assert analyses == [16]
    assert bodies[0] == bodies[1] and bodies[0]["counts"]["links"] == 16


def test_the_command_reads_the_cached_report(cluster, analyses):
    outputs = []
    for _ in range(2):
        out = StringIO()
        call_command("fabric_report", "--cluster", "small", stdout=out)
        outputs.append(out.getvalue())
    assert analyses == [16]
    assert outputs[0] == outputs[1] and "leaf001" in outputs[0]
