"""Generate a consistent, rail-optimised InfiniBand fat tree as a ParsedFabric.

    generate_fat_tree(nodes=32)              # 32 DGX H100, 64-port NDR switches, non-blocking

Layout (`plan_fat_tree` computes it, `generate_fat_tree` cables it):

* Leaf ports are split into `down` (hosts) and `up` (spines) with down/up as close to
  `oversubscription` as whole ports allow without exceeding it: up = floor(P / (1 + o)),
  down = floor(up * o). 64 ports: 1:1 -> 32/32, 2:1 -> 42/21 (one port unused), 3:1 -> 48/16,
  1.5:1 -> 37/25.
  With fewer servers than `down`, the leaves get `down` = servers and uplinks for them:
  ceil(servers / o), rounded up to an even count (so 16 servers at 2:1 -> 16 / 8).
* Rail-optimised, as in DGX SuperPOD: a scalable unit (SU) is `down` servers and one
  leaf per rail; HCA i of every server of the SU goes to leaf i of the SU. A server
  with 8 HCAs therefore sits on 8 leaves and no single leaf or cable cuts it off.
  With one HCA per server this degenerates to the classic one-leaf-per-rack tree.
* Not rail-optimised (`rail_optimised=False`, plan_flat_fat_tree): every HCA of a server on one leaf,
  floor(down / HCAs) servers per leaf, one rack per leaf; the tree above the leaves is built the same way.
* Storage servers (2 HCAs, no GPUs) get their own SUs of 2 leaves, cabled the same way.
* Two tiers when one spine layer reaches every leaf (leaves <= P). Spines: the smallest
  divisor of `up` that is >= ceil(leaves * up / P) and >= 2 (one spine would be a single
  point of failure; `up` itself always fits), so every leaf has up/spines cables to
  every spine: a symmetric tree whose bisection is exactly what the ports promise.
* Three tiers otherwise: pods of at most P/2 leaves (whole SUs where they fit) with their
  own spines (counted as above against P/2 down ports; a partial last pod gets as many
  spines as a full one); a spine goes up with as many ports as it has down (non-blocking
  above the leaves), and spine k of every pod deals its uplinks round-robin over core
  group k (enough cores for the group's cables, a divisor of a spine's uplink count), so
  every core reaches every pod equally: the classic Clos wiring. More than P pods would
  need a fourth tier: ValueError.
* Deterministic: GUIDs are a fixed OUI, a 16-bit hash of `name_prefix` (so two generated
  clusters can share a database), a kind digit and a counter; GPU UUIDs are uuid5 of
  `uuid_salt`, the hostname and the index. Same arguments, same fabric.
"""

from __future__ import annotations

import math
import uuid
import zlib
from dataclasses import dataclass

from fabric.topology.catalog import GpuModel
from fabric.topology.catalog import gpu_model as lookup_gpu_model
from fabric.topology.link_speeds import SPEEDS

from .types import (
    NodeRole,
    ParsedCA,
    ParsedFabric,
    ParsedGPU,
    ParsedLink,
    ParsedNode,
    ParsedNodeTopology,
    ParsedSwitch,
    PortRef,
    SwitchRole,
)

GUID_OUI = "b8cef6"  # a Mellanox/NVIDIA OUI, as real HCAs and switches carry
STORAGE_HCAS = 2
_MIN_SPINES = 2  # one spine would be a single point of failure for every leaf-to-leaf path
_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "generated.clusterctl")
_KIND_SWITCH, _KIND_CA, _KIND_PORT = 1, 2, 3
_MAX_COUNTER = 0xFFFFF
_MAX_UNICAST_LID = 0xBFFF
# NVLink bandwidth per link, GB/s bidirectional, by generation: turns a model's per-GPU
# bandwidth into the link count `nvidia-smi topo -m` prints (H100: 900 / 50 = NV18).
_NVLINK_GBPS_PER_LINK = {1: 40.0, 2: 50.0, 3: 50.0, 4: 50.0, 5: 100.0}


@dataclass(frozen=True, slots=True)
class FatTreePlan:
    tiers: int  # 2 or 3
    down: int  # host ports per leaf
    up: int  # uplink ports per leaf
    hcas_per_node: int
    compute_units: int  # scalable units of compute servers
    storage_units: int
    leaves: int
    leaves_per_pod: int  # == leaves for 2 tiers
    pods: int
    spines_per_pod: tuple[int, ...]
    cores_per_group: tuple[int, ...]  # core switches per spine index k; () for 2 tiers

    @property
    def cores(self) -> int:
        return sum(self.cores_per_group)

    @property
    def spines(self) -> int:
        return sum(self.spines_per_pod)

    @property
    def oversubscription(self) -> float:
        return self.down / self.up


def plan_fat_tree(
    nodes: int,
    hcas_per_node: int,
    leaf_ports: int = 64,
    oversubscription: float = 1.0,
    storage_nodes: int = 0,
) -> FatTreePlan:
    """The switch counts and port split for a fat tree; ValueError names any impossible argument."""
    if not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be a whole number >= 1, got {nodes!r}")
    if not isinstance(hcas_per_node, int) or hcas_per_node < 1:
        raise ValueError(f"hcas_per_node must be >= 1, got {hcas_per_node!r} (a server needs a link to the fabric)")
    if not isinstance(storage_nodes, int) or storage_nodes < 0:
        raise ValueError(f"storage_nodes must be a whole number >= 0, got {storage_nodes!r}")
    if not isinstance(leaf_ports, int) or leaf_ports < 2:
        raise ValueError(f"leaf_ports must be >= 2 (one port down, one up), got {leaf_ports!r}")
    if not math.isfinite(oversubscription) or oversubscription < 1:
        raise ValueError(
            f"oversubscription must be >= 1 (host ports per uplink at each leaf), got {oversubscription!r}: "
            "below 1 a leaf would have more uplinks than hosts to fill them"
        )
    up = math.floor(leaf_ports / (1 + oversubscription))
    if up < 1:
        raise ValueError(
            f"leaf_ports={leaf_ports} is too small for oversubscription {oversubscription:g}:1 "
            f"(needs at least {math.ceil(1 + oversubscription)} ports for one uplink)"
        )
    down = min(leaf_ports - up, math.floor(up * oversubscription + 1e-9))  # never above the ratio asked for
    if nodes < down:
        # One partly filled unit: cable uplinks for the servers it has, not for empty ports, so a
        # small cluster gets the ratio asked for (16 servers at 2:1 -> 16 down, 8 up). Rounded up
        # to an even count (at least 2) so that two spines share them evenly; never above `up`.
        want = max(_MIN_SPINES, math.ceil(nodes / oversubscription))
        up = min(up, want + want % 2)
        down = nodes

    compute_units = math.ceil(nodes / down)
    storage_units = math.ceil(storage_nodes / down) if storage_nodes else 0
    leaves = compute_units * hcas_per_node + storage_units * STORAGE_HCAS
    if leaves <= leaf_ports:
        spines = _divisor_at_least(up, max(math.ceil(leaves * up / leaf_ports), _MIN_SPINES))
        return FatTreePlan(2, down, up, hcas_per_node, compute_units, storage_units, leaves, leaves, 1, (spines,), ())

    spine_down = leaf_ports // 2
    # Keep scalable units whole inside a pod when the pod can hold at least one.
    per_pod = (spine_down // hcas_per_node) * hcas_per_node if hcas_per_node <= spine_down else spine_down
    pods = math.ceil(leaves / per_pod)
    if pods > leaf_ports:
        max_nodes = leaf_ports * (per_pod // hcas_per_node or 1) * down
        raise ValueError(
            f"{nodes} nodes need {pods} pods of {per_pod} leaves, more than a 3-tier fat tree of "
            f"{leaf_ports}-port switches can join (at most {leaf_ports} pods, about {max_nodes} nodes); "
            "use bigger switches or more oversubscription"
        )
    spines_per_pod = []
    group_uplinks: list[int] = []  # core group k takes the uplinks of spine k of every pod
    # Every pod gets the spine count of a full pod, a partial last pod included: with fewer
    # spines its leaves would double up on some spine indices while core groups k >= its
    # spine count never reach it, and the cut into that pod would fall below its host ports.
    sp = _divisor_at_least(up, max(math.ceil(per_pod * up / spine_down), _MIN_SPINES))
    for p in range(pods):
        cables = min(per_pod, leaves - p * per_pod) * up
        spines_per_pod.append(sp)
        for k in range(sp):
            # Leaf uplinks are dealt round-robin, so spine k holds floor(cables/sp) or one more;
            # it goes up with as many ports as it has down (non-blocking above the leaves).
            load = cables // sp + (1 if k < cables % sp else 0)
            if k == len(group_uplinks):
                group_uplinks.append(0)
            group_uplinks[k] += load
    # Spine k of a full pod goes up with `per_spine` cables; a group size dividing it gives each
    # core the same number of cables from every pod (group size = per_spine always fits: one
    # cable per pod per core, and pods <= P).
    per_spine = per_pod * up // sp
    cores_per_group = tuple(_divisor_at_least(per_spine, math.ceil(u / leaf_ports)) for u in group_uplinks)
    return FatTreePlan(
        3,
        down,
        up,
        hcas_per_node,
        compute_units,
        storage_units,
        leaves,
        per_pod,
        pods,
        tuple(spines_per_pod),
        cores_per_group,
    )


def plan_flat_fat_tree(
    nodes: int, hcas_per_node: int, leaf_ports: int = 64, oversubscription: float = 1.0
) -> tuple[FatTreePlan, int]:
    """The plan of a fat tree that is not rail-optimised: every HCA of a server on one leaf, `servers per leaf` =
    floor(down / hcas) (down, up: a full leaf's split at the ratio), the tree above the leaves as for rail-optimised
    ones (the leaves counted as leaves of single-HCA hosts). Returns (plan, servers per leaf); ValueError names the
    impossible argument, or a server whose HCAs do not fit one leaf."""
    if not isinstance(hcas_per_node, int) or hcas_per_node < 1:
        raise ValueError(f"hcas_per_node must be >= 1, got {hcas_per_node!r} (a server needs a link to the fabric)")
    if not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be a whole number >= 1, got {nodes!r}")
    probe = plan_fat_tree(leaf_ports, 1, leaf_ports, oversubscription)  # a full leaf's port split at the ratio
    per_leaf = probe.down // hcas_per_node
    if per_leaf < 1:
        raise ValueError(
            f"a server's {hcas_per_node} HCAs do not fit one leaf's {probe.down} host ports at {oversubscription:g}:1"
        )
    leaves = math.ceil(nodes / per_leaf)
    # One pseudo-host per host port: the plan of `leaves` full leaves of single-HCA hosts.
    return plan_fat_tree(leaves * probe.down, 1, leaf_ports, oversubscription), per_leaf


def _divisor_at_least(n: int, low: int) -> int:
    """The smallest divisor of n that is >= low (n itself when low > n): a switch count that
    splits n cables evenly, so every leaf (spine) has the same number of cables to each switch
    above it and no switch above becomes a hidden bottleneck."""
    for d in range(max(low, 1), n + 1):
        if n % d == 0:
            return d
    return n


def generate_fat_tree(
    nodes: int,
    gpus_per_node: int = 8,
    gpu_model: str = "H100",
    leaf_ports: int = 64,
    oversubscription: float = 1.0,
    storage_nodes: int = 0,
    rate: str = "NDR",
    hcas_per_node: int | None = None,
    name_prefix: str = "",
    uuid_salt: str = "",
    rail_optimised: bool = True,
) -> ParsedFabric:
    """A rail-optimised fat tree of `nodes` GPU servers (see the module docstring for the layout); with
    `rail_optimised=False`, every HCA of a server on one leaf (plan_flat_fat_tree), no storage servers.

    GPU UUIDs are unique across a database only per (`uuid_salt`, hostname, index): give each
    generated cluster its own salt (the import action passes the cluster name).

    `hcas_per_node` defaults to `gpus_per_node` (one HCA per GPU, as on DGX). Raises ValueError
    for an impossible design (no nodes, too few leaf ports, oversubscription below 1, an unknown
    GPU model or rate, more nodes than three tiers can hold).
    """
    if not isinstance(gpus_per_node, int) or gpus_per_node < 0:
        raise ValueError(f"gpus_per_node must be a whole number >= 0, got {gpus_per_node!r}")
    speed = rate.strip().upper()
    if speed not in SPEEDS:
        raise ValueError(f"unknown rate {rate!r}; known: {', '.join(SPEEDS)}")
    model: GpuModel | None = None
    if gpus_per_node:
        try:
            model = lookup_gpu_model(gpu_model)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
    hcas = gpus_per_node if hcas_per_node is None else hcas_per_node
    per_leaf = 0
    if rail_optimised:
        plan = plan_fat_tree(nodes, hcas, leaf_ports, oversubscription, storage_nodes)
    elif storage_nodes:
        raise ValueError("storage servers are cabled rail-optimised only (2 leaves per unit): leave storage_nodes 0")
    else:
        plan, per_leaf = plan_flat_fat_tree(nodes, hcas, leaf_ports, oversubscription)
    if nodes * hcas + storage_nodes * STORAGE_HCAS > _MAX_COUNTER:
        raise ValueError(f"{nodes * hcas} HCAs is more than the generator numbers ({_MAX_COUNTER})")
    builder = _Builder(plan, name_prefix, speed, leaf_ports, uuid_salt)
    if per_leaf:
        return builder.build_flat(nodes, hcas, per_leaf, gpus_per_node, model)
    return builder.build(nodes, storage_nodes, gpus_per_node, model)


class _Builder:
    def __init__(self, plan: FatTreePlan, prefix: str, speed: str, ports: int, uuid_salt: str = "") -> None:
        self.uuid_prefix = f"{uuid_salt}/" if uuid_salt else ""
        self.plan = plan
        self.prefix = prefix
        self.speed = speed
        self.ports = ports
        self.salt = zlib.crc32(prefix.encode()) & 0xFFFF
        self.counters = {_KIND_SWITCH: 0, _KIND_CA: 0, _KIND_PORT: 0}
        self.next_lid = 1
        self.fabric = ParsedFabric(source="generated")
        self.next_port: dict[str, int] = {}  # switch GUID -> next free port (spines, cores)

    def guid(self, kind: int) -> str:
        self.counters[kind] += 1
        return f"{GUID_OUI}{self.salt:04x}{kind:x}{self.counters[kind]:05x}"

    def lid(self) -> int | None:
        lid = self.next_lid
        self.next_lid += 1
        return lid if lid <= _MAX_UNICAST_LID else None

    def switch(self, name: str, role: SwitchRole, rack: str) -> str:
        guid = self.guid(_KIND_SWITCH)
        self.fabric.switches.append(
            ParsedSwitch(
                guid=guid,
                name=name,
                description=f"{name} ({self.ports}-port {self.speed} {role}, generated)",
                port_count=self.ports,
                lid=self.lid(),
                role=role,
                rack=rack,
            )
        )
        return guid

    def cable(self, a: str, a_port: int, b: str, b_port: int) -> None:
        self.fabric.links.append(ParsedLink(PortRef(a, a_port), PortRef(b, b_port), 4, self.speed))

    def take_port(self, switch_guid: str) -> int:
        port = self.next_port.get(switch_guid, 1)
        self.next_port[switch_guid] = port + 1
        return port

    def build(self, nodes: int, storage_nodes: int, gpus: int, model: GpuModel | None) -> ParsedFabric:
        plan, pre = self.plan, self.prefix
        width = max(4, len(str(nodes)))
        hostnames = [f"{pre}gpu{i:0{width}d}" for i in range(1, nodes + 1)]
        s_width = max(2, len(str(storage_nodes)))
        storage = [f"{pre}stor{i:0{s_width}d}" for i in range(1, storage_nodes + 1)]

        # Leaves, unit by unit: compute SUs (one leaf per rail), then storage SUs.
        units: list[tuple[list[str], int, NodeRole, str]] = []  # (hosts, hcas each, role, rack)
        for u in range(plan.compute_units):
            units.append(
                (hostnames[u * plan.down : (u + 1) * plan.down], plan.hcas_per_node, "compute", f"{pre}rack{u + 1:02d}")
            )
        for u in range(plan.storage_units):
            units.append(
                (storage[u * plan.down : (u + 1) * plan.down], STORAGE_HCAS, "storage", f"{pre}rack-s{u + 1:02d}")
            )
        l_width = max(3, len(str(plan.leaves)))
        leaves: list[str] = []
        for hosts, n_hcas, role, rack in units:
            unit_leaves = []
            for _ in range(n_hcas):
                unit_leaves.append(self.switch(f"{pre}leaf{len(leaves) + 1:0{l_width}d}", "leaf", rack))
                leaves.append(unit_leaves[-1])
            for slot, host in enumerate(hosts):
                ends = [(leaf, slot + 1) for leaf in unit_leaves]
                self.server(host, role, rack, ends, gpus if role == "compute" else 0, model)
        self.above_leaves(leaves)
        return self.fabric

    def build_flat(self, nodes: int, hcas: int, per_leaf: int, gpus: int, model: GpuModel | None) -> ParsedFabric:
        """Not rail-optimised: `per_leaf` servers on each leaf, HCA i of the server in slot s on port s * hcas + i + 1,
        one rack per leaf."""
        plan, pre = self.plan, self.prefix
        width = max(4, len(str(nodes)))
        hostnames = [f"{pre}gpu{i:0{width}d}" for i in range(1, nodes + 1)]
        l_width = max(3, len(str(plan.leaves)))
        leaves: list[str] = []
        for u in range(math.ceil(nodes / per_leaf)):
            rack = f"{pre}rack{u + 1:02d}"
            leaf = self.switch(f"{pre}leaf{u + 1:0{l_width}d}", "leaf", rack)
            leaves.append(leaf)
            for slot, host in enumerate(hostnames[u * per_leaf : (u + 1) * per_leaf]):
                self.server(host, "compute", rack, [(leaf, slot * hcas + i + 1) for i in range(hcas)], gpus, model)
        # The last leaf may be partly filled; it keeps the uplinks of a full one (as planned).
        self.above_leaves(leaves)
        return self.fabric

    def above_leaves(self, leaves: list[str]) -> None:
        plan, pre = self.plan, self.prefix
        # Spines, pod by pod; each leaf deals its uplinks round-robin over the pod's spines.
        sp_width = max(2, len(str(plan.spines)))
        spines: list[str] = []
        spines_by_pod: list[list[str]] = []
        for p, n_spines in enumerate(plan.spines_per_pod):
            pod_spines = [
                self.switch(f"{pre}spine{len(spines) + i + 1:0{sp_width}d}", "spine", f"{pre}net{p + 1:02d}")
                for i in range(n_spines)
            ]
            spines.extend(pod_spines)
            spines_by_pod.append(pod_spines)
            deal = 0
            for leaf in leaves[p * plan.leaves_per_pod : (p + 1) * plan.leaves_per_pod]:
                for j in range(plan.up):
                    spine = pod_spines[deal % n_spines]
                    deal += 1
                    self.cable(leaf, plan.down + j + 1, spine, self.take_port(spine))

        # Cores, in groups: spine k of every pod deals its uplinks (as many as its leaf cables)
        # round-robin over core group k, so every core of the group reaches every pod equally:
        # the classic Clos wiring, non-blocking above the leaves.
        if plan.tiers == 3:
            c_width = max(2, len(str(plan.cores)))
            n_cores = 0
            for k, group_size in enumerate(plan.cores_per_group):
                group = [
                    self.switch(f"{pre}core{n_cores + i + 1:0{c_width}d}", "core", f"{pre}core")
                    for i in range(group_size)
                ]
                n_cores += group_size
                deal = 0
                for pod_spines in spines_by_pod:
                    if k >= len(pod_spines):
                        continue
                    spine = pod_spines[k]
                    for _ in range(self.next_port[spine] - 1):
                        core = group[deal % group_size]
                        deal += 1
                        self.cable(spine, self.take_port(spine), core, self.take_port(core))

    def server(
        self,
        host: str,
        role: NodeRole,
        rack: str,
        ends: list[tuple[str, int]],
        gpus: int,
        model: GpuModel | None,
    ) -> None:
        """The server with HCA i cabled to ends[i] (a leaf and its port)."""
        nics = [f"mlx5_{i}" for i in range(len(ends))]
        for i, (leaf, leaf_port) in enumerate(ends):
            ca = self.guid(_KIND_CA)
            port_guid = self.guid(_KIND_PORT)
            lid = self.lid()
            self.fabric.cas.append(
                ParsedCA(
                    guid=ca,
                    description=f"{host} {nics[i]}",
                    hostname=host,
                    device=nics[i],
                    kind="host",
                    port_guids={1: port_guid},
                    lids={1: lid} if lid is not None else {},
                )
            )
            self.cable(ca, 1, leaf, leaf_port)
        node = ParsedNode(hostname=host, role=role, rack=rack)
        if gpus and model is not None:
            node.gpu_model = model.name
            node.gpus = [
                ParsedGPU(
                    index=g,
                    model=model.name,
                    memory_mib=model.memory_mib,
                    uuid=f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{self.uuid_prefix}{host}/{g}')}",
                    nvlink_generation=model.nvlink_generation,
                    nvlink_gbps=model.nvlink_gbps,
                    mig_capable=model.mig_capable,
                )
                for g in range(gpus)
            ]
            node.topology = _node_topology(model, gpus, nics)
        self.fabric.nodes.append(node)


_TOPOLOGY_CACHE: dict[tuple[str, int, tuple[str, ...]], ParsedNodeTopology] = {}


def _node_topology(model: GpuModel, gpus: int, nics: list[str]) -> ParsedNodeTopology:
    """`nvidia-smi topo -m` of a DGX-like server: all GPUs on NVSwitch, GPU i next to its own HCA.

    GPU i's own HCA is `mlx5_{i * nics // gpus}` ("PIX"); other HCAs on the same CPU socket are
    "NODE", on the other socket "SYS". Without NVLink, GPUs talk over PCIe: "NODE" / "SYS".
    Each node gets its own copy of the dicts (callers may edit one node's topology).
    """
    key = (model.name, gpus, tuple(nics))
    tpl = _TOPOLOGY_CACHE.get(key)
    if tpl is None:
        tpl = _TOPOLOGY_CACHE[key] = _build_topology(model, gpus, nics)
    return ParsedNodeTopology(
        gpus=list(tpl.gpus),
        nics=list(tpl.nics),
        gpu_links=dict(tpl.gpu_links),
        nic_affinity=dict(tpl.nic_affinity),
        numa_affinity=dict(tpl.numa_affinity),
    )


def _build_topology(model: GpuModel, gpus: int, nics: list[str]) -> ParsedNodeTopology:
    def socket(i: int, n: int) -> int:
        return (2 * i) // n

    per_link = _NVLINK_GBPS_PER_LINK.get(model.nvlink_generation, 0.0)
    nv = f"NV{round(model.nvlink_gbps / per_link)}" if model.nvlink_generation and per_link else ""
    gpu_links = {
        (i, j): nv or ("NODE" if socket(i, gpus) == socket(j, gpus) else "SYS")
        for i in range(gpus)
        for j in range(i + 1, gpus)
    }
    nic_affinity: dict[tuple[int, str], str] = {}
    for i in range(gpus):
        own = i * len(nics) // gpus
        for k, nic in enumerate(nics):
            if k == own:
                code = "PIX"
            elif socket(k, len(nics)) == socket(i, gpus):
                code = "NODE"
            else:
                code = "SYS"
            nic_affinity[(i, nic)] = code
    return ParsedNodeTopology(
        gpus=list(range(gpus)),
        nics=list(nics),
        gpu_links=gpu_links,
        nic_affinity=nic_affinity,
        numa_affinity={i: socket(i, gpus) for i in range(gpus)},
    )
