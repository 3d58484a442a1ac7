"""Hosts: naming a placeholder host, putting HCAs on hosts (by hand or from a node agent's report), and what jobs
may take of a host's CPU and memory."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from fabric import events
from fabric.actions.common import hosts_moved, lock_cluster, remove_empty_placeholders
from fabric.actions.errors import ActionError
from fabric.choices import CaKind
from fabric.importers.types import normalise_guid
from fabric.models import HCA, Cluster, Node

log = logging.getLogger(__name__)


def _check_hostname(hostname: str) -> str:
    hostname = hostname.strip()
    if not hostname or len(hostname) > 128 or any(c.isspace() for c in hostname):
        raise ActionError(f"not a host name: {hostname!r}")
    return hostname


@transaction.atomic
def name_host(node: Node, hostname: str) -> Node:
    """Give a node (typically an unnamed placeholder) its real host name; returns the node that holds its HCAs.

    When another node of the cluster already has that name (the node agent registered it), the HCAs move there
    and an emptied placeholder is removed; otherwise the node is renamed in place.
    """
    hostname = _check_hostname(hostname)
    lock_cluster(node.cluster_id)
    hosts_moved(node.cluster_id)
    Node.objects.select_for_update(no_key=True).filter(pk=node.pk).first()
    other = Node.objects.filter(cluster_id=node.cluster_id, hostname=hostname).exclude(pk=node.pk).first()
    if other is None:
        node.hostname, node.unnamed = hostname, False
        node.save(update_fields=["hostname", "unnamed"])
        target = node
    else:
        node.hcas.update(node=other)
        remove_empty_placeholders(node.cluster)
        target = other
    events.send_on_commit(node.cluster_id, {"kind": "inventory_changed", "cause": f"host {hostname} named"})
    return target


@transaction.atomic
def attach_hca(cluster: Cluster | int, guid: str, hostname: str, *, force: bool = False) -> Node:
    """Put the HCA with node GUID `guid` on host `hostname` (by hand, or a script: the HCA's node_guid and the host
    name). An HCA on an unnamed placeholder names the placeholder (with its other HCAs, see name_host); an HCA on
    no node or `force`d moves alone, to a node created for `hostname` when there is none. An HCA already on another
    named host is refused unless `force`: which of the two is right is the operator's call."""
    cluster_id = cluster.pk if isinstance(cluster, Cluster) else cluster
    try:
        guid = normalise_guid(guid)
    except ValueError as exc:
        raise ActionError(str(exc)) from None
    hostname = _check_hostname(hostname)
    lock_cluster(cluster_id)
    hca = HCA.objects.select_related("node").select_for_update(of=("self",)).filter(
        cluster_id=cluster_id, guid=guid
    ).first()  # fmt: skip
    if hca is None:
        raise ActionError(f"no HCA with node GUID {guid} in this cluster (import the fabric first)")
    if hca.kind != CaKind.HOST:
        raise ActionError(f"HCA {guid} is a {hca.get_kind_display()}, not a host's adapter")
    if hca.node_id and hca.node.unnamed:
        return name_host(hca.node, hostname)
    if hca.node_id and hca.node.hostname == hostname:
        return hca.node
    if hca.node_id and not force:
        raise ActionError(f"HCA {guid} is on host {hca.node.hostname}, not moved to {hostname} (force it to move it)")
    node, _ = Node.objects.get_or_create(cluster_id=cluster_id, hostname=hostname)
    hca.node = node
    hca.save(update_fields=["node"])
    hosts_moved(cluster_id)
    events.send_on_commit(cluster_id, {"kind": "inventory_changed", "cause": f"HCA {guid} on {hostname}"})
    return node


@dataclass
class ClaimResult:
    """What claim_hcas did with the HCAs a node agent reported (node GUIDs)."""

    attached: list[str] = field(default_factory=list)  # taken off an unnamed placeholder onto the node
    devices: list[str] = field(default_factory=list)  # already the node's: the kernel's device name stored
    elsewhere: dict[str, str] = field(default_factory=dict)  # GUID -> the other named host it stays on
    unknown: list[str] = field(default_factory=list)  # no host's HCA of this cluster has that GUID
    placeholders_removed: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.attached or self.devices)


@transaction.atomic
def claim_hcas(cluster_id: int, hostname: str, reported: Iterable[tuple[str, str]]) -> ClaimResult:
    """A node agent on `hostname` reported its RDMA devices as (node GUID, kernel device name): put on that node the
    HCAs of the imported fabric it names that sit on an unnamed placeholder (the whole placeholder's HCAs go: it
    stands for one system, see name_host), and store the kernel's device name on the node's own HCAs, so the
    agent's port samples find their ports. An HCA on another named host is never moved (`elsewhere`: ingest raises
    an alert). Idempotent: a second call with the same report changes nothing. One transaction; an event and a
    cache refresh (fabric_version) only when something changed."""
    lock_cluster(cluster_id)
    node = Node.objects.select_for_update(no_key=True).filter(cluster_id=cluster_id, hostname=hostname).first()
    if node is None:
        raise ActionError(f"no node {hostname!r} in this cluster: its agent's HCAs have nowhere to go")
    devices: dict[str, str] = {}
    for guid, device in reported:
        try:
            devices[normalise_guid(guid)] = device[:32]
        except ValueError as exc:
            raise ActionError(f"{hostname} reported {exc}") from None
    result = ClaimResult()
    hcas = HCA.objects.select_for_update(of=("self",)).select_related("node").filter(
        cluster_id=cluster_id, guid__in=sorted(devices), kind=CaKind.HOST
    )  # fmt: skip
    found = {h.guid: h for h in hcas}
    result.unknown = sorted(set(devices) - set(found))
    placeholders: set[int] = set()
    moved: list[HCA] = []
    for guid in sorted(found):
        hca, device = found[guid], devices[guid]
        if hca.node_id == node.pk:
            if device and hca.device != device:
                hca.device = device
                moved.append(hca)
                result.devices.append(guid)
        elif hca.node_id is None or hca.node.unnamed:
            if hca.node_id is not None:
                placeholders.add(hca.node_id)
            hca.node, hca.device = node, device or hca.device
            moved.append(hca)
            result.attached.append(guid)
        else:
            result.elsewhere[guid] = hca.node.hostname
    if placeholders:  # the placeholders' other HCAs (same system image) come along
        rest = list(HCA.objects.filter(node_id__in=placeholders).exclude(pk__in=[h.pk for h in moved]))
        for hca in rest:
            hca.node = node
        moved += rest
        result.attached += sorted(h.guid for h in rest)
    if moved:
        HCA.objects.bulk_update(moved, ["node", "device"])
    if placeholders:
        result.placeholders_removed = remove_empty_placeholders(node.cluster)
    if result.changed:
        hosts_moved(cluster_id)
        what = ", ".join([*(f"{g} attached" for g in result.attached), *(f"{g} is {devices.get(g) or '?'}"
                                                                          for g in result.devices)])  # fmt: skip
        log.info("node agent of %s: %s", hostname, what)
        events.send_on_commit(cluster_id, {"kind": "inventory_changed", "cause": f"node agent of {hostname}: {what}"})
    return result


#
# Host resources: what jobs may take of a node's host CPU and memory (Node.cpu_milli / memory_mib). The node agent
# reports what the host has (record_host_resources, from ingest, only on change); an operator may set a value of
# their own (set_host_resources, the admin and the node API), which the agent's reports then leave alone.
#

HOST_MAX = 2**31 - 1  # PositiveIntegerField: 2 million CPUs, 2 PiB of memory
HOST_RESOURCES = ("cpu_milli", "memory_mib")
HOST_FIELDS = (*HOST_RESOURCES, "cpu_milli_manual", "memory_mib_manual")
_FOLLOW_AGENT = None


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _host_amount(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= HOST_MAX:
        raise ActionError(f"{name} must be a whole number from 0 to {HOST_MAX}, not {value!r}")
    return value


def apply_host_edit(node: Node, changed: set[str]) -> None:
    """The rule of an operator's edit, on the node in memory: a resource whose `*_manual` was cleared follows the
    agent's report again (its value is the reported one, whatever was typed beside it); one whose value was given
    is the operator's (manual)."""
    for name in HOST_RESOURCES:
        manual = f"{name}_manual"
        if manual in changed and not getattr(node, manual):
            setattr(node, name, getattr(node, f"reported_{name}"))
        elif name in changed:
            _host_amount(name, getattr(node, name))
            setattr(node, manual, True)


@transaction.atomic
def set_host_resources(node: Node, *, cpu_milli: int | None = UNSET, memory_mib: int | None = UNSET) -> Node:
    """An operator sets what jobs may take of the node's host CPU (milli-CPUs) and memory (MiB): a number is kept
    whatever the node agent reports next (0: not tracked, never a constraint); None follows the agent's report
    again (its last one now, or 0 while it has reported none); UNSET leaves that resource as it is."""
    wanted = {"cpu_milli": cpu_milli, "memory_mib": memory_mib}
    lock_cluster(node.cluster_id)
    locked = Node.objects.select_for_update(no_key=True).filter(pk=node.pk).first()
    if locked is None:
        raise ActionError(f"node {node} no longer exists")
    changed: set[str] = set()
    for name, value in wanted.items():
        if value is UNSET:
            continue
        if value is _FOLLOW_AGENT:
            setattr(locked, f"{name}_manual", False)
            changed.add(f"{name}_manual")
        else:
            setattr(locked, name, _host_amount(name, value))
            changed.add(name)
    if changed:
        apply_host_edit(locked, changed)
        locked.save(update_fields=list(HOST_FIELDS))
        events.send_on_commit(node.cluster_id, {"kind": "nodes_changed", "cause": f"host resources of {locked}"})
    for name in HOST_FIELDS:
        setattr(node, name, getattr(locked, name))
    return node


@transaction.atomic
def record_host_resources(cluster_id: int, reports: dict[str, tuple[int | None, int | None]]) -> list[str]:
    """Node agents reported their hosts' CPUs (milli-CPUs) and MemTotal (MiB), hostname -> (cpu, memory), None for
    one not read: store each report that differs from the node's last one (reported_*), and make it what jobs may
    take unless an operator set that resource (*_manual). Returns the hostnames changed; nothing is written, and no
    event sent, for a report equal to the last (ingest calls this only when a node's figures changed)."""
    if not reports:
        return []
    lock_cluster(cluster_id)  # import_fabric's order (see _lock_cluster): the cluster row before node rows
    nodes = (
        Node.objects.select_for_update(no_key=True)
        .filter(cluster_id=cluster_id, hostname__in=sorted(reports))
        .only("pk", "cluster_id", "hostname", *HOST_FIELDS, "reported_cpu_milli", "reported_memory_mib")
        .order_by("pk")
    )
    changed: list[Node] = []
    for node in nodes:
        dirty = False
        for name, value in zip(HOST_RESOURCES, reports[node.hostname], strict=True):
            if value is None or value == getattr(node, f"reported_{name}"):
                continue
            setattr(node, f"reported_{name}", _host_amount(name, value))
            if not getattr(node, f"{name}_manual"):
                setattr(node, name, value)
            dirty = True
        if dirty:
            changed.append(node)
    if changed:
        Node.objects.bulk_update(changed, [*HOST_RESOURCES, "reported_cpu_milli", "reported_memory_mib"])
        names = [n.hostname for n in changed]
        log.info("host resources reported by the node agents of %s", ", ".join(names[:20]))
        events.send_on_commit(cluster_id, {"kind": "nodes_changed", "cause": f"host resources of {len(names)} nodes"})
    return [n.hostname for n in changed]
