"""Health findings become alerts; alerts that remove capacity take GPUs and links out and give them back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from fabric import actions
from fabric.models import GPU, Alert, Link, Port
from fabric.telemetry.health import Finding
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

T0 = timezone.now()


@pytest.fixture
def cluster():
    return fat_tree("health", nodes=2, gpus_per_node=8, leaf_ports=16)


def gpu_finding(gpu: GPU, rule: str = "gpu_xid_critical", removes: bool = True) -> Finding:
    return Finding(rule, "critical", "gpu", f"{gpu.node.hostname}/{gpu.uuid}", "XID 79: GPU has fallen off the bus",
                   removes)  # fmt: skip


def port_finding(port: Port, rule: str, removes: bool = True) -> Finding:
    key = f"{port.hca.node.hostname}/{port.hca.device}/{port.number}"
    return Finding(rule, "warning", "port", key, "link errors climbing: symbol_error +40", removes)


def test_critical_xid_opens_alert_and_fails_gpu(cluster):
    gpu = GPU.objects.filter(node__cluster=cluster).first()
    counts = actions.record_findings(cluster.pk, gpu.node.hostname, [gpu_finding(gpu)], now=T0)
    assert counts["raised"] == 1 and counts["capacity_changes"] == 1
    gpu.refresh_from_db()
    assert gpu.health == "failed"
    alert = Alert.objects.get()
    assert (alert.severity, alert.cleared_at, alert.object_kind) == ("critical", None, "gpu")


def test_repeated_finding_refreshes_one_alert(cluster):
    gpu = GPU.objects.filter(node__cluster=cluster).first()
    actions.record_findings(cluster.pk, gpu.node.hostname, [gpu_finding(gpu)], now=T0)
    counts = actions.record_findings(cluster.pk, gpu.node.hostname, [gpu_finding(gpu)], now=T0 + timedelta(seconds=5))
    assert counts == {"raised": 0, "refreshed": 1, "cleared": 0, "capacity_changes": 0}
    assert Alert.objects.get().last_seen == T0 + timedelta(seconds=5)


def test_alert_holds_until_quiet_for_the_hold_down(cluster):
    gpu = GPU.objects.filter(node__cluster=cluster).first()
    host = gpu.node.hostname
    actions.record_findings(cluster.pk, host, [gpu_finding(gpu)], now=T0)
    actions.record_findings(cluster.pk, host, [], now=T0 + timedelta(seconds=60), hold_down_s=300)
    gpu.refresh_from_db()
    assert gpu.health == "failed" and Alert.objects.get().cleared_at is None
    counts = actions.record_findings(cluster.pk, host, [], now=T0 + timedelta(seconds=301), hold_down_s=300)
    assert counts["cleared"] == 1 and counts["capacity_changes"] == 1
    gpu.refresh_from_db()
    assert gpu.health == "healthy"


def test_warning_without_capacity_keeps_gpu(cluster):
    gpu = GPU.objects.filter(node__cluster=cluster).first()
    actions.record_findings(cluster.pk, gpu.node.hostname, [gpu_finding(gpu, "gpu_hot", removes=False)], now=T0)
    gpu.refresh_from_db()
    assert gpu.health == "healthy" and Alert.objects.count() == 1


def test_other_nodes_alerts_untouched(cluster):
    gpus = list(GPU.objects.filter(node__cluster=cluster).order_by("node__hostname"))
    a, b = gpus[0], gpus[-1]
    assert a.node_id != b.node_id
    actions.record_findings(cluster.pk, a.node.hostname, [gpu_finding(a)], now=T0)
    actions.record_findings(cluster.pk, b.node.hostname, [], now=T0 + timedelta(hours=1))
    assert Alert.objects.get().cleared_at is None


def test_climbing_errors_degrade_the_link_and_recover(cluster):
    port = (
        Port.objects.filter(cluster=cluster, hca__isnull=False, link__isnull=False).select_related("hca__node").first()
    )
    host = port.hca.node.hostname
    actions.record_findings(cluster.pk, host, [port_finding(port, "port_errors")], now=T0)
    link = Link.objects.get(pk=port.link_id)
    assert link.state == "degraded" and "symbol_error" in link.state_reason
    actions.record_findings(cluster.pk, host, [], now=T0 + timedelta(seconds=301), hold_down_s=300)
    link.refresh_from_db()
    assert link.state == "up"


def test_port_down_takes_the_link_down(cluster):
    port = (
        Port.objects.filter(cluster=cluster, hca__isnull=False, link__isnull=False).select_related("hca__node").first()
    )
    actions.record_findings(cluster.pk, port.hca.node.hostname, [port_finding(port, "port_down")], now=T0)
    assert Link.objects.get(pk=port.link_id).state == "down"


def test_erroring_link_reaches_the_scheduler_snapshot(cluster):
    from scheduler.actions import ensure_scheduler
    from scheduler.snapshot_from_db import build_snapshot

    ensure_scheduler(cluster)
    port = (
        Port.objects.filter(cluster=cluster, hca__isnull=False, link__isnull=False).select_related("hca__node").first()
    )
    actions.record_findings(cluster.pk, port.hca.node.hostname, [port_finding(port, "port_errors")], now=T0)
    snapshot, _ = build_snapshot(cluster.pk)
    assert snapshot.link_errors == {str(port.link_id): True}


def test_acknowledge(cluster):
    gpu = GPU.objects.filter(node__cluster=cluster).first()
    actions.record_findings(cluster.pk, gpu.node.hostname, [gpu_finding(gpu)], now=T0)
    alert = actions.acknowledge_alert(Alert.objects.get(), actor="op")
    assert alert.acknowledged_by == "op" and alert.acknowledged_at is not None
