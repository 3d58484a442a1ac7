"""Health: alerts from the rules' findings, the capacity they take away or give back, and acknowledgements."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from fabric import events
from fabric.actions.common import BATCH
from fabric.actions.inventory import save_link_ports, set_node_state
from fabric.choices import GpuHealth, LinkState, NodeState
from fabric.models import GPU, Alert, Link, Node
from fabric.selectors import gpu_for_alert_key, link_for_alert_key
from fabric.telemetry.liveness import CLUSTER_KEY

TELEMETRY_REASON = "telemetry: "  # prefix of the state reason of a node taken down by the liveness check


def _apply_capacity(cluster_id: int, alert: Alert, *, removed: bool) -> bool:
    """Take the alert's GPU or link out of service, or give it back. True when something changed."""
    if not alert.removes_capacity:
        return False
    if alert.object_kind == "gpu":
        gpu = gpu_for_alert_key(cluster_id, alert.object_key)
        if gpu is None:
            return False
        health = GpuHealth.FAILED if removed else GpuHealth.HEALTHY
        return bool(GPU.objects.filter(pk=gpu.pk).exclude(health=health).update(health=health))
    if alert.object_kind == "port":
        link = link_for_alert_key(cluster_id, alert.object_key)
        if link is None:
            return False
        if removed:
            state = LinkState.DOWN if alert.rule == "port_down" else LinkState.DEGRADED
            return bool(
                Link.objects.filter(pk=link.pk).exclude(state=state).update(state=state, state_reason=alert.message)
            )
        before = link.state
        save_link_ports(link)
        return link.state != before
    if alert.object_kind == "node":
        host = alert.object_key.split("/", 1)[0]
        node = Node.objects.filter(cluster_id=cluster_id, hostname=host).first()
        if node is None:
            return False
        if removed:
            if node.state == NodeState.DOWN:
                return False  # an operator's "down" stays the operator's
            return bool(set_node_state([node], NodeState.DOWN, f"{TELEMETRY_REASON}{alert.message}"))
        # Only a node telemetry took down comes back by itself; a drain or an operator's down stays.
        if node.state == NodeState.DOWN and node.state_reason.startswith(TELEMETRY_REASON):
            return bool(set_node_state([node], NodeState.UP, ""))
        return False
    return False


@transaction.atomic
def record_findings(cluster_id: int, node: str, findings: Iterable, *, now, hold_down_s: float = 300.0) -> dict:
    """One poll's health findings for one node (see record_node_findings)."""
    return record_node_findings(cluster_id, {node: list(findings)}, now=now, hold_down_s=hold_down_s)


@transaction.atomic
def record_node_findings(
    cluster_id: int,
    findings_by_node: dict[str, list],
    *,
    now,
    hold_down_s: float = 300.0,
    only_rules: Iterable[str] | None = None,
    exclude_rules: Iterable[str] = (),
) -> dict:
    """One poll's health findings for a set of nodes (fabric.telemetry.health, keys prefixed "node/").

    A finding opens an alert or refreshes the open one; an open alert of these nodes that did not fire clears
    once it has been quiet for `hold_down_s`, so a flapping condition does not raise and clear on every poll.
    `only_rules`/`exclude_rules` say which rules this evaluation speaks for (the liveness check does not clear
    a GPU alert, a sample does not clear "unreachable"). Alerts that remove capacity mark their GPU failed,
    their link down/degraded or their node down while open, and give it back when they clear; the scheduler
    gets a round after commit when capacity moved. One query reads the open alerts of all the nodes.
    """
    nodes = set(findings_by_node)
    counts = {"raised": 0, "refreshed": 0, "cleared": 0, "capacity_changes": 0}
    if not nodes:
        return counts
    scope = Alert.objects.select_for_update().filter(cluster_id=cluster_id, cleared_at__isnull=True)
    if only_rules is not None:
        scope = scope.filter(rule__in=list(only_rules))
    if exclude_rules:
        scope = scope.exclude(rule__in=list(exclude_rules))
    open_alerts = {(a.rule, a.object_key): a for a in scope if a.object_key.split("/", 1)[0] in nodes}
    fired = set()
    changed_nodes: set[str] = set()
    refreshed: list[Alert] = []
    for node, findings in findings_by_node.items():
        for f in findings:
            key = (f.rule, f.object_key[:200])
            if key in fired:
                continue
            fired.add(key)
            alert = open_alerts.get(key)
            if alert is not None:
                alert.last_seen, alert.message, alert.severity = now, f.message[:500], f.severity
                refreshed.append(alert)
                continue
            alert = Alert.objects.create(
                cluster_id=cluster_id, rule=f.rule, severity=f.severity, object_kind=f.object_kind,
                object_key=f.object_key[:200], message=f.message[:500], removes_capacity=f.removes_capacity,
                first_seen=now, last_seen=now,
            )  # fmt: skip
            counts["raised"] += 1
            changed_nodes.add(node)
            counts["capacity_changes"] += _apply_capacity(cluster_id, alert, removed=True)
    if refreshed:
        Alert.objects.bulk_update(refreshed, ["last_seen", "message", "severity"])
        counts["refreshed"] = len(refreshed)
    for key, alert in open_alerts.items():
        if key in fired or (now - alert.last_seen).total_seconds() < hold_down_s:
            continue
        alert.cleared_at = now
        alert.save(update_fields=["cleared_at"])
        counts["cleared"] += 1
        changed_nodes.add(alert.object_key.split("/", 1)[0])
        still_held = Alert.objects.filter(
            cluster_id=cluster_id, object_key=alert.object_key, cleared_at__isnull=True, removes_capacity=True
        ).exists()
        if not still_held:
            counts["capacity_changes"] += _apply_capacity(cluster_id, alert, removed=False)
    if counts["raised"] or counts["cleared"]:
        events.send_on_commit(cluster_id, {"kind": "health_changed", "nodes": sorted(changed_nodes), **counts})
    return counts


@transaction.atomic
def record_cluster_findings(
    cluster_id: int, findings: Iterable, *, rules: Iterable[str], now, hold_down_s: float
) -> dict:
    """Findings about the cluster as a whole (the telemetry pipeline, the beat) for the given rules: one open alert per
    rule, raised, refreshed or cleared after `hold_down_s` like a node's. They never move capacity."""
    findings = list(findings)
    if any(f.removes_capacity or f.object_key != CLUSTER_KEY for f in findings):
        raise ValueError("a cluster-level finding has the key 'cluster' and takes no capacity")
    return record_node_findings(
        cluster_id, {CLUSTER_KEY: findings}, now=now, hold_down_s=hold_down_s, only_rules=list(rules)
    )


@transaction.atomic
def acknowledge_alert(alert: Alert, *, actor: str) -> Alert:
    if alert.acknowledged_at is None:
        alert.acknowledged_by, alert.acknowledged_at = actor[:150], timezone.now()
        alert.save(update_fields=["acknowledged_by", "acknowledged_at"])
        events.live_changed(alert.cluster_id, "alerts")
    return alert


@transaction.atomic
def acknowledge_alerts(cluster_id: int, alert_ids: Iterable[int], *, actor: str) -> int:
    """Acknowledge many alerts of one cluster at once (a group of an alert storm): those not acknowledged yet get
    `actor` and the same time, in one transaction; ids of another cluster are left alone. One announcement after the
    commit. Returns how many were acknowledged."""
    ids = sorted({int(pk) for pk in alert_ids})
    now, changed = timezone.now(), 0
    for start in range(0, len(ids), BATCH):  # bounded IN lists (SQLite's variable limit)
        changed += Alert.objects.filter(
            cluster_id=cluster_id, pk__in=ids[start : start + BATCH], acknowledged_at__isnull=True
        ).update(acknowledged_by=actor[:150], acknowledged_at=now)
    if changed:
        events.live_changed(cluster_id, "alerts")
    return changed
