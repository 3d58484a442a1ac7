"""Every state change of the fabric app. Views, admin, tasks and commands call these.

Each action is one transaction: either everything it describes is stored or nothing is.
Events go out after commit (fabric.events).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import NotSupportedError, connections, transaction
from django.db.models import Avg, Count, ExpressionWrapper, F, FloatField, JSONField, Max, Min, Q, QuerySet, Sum, Value
from django.db.models.functions import Trunc
from django.utils import timezone

from fabric import events
from fabric.choices import CaKind, GpuHealth, LinkState, NodeState, PortState, RoleSource, SwitchRole
from fabric.collectors.samples import FABRIC_SOURCE
from fabric.importers.types import ParsedFabric, ParsedNodeTopology, PortRef, normalise_guid
from fabric.models import GPU, HCA, Alert, Cluster, ImportRecord, Link, Node, NodeTopology, Port, Switch
from fabric.models.telemetry import (
    GpuMetric,
    GpuMetricRollup,
    PortMetric,
    PortMetricRollup,
    Resolution,
    bucket_start,
    retention,
)
from fabric.telemetry.liveness import CLUSTER_KEY
from fabric.topology.convert import unnamed_host_name
from fabric.topology.rates import LinkRate

log = logging.getLogger(__name__)
BATCH = 2000


class ActionError(ValueError):
    """A request an action refuses; the message says what and where."""


@dataclass
class Counter:
    created: int = 0
    updated: int = 0
    unchanged: int = 0


@dataclass
class ImportSummary:
    cluster: str
    format: str
    switches: int = 0
    hosts: int = 0  # servers: named hosts plus one per unnamed system
    unnamed_hosts: int = 0  # of which the fabric named no host (placeholder nodes "unnamed-<guid>")
    cas: int = 0
    links: int = 0
    loopbacks: int = 0  # cables between two ports of one node: stored, flagged, never routed
    degraded_links: int = 0  # the two ends reported different rates: the slower is stored
    down_ports: int = 0
    gpus: int = 0
    changes: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _changed(obj: Any, values: dict[str, Any]) -> bool:
    """Set values on obj; True when any differed."""
    dirty = False
    for name, value in values.items():
        if getattr(obj, name) != value:
            setattr(obj, name, value)
            dirty = True
    return dirty


def _upsert(model, existing: dict, wanted: dict, fields: list[str], make) -> tuple[dict, Counter]:
    """Bulk create the keys of `wanted` missing from `existing`, bulk update the ones that differ.

    wanted: key -> dict of field values. Returns key -> row for every wanted key.
    """
    counter = Counter()
    to_create, to_update, rows = [], [], {}
    for key, values in wanted.items():
        row = existing.get(key)
        if row is None:
            row = make(key, values)
            to_create.append(row)
            counter.created += 1
        elif _changed(row, values):
            to_update.append(row)
            counter.updated += 1
        else:
            counter.unchanged += 1
        rows[key] = row
    model.objects.bulk_create(to_create, batch_size=BATCH)
    if to_update:
        model.objects.bulk_update(to_update, fields, batch_size=BATCH)
    return rows, counter


def get_or_create_cluster(name: str) -> Cluster:
    cluster, _ = Cluster.objects.get_or_create(name=name)
    return cluster


Progress = Callable[[str], None]


def no_progress(message: str) -> None:
    pass


@transaction.atomic
def import_fabric(
    cluster_name: str, parsed: ParsedFabric, *, fmt: str, source: str = "", progress: Progress = no_progress
) -> ImportSummary:
    """Apply a parsed fabric: upsert by GUID, mark links that vanished as down, detect switch tiers.

    `progress` gets one line per step (the commands print them; imports of large fabrics take seconds).
    """
    cluster = get_or_create_cluster(cluster_name)
    # Serialise imports of one cluster (a row lock on PostgreSQL; SQLite locks the whole file anyway).
    Cluster.objects.select_for_update(no_key=True).filter(pk=cluster.pk).first()
    now = timezone.now()
    summary = ImportSummary(cluster=cluster.name, format=fmt)
    changes = summary.changes

    switches, changes["switches"] = _apply_switches(cluster, parsed)
    progress(f"switches: {changes['switches']}")
    nodes, ca_nodes, changes["nodes"] = _apply_nodes(cluster, parsed)
    progress(f"nodes: {changes['nodes']}")
    cas, changes["cas"] = _apply_cas(cluster, parsed, nodes, ca_nodes)
    changes["nodes"]["placeholders_removed"] = _remove_empty_placeholders(cluster)
    progress(f"channel adapters: {changes['cas']}")
    changes["ports"], changes["links"] = _apply_cabling(cluster, parsed, switches, cas, now)
    progress(f"ports: {changes['ports']}; links: {changes['links']}")
    changes["gpus"] = _apply_gpus(parsed, nodes)
    _store_topologies([(nodes[p.hostname], p.topology) for p in parsed.nodes if p.topology is not None])
    progress(f"GPUs: {changes['gpus']}")
    changes["roles"] = detect_switch_roles(cluster)
    progress(f"tiers: {changes['roles']}")

    summary.switches = len(parsed.switches)
    summary.hosts = parsed.host_count()
    summary.unnamed_hosts = len(parsed.unnamed_hosts())
    summary.cas = len(parsed.cas)
    summary.links = len(parsed.links)
    summary.loopbacks = sum(1 for link in parsed.links if link.loopback)
    summary.degraded_links = sum(1 for link in parsed.links if link.degraded)
    summary.down_ports = len(parsed.down_ports)
    summary.gpus = sum(len(n.gpus) for n in parsed.nodes)
    summary.warnings = list(parsed.warnings)
    ImportRecord.objects.create(cluster=cluster, format=fmt, source=source[:255], summary=summary.to_dict())
    events.send_on_commit(cluster.pk, {"kind": "inventory_changed", "cause": f"{fmt} import"})
    return summary


def _apply_switches(cluster: Cluster, parsed: ParsedFabric) -> tuple[dict[str, Switch], dict]:
    existing = {s.guid: s for s in cluster.switches.all()}
    wanted = {}
    for ps in parsed.switches:
        values = {
            "name": ps.name[:128] or ps.guid,
            "description": ps.description[:255],
            "lid": ps.lid,
            "vendor_id": ps.vendor_id,
            "device_id": ps.device_id,
        }
        # Keep what an operator filled in when the source does not say.
        for name, value in (("model", ps.model), ("port_count", ps.port_count), ("rack", ps.rack)):
            if value:
                values[name] = value
        if ps.role:  # a design (spec, generator) states roles; keep an operator's override
            row = existing.get(ps.guid)
            if row is None or row.role_source != RoleSource.SET:
                values["role"] = ps.role
        wanted[ps.guid] = values
    fields = ["name", "description", "lid", "vendor_id", "device_id", "model", "port_count", "rack", "role"]
    rows, counter = _upsert(Switch, existing, wanted, fields, lambda guid, v: Switch(cluster=cluster, guid=guid, **v))
    return rows, asdict(counter)


def _apply_nodes(cluster: Cluster, parsed: ParsedFabric) -> tuple[dict[str, Node], dict[str, Node], dict]:
    """Upsert the servers: hostname -> node, unnamed CA GUID -> node, and the counters.

    HCAs the fabric names no host for (ParsedCA.unnamed) stay on the node they are already on (an operator,
    the node agent or an earlier import named it); the others get their system's placeholder node
    "unnamed-<system image GUID>", marked unnamed. An HCA on a placeholder that now names its host makes the
    placeholder that host when no node has the name yet (it keeps its id, GPUs and history); otherwise it
    moves to the named node and the emptied placeholder goes (_remove_empty_placeholders).
    """
    existing = {n.hostname: n for n in cluster.nodes.all()}
    by_pk = {n.pk: n for n in existing.values()}
    stored_on = dict(HCA.objects.filter(cluster=cluster, node__isnull=False).values_list("guid", "node_id"))

    renamed = 0
    for ca in sorted(parsed.cas, key=lambda c: c.guid):  # GUID order: the same placeholder wins every time
        if ca.kind != CaKind.HOST or not ca.hostname or ca.hostname in existing:
            continue
        node = by_pk.get(stored_on.get(ca.guid))
        if node is not None and node.unnamed:
            del existing[node.hostname]
            node.hostname, node.unnamed = ca.hostname, False
            node.save(update_fields=["hostname", "unnamed"])
            existing[node.hostname] = node
            renamed += 1

    wanted: dict[str, dict] = {h: {} for h in sorted(parsed.hosts())}
    for pn in parsed.nodes:
        values = {"role": pn.role}
        if pn.rack:
            values["rack"] = pn.rack
        if pn.gpu_model:
            values["gpu_model"] = pn.gpu_model
        if pn.nvlink_domain:
            values["nvlink_domain"] = pn.nvlink_domain
        wanted[pn.hostname] = values
    ca_host: dict[str, str] = {}  # unnamed CA GUID -> hostname of the node it goes on
    for key, group in sorted(parsed.unnamed_hosts().items()):
        placeholder = unnamed_host_name(key)
        for ca in group:
            node = by_pk.get(stored_on.get(ca.guid))
            if node is not None:
                ca_host[ca.guid] = node.hostname
                continue
            ca_host[ca.guid] = placeholder
            if placeholder not in existing or existing[placeholder].unnamed:
                wanted[placeholder] = {"unnamed": True, "system_guid": key[:16]}
    rows, counter = _upsert(
        Node,
        existing,
        wanted,
        ["role", "rack", "gpu_model", "unnamed", "system_guid", "nvlink_domain"],
        lambda h, v: Node(cluster=cluster, hostname=h, **v),
    )
    nodes = {**existing, **rows}
    counts = asdict(counter) | {"renamed": renamed, "unnamed": sum(1 for v in wanted.values() if v.get("unnamed"))}
    return rows, {guid: nodes[name] for guid, name in ca_host.items()}, counts


def _apply_cas(
    cluster: Cluster, parsed: ParsedFabric, nodes: dict[str, Node], ca_nodes: dict[str, Node]
) -> tuple[dict[str, HCA], dict]:
    existing = {c.guid: c for c in cluster.hcas.all()}
    wanted = {}
    for ca in parsed.cas:
        node = None
        if ca.kind == CaKind.HOST:
            node = nodes.get(ca.hostname) if ca.hostname else ca_nodes[ca.guid]
        stored = existing.get(ca.guid)
        wanted[ca.guid] = {
            "node_id": node.pk if node else None,
            # An unnamed HCA's description names no device either: keep the one its node agent reported.
            "device": ca.device[:32] or (stored.device if stored is not None else ""),
            "description": ca.description[:255],
            "kind": ca.kind,
            "system_guid": ca.system_guid,
        }
    fields = ["node", "device", "description", "kind", "system_guid"]
    rows, counter = _upsert(HCA, existing, wanted, fields, lambda g, v: HCA(cluster=cluster, guid=g, **v))
    return rows, asdict(counter)


def _remove_empty_placeholders(cluster: Cluster) -> int:
    """Delete unnamed placeholder nodes left with no HCA and no GPU (their HCAs were named elsewhere)."""
    empty = Node.objects.filter(cluster=cluster, unnamed=True, hcas__isnull=True, gpus__isnull=True)
    return Node.objects.filter(pk__in=list(empty.values_list("pk", flat=True))).delete()[1].get("fabric.Node", 0)


def _lock_cluster(cluster_id: int) -> None:
    """The cluster row before any node or HCA row, in import_fabric's order: an import and an attach or rename
    running at once wait for each other instead of deadlocking on each other's rows."""
    Cluster.objects.select_for_update(no_key=True).filter(pk=cluster_id).first()


def _hosts_moved(cluster_id: int) -> None:
    """HCAs changed hosts or a host its name: caches keyed by host name (ingest's port map, the scheduler's
    topology, the dashboard's) must rebuild. fabric.selectors.fabric_version reads Cluster.updated."""
    Cluster.objects.filter(pk=cluster_id).update(updated=timezone.now())


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
    _lock_cluster(node.cluster_id)
    _hosts_moved(node.cluster_id)
    Node.objects.select_for_update(no_key=True).filter(pk=node.pk).first()
    other = Node.objects.filter(cluster_id=node.cluster_id, hostname=hostname).exclude(pk=node.pk).first()
    if other is None:
        node.hostname, node.unnamed = hostname, False
        node.save(update_fields=["hostname", "unnamed"])
        target = node
    else:
        node.hcas.update(node=other)
        _remove_empty_placeholders(node.cluster)
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
    _lock_cluster(cluster_id)
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
    _hosts_moved(cluster_id)
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
    _lock_cluster(cluster_id)
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
        result.placeholders_removed = _remove_empty_placeholders(node.cluster)
    if result.changed:
        _hosts_moved(cluster_id)
        what = ", ".join([*(f"{g} attached" for g in result.attached), *(f"{g} is {devices.get(g) or '?'}"
                                                                          for g in result.devices)])  # fmt: skip
        log.info("node agent of %s: %s", hostname, what)
        events.send_on_commit(cluster_id, {"kind": "inventory_changed", "cause": f"node agent of {hostname}: {what}"})
    return result


PortKey = tuple[str, int]  # (node GUID, port number)


def _existing_ports(cluster: Cluster, switches: dict[str, Switch], cas: dict[str, HCA]) -> dict[PortKey, Port]:
    switch_guid = {s.pk: g for g, s in switches.items()}
    ca_guid = {c.pk: g for g, c in cas.items()}
    existing: dict[PortKey, Port] = {}
    for port in Port.objects.filter(cluster=cluster):
        guid = switch_guid.get(port.switch_id) if port.switch_id else ca_guid.get(port.hca_id)
        if guid is not None:
            existing[(guid, port.number)] = port
    return existing


def _wanted_ports(parsed: ParsedFabric) -> dict[PortKey, dict]:
    ca_by_guid = {ca.guid: ca for ca in parsed.cas}
    wanted: dict[PortKey, dict] = {}

    def want(ref: PortRef, rate: LinkRate, state: str) -> None:
        values = {"width": rate.width, "speed": rate.speed, "state": state}
        pca = ca_by_guid.get(ref.node_guid)
        if pca is not None:
            values["guid"] = pca.port_guids.get(ref.port, "")
            values["lid"] = pca.lids.get(ref.port)
        wanted[ref.node_guid, ref.port] = values

    for dp in parsed.down_ports:
        want(dp.ref, LinkRate(dp.width, dp.speed), PortState.DOWN)
    for link in parsed.links:
        rate = LinkRate(link.width, link.speed)
        want(link.a, rate, PortState.ACTIVE)
        want(link.b, rate, PortState.ACTIVE)
    return wanted


def link_state(rate: LinkRate, supported_gbps: float, ports_up: bool) -> tuple[str, str]:
    """The state a link is in, and why, from its rate and its ends."""
    if not ports_up:
        return LinkState.DOWN, "a port is down"
    if supported_gbps and rate.data_gbps < supported_gbps:
        return (
            LinkState.DEGRADED,
            f"runs at {rate.label} ({rate.data_gbps:g} Gb/s), both ends support {supported_gbps:g}",
        )
    if not rate.known:
        return LinkState.UP, "speed unknown (fabric reported ???)"
    return LinkState.UP, ""


def _supported_gbps(a: Port, b: Port) -> float:
    """The best rate both ends support, when an operator or a collector recorded it for both."""
    rates = [LinkRate(p.supported_width or p.width, p.supported_speed).data_gbps for p in (a, b) if p.supported_speed]
    return min(rates) if len(rates) == 2 else 0.0


LINK_FIELDS = ["width", "speed", "capacity_gbps", "supported_gbps", "state", "state_reason", "loopback"]


def _chunks(items: list, size: int = BATCH) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _apply_cabling(
    cluster: Cluster, parsed: ParsedFabric, switches: dict[str, Switch], cas: dict[str, HCA], now
) -> tuple[dict, dict]:
    """Ports and links together, so new ports are created already cabled (no mass UPDATE after)."""
    existing = _existing_ports(cluster, switches, cas)
    wanted = _wanted_ports(parsed)
    stored = {link.pk: link for link in Link.objects.filter(cluster=cluster).only("pk", "state", *LINK_FIELDS)}

    kept: dict[int, dict] = {}  # stored link -> its values now
    new: list[tuple[Link, PortKey, PortKey]] = []
    recabled: set[int] = set()
    for pl in parsed.links:
        ka, kb = (pl.a.node_guid, pl.a.port), (pl.b.node_guid, pl.b.port)
        pa, pb = existing.get(ka), existing.get(kb)
        rate = LinkRate(pl.width, pl.speed)
        supported = _supported_gbps(pa, pb) if pa and pb else 0.0
        state, reason = link_state(rate, supported, True)
        if pl.degraded:  # the ends disagreed: the slower rate is stored, and why
            state, reason = LinkState.DEGRADED, pl.degraded
        if pl.loopback:
            reason = "; ".join(filter(None, ["loopback: both ends on one node, never routed over", reason]))
        values = {
            "width": rate.width,
            "speed": rate.speed,
            "capacity_gbps": rate.data_gbps,
            "supported_gbps": supported,
            "state": state,
            "state_reason": reason[:255],
            "loopback": pl.loopback,
        }
        if pa and pb and pa.link_id is not None and pa.link_id == pb.link_id:
            kept[pa.link_id] = values
            continue
        # A port on another cable now: that old cable no longer exists physically.
        recabled |= {p.link_id for p in (pa, pb) if p is not None and p.link_id is not None}
        new.append((Link(cluster=cluster, last_seen=now, **values), ka, kb))

    if recabled:
        Port.objects.filter(link__in=recabled).update(link=None, link_end="")
        Link.objects.filter(pk__in=recabled).delete()
        for port in existing.values():
            if port.link_id in recabled:
                port.link_id, port.link_end = None, ""

    changed_links = [stored[pk] for pk, values in kept.items() if _changed(stored[pk], values)]
    Link.objects.bulk_update(changed_links, LINK_FIELDS, batch_size=BATCH)
    for chunk in _chunks(list(kept)):
        Link.objects.filter(pk__in=chunk).update(last_seen=now)
    Link.objects.bulk_create([link for link, _, _ in new], batch_size=BATCH)
    for link, ka, kb in new:
        wanted[ka].update(link_id=link.pk, link_end=Port.End.A)
        wanted[kb].update(link_id=link.pk, link_end=Port.End.B)

    def make(key: PortKey, values: dict) -> Port:
        guid, number = key
        if guid in switches:
            return Port(cluster=cluster, switch=switches[guid], number=number, **values)
        if guid in cas:
            return Port(cluster=cluster, hca=cas[guid], number=number, **values)
        raise ActionError(f"port {number} of {guid}: no switch or channel adapter with that GUID in the input")

    port_fields = ["width", "speed", "state", "guid", "lid", "link", "link_end"]
    _, port_counter = _upsert(Port, existing, wanted, port_fields, make)

    gone = stored.keys() - kept.keys() - recabled
    vanished = sorted(pk for pk in gone if stored[pk].state != LinkState.DOWN)
    reason = f"not found by the import of {now:%Y-%m-%d %H:%M}"
    for chunk in _chunks(vanished):
        Link.objects.filter(pk__in=chunk).update(state=LinkState.DOWN, state_reason=reason)
    links = {
        "created": len(new),
        "updated": len(changed_links),
        "unchanged": len(kept) - len(changed_links),
        "marked_down": len(vanished),
        "recabled": len(recabled),
    }
    return asdict(port_counter), links


def _apply_gpus(parsed: ParsedFabric, nodes: dict[str, Node]) -> dict:
    wanted_nodes = [nodes[pn.hostname] for pn in parsed.nodes if pn.gpus]
    existing = {(g.node_id, g.index): g for g in GPU.objects.filter(node__in=wanted_nodes)}
    wanted = {}
    for pn in parsed.nodes:
        node = nodes[pn.hostname]
        for pg in pn.gpus:
            values = {
                "model": pg.model,
                "memory_mib": pg.memory_mib,
                "nvlink_generation": pg.nvlink_generation,
                "nvlink_gbps": pg.nvlink_gbps,
                "mig_capable": pg.mig_capable,
            }
            if pg.uuid:
                values["uuid"] = pg.uuid
            wanted[(node.pk, pg.index)] = values
    fields = ["model", "memory_mib", "nvlink_generation", "nvlink_gbps", "mig_capable", "uuid"]
    _, counter = _upsert(GPU, existing, wanted, fields, lambda k, v: GPU(node_id=k[0], index=k[1], **v))
    return asdict(counter)


def _topology_values(topo: ParsedNodeTopology) -> dict[str, Any]:
    nic_affinity: dict[str, dict[str, str]] = {}
    for (gpu, nic), code in topo.nic_affinity.items():
        nic_affinity.setdefault(str(gpu), {})[nic] = code
    return {
        "gpu_links": {f"{a}-{b}": code for (a, b), code in sorted(topo.gpu_links.items())},
        "nic_affinity": nic_affinity,
        "nics": list(topo.nics),
    }


def _store_topologies(items: list[tuple[Node, ParsedNodeTopology]]) -> None:
    existing = {t.node_id: t for t in NodeTopology.objects.filter(node__in=[node for node, _ in items])}
    wanted = {node.pk: _topology_values(topo) for node, topo in items}
    _upsert(
        NodeTopology,
        existing,
        wanted,
        ["gpu_links", "nic_affinity", "nics"],
        lambda pk, v: NodeTopology(node_id=pk, **v),
    )


@transaction.atomic
def import_node_topology(cluster_name: str, hostname: str, topo: ParsedNodeTopology, *, source: str = "") -> dict:
    """Store one server's `nvidia-smi topo -m`: GPU<->GPU codes, GPU<->NIC affinity, NUMA/CPU affinity."""
    cluster = get_or_create_cluster(cluster_name)
    node, node_created = Node.objects.get_or_create(cluster=cluster, hostname=hostname)
    _store_topologies([(node, topo)])
    existing = {g.index: g for g in node.gpus.all()}
    created = updated = 0
    for index in topo.gpus:
        values = {"numa_node": topo.numa_affinity.get(index), "cpu_affinity": topo.cpu_affinity.get(index, "")}
        gpu = existing.get(index)
        if gpu is None:
            GPU.objects.create(node=node, index=index, model=node.gpu_model, **values)
            created += 1
        elif _changed(gpu, values):
            gpu.save(update_fields=list(values))
            updated += 1
    nvlink_pairs = sum(1 for code in topo.gpu_links.values() if code.startswith("NV"))
    summary = {
        "cluster": cluster.name,
        "node": hostname,
        "node_created": node_created,
        "gpus": len(topo.gpus),
        "nics": len(topo.nics),
        "nvlink_pairs": nvlink_pairs,
        "gpus_created": created,
        "gpus_updated": updated,
    }
    ImportRecord.objects.create(cluster=cluster, format="nvidia-topo", source=source[:255], summary=summary)
    events.send_on_commit(cluster.pk, {"kind": "inventory_changed", "cause": f"topology of {hostname}"})
    return summary


def detect_switch_roles(cluster: Cluster) -> dict[str, int]:
    """Store the tier detected from the graph on every switch whose role an operator has not set."""
    from fabric.adapters import fabric_for_cluster
    from fabric.topology.graph import FabricGraph
    from fabric.topology.tiers import UNKNOWN, detect_tiers

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
def set_switch_role(switch: Switch, role: str) -> Switch:
    """Pin a switch's tier; an empty role hands it back to detection."""
    if role not in SwitchRole.values:
        raise ActionError(f"switch {switch}: unknown role {role!r}; use one of {', '.join(SwitchRole.values)}")
    switch.role = role
    switch.role_source = RoleSource.SET if role else RoleSource.DETECTED
    switch.save(update_fields=["role", "role_source"])
    if not role:
        detect_switch_roles(switch.cluster)
        switch.refresh_from_db()
    events.send_on_commit(switch.cluster_id, {"kind": "inventory_changed", "cause": f"role of {switch}"})
    return switch


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


def _apply_host_edit(node: Node, changed: set[str]) -> None:
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
    _lock_cluster(node.cluster_id)
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
        _apply_host_edit(locked, changed)
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
    _lock_cluster(cluster_id)  # import_fabric's order (see _lock_cluster): the cluster row before node rows
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


@transaction.atomic
def save_link_ports(link: Link) -> Link:
    """Recompute a link's rate, capacity and state from its ports after an edit."""
    ends = list(link.ports.select_for_update().order_by("link_end"))
    if len(ends) != 2:
        raise ActionError(f"link {link.pk} has {len(ends)} ports; a link joins exactly two")
    a, b = ends
    rate = LinkRate(a.width, a.speed)
    supported = _supported_gbps(a, b)
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
        _apply_host_edit(obj, changed)  # a value typed is the operator's; a cleared *_manual follows the agent
    if (isinstance(obj, Node) and "hostname" in changed) or (isinstance(obj, HCA) and changed & {"node", "device"}):
        _lock_cluster(obj.cluster_id)  # before the node's own row: see _lock_cluster
        _hosts_moved(obj.cluster_id)
    obj.save()
    if isinstance(obj, Port) and obj.link_id and changed & {"width", "speed", "state", "supported_speed"}:
        save_link_ports(obj.link)
    if isinstance(obj, Switch) and "role" in changed and not obj.role:
        detect_switch_roles(obj.cluster)
    cluster_id = getattr(obj, "cluster_id", None) or getattr(getattr(obj, "node", None), "cluster_id", None)
    if cluster_id:
        events.send_on_commit(cluster_id, {"kind": "inventory_changed", "cause": f"edit of {obj}"})


@transaction.atomic
def generate_fabric(cluster_name: str, *, progress: Progress = no_progress, **params: Any) -> ImportSummary:
    """Generate a fat tree (fabric.importers.fattree) and import it like any other fabric."""
    from fabric.importers.fattree import generate_fat_tree

    parsed = generate_fat_tree(**params, uuid_salt=cluster_name)
    progress(f"generated {len(parsed.switches)} switches, {len(parsed.nodes)} servers, {len(parsed.links)} links")
    source = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return import_fabric(cluster_name, parsed, fmt="generated", source=source, progress=progress)


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


#
# Health: alerts from rule findings, and the capacity they take away or give back
#


def gpu_for_alert_key(cluster_id: int, object_key: str) -> GPU | None:
    node, _, ident = object_key.partition("/")
    gpus = GPU.objects.filter(node__cluster_id=cluster_id, node__hostname=node)
    if ident.startswith("gpu") and ident[3:].isdigit():
        return gpus.filter(index=int(ident[3:])).first()
    return gpus.filter(uuid=ident).first()


def link_for_alert_key(cluster_id: int, object_key: str) -> Link | None:
    node, device, port = [*object_key.split("/"), "", "", ""][:3]
    if not port.isdigit():
        return None
    ports = Port.objects.filter(cluster_id=cluster_id, number=int(port), link__isnull=False).select_related("link")
    if node == FABRIC_SOURCE:  # a switch port read by the fabric agent: the device is the switch GUID
        found = ports.filter(switch__guid=device.lower().removeprefix("0x")).first()
    else:
        found = ports.filter(hca__node__hostname=node, hca__device=device).first()
    return found.link if found else None


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


TELEMETRY_REASON = "telemetry: "  # prefix of the state reason of a node taken down by the liveness check


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


#
# Time series: rollups and retention. Raw samples (ingest) -> 1-minute buckets -> 1-hour buckets; beat runs both
# through fabric.tasks. Set-based SQL: one INSERT ... SELECT ... GROUP BY ... ON CONFLICT DO UPDATE per series
# and chunk of buckets (PostgreSQL and SQLite), so reruns are idempotent and a late sample re-aggregates its bucket.
#

# Buckets recomputed behind the newest stored one on every run: a sample that arrives up to this many buckets
# late (a slow ingest) still counts. The hour tier redoes the hours whose minutes were redone.
ROLLUP_LATE_BUCKETS = {Resolution.MINUTE: 3, Resolution.HOUR: 1}
# Buckets per statement (and transaction) while catching up on a backlog: bounded work per statement.
ROLLUP_CHUNK_BUCKETS = {Resolution.MINUTE: 30, Resolution.HOUR: 24}
# Chunks per tier and run: a long backlog (the task was down) is worked off over several runs.
ROLLUP_MAX_CHUNKS = 8
# Rows per DELETE when pruning: each batch is its own short transaction.
PRUNE_BATCH = 10_000


@dataclass(frozen=True)
class _Series:
    raw: type[GpuMetric] | type[PortMetric]
    rollup: type[GpuMetricRollup] | type[PortMetricRollup]
    owner: str  # the foreign key: "gpu" or "port"

    @property
    def fields(self) -> tuple[str, ...]:
        return self.raw.SERIES_FIELDS


SERIES = {"gpu": _Series(GpuMetric, GpuMetricRollup, "gpu"), "port": _Series(PortMetric, PortMetricRollup, "port")}


def _bucket_select(series: _Series, resolution_s: int, start: datetime, end: datetime) -> QuerySet:
    """SELECT of the rollup rows for buckets in [start, end); annotation "r_<column>" fills rollup column <column>."""
    aggregates: dict[str, Any] = {}
    if resolution_s == Resolution.MINUTE:
        source = series.raw.objects.filter(at__gte=start, at__lt=end)
        aggregates["r_samples"] = Count("pk")
        for name in series.fields:
            aggregates[f"r_{name}_avg"] = Avg(name)
            aggregates[f"r_{name}_max"] = Max(name)
    else:
        # Hours from minutes: averages weighted by each minute's sample count (over the minutes that have a value).
        source = series.rollup.objects.filter(resolution_s=Resolution.MINUTE, at__gte=start, at__lt=end)
        aggregates["r_samples"] = Sum("samples")
        for name in series.fields:
            avg, has = f"{name}_avg", Q(**{f"{name}_avg__isnull": False})
            weighted = Sum(F(avg) * F("samples"), filter=has, output_field=FloatField())
            aggregates[f"r_{avg}"] = ExpressionWrapper(weighted / Sum("samples", filter=has), output_field=FloatField())
            aggregates[f"r_{name}_max"] = Max(f"{name}_max")
    aggregates["r_resolution_s"] = Value(int(resolution_s))
    if series.owner == "port":
        # Error counters are summed afterwards in Python (_rollup_port_errors): rare, and JSON differs per database.
        aggregates["r_errors_total"] = Value(0)
        aggregates["r_errors"] = Value({}, output_field=JSONField())
    kind = "minute" if resolution_s == Resolution.MINUTE else "hour"
    return (
        source.annotate(r_at=Trunc("at", kind, tzinfo=UTC))
        .values(f"{series.owner}_id", "r_at")
        .annotate(**aggregates)
        .order_by()
    )


def _upsert_from_select(model, select: QuerySet, unique: list[str]) -> int:
    """INSERT INTO model (...) <select> ON CONFLICT (unique) DO UPDATE: one statement, no rows through Python."""
    conn = connections[select.db]
    if conn.vendor not in ("postgresql", "sqlite"):
        raise NotSupportedError(f"rollups need PostgreSQL or SQLite, not {conn.vendor}")
    compiler = select.query.get_compiler(using=select.db)
    select_sql, params = compiler.as_sql()
    columns = [(alias or expr.target.column).removeprefix("r_") for expr, _, alias in compiler.select]
    expected = {f.column for f in model._meta.concrete_fields if not f.primary_key}
    if set(columns) != expected:  # a new rollup field without its aggregate, or the reverse
        raise ValueError(f"rollup SELECT gives {sorted(columns)}, {model.__name__} has {sorted(expected)}")
    q = conn.ops.quote_name
    updates = ", ".join(f"{q(c)} = excluded.{q(c)}" for c in columns if c not in unique)
    sql = (
        f"INSERT INTO {q(model._meta.db_table)} ({', '.join(map(q, columns))}) {select_sql} "
        f"ON CONFLICT ({', '.join(map(q, unique))}) DO UPDATE SET {updates}"
    )
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        return max(cursor.rowcount, 0)


def _rollup_port_errors(resolution_s: int, start: datetime, end: datetime) -> None:
    """Sum error counter growth per counter into the port rollups of [start, end) (few rows have any)."""
    if resolution_s == Resolution.MINUTE:
        rows = PortMetric.objects.filter(at__gte=start, at__lt=end).exclude(errors={})
    else:
        rows = PortMetricRollup.objects.filter(
            resolution_s=Resolution.MINUTE, at__gte=start, at__lt=end, errors_total__gt=0
        )
    sums: dict[tuple[int, datetime], dict[str, float]] = {}
    for port_id, at, errors in rows.values_list("port_id", "at", "errors").iterator(chunk_size=BATCH):
        acc = sums.setdefault((port_id, bucket_start(at, resolution_s)), {})
        for counter, growth in (errors or {}).items():
            acc[counter] = acc.get(counter, 0) + growth
    ports = sorted({port_id for port_id, _ in sums})
    for chunk in _chunks(ports, 1000):
        changed = []
        for rollup in PortMetricRollup.objects.filter(
            resolution_s=resolution_s, at__gte=start, at__lt=end, port_id__in=chunk
        ).only("pk", "port_id", "at"):
            acc = sums.get((rollup.port_id, rollup.at))
            if acc:
                rollup.errors, rollup.errors_total = acc, round(sum(acc.values()))
                changed.append(rollup)
        PortMetricRollup.objects.bulk_update(changed, ["errors", "errors_total"], batch_size=500)


def _rollup_start(
    series: _Series, resolution_s: int, now: datetime, rewritten_from: datetime | None = None
) -> datetime | None:
    """First bucket to (re)compute, None when there is nothing to roll up.

    The bucket after the newest stored one, and also: the buckets whose source rows this run rewrote
    (`rewritten_from`, the finer tier's first rewritten bucket), or without that the last few
    (ROLLUP_LATE_BUCKETS). With nothing stored yet, the oldest source row. Never a bucket retention would delete.
    """
    latest = series.rollup.objects.filter(resolution_s=resolution_s).aggregate(m=Max("at"))["m"]
    if latest is None:
        source = series.raw.objects.all()
        if resolution_s != Resolution.MINUTE:
            source = series.rollup.objects.filter(resolution_s=Resolution.MINUTE)
        oldest = source.aggregate(m=Min("at"))["m"]
        if oldest is None:
            return None
        start = bucket_start(oldest, resolution_s)
    elif rewritten_from is not None:
        start = min(latest + timedelta(seconds=resolution_s), bucket_start(rewritten_from, resolution_s))
    else:
        start = latest - timedelta(seconds=ROLLUP_LATE_BUCKETS[resolution_s] * resolution_s)
    return max(start, bucket_start(now - retention(resolution_s), resolution_s))


def rollup_metrics(
    now: datetime | None = None, resolutions: Iterable[int] = (Resolution.MINUTE, Resolution.HOUR)
) -> dict[str, dict[str, int]]:
    """Aggregate every complete bucket not rolled up yet (and the last few again) into the rollup tables.

    1-minute buckets from the raw samples, then 1-hour buckets from the 1-minute ones; a bucket is complete once
    `now` is past its end. When both tiers run, the hour tier redoes only the hours whose minutes were rewritten,
    and a backlog is worked off at most ROLLUP_MAX_CHUNKS chunks per tier and run. Idempotent: rerunning writes
    the same rows. Returns rows written per resolution and series, e.g.
    {"60s": {"gpu": 960, "port": 2400}, "3600s": {"gpu": 0, "port": 0}}.
    """
    now = now or timezone.now()
    counts: dict[str, dict[str, int]] = {}
    rewritten: dict[str, tuple[datetime, datetime]] = {}  # series -> [from, to) the finer tier covered this run
    for resolution_s in sorted(int(r) for r in resolutions):
        Resolution(resolution_s)  # ValueError for anything but 60 and 3600
        step = timedelta(seconds=ROLLUP_CHUNK_BUCKETS[resolution_s] * resolution_s)
        written = counts[f"{resolution_s}s"] = {}
        for name, series in SERIES.items():
            written[name] = 0
            end = bucket_start(now, resolution_s)
            finer = rewritten.get(name)
            if finer is not None:  # no further than the finer tier got
                end = min(end, bucket_start(finer[1], resolution_s))
            start = _rollup_start(series, resolution_s, now, finer[0] if finer else None) or end
            first, chunks = start, 0
            while start < end and chunks < ROLLUP_MAX_CHUNKS:
                stop = min(start + step, end)
                with transaction.atomic():
                    select = _bucket_select(series, resolution_s, start, stop)
                    written[name] += _upsert_from_select(series.rollup, select, [f"{name}_id", "resolution_s", "at"])
                    if name == "port":
                        _rollup_port_errors(resolution_s, start, stop)
                start, chunks = stop, chunks + 1
            rewritten[name] = (min(first, start), start)
    log.debug("rollup_metrics at %s: %s", now, counts)
    return counts


def _delete_in_batches(queryset: QuerySet, batch_size: int) -> int:
    """Delete the rows of `queryset` batch_size at a time, each DELETE in its own short transaction."""
    total = 0
    while True:
        batch = queryset.model.objects.filter(pk__in=queryset.values("pk")[:batch_size])
        with transaction.atomic():
            deleted, _ = batch.delete()
        total += deleted
        if deleted < batch_size:
            return total


def prune_metrics(now: datetime | None = None, batch_size: int = PRUNE_BATCH) -> dict[str, int]:
    """Delete samples past retention: raw after TELEMETRY_RETENTION_RAW_H hours, 1-minute rollups after
    TELEMETRY_RETENTION_MINUTE_D days, 1-hour rollups after TELEMETRY_RETENTION_HOUR_D days. Returns rows deleted."""
    now = now or timezone.now()
    counts: dict[str, int] = {}
    for name, series in SERIES.items():
        counts[f"{name}_raw"] = _delete_in_batches(series.raw.objects.filter(at__lt=now - retention(0)), batch_size)
        for resolution_s in (Resolution.MINUTE, Resolution.HOUR):
            old = series.rollup.objects.filter(resolution_s=resolution_s, at__lt=now - retention(resolution_s))
            counts[f"{name}_{resolution_s}s"] = _delete_in_batches(old, batch_size)
    log.debug("prune_metrics at %s: %s", now, counts)
    return counts
