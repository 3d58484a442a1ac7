"""The fabric topic: switches, nodes and links with their load and state, laid out; one group per leaf above
AGGREGATE_ABOVE nodes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dashboard.selectors.cluster import _Cabling, _Cluster
from fabric.choices import LinkState, NodeState
from fabric.collectors.samples import FABRIC_SOURCE
from fabric.models import Link
from fabric.topology.graph import natural_key
from fabric.topology.layout import Layout, LayoutLink, LayoutNode, LayoutSwitch, layout

AGGREGATE_ABOVE = 256  # nodes: beyond this the fabric topic shows one group per leaf
ERROR_FREE_RULES = frozenset({"port_congestion"})  # port alerts that do not mean a sick link


def _link_errors(cab: _Cabling, open_alerts: list[tuple]) -> set[int]:
    """Links with an open port alert that means errors (not congestion) on either end."""
    out: set[int] = set()
    for rule, _, kind, key in open_alerts:
        if kind != "port" or rule in ERROR_FREE_RULES:
            continue
        node, device, port = [*key.split("/"), "", "", ""][:3]
        if not port.isdigit():
            continue
        if node == FABRIC_SOURCE:
            device = device.lower().removeprefix("0x")
        link_id = cab.port_link.get((node, device, int(port)))
        if link_id is not None:
            out.add(link_id)
    return out


@dataclass(frozen=True, slots=True)
class FabricLoad:
    """Where the latest load goes in a built fabric state (`fabric_with_load`), in the state's order: per link the
    ids of the links it shows (itself, or the host links a group's link folds), per switch the drawn links it ends."""

    links: tuple[tuple[int, ...], ...]
    switches: tuple[tuple[int, ...], ...]


def fabric(c: _Cluster) -> dict:
    return fabric_and_load(c)[0]


def fabric_and_load(c: _Cluster) -> tuple[dict, FabricLoad]:
    """The topic's state, and where telemetry's load goes in it."""
    cab = c.cabling
    topo = cab.topology
    node_rows = c.nodes  # before the load: its host names come from these rows
    util = c.link_util
    errors = _link_errors(cab, c.open_alerts)
    links: list[dict] = []
    at_switch: dict[int, list[int]] = defaultdict(list)
    for pk, capacity, state in Link.objects.filter(cluster_id=c.id).values_list("pk", "capacity_gbps", "state"):
        ends = cab.ends.get(pk)
        if ends is None:
            continue  # an end on an aggregation node or a router (or cabled since the cabling was read): not drawn
        for kind, end_id in ends.values():
            if kind == "switch":
                at_switch[end_id].append(pk)
        links.append({"id": pk, "a": ends["a"], "b": ends["b"], "capacity_gbps": capacity, "state": state,
                      "util": round(util.get(pk, 0.0), 2), "errors": pk in errors})  # fmt: skip
    index = topo.graph.switch_index
    switches = []
    for pk, guid, name in sorted(cab.switches, key=lambda s: natural_key(s[2])):
        i = index[guid]
        switches.append({"id": pk, "name": name, "tier": topo.tiers.level[i], "role": topo.tiers.role[i],
                         "hottest": _hottest(util, at_switch.get(pk, ()))})  # fmt: skip
    switch_links = tuple(tuple(at_switch.get(s["id"], ())) for s in switches)
    nodes = [
        {"id": pk, "hostname": hostname, "role": role, "state": state, "leaf": cab.leaf_id(hostname), "gpus": n}
        for pk, hostname, role, state, n in sorted(node_rows, key=lambda n: natural_key(n[1]))
    ]
    places = _positions(cab, switches, nodes, links)
    for s in switches:
        s["x"], s["y"] = places.switches[s["id"]].x, places.switches[s["id"]].y
    if len(nodes) <= AGGREGATE_ABOVE:
        for n in nodes:
            n["x"], n["y"] = places.nodes[n["id"]].x, places.nodes[n["id"]].y
        state = {"switches": switches, "nodes": nodes, "links": links, "aggregated": False}
        return state, FabricLoad(tuple((k["id"],) for k in links), switch_links)
    folded, members = _aggregate(nodes, links, {s["id"]: s["name"] for s in switches})
    hosts: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        hosts[places.group_of.get(n["id"], "leaf:none")].append(n["hostname"])
    for g in folded["nodes"]:
        at = places.nodes.get(g["id"])
        g["x"], g["y"] = (at.x, at.y) if at else (0.0, 0.0)
        g["storage"] = at.storage if at else 0
        g["hosts"] = hosts.get(g["id"], [])
    return {"switches": switches, **folded, "aggregated": True}, FabricLoad(members, switch_links)


def fabric_with_load(state: dict, where: FabricLoad, c: _Cluster) -> dict:
    """`state` (built with `where`) with the links' latest load and each switch's hottest link: a new state, `state`
    is not changed. The same as a new build while nothing but the load changed."""
    util = c.link_util
    shown: dict[int, float] = {}
    links = []
    for item, ids in zip(state["links"], where.links, strict=True):
        u = 0.0
        for pk in ids:
            v = shown.get(pk)
            if v is None:
                v = shown[pk] = round(util.get(pk, 0.0), 2)
            if v > u:
                u = v
        links.append(item if item["util"] == u else {**item, "util": u})
    switches = []
    for item, ids in zip(state["switches"], where.switches, strict=True):
        h = _hottest(util, ids)
        switches.append(item if item["hottest"] == h else {**item, "hottest": h})
    return {**state, "switches": switches, "links": links}


def _hottest(util: dict[int, float], link_ids) -> float:
    return round(max((util.get(pk, 0.0) for pk in link_ids), default=0.0), 2)


def _positions(cab: _Cabling, switches: list[dict], nodes: list[dict], links: list[dict]) -> Layout:
    """Where the fabric page draws each switch and node (fabric.topology.layout, pure): computed once per cabling,
    since node states and load do not move anything."""
    cached = getattr(cab, "_layout", None)
    if cached is None:
        cached = layout(
            [LayoutSwitch(s["id"], s["tier"], s["name"]) for s in switches],
            [LayoutNode(n["id"], n["leaf"], n["role"], n["hostname"]) for n in nodes],
            [LayoutLink(tuple(k["a"]), tuple(k["b"])) for k in links if k["a"][0] == k["b"][0] == "switch"],
            aggregate_above=AGGREGATE_ABOVE,
        )
        cab._layout = cached
    return cached


def _group_state(states: dict[str, int]) -> str:
    if set(states) == {NodeState.UP}:
        return NodeState.UP
    if not states.get(NodeState.UP):
        return NodeState.DOWN if set(states) == {NodeState.DOWN} else NodeState.DRAIN
    return "mixed"


def _aggregate(
    nodes: list[dict], links: list[dict], switch_names: dict[int, str]
) -> tuple[dict, tuple[tuple[int, ...], ...]]:
    """One node entry per leaf, and the host links of each (switch, group) folded into one; with, per link out, the
    ids of the links it shows."""
    groups: dict[int | None, dict] = {}
    group_of: dict[int, str] = {}
    for n in nodes:
        g = groups.get(n["leaf"])
        if g is None:
            gid = f"leaf:{n['leaf']}" if n["leaf"] is not None else "leaf:none"
            g = groups[n["leaf"]] = {"id": gid, "hostname": switch_names.get(n["leaf"], "unattached"),
                                     "role": "group", "state": "up", "leaf": n["leaf"], "gpus": 0, "members": 0,
                                     "states": defaultdict(int)}  # fmt: skip
        g["gpus"] += n["gpus"]
        g["members"] += 1
        g["states"][n["state"]] += 1
        group_of[n["id"]] = g["id"]
    for g in groups.values():
        g["hostname"] = f"{g['hostname']}: {g['members']} nodes"
        g["states"] = dict(g["states"])
        g["state"] = _group_state(g["states"])
    out_links: list[dict] = []
    members: list[list[int]] = []
    folded: dict[tuple, dict] = {}
    folded_members: dict[tuple, list[int]] = {}
    for link in links:
        ends = [link["a"], link["b"]]
        host = next((e for e in ends if e[0] == "node"), None)
        switch = next((e for e in ends if e[0] == "switch"), None)
        if host is None or switch is None:
            out_links.append(link)
            members.append([link["id"]])
            continue
        gid = group_of[host[1]]
        key = (switch[1], gid)
        f = folded.get(key)
        if f is None:
            fid = gid if gid == f"leaf:{switch[1]}" else f"{gid}@{switch[1]}"
            f = folded[key] = {"id": fid, "a": switch, "b": ["node", gid], "capacity_gbps": 0.0, "states": {},
                               "util": 0.0, "errors": False, "members": 0}  # fmt: skip
            out_links.append(f)
            members.append(folded_members.setdefault(key, []))
        folded_members[key].append(link["id"])
        f["capacity_gbps"] += link["capacity_gbps"]
        f["states"][link["state"]] = f["states"].get(link["state"], 0) + 1
        f["util"] = max(f["util"], link["util"])
        f["errors"] = f["errors"] or link["errors"]
        f["members"] += 1
    for f in folded.values():
        states = f.pop("states")
        f["state"] = (LinkState.UP if set(states) == {LinkState.UP}
                      else LinkState.DOWN if set(states) == {LinkState.DOWN} else LinkState.DEGRADED)  # fmt: skip
    return {"nodes": list(groups.values()), "links": out_links}, tuple(tuple(m) for m in members)
