"""Inventory edits: clusters, switch tiers, node states, links and the admin's and API's edits of any row."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from fabric import events
from fabric.actions.common import BATCH, hosts_moved, lock_cluster
from fabric.actions.errors import ActionError
from fabric.actions.hosts import HOST_FIELDS, apply_host_edit
from fabric.choices import NodeState, PortState, RoleSource, SwitchRole
from fabric.graph_from_db import fabric_for_cluster
from fabric.models import HCA, Cluster, Link, Node, Port, Switch
from fabric.selectors import link_state, supported_gbps
from fabric.topology.graph import FabricGraph
from fabric.topology.link_speeds import LinkRate
from fabric.topology.tiers import UNKNOWN, detect_tiers


def detect_switch_roles(cluster: Cluster) -> dict[str, int]:
    """Store the tier detected from the graph on every switch whose role an operator has not set."""

    graph = FabricGraph.build(fabric_for_cluster(cluster))
    tiers = detect_tiers(graph)
    roles = {key: ("" if role == UNKNOWN else role) for key, role in zip(graph.switch_keys, tiers.role, strict=True)}
    changed = []
    for switch in cluster.switches.filter(role_source=RoleSource.DETECTED):
        role = roles.get(switch.guid, SwitchRole.UNKNOWN)
        if switch.role != role:
            switch.role = role
            changed.append(switch)
    Switch.objects.bulk_update(changed, ["role"], batch_size=BATCH)
    counts: dict[str, int] = {}
    for role in cluster.switches.values_list("role", flat=True):
        counts[role or "unknown"] = counts.get(role or "unknown", 0) + 1
    return counts


@transaction.atomic
def set_node_state(nodes: Iterable[Node], state: str, reason: str = "") -> int:
    """Drain, undrain (up) or mark down a set of nodes. Returns how many changed."""
    if state not in NodeState.values:
        raise ActionError(f"unknown node state {state!r}; use one of {', '.join(NodeState.values)}")
    rows = list(
        Node.objects.select_for_update(no_key=True)
        .filter(pk__in=[n.pk for n in nodes])
        .exclude(state=state)
        .values_list("pk", "cluster_id")
    )
    changed = Node.objects.filter(pk__in=[pk for pk, _ in rows]).update(state=state, state_reason=reason[:255])
    for cluster_id in {c for _, c in rows}:
        events.send_on_commit(cluster_id, {"kind": "nodes_changed", "state": state})
    return changed


@transaction.atomic
def save_link_ports(link: Link) -> Link:
    """Recompute a link's rate, capacity and state from its ports after an edit."""
    ends = list(link.ports.select_for_update().order_by("link_end"))
    if len(ends) != 2:
        raise ActionError(f"link {link.pk} has {len(ends)} ports; a link joins exactly two")
    a, b = ends
    rate = LinkRate(a.width, a.speed)
    supported = supported_gbps(a, b)
    up = a.state == PortState.ACTIVE and b.state == PortState.ACTIVE
    link.width, link.speed, link.capacity_gbps, link.supported_gbps = rate.width, rate.speed, rate.data_gbps, supported
    link.state, link.state_reason = link_state(rate, supported, up)
    link.save()
    events.send_on_commit(link.cluster_id, {"kind": "inventory_changed", "cause": f"link {link.pk}"})
    return link


@transaction.atomic
def save_inventory_object(obj, changed_fields: Iterable[str] = ()) -> None:
    """Admin edits of inventory rows land here, so derived fields follow the edit."""
    changed = set(changed_fields)
    if isinstance(obj, Switch) and "role" in changed:
        obj.role_source = RoleSource.SET if obj.role else RoleSource.DETECTED
    if isinstance(obj, Node) and "hostname" in changed:
        obj.unnamed = False  # an operator named the placeholder
    if isinstance(obj, Node) and changed & set(HOST_FIELDS):
        apply_host_edit(obj, changed)  # a value typed is the operator's; a cleared *_manual follows the agent
    if (isinstance(obj, Node) and "hostname" in changed) or (isinstance(obj, HCA) and changed & {"node", "device"}):
        lock_cluster(obj.cluster_id)  # before the node's own row: see _lock_cluster
        hosts_moved(obj.cluster_id)
    obj.save()
    if isinstance(obj, Port) and obj.link_id and changed & {"width", "speed", "state", "supported_speed"}:
        save_link_ports(obj.link)
    if isinstance(obj, Switch) and "role" in changed and not obj.role:
        detect_switch_roles(obj.cluster)
    cluster_id = getattr(obj, "cluster_id", None) or getattr(getattr(obj, "node", None), "cluster_id", None)
    if cluster_id:
        events.send_on_commit(cluster_id, {"kind": "inventory_changed", "cause": f"edit of {obj}"})


@transaction.atomic
def create_cluster(name: str, description: str = "") -> Cluster:
    if Cluster.objects.filter(name=name).exists():
        raise ActionError(f"cluster {name!r} already exists")
    return Cluster.objects.create(name=name, description=description)


@transaction.atomic
def delete_cluster(cluster: Cluster) -> None:
    """Remove a cluster and all its inventory (ports are unlinked first so no half-linked row remains)."""
    Port.objects.filter(cluster=cluster).update(link=None, link_end="")
    cluster.delete()


@transaction.atomic
def update_inventory_object(obj, values: dict[str, Any]) -> Any:
    """Apply field edits (API PATCH/PUT) and recompute what depends on them."""
    # A host resource given is the operator's value even when it equals the current one (set_host_resources).
    changed = [
        name
        for name, value in values.items()
        if getattr(obj, name) != value or (isinstance(obj, Node) and name in HOST_FIELDS)
    ]
    for name, value in values.items():
        setattr(obj, name, value)
    save_inventory_object(obj, changed)
    return obj
