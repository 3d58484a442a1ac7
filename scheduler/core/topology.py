"""Static index of the fabric for placement: leaf groups, pods, and which links each one leans on. PURE.

    topo = build_topology(fabric)      # once per fabric version; pass it as Snapshot.topology

Domains, smallest first (the `LEVEL_*` numbers are used throughout scheduler.core):

    island (0)  GPUs of one node joined by NVLink
    node (1)    one server
    leaf (2)    a *leaf group*: the servers cabled to exactly the same set of leaf switches. In a classic
                tree that is the servers of one leaf; in a rail-optimised fabric (DGX SuperPOD) it is a
                scalable unit, whose servers reach each other through any one of the unit's rail leaves
                without touching a spine. Two groups that share a switch count as the same leaf level.
    pod (3)     leaf groups joined by one spine layer (fabric.topology.tiers pods)
    fabric (4)  anything joined only through the core

Per group the index keeps its host links and its uplinks (cables from its leaves to a higher tier), per
pod its spine-core uplinks and leaf-spine links: the live model (`scheduler.core.state`) lowers their
bandwidth by utilisation and errors each round without walking the graph again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabric.topology.distance import LEVEL_CORE, LEVEL_LEAF, LEVEL_POD, LEVEL_SAME_HOST, HopIndex
from fabric.topology.graph import FabricGraph, natural_key
from fabric.topology.tiers import Tiers, detect_tiers
from fabric.topology.types import Fabric

LEVEL_ISLAND = 0
LEVEL_NODE = 1
LEVEL_LEAF_GROUP = 2
LEVEL_POD_GROUP = 3
LEVEL_FABRIC = 4
LEVEL_NAMES = ("island", "node", "leaf", "pod", "fabric")
_FROM_HOP_LEVEL = {LEVEL_SAME_HOST: LEVEL_NODE, LEVEL_LEAF: LEVEL_LEAF_GROUP, LEVEL_POD: LEVEL_POD_GROUP}

# Link roles for the live model.
ROLE_HOST = 0  # host - leaf
ROLE_GROUP_UPLINK = 1  # leaf - spine
ROLE_POD_UPLINK = 2  # spine - core


@dataclass(slots=True)
class Group:
    id: int
    name: str  # "L3" or "leaf001-leaf008"
    label: str  # "leaf L3" or "leaf group leaf001-leaf008"
    switches: tuple[int, ...]
    hosts: list[str]
    pod: int  # -1 when the leaves are in no pod
    host_gbps: float  # capacity of the live host links, Gb/s
    uplink_gbps: float  # capacity of the live uplinks, Gb/s


@dataclass(slots=True)
class Pod:
    id: int
    label: str  # "pod 1"
    groups: list[int] = field(default_factory=list)
    down_gbps: float = 0.0  # leaf-spine capacity inside the pod
    up_gbps: float = 0.0  # spine-core capacity out of the pod


@dataclass(slots=True)
class Topology:
    fabric: Fabric
    graph: FabricGraph
    tiers: Tiers
    hops: HopIndex
    groups: list[Group]
    pods: list[Pod]
    group_of: dict[str, int]  # hostname -> group id (hosts with no live link are absent)
    host_nominal_gbps: dict[str, float]  # hostname -> capacity of its live links, Gb/s
    # link key -> (role, owner, capacity Gb/s); owner = hostname, group id or pod id. Links that are down
    # or belong to no role (switch-switch lateral cables, host-host) are absent.
    link_role: dict[str, tuple[int, object, float]]
    # hostname -> its live HCA links (rails): k of a node's G GPUs reach k/G of a rail-optimised node's HCA
    # bandwidth, but all of a single-HCA node's (costmodel.hca_reach)
    host_rails: dict[str, int] = field(default_factory=dict)
    _level_cache: dict[tuple[int, int], int] = field(default_factory=dict)

    def group_level(self, ga: int, gb: int) -> int:
        """LEVEL_LEAF_GROUP when the groups share a switch (or are one group), LEVEL_POD_GROUP through a
        spine, LEVEL_FABRIC through the core or not at all."""
        if ga == gb:
            return LEVEL_LEAF_GROUP
        key = (ga, gb) if ga < gb else (gb, ga)
        lv = self._level_cache.get(key)
        if lv is None:
            d = self.hops.distance(self.groups[ga].hosts[0], self.groups[gb].hosts[0])
            lv = _FROM_HOP_LEVEL.get(d.level, LEVEL_FABRIC) if d.reachable else LEVEL_FABRIC
            if d.level == LEVEL_CORE:
                lv = LEVEL_FABRIC
            self._level_cache[key] = lv
        return lv

    def host_level(self, a: str, b: str) -> int:
        """Level joining two hosts (LEVEL_NODE for the same host); LEVEL_FABRIC when either is unknown."""
        if a == b:
            return LEVEL_NODE
        ga, gb = self.group_of.get(a), self.group_of.get(b)
        if ga is None or gb is None:
            return LEVEL_FABRIC
        return self.group_level(ga, gb)


def build_topology(fabric: Fabric) -> Topology:
    graph = FabricGraph.build(fabric)
    tiers = detect_tiers(graph)
    hops = HopIndex.from_graph(graph, tiers)
    links = graph.links

    by_set: dict[frozenset[int], list[int]] = {}
    for h, hl in enumerate(graph.host_links):
        sws = frozenset(s for s, _ in hl)
        if sws:
            by_set.setdefault(sws, []).append(h)

    groups: list[Group] = []
    group_of: dict[str, int] = {}
    link_role: dict[str, tuple[int, object, float]] = {}
    host_nominal: dict[str, float] = {}
    host_rails: dict[str, int] = {}
    ordered = sorted(by_set.items(), key=lambda kv: min(graph.switch_sort[s] for s in kv[0]))
    for sws, hosts in ordered:
        gid = len(groups)
        sw_sorted = sorted(sws, key=lambda s: graph.switch_sort[s])
        names = [graph.switch_names[s] for s in sw_sorted]
        name = names[0] if len(names) == 1 else f"{names[0]}-{names[-1]}"
        label = f"leaf {name}" if len(names) == 1 else f"leaf group {name}"
        pods = [tiers.pod[s] for s in sw_sorted if tiers.pod[s] >= 0]
        host_keys = sorted((graph.host_keys[h] for h in hosts), key=natural_key)
        host_gbps = 0.0
        for h in hosts:
            key = graph.host_keys[h]
            group_of[key] = gid
            cap = 0.0
            for _, li in graph.host_links[h]:
                link = links[li]
                cap += link.capacity_gbps
                link_role[link.key] = (ROLE_HOST, key, link.capacity_gbps)
            host_nominal[key] = cap
            host_rails[key] = len(graph.host_links[h])
            host_gbps += cap
        groups.append(Group(gid, name, label, tuple(sw_sorted), host_keys, min(pods) if pods else -1, host_gbps, 0.0))

    # Uplinks: a leaf's cables to a higher tier. A leaf shared by several groups (partly cabled servers)
    # lends its uplinks to the group that holds most of its hosts' capacity; its other groups share the
    # leaf and are priced at the leaf level against that group anyway.
    owner_of_switch: dict[int, int] = {}
    for g in sorted(groups, key=lambda g: -g.host_gbps):
        for s in g.switches:
            owner_of_switch.setdefault(s, g.id)
    pods = [Pod(p, f"pod {p + 1}") for p in range(tiers.n_pods)]
    for g in groups:
        if g.pod >= 0:
            pods[g.pod].groups.append(g.id)
    level = tiers.level
    for li, link in enumerate(links):
        if graph.link_kind[li] != 0 or not link.up:  # switch-switch, live
            continue
        a, b = graph.end_a[li], graph.end_b[li]
        if level[a] > level[b]:
            a, b = b, a
        la, lb = level[a], level[b]
        if la < 0 or lb <= la:
            continue  # lateral or unknown
        if la == 0:
            gid = owner_of_switch.get(a)
            if gid is not None:
                groups[gid].uplink_gbps += link.capacity_gbps
                link_role[link.key] = (ROLE_GROUP_UPLINK, gid, link.capacity_gbps)
            p = tiers.pod[a]
            if p >= 0:
                pods[p].down_gbps += link.capacity_gbps
        elif la == 1:
            p = tiers.pod[a]
            if p >= 0:
                pods[p].up_gbps += link.capacity_gbps
                link_role[link.key] = (ROLE_POD_UPLINK, p, link.capacity_gbps)
    return Topology(
        fabric=fabric,
        graph=graph,
        tiers=tiers,
        hops=hops,
        groups=groups,
        pods=pods,
        group_of=group_of,
        host_nominal_gbps=host_nominal,
        link_role=link_role,
        host_rails=host_rails,
    )
