"""The simulated cluster: a spec string (or a real inventory) -> nodes, GPUs, NVLink islands, leaves. PURE.

    spec = parse_cluster_spec("16x4/4:2")     # 16 nodes x 4 GPUs, 4 nodes per leaf, leaves 2:1 oversubscribed
    cluster = build_cluster(spec)             # two-tier fat tree, indexed by the engine's build_topology

Spec grammar: `NODESxGPUS[/NODES_PER_LEAF][:OVERSUB]`, e.g. `2x4`, `32x4`, `16x4/4`, `16x4/4:2`. Without
`/NODES_PER_LEAF` every node hangs off one leaf (the Tiresias simulator's single switch); the
oversubscription is host capacity over uplink capacity at each leaf (2 = 2:1), the leaves joined by a
spine layer. The GPUs are V100s (NVLink joins the GPUs of a node into one island) and each node has one
EDR HCA, unless `gpu_model` / `link_rate` say otherwise. A Tiresias cluster-spec file (`num_switch,num_node_p_switch,
num_gpu_p_node,...`, e.g. its `n32g4.csv`) is read by `load_tiresias_cluster_spec`.

`SimCluster.from_inventory(fabric, nodes)` takes a real inventory instead (the `replay` command builds it
from a cluster in the database with the production adapter): the engine's `NodeState`s and `Fabric`.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from fabric.topology.catalog import GPU_MODELS
from fabric.topology.link_speeds import SPEED_DATA_4X_GBPS, SPEEDS
from fabric.topology.types import Fabric, THost, TLink, TSwitch
from scheduler.core.topology import LEVEL_FABRIC, LEVEL_LEAF_GROUP, Topology, build_topology
from scheduler.core.types import GpuState, NodeState

_SPEC_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*(?:/\s*(\d+)\s*)?(?::\s*(\d+(?:\.\d+)?)\s*)?$")


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    nodes: int
    gpus_per_node: int
    nodes_per_leaf: int | None = None  # None: one leaf holds every node
    oversubscription: float = 1.0
    gpu_model: str = "V100"
    link_rate: str = "EDR"

    @property
    def label(self) -> str:
        s = f"{self.nodes}x{self.gpus_per_node}"
        if self.nodes_per_leaf is not None:
            s += f"/{self.nodes_per_leaf}"
        if self.oversubscription != 1.0:
            s += f":{self.oversubscription:g}"
        return s

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def looks_like_spec(text: str) -> bool:
    return bool(_SPEC_RE.match(text))


def parse_cluster_spec(text: str, gpu_model: str = "V100", link_rate: str = "EDR") -> ClusterSpec:
    """`NODESxGPUS[/NODES_PER_LEAF][:OVERSUB]`; ValueError names what is wrong."""
    m = _SPEC_RE.match(text)
    if not m:
        raise ValueError(
            f"cluster spec {text!r} is not NODESxGPUS[/NODES_PER_LEAF][:OVERSUB] (e.g. 2x4, 32x4, 16x4/4:2)"
        )
    nodes, gpus = int(m.group(1)), int(m.group(2))
    per_leaf = int(m.group(3)) if m.group(3) else None
    oversub = float(m.group(4)) if m.group(4) else 1.0
    if nodes < 1 or gpus < 1:
        raise ValueError(f"cluster spec {text!r}: nodes and GPUs per node must be >= 1")
    if per_leaf is not None and per_leaf < 1:
        raise ValueError(f"cluster spec {text!r}: nodes per leaf must be >= 1")
    if oversub < 1:
        raise ValueError(f"cluster spec {text!r}: oversubscription must be >= 1 (2 means 2:1)")
    if per_leaf is None and oversub != 1.0:
        raise ValueError(f"cluster spec {text!r}: an oversubscription needs /NODES_PER_LEAF (one leaf has no uplinks)")
    model = gpu_model.strip().upper()
    if model not in GPU_MODELS:
        raise ValueError(f"unknown GPU model {gpu_model!r}; known: {', '.join(GPU_MODELS)}")
    rate = link_rate.strip().upper()
    if rate not in SPEEDS:
        raise ValueError(f"unknown link rate {link_rate!r}; known: {', '.join(SPEEDS)}")
    return ClusterSpec(nodes, gpus, per_leaf, oversub, model, rate)


def load_tiresias_cluster_spec(path: str | Path, gpu_model: str = "V100", link_rate: str = "EDR") -> ClusterSpec:
    """A Tiresias simulator cluster-spec CSV (`num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,
    mem_p_node`, one data row): switches become leaves of `num_node_p_switch` nodes."""
    p = Path(path)
    with p.open(newline="") as fh:
        rows = list(csv.reader(fh))
    need = ("num_switch", "num_node_p_switch", "num_gpu_p_node")
    if not rows or any(c not in [h.strip() for h in rows[0]] for c in need):
        raise ValueError(f"{p}:1: a Tiresias cluster spec needs the columns {', '.join(need)}")
    header = [h.strip() for h in rows[0]]
    data = [r for r in rows[1:] if any(c.strip() for c in r)]
    if len(data) != 1:
        raise ValueError(f"{p}: a Tiresias cluster spec has exactly one data row, found {len(data)}")
    row = dict(zip(header, data[0], strict=False))
    values = {}
    for c in need:
        v = (row.get(c) or "").strip()
        if not v.isdigit() or int(v) < 1:
            raise ValueError(f"{p}:2: {c} {v!r} is not a whole number >= 1")
        values[c] = int(v)
    nodes = values["num_switch"] * values["num_node_p_switch"]
    per_leaf = values["num_node_p_switch"] if values["num_switch"] > 1 else None
    return ClusterSpec(nodes, values["num_gpu_p_node"], per_leaf, 1.0, gpu_model.upper(), link_rate.upper())


def build_cluster(spec: ClusterSpec) -> SimCluster:
    """A two-tier fat tree of the spec's shape: node i on leaf i // NODES_PER_LEAF through one HCA of the
    spec's rate; every leaf cabled to two spines with uplinks of (its hosts' capacity / OVERSUB) in all.
    Capacities are what the engine's topology index and the runtime model read, so any leaf size and any
    oversubscription can be modelled (no port counting)."""
    rate = SPEED_DATA_4X_GBPS[spec.link_rate]
    model = GPU_MODELS[spec.gpu_model]
    per_leaf = spec.nodes_per_leaf if spec.nodes_per_leaf is not None else spec.nodes
    n_leaves = math.ceil(spec.nodes / per_leaf)
    switches = [TSwitch(f"leaf{k + 1:03d}", f"leaf{k + 1:03d}", "leaf") for k in range(n_leaves)]
    spines = [TSwitch(f"spine{k + 1:02d}", f"spine{k + 1:02d}", "spine") for k in range(2)] if n_leaves > 1 else []
    hosts: list[THost] = []
    links: list[TLink] = []
    nodes: list[NodeState] = []
    gid = 0
    for i in range(spec.nodes):
        host = f"gpu{i + 1:04d}"
        leaf = switches[i // per_leaf].key
        hosts.append(THost(host))
        links.append(TLink(f"{host}-{leaf}", host, leaf, rate, speed=spec.link_rate))
        gpus = []
        for g in range(spec.gpus_per_node):
            gid += 1
            gpus.append(GpuState(gid, g, model.name, model.memory_mib, nvlink_gbps=model.nvlink_gbps))
        islands = (tuple(range(spec.gpus_per_node)),) if model.nvlink_gbps > 0 else ()
        nodes.append(NodeState(host, gpus=tuple(gpus), nvlink_islands=islands, hca_gbps=rate))
    for k, leaf in enumerate(switches):
        count = min(per_leaf, spec.nodes - k * per_leaf)
        for spine in spines:
            cap = count * rate / spec.oversubscription / len(spines)
            links.append(TLink(f"{leaf.key}-{spine.key}", leaf.key, spine.key, cap))
    fabric = Fabric(switches=switches + spines, hosts=hosts, links=links)
    return SimCluster.from_inventory(fabric, nodes, label=spec.label, spec=spec)


class SimCluster:
    """Static view of the cluster the simulator and every policy share (GPUs by position 0..N-1)."""

    def __init__(
        self,
        fabric: Fabric,
        nodes: list[NodeState],
        topology: Topology,
        label: str,
        spec: ClusterSpec | None = None,
    ) -> None:
        self.fabric = fabric
        self.topology = topology
        self.label = label
        self.spec = spec
        self.node_states = nodes
        self.hostnames = [n.hostname for n in nodes]
        self.gpu_ids: list[int] = []  # position -> GpuState.id
        self.gpu_node: list[int] = []  # position -> node index
        self.gpu_index: list[int] = []  # position -> device index on its node
        self.node_gpus: list[list[int]] = []  # node index -> GPU positions
        self.gpu_island: list[int] = []  # position -> island number (global)
        self.gpu_model: list[str] = []
        self.gpu_nvlink: list[float] = []
        island = 0
        for ni, ns in enumerate(nodes):
            pos_of: dict[int, int] = {}
            mine = []
            for g in ns.gpus:
                p = len(self.gpu_ids)
                self.gpu_ids.append(g.id)
                self.gpu_node.append(ni)
                self.gpu_index.append(g.index)
                self.gpu_model.append(g.model)
                self.gpu_nvlink.append(g.nvlink_gbps)
                self.gpu_island.append(-1)
                pos_of[g.index] = p
                mine.append(p)
            self.node_gpus.append(mine)
            for isl in ns.nvlink_islands:
                members = [pos_of[i] for i in isl if i in pos_of and self.gpu_island[pos_of[i]] < 0]
                if members:
                    for p in members:
                        self.gpu_island[p] = island
                    island += 1
            for p in mine:
                if self.gpu_island[p] < 0:
                    self.gpu_island[p] = island
                    island += 1
        self.pos_of_id = {gid: p for p, gid in enumerate(self.gpu_ids)}
        self.n_gpus = len(self.gpu_ids)
        self.n_nodes = len(nodes)
        # Leaves (the engine's leaf groups), pods and the capacities the runtime model shares out, GB/s.
        self.node_group: list[int] = []
        self.node_pod: list[int] = []
        self.node_nic_gbs: list[float] = []
        for i, ns in enumerate(nodes):
            g = topology.group_of.get(ns.hostname)
            if g is None:
                self.node_group.append(-1 - i)
                self.node_pod.append(-1 - i)
                self.node_nic_gbs.append(ns.hca_gbps / 8.0)
            else:
                self.node_group.append(g)
                self.node_pod.append(topology.groups[g].pod)
                self.node_nic_gbs.append(topology.host_nominal_gbps.get(ns.hostname, ns.hca_gbps) / 8.0)
        self.group_uplink_gbs = {g.id: g.uplink_gbps / 8.0 for g in topology.groups}
        self.pod_uplink_gbs = {p.id: p.up_gbps / 8.0 for p in topology.pods}
        self.host_links: dict[int, list[str]] = {}  # node index -> link keys (host <-> leaf)
        self.group_links: dict[int, list[str]] = {}  # group -> uplink keys
        self.pod_links: dict[int, list[str]] = {}
        index_of = {h: i for i, h in enumerate(self.hostnames)}
        for key, (role, owner, _cap) in topology.link_role.items():
            if role == 0 and owner in index_of:
                self.host_links.setdefault(index_of[owner], []).append(key)
            elif role == 1:
                self.group_links.setdefault(owner, []).append(key)  # type: ignore[arg-type]
            elif role == 2:
                self.pod_links.setdefault(owner, []).append(key)  # type: ignore[arg-type]
        self.max_gpus_per_node = max((len(g) for g in self.node_gpus), default=0)
        self._leaves: tuple[tuple[int, ...], ...] | None = None

    @classmethod
    def from_inventory(
        cls,
        fabric: Fabric,
        nodes: list[NodeState],
        topology: Topology | None = None,
        label: str = "",
        spec: ClusterSpec | None = None,
    ) -> SimCluster:
        """Nodes as the engine sees them; occupancy, load and health are cleared (a replay starts empty),
        nodes without GPUs or not schedulable are left out."""
        clean = []
        for ns in nodes:
            if not ns.gpus or not ns.schedulable or not ns.up or ns.storage:
                continue
            gpus = tuple(GpuState(g.id, g.index, g.model, g.memory_mib, nvlink_gbps=g.nvlink_gbps) for g in ns.gpus)
            clean.append(replace(ns, gpus=gpus))
        if not clean:
            raise ValueError("the cluster has no schedulable node with GPUs")
        models = {g.model for ns in clean for g in ns.gpus}
        if len(models) > 1:
            raise ValueError(f"the replay needs one GPU model; the cluster has {', '.join(sorted(models))}")
        topo = topology if topology is not None else build_topology(fabric)
        total = sum(len(ns.gpus) for ns in clean)
        return cls(fabric, clean, topo, label or f"{len(clean)} nodes / {total} GPUs")

    # ------------------------------------------------------------------ geometry

    def level_of(self, positions) -> int:
        """Smallest domain holding these GPUs: 0 island, 1 node, 2 leaf, 3 pod, 4 fabric."""
        nodes = {self.gpu_node[p] for p in positions}
        if len(nodes) == 1:
            return 0 if len({self.gpu_island[p] for p in positions}) == 1 else 1
        groups = {self.node_group[n] for n in nodes}
        if len(groups) == 1:
            return LEVEL_LEAF_GROUP
        level = LEVEL_LEAF_GROUP
        gs = sorted(groups)
        for g in gs[1:]:
            if gs[0] < 0 or g < 0:
                return LEVEL_FABRIC
            level = max(level, self.topology.group_level(gs[0], g))
        return level

    def leaves(self) -> tuple[tuple[int, ...], ...]:
        """Node indexes per leaf, leaves and nodes in inventory order (Tiresias' switches); built once."""
        if self._leaves is None:
            order: dict[int, list[int]] = {}
            for i in range(self.n_nodes):
                order.setdefault(self.node_group[i], []).append(i)
            self._leaves = tuple(tuple(v) for v in order.values())
        return self._leaves

    def leaves_in_order(self) -> list[list[int]]:
        """`leaves()` as fresh lists (the caller may change them)."""
        return [list(v) for v in self.leaves()]
