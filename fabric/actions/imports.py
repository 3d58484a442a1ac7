"""Imports of a fabric: a parsed fabric (ibnetdiscover, a spec, the generator) or one server's `nvidia-smi topo -m`
applied in one transaction: upsert by GUID, cable ports, mark vanished links down, detect tiers, record the import.
`import_text` parses a file in any supported format first (what the command, the API and the demo call)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from fabric import events
from fabric.actions.common import BATCH, batches, remove_empty_placeholders
from fabric.actions.errors import ActionError
from fabric.actions.inventory import detect_switch_roles
from fabric.choices import CaKind, LinkState, PortState, RoleSource
from fabric.importers import FORMATS, parse_nvidia_topo
from fabric.importers.fattree import generate_fat_tree
from fabric.importers.types import ParsedFabric, ParsedNodeTopology, PortRef
from fabric.models import GPU, HCA, Cluster, ImportRecord, Link, Node, NodeTopology, Port, Switch
from fabric.selectors import link_state, supported_gbps
from fabric.topology.convert import unnamed_host_name
from fabric.topology.link_speeds import LinkRate


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
    changes["nodes"]["placeholders_removed"] = remove_empty_placeholders(cluster)
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
    moves to the named node and the emptied placeholder goes (remove_empty_placeholders).
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


LINK_FIELDS = ["width", "speed", "capacity_gbps", "supported_gbps", "state", "state_reason", "loopback"]


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
        supported = supported_gbps(pa, pb) if pa and pb else 0.0
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
    for chunk in batches(list(kept)):
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
    for chunk in batches(vanished):
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


@transaction.atomic
def generate_fabric(cluster_name: str, *, progress: Progress = no_progress, **params: Any) -> ImportSummary:
    """Generate a fat tree (fabric.importers.fattree) and import it like any other fabric."""
    parsed = generate_fat_tree(**params, uuid_salt=cluster_name)
    progress(f"generated {len(parsed.switches)} switches, {len(parsed.nodes)} servers, {len(parsed.links)} links")
    source = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return import_fabric(cluster_name, parsed, fmt="generated", source=source, progress=progress)


TOPOLOGY_FORMAT = "nvidia-topo"
ALL_FORMATS = (*FORMATS, TOPOLOGY_FORMAT)


def import_text(
    cluster: str,
    fmt: str,
    text: str,
    *,
    source: str = "",
    node: str = "",
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """Parse `text` as `fmt` and store it in `cluster`. Raises ParseError / ActionError; stores nothing then."""
    if fmt == TOPOLOGY_FORMAT:
        if not node:
            raise ActionError("format nvidia-topo describes one server: name it (--node HOST)")
        topo = parse_nvidia_topo(text, source=source)
        return import_node_topology(cluster, node, topo, source=source)
    if fmt not in FORMATS:
        raise ActionError(f"unknown format {fmt!r}; use one of {', '.join(ALL_FORMATS)}")
    parsed = FORMATS[fmt](text, source=source)
    progress(
        f"parsed {len(parsed.switches)} switches, {len(parsed.cas)} channel adapters, {len(parsed.links)} links"
        + (f", {len(parsed.warnings)} warnings" if parsed.warnings else "")
    )
    return import_fabric(cluster, parsed, fmt=fmt, source=source, progress=progress).to_dict()
