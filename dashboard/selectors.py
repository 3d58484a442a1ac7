"""What the live views show, topic by topic (docs/dashboard.md): plain JSON-ready dicts, bounded queries.

`build(cluster_id, topics)` returns the current state of each topic; the broadcaster diffs it against what it
sent last, the sockets send it as a snapshot. One build shares its reads between topics (`_Cluster`), and each
topic reads a fixed number of rows sets whatever the cluster size (tests/dashboard/test_selectors.py). Queries per
topic alone, the cluster row included:

| topic    | queries | + once per cabling | cache reads |
|----------|---------|--------------------|-------------|
| overview | 7       | -                  | latest load of every node (one get_many), the trend ring |
| fabric   | 9       | 4                  | latest load of every node |
| gpus     | 9       | 4                  | latest load of every node |
| alerts   | 2       | -                  | - |
| queue    | 10      | 4                  | - |

The cabling (switches, link ends, tiers, paths between leaves: fabric.topology, pure) is kept per process while
fabric.selectors.fabric_version is unchanged (five of the queries above). Measured on PostgreSQL: all five topics
of the demo cluster (128 x 8 H100, 1,024 GPUs) in about 40 ms; 1,250 x 8 (10,000 GPUs) in about 0.25-0.6 s.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

from django.db.models import Count, Exists, Max, Min, OuterRef, Q
from django.utils import timezone

from dashboard.topics import TOPICS
from fabric.choices import AlertSeverity, CaKind, GpuHealth, LinkState, NodeState, RoleSource
from fabric.collectors.samples import FABRIC_SOURCE
from fabric.latest import node_loads
from fabric.models import GPU, Alert, Cluster, Link, Node, Port, Switch
from fabric.selectors import fabric_version
from fabric.telemetry.imbalance import IDLE_BELOW, spread
from fabric.topology.graph import FabricGraph, natural_key
from fabric.topology.layout import Layout, LayoutLink, LayoutNode, LayoutSwitch, layout
from fabric.topology.tiers import Tiers, detect_tiers
from fabric.topology.types import Fabric, THost, TLink, TSwitch
from scheduler.choices import ACTIVE_STATUSES, JobStatus
from scheduler.models import Allocation, Job, JobEvent, PriorityClass, SchedulingRound
from scheduler.selectors import queue_entries

AGGREGATE_ABOVE = 256  # nodes: beyond this the fabric topic shows one group per leaf
ALERTS_LIMIT = 500
ALERTS_CLEARED_WITHIN = timedelta(hours=24)
RECENT_LIMIT = 50  # preemptions and migrations in the queue topic
RECENT_KINDS = {JobStatus.PREEMPTED: "preempted", JobStatus.MIGRATING: "migrated"}
NO_ROUND_YET = "waiting for the next scheduling round"
GPU_METRICS_UNITS = {"util": "%", "mem_used": "MiB", "temp": "°C", "power": "W"}
ERROR_FREE_RULES = frozenset({"port_congestion"})  # port alerts that do not mean a sick link


def iso(dt: datetime | None) -> str | None:
    """UTC ISO 8601 with a Z, or None."""
    if dt is None:
        return None
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


#
# Topology derived from the inventory rows: tiers, each host's leaf, links on the shortest paths between leaves.
#


class _Topology:
    """Pure analysis of one cabling, kept while the cabling is unchanged. Thread-safe enough: every cache
    here is a dict filled with values that are always the same for the same key."""

    def __init__(self, fabric: Fabric) -> None:
        self.graph = FabricGraph.build(fabric)
        self.tiers: Tiers = detect_tiers(self.graph)
        g, level = self.graph, self.tiers.level
        # A host's leaf: of the switches it is cabled to (up or down), the lowest tier, then the name.
        self.leaf_of: dict[str, str] = {}
        for h, links in enumerate(g.host_links_all):
            switches = {s for s, _ in links}
            if switches:
                best = min(switches, key=lambda s: (level[s] if level[s] >= 0 else 99, g.switch_sort[s]))
                self.leaf_of[g.host_keys[h]] = g.switch_keys[best]
        self._dist: dict[int, list[int]] = {}
        self._pairs: dict[tuple[int, int], frozenset[int]] = {}

    def _distances(self, src: int) -> list[int]:
        dist = self._dist.get(src)
        if dist is None:
            g = self.graph
            dist = [-1] * g.n_switches
            dist[src] = 0
            frontier = [src]
            while frontier:
                nxt = []
                for v in frontier:
                    for w, _ in g.sw_adj[v]:
                        if dist[w] < 0:
                            dist[w] = dist[v] + 1
                            nxt.append(w)
                frontier = nxt
            self._dist[src] = dist
        return dist

    def path_links(self, a: int, b: int) -> frozenset[int]:
        """Ids of the switch links on every shortest path between switches a and b (up links only); in a fat
        tree these are the up/down paths: up to the lowest common tier and down again."""
        if a > b:
            a, b = b, a
        found = self._pairs.get((a, b))
        if found is None:
            da, db = self._distances(a), self._distances(b)
            total = da[b]
            out: set[int] = set()
            if total > 0:
                g = self.graph
                for v in range(g.n_switches):
                    if da[v] < 0 or db[v] < 0 or da[v] + db[v] != total:
                        continue
                    for w, li in g.sw_adj[v]:
                        if da[w] == da[v] + 1 and db[w] == db[v] - 1:
                            out.add(int(g.links[li].key))
            found = self._pairs[(a, b)] = frozenset(out)
        return found

    def job_links(self, hosts: Iterable[str]) -> list[int]:
        """The links a job's traffic uses: the host links of its nodes, and the switch links on the shortest
        paths between them. Like the twin routes it: a host's rail (its link to one switch) reaches a host
        cabled to the same switch there, else the nearest of that host's switches through the fabric."""
        g = self.graph
        links: set[int] = set()
        groups: set[frozenset[int]] = set()  # hosts cabled to the same switches talk through them alone
        for host in hosts:
            h = g.host_index.get(host)
            if h is None:
                continue
            for _, li in g.host_links[h]:
                links.add(int(g.links[li].key))
            groups.add(frozenset(s for s, _ in g.host_links[h]))
        ordered = sorted(groups, key=sorted)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                for src, dst in ((a, b), (b, a)):
                    for s in src:
                        if s in dst:
                            continue
                        dist = self._distances(s)
                        reachable = [t for t in dst if dist[t] > 0]
                        if reachable:
                            nearest = min(dist[t] for t in reachable)
                            for t in reachable:
                                if dist[t] == nearest:
                                    links |= self.path_links(s, t)
        return sorted(links)


@dataclass
class _Cabling:
    """What changes only with the cabling: the switches, the two ends of every link, the port -> link map that
    alerts name, and the topology. Four queries; kept per process while fabric_version is unchanged (5 small
    aggregate queries), as the scheduler's and ingest's caches of the fabric are."""

    version: tuple
    switches: list[tuple]  # (pk, guid, name)
    switch_id: dict[str, int]  # guid -> pk
    ends: dict[int, dict[str, list]]  # link -> end -> ["switch" | "node", pk]
    port_link: dict[tuple[str, str, int], int]  # (hostname or FABRIC_SOURCE, device or guid, port) -> link
    topology: _Topology

    @classmethod
    def load(cls, cluster_id: int, version: tuple) -> _Cabling:
        switches = list(
            Switch.objects.filter(cluster_id=cluster_id).values_list("pk", "guid", "name", "role", "role_source")
        )
        hosts = list(Node.objects.filter(cluster_id=cluster_id).values_list("hostname", "role"))
        ports = Port.objects.filter(cluster_id=cluster_id, link__isnull=False).values_list(
            "link_id", "link_end", "number", "switch_id", "switch__guid", "hca__kind", "hca__device",
            "hca__node_id", "hca__node__hostname",
        )  # fmt: skip
        ends: dict[int, dict[str, list]] = {}
        vertex: dict[int, dict[str, tuple[str, int]]] = {}  # link -> end -> (graph key, port number)
        port_link: dict[tuple[str, str, int], int] = {}
        for link_id, end, number, switch_id, guid, ca_kind, device, node_id, hostname in ports:
            if switch_id:
                ends.setdefault(link_id, {})[end] = ["switch", switch_id]
                vertex.setdefault(link_id, {})[end] = (guid, number)
                port_link[(FABRIC_SOURCE, guid, number)] = link_id
            elif ca_kind == CaKind.HOST and node_id:
                ends.setdefault(link_id, {})[end] = ["node", node_id]
                vertex.setdefault(link_id, {})[end] = (hostname, number)
                port_link[(hostname, device, number)] = link_id
        links = Link.objects.filter(cluster_id=cluster_id).values_list(
            "pk", "capacity_gbps", "state", "width", "speed", "supported_gbps"
        )
        # The same graph as fabric.graph_from_db.fabric_for_cluster builds, from the rows read here.
        fabric = Fabric(
            switches=[
                TSwitch(key=guid, name=name, role=role if source == RoleSource.SET else "")
                for _, guid, name, role, source in switches
            ],
            hosts=[THost(key=hostname, role=role) for hostname, role in hosts],
            links=[
                TLink(key=str(pk), a=vertex[pk]["a"][0], b=vertex[pk]["b"][0], capacity_gbps=capacity,
                      up=state != LinkState.DOWN, width=width, speed=speed, supported_gbps=supported,
                      a_port=vertex[pk]["a"][1], b_port=vertex[pk]["b"][1])
                for pk, capacity, state, width, speed, supported in links.iterator(chunk_size=5000)
                if len(vertex.get(pk, ())) == 2
            ],
        )  # fmt: skip
        return cls(
            version=version,
            switches=[(pk, guid, name or guid) for pk, guid, name, _, _ in switches],
            switch_id={guid: pk for pk, guid, *_ in switches},
            ends={k: v for k, v in ends.items() if len(v) == 2},
            port_link=port_link,
            topology=_Topology(fabric),
        )

    def leaf_id(self, hostname: str) -> int | None:
        guid = self.topology.leaf_of.get(hostname)
        return self.switch_id.get(guid) if guid else None


_CABLING: dict[int, _Cabling] = {}
_CABLING_LOCK = threading.Lock()


def cabling(cluster_id: int) -> _Cabling:
    version = fabric_version(cluster_id)
    cached = _CABLING.get(cluster_id)
    if cached is None or cached.version != version:
        cached = _Cabling.load(cluster_id, version)
        with _CABLING_LOCK:
            _CABLING[cluster_id] = cached
    return cached


class _Cluster:
    """One build's shared reads, each loaded on first use."""

    def __init__(self, cluster_id: int) -> None:
        self.id = cluster_id

    @cached_property
    def row(self) -> dict | None:
        return Cluster.objects.filter(pk=self.id).values("id", "name").first()

    @cached_property
    def cabling(self) -> _Cabling:
        return cabling(self.id)

    @cached_property
    def nodes(self) -> list[tuple]:
        """(pk, hostname, role, state, GPUs) of every node."""
        return list(
            Node.objects.filter(cluster_id=self.id)
            .annotate(n_gpus=Count("gpus"))
            .order_by()
            .values_list("pk", "hostname", "role", "state", "n_gpus")
        )

    @cached_property
    def hostnames(self) -> list[str]:
        if "nodes" in self.__dict__:
            return [row[1] for row in self.nodes]
        return list(Node.objects.filter(cluster_id=self.id).values_list("hostname", flat=True))

    @cached_property
    def loads(self) -> dict[str, dict]:
        return node_loads(self.id, self.hostnames)

    @cached_property
    def link_util(self) -> dict[int, float]:
        """Raw utilisation of each link (the busier end), from telemetry's latest state."""
        out: dict[int, float] = {}
        for load in self.loads.values():
            for link_id, u in load.get("links", {}).items():
                link_id = int(link_id)
                if u > out.get(link_id, -1.0):
                    out[link_id] = u
        return out

    @cached_property
    def gpu_metrics(self) -> dict[int, tuple]:
        out: dict[int, tuple] = {}
        for load in self.loads.values():
            out.update(load.get("gpu_metrics", {}))
        return out

    @cached_property
    def gpu_jobs(self) -> dict[int, list[dict]]:
        """GPU id -> the jobs holding a share of it (active allocations)."""
        out: dict[int, list[dict]] = defaultdict(list)
        rows = Allocation.objects.filter(active=True, gpu__node__cluster_id=self.id).values_list(
            "gpu_id", "job_id", "job__name"
        )
        for gpu_id, job_id, name in rows.order_by("gpu_id", "job_id"):
            out[gpu_id].append({"id": job_id, "name": name})
        return out

    @cached_property
    def open_alerts(self) -> list[tuple]:
        return list(
            Alert.objects.filter(cluster_id=self.id, cleared_at__isnull=True).values_list(
                "rule", "severity", "object_kind", "object_key"
            )
        )


#
# Topics
#


def overview(c: _Cluster, trend: list[dict] | None = None) -> dict:
    gpus = (
        GPU.objects.filter(node__cluster_id=c.id, node__role="compute")
        .annotate(busy=Exists(Allocation.objects.filter(gpu_id=OuterRef("pk"), active=True)))
        .aggregate(
            total=Count("pk"),
            allocated=Count("pk", filter=Q(busy=True)),
            free=Count("pk", filter=Q(busy=False, health=GpuHealth.HEALTHY, node__state=NodeState.UP)),
            unhealthy=Count("pk", filter=~Q(health=GpuHealth.HEALTHY)),
        )
    )
    by_priority = dict.fromkeys(PriorityClass.objects.values_list("name", flat=True), 0)
    running = 0
    rows = (
        Job.objects.filter(pool__cluster_id=c.id, status__in=[JobStatus.PENDING, *ACTIVE_STATUSES])
        .values_list("status", "priority_class__name")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for status, priority, n in rows:
        if status == JobStatus.PENDING:
            by_priority[priority] = by_priority.get(priority, 0) + n
        else:
            running += n
    last = (
        SchedulingRound.objects.filter(cluster_id=c.id)
        .order_by("-started")
        .values("started", "placed", "duration_ms")
        .first()
    )
    severities = dict.fromkeys(AlertSeverity.values, 0)
    for _, severity, _, _ in c.open_alerts:
        severities[severity] = severities.get(severity, 0) + 1
    utilisation = spread([m[0] / 100 for m in c.gpu_metrics.values() if m and m[0] is not None])
    return {
        "cluster": {"id": c.row["id"], "name": c.row["name"]},
        "gpus": gpus,
        "utilisation": {"mean": _r(utilisation.mean, 3), "cv": spread_cv(utilisation)},
        "queue": {"by_priority": by_priority, "running": running},
        "last_round": None
        if last is None
        else {"at": iso(last["started"]), "placed": last["placed"], "duration_ms": round(last["duration_ms"], 1)},
        "alerts": severities,
        "trend": list(trend or []),
    }


def spread_cv(utilisation) -> float | None:
    """The overview's spread: the coefficient of variation of GPU utilisation (stddev / mean), or None when the mean is
    under IDLE_BELOW (5 %). Near a zero mean the ratio measures noise, not imbalance: one GPU at 1 % beside three
    idle ones has a mean of 0.25 % and a CV of sqrt(3) = 1.73, which would read as a badly balanced cluster."""
    if utilisation.mean is None or utilisation.cv is None or utilisation.mean < IDLE_BELOW:
        return None
    return _r(utilisation.cv, 3)


def trend_point(data: dict, at: datetime | None = None) -> dict:
    """The point the overview's trend gets from one overview state."""
    return {
        "at": iso(at or timezone.now()),
        "utilisation": data["utilisation"]["mean"],
        "allocated": data["gpus"]["allocated"],
        "pending": sum(data["queue"]["by_priority"].values()),
    }


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


def fabric(c: _Cluster) -> dict:
    cab = c.cabling
    topo = cab.topology
    node_rows = c.nodes  # before the load: its host names come from these rows
    util = c.link_util
    errors = _link_errors(cab, c.open_alerts)
    links: list[dict] = []
    hottest: dict[int, float] = defaultdict(float)
    for pk, capacity, state in Link.objects.filter(cluster_id=c.id).values_list("pk", "capacity_gbps", "state"):
        ends = cab.ends.get(pk)
        if ends is None:
            continue  # an end on an aggregation node or a router (or cabled since the cabling was read): not drawn
        u = util.get(pk, 0.0)
        for kind, end_id in ends.values():
            if kind == "switch":
                hottest[end_id] = max(hottest[end_id], u)
        links.append({"id": pk, "a": ends["a"], "b": ends["b"], "capacity_gbps": capacity, "state": state,
                      "util": round(u, 2), "errors": pk in errors})  # fmt: skip
    index = topo.graph.switch_index
    switches = []
    for pk, guid, name in sorted(cab.switches, key=lambda s: natural_key(s[2])):
        i = index[guid]
        switches.append({"id": pk, "name": name, "tier": topo.tiers.level[i], "role": topo.tiers.role[i],
                         "hottest": round(hottest.get(pk, 0.0), 2)})  # fmt: skip
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
        return {"switches": switches, "nodes": nodes, "links": links, "aggregated": False}
    folded = _aggregate(nodes, links, {s["id"]: s["name"] for s in switches})
    hosts: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        hosts[places.group_of.get(n["id"], "leaf:none")].append(n["hostname"])
    for g in folded["nodes"]:
        at = places.nodes.get(g["id"])
        g["x"], g["y"] = (at.x, at.y) if at else (0.0, 0.0)
        g["storage"] = at.storage if at else 0
        g["hosts"] = hosts.get(g["id"], [])
    return {"switches": switches, **folded, "aggregated": True}


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


def _aggregate(nodes: list[dict], links: list[dict], switch_names: dict[int, str]) -> dict:
    """One node entry per leaf, and the host links of each (switch, group) folded into one."""
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
    folded: dict[tuple, dict] = {}
    for link in links:
        ends = [link["a"], link["b"]]
        host = next((e for e in ends if e[0] == "node"), None)
        switch = next((e for e in ends if e[0] == "switch"), None)
        if host is None or switch is None:
            out_links.append(link)
            continue
        gid = group_of[host[1]]
        key = (switch[1], gid)
        f = folded.get(key)
        if f is None:
            fid = gid if gid == f"leaf:{switch[1]}" else f"{gid}@{switch[1]}"
            f = folded[key] = {"id": fid, "a": switch, "b": ["node", gid], "capacity_gbps": 0.0, "states": {},
                               "util": 0.0, "errors": False, "members": 0}  # fmt: skip
            out_links.append(f)
        f["capacity_gbps"] += link["capacity_gbps"]
        f["states"][link["state"]] = f["states"].get(link["state"], 0) + 1
        f["util"] = max(f["util"], link["util"])
        f["errors"] = f["errors"] or link["errors"]
        f["members"] += 1
    for f in folded.values():
        states = f.pop("states")
        f["state"] = (LinkState.UP if set(states) == {LinkState.UP}
                      else LinkState.DOWN if set(states) == {LinkState.DOWN} else LinkState.DEGRADED)  # fmt: skip
    return {"nodes": list(groups.values()), "links": out_links}


def gpus(c: _Cluster) -> dict:
    cab = c.cabling
    switch_name = {pk: name for pk, _, name in cab.switches}
    rows = GPU.objects.filter(node__cluster_id=c.id).values_list(
        "pk", "node__hostname", "index", "model", "health", "memory_mib"
    )
    metrics, jobs = c.gpu_metrics, c.gpu_jobs
    out = []
    leaf_of: dict[str, str] = {}
    order: dict[str, tuple] = {}
    for pk, host, index, model, health, memory in rows:
        leaf = leaf_of.get(host)
        if leaf is None:
            leaf = leaf_of[host] = switch_name.get(cab.leaf_id(host), "")
            order[host] = (natural_key(leaf), natural_key(host))
        util, mem_used, mem_total, temp, power = metrics.get(pk) or (None,) * 5
        out.append({
            "id": pk, "node": host, "leaf": leaf, "index": index, "model": model,
            "health": health, "util": _r(util, 1), "mem_used": _r(mem_used, 0),
            "mem_total": _r(mem_total, 0) if mem_total else memory or None, "temp": _r(temp, 0),
            "power": _r(power, 0), "jobs": jobs.get(pk, []),
        })  # fmt: skip
    out.sort(key=lambda g: (order[g["node"]], g["index"]))
    return {"gpus": out, "metrics": GPU_METRICS_UNITS}


ALERT_FIELDS = ("id", "rule", "severity", "object_kind", "object_key", "message", "first_seen", "last_seen",
                "cleared_at", "acknowledged_by")  # fmt: skip
ALERT_TIMES = ("first_seen", "last_seen", "cleared_at")


def listed_alerts(cluster_id: int, now: datetime | None = None):
    """The alerts the Alerts page lists: open ones, and those cleared within ALERTS_CLEARED_WITHIN."""
    since = (now or timezone.now()) - ALERTS_CLEARED_WITHIN
    return Alert.objects.filter(Q(cleared_at__isnull=True) | Q(cleared_at__gte=since), cluster_id=cluster_id)


# A measurement in a message: a number, not the number that names an error ("XID 79", kept).
_MEASURE = re.compile(r"(?<!XID )(?<![\w./])\d+(?:\.\d+)?(?![\w./])")


def alert_cause(message: str) -> str:
    """What an alert says with its measurements left out, so that a storm of one fault reads as one cause: "link errors
    climbing over 9.07394 s: link_downed +1" and "... over 8.92811 s: link_downed +1" are both "link errors climbing
    over N s: link_downed +N"; "XID 79: ..." keeps its 79 (it names the error). Names with digits stay."""
    return _MEASURE.sub("N", message)


def group_key(rule: str, severity: str, cause: str) -> str:
    return f"{rule}|{severity}|{cause}"


def alert_groups(cluster_id: int, now: datetime | None = None, *, times_as_text: bool = True) -> list[dict]:
    """Every listed alert (not only the newest ALERTS_LIMIT) grouped by rule, severity and cause, in one aggregate
    query (one row per distinct message) merged here: count, open, unacknowledged, first and last seen, the newest
    alert's id and message. Groups with open alerts first, then the most recently seen."""
    rows = (
        listed_alerts(cluster_id, now)
        .values("rule", "severity", "message")
        .annotate(
            n=Count("id"),
            open=Count("id", filter=Q(cleared_at__isnull=True)),
            unacknowledged=Count("id", filter=Q(acknowledged_at__isnull=True)),
            first=Min("first_seen"),
            last=Max("last_seen"),
            last_id=Max("id"),
        )
        .order_by()
    )
    groups: dict[str, dict] = {}
    for r in rows:
        cause = alert_cause(r["message"])
        key = group_key(r["rule"], r["severity"], cause)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"key": key, "rule": r["rule"], "severity": r["severity"], "cause": cause,
                               "message": r["message"], "count": 0, "open": 0, "unacknowledged": 0,
                               "first_seen": r["first"], "last_seen": r["last"], "last_id": r["last_id"]}  # fmt: skip
        g["count"] += r["n"]
        g["open"] += r["open"]
        g["unacknowledged"] += r["unacknowledged"]
        g["first_seen"] = min(g["first_seen"], r["first"])
        if (r["last"], r["last_id"]) > (g["last_seen"], g["last_id"]):
            g["message"] = r["message"]
        g["last_seen"] = max(g["last_seen"], r["last"])
        g["last_id"] = max(g["last_id"], r["last_id"])
    out = sorted(groups.values(), key=lambda g: (g["open"] == 0, -g["last_seen"].timestamp(), g["key"]))
    if not times_as_text:
        return out
    return [g | {"first_seen": iso(g["first_seen"]), "last_seen": iso(g["last_seen"])} for g in out]


def group_members(
    cluster_id: int, rule: str, severity: str, cause: str, until: int, now: datetime | None = None
) -> list[int]:
    """Ids of the listed alerts of one group (rule, severity, cause) up to alert id `until` (what the page had seen)."""
    rows = listed_alerts(cluster_id, now).filter(rule=rule, severity=severity, pk__lte=until)
    return [pk for pk, message in rows.values_list("pk", "message") if alert_cause(message) == cause]


GROUP_SAMPLES = 3  # objects named in a group's row on the Alerts page ("and N more")


def rule_counts(groups: list[dict]) -> list[dict]:
    """Alerts per rule, from alert_groups: [{rule, count, open, unacknowledged}], the rules with most open first."""
    rules: dict[str, dict] = {}
    for g in groups:
        r = rules.setdefault(g["rule"], {"rule": g["rule"], "count": 0, "open": 0, "unacknowledged": 0})
        for k in ("count", "open", "unacknowledged"):
            r[k] += g[k]
    return sorted(rules.values(), key=lambda r: (-r["open"], -r["count"], r["rule"]))


def alerts(c: _Cluster) -> dict:
    """The newest ALERTS_LIMIT listed alerts (each with its cause and group key), and the groups of all of them."""
    now = timezone.now()
    rows = listed_alerts(c.id, now).order_by("-last_seen", "-id").values(*ALERT_FIELDS)[:ALERTS_LIMIT]
    out = []
    for a in rows:
        cause = alert_cause(a["message"])
        out.append(a | {k: iso(a[k]) for k in ALERT_TIMES} | {"group": group_key(a["rule"], a["severity"], cause)})
    return {"alerts": out, "groups": alert_groups(c.id, now)}


JOB_FIELDS = ("pk", "name", "tenant__name", "gpus", "nodes", "gpus_per_node", "sharing", "mps_compute_pct",
              "mig_profile", "priority_class__name", "status", "held", "pending_reason", "submitted_at", "started_at",
              "queue_seq", "observed_slurm_id")  # fmt: skip


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def shape_text(gpus: int, nodes: int | None = None, per_node: int | None = None, sharing: str = "exclusive",
               mps_compute_pct: int | None = None, mig_profile: str = "") -> str:  # fmt: skip
    """What a job asks for, in words, the same on every page: "1 GPU", "8 GPUs", "16 GPUs: 2 nodes x 8" (a gang),
    "MPS, 25 % of 1 GPU", "MPS, 50 % of each of 2 GPUs", "MIG 1g.10gb", "2 x MIG 3g.40gb", "time-slice of 1 GPU"."""
    if nodes and per_node:
        return f"{_gpus(gpus)}: {nodes} node{'s' if nodes != 1 else ''} x {per_node}"
    if sharing == "mps":
        if not mps_compute_pct:
            return f"MPS on {_gpus(gpus)}"
        return f"MPS, {mps_compute_pct} % of {'1 GPU' if gpus == 1 else f'each of {gpus} GPUs'}"
    if sharing == "mig":
        profile = f"MIG {mig_profile}" if mig_profile else "MIG"
        return profile if gpus == 1 else f"{gpus} x {profile}"
    if sharing == "timeslice":
        return "time-slice of 1 GPU" if gpus == 1 else f"time-slices of {gpus} GPUs"
    return _gpus(gpus)


def job_shape(job) -> str:
    """shape_text of a Job row."""
    return shape_text(job.gpus, job.nodes, job.gpus_per_node, job.sharing, job.mps_compute_pct, job.mig_profile)


#
# Where a job runs, in words (the job page): its nodes grouped by the leaf switches their host links reach
#

NO_LEAF = "(no leaf)"


def leaves_of(node_ids: Iterable[int]) -> dict[int, tuple[str, ...]]:
    """Node id -> the names of every switch its host links reach (its leaves; a rail-optimised server has one per
    rail, e.g. 8), in natural order, in one query. A node without a cabled host link is absent."""
    rows = (
        Port.objects.filter(hca__node_id__in=list(node_ids), link__isnull=False, link__ports__switch__isnull=False)
        .values_list("hca__node_id", "link__ports__switch__name")
        .distinct()
    )
    found: dict[int, set[str]] = defaultdict(set)
    for node_id, name in rows:
        found[node_id].add(name)
    return {node_id: tuple(sorted(names, key=natural_key)) for node_id, names in found.items()}


def name_span(names: tuple[str, ...] | list[str]) -> str:
    """Switch names, short: "leaf017" / "leaf017, leaf020" / "leaf017-leaf024" (with an en dash) when they are a run of
    consecutive numbers with one prefix and width / else the first three and how many more."""
    names = list(names)
    if len(names) <= 2:
        return ", ".join(names)
    parts = [re.fullmatch(r"(.*?)(\d+)", n) for n in names]
    if all(parts) and len({(m.group(1), len(m.group(2))) for m in parts}) == 1:
        numbers = [int(m.group(2)) for m in parts]
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{names[0]}\N{EN DASH}{names[-1]}"
    if len(names) == 3:
        return ", ".join(names)
    return f"{', '.join(names[:3])} and {len(names) - 3} more"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


@dataclass(frozen=True)
class Placement:
    """A job's nodes grouped by the set of leaves they reach (one leaf, or one rail group of leaves), and the sentence
    that says where it runs: "16 GPUs on 2 nodes, 1 leaf switch (leaf001)", "64 GPUs on 8 nodes, 1 rail group of 8
    leaf switches (leaf017-leaf024)", "128 GPUs on 16 nodes, 2 rail groups of 8 leaf switches (16 leaf switches)"."""

    groups: list[tuple[str, tuple[str, ...], list]]  # (label, leaves, nodes), by the first leaf's name
    leaves: int  # leaf switches its nodes reach, all together
    text: str


def placement(gpus: int, nodes: dict[int, object]) -> Placement:
    """Where a job runs; `nodes`: node id -> what the page shows of that node (grouped, in the order given)."""
    reach = leaves_of(nodes)
    by_set: dict[tuple[str, ...], list] = defaultdict(list)
    for node_id, node in nodes.items():
        by_set[reach.get(node_id, ())].append(node)
    order = sorted(by_set, key=lambda leaves: (not leaves, [natural_key(n) for n in leaves]))
    groups = []
    for leaves in order:
        if not leaves:
            label = NO_LEAF
        elif len(leaves) == 1:
            label = leaves[0]
        else:
            label = f"rail group {name_span(leaves)} ({len(leaves)} leaf switches)"
        groups.append((label, leaves, by_set[leaves]))
    every = sorted({leaf for leaves in by_set for leaf in leaves}, key=natural_key)
    where = [f"{_count(gpus, 'GPU', 'GPUs')} on {_count(len(nodes), 'node', 'nodes')}"]
    placed = [leaves for leaves in order if leaves]
    if placed and all(len(leaves) == 1 for leaves in placed):
        where.append(f"{_count(len(every), 'leaf switch', 'leaf switches')} ({name_span(every)})")
    elif placed:
        sizes = {len(leaves) for leaves in placed}
        text = _count(len(placed), "rail group", "rail groups")
        if len(sizes) == 1:
            text += f" of {len(placed[0])} leaf switches"
        text += f" ({name_span(every)})" if len(placed) == 1 else f" ({len(every)} leaf switches)"
        where.append(text)
    if len(placed) < len(order):
        where.append("some nodes on no leaf switch" if placed else "on no leaf switch")
    return Placement(groups=groups, leaves=len(every), text=", ".join(where))


def queue(c: _Cluster, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    last_round = queue_entries([c.id])  # job -> place in line, why it waits, estimated start
    rows = Job.objects.filter(pool__cluster_id=c.id).filter(Q(status=JobStatus.PENDING) | Q(status__in=ACTIVE_STATUSES))
    pending, running = [], []
    for (pk, name, tenant, n_gpus, nodes, per_node, sharing, mps_pct, mig_profile, priority, status, held,
         held_reason, submitted, started, seq, slurm_id) in rows.values_list(*JOB_FIELDS):  # fmt: skip
        item = {"id": pk, "name": name, "tenant": tenant, "gpus": n_gpus,
                "shape": shape_text(n_gpus, nodes, per_node, sharing, mps_pct, mig_profile),
                "priority": priority}  # fmt: skip
        if status == JobStatus.PENDING:
            entry = last_round.get(pk)
            place, why = (entry.position, entry.reason) if entry else (None, NO_ROUND_YET)
            start, basis = (entry.estimated_start, entry.start_estimate) if entry and not held else (None, "none")
            why = (held_reason or "held") if held else why
            if slurm_id is not None:  # Slurm's own job, waiting in Slurm's queue: Slurm's reason, no place in ours
                place, why, start, basis = None, held_reason or "Slurm: pending", None, "none"
            item |= {"position": place, "reason": why, "submitted_at": iso(submitted),
                     "wait_s": max(0, int((now - submitted).total_seconds())), "start_at": iso(start),
                     "start_estimate": basis, "_seq": seq}  # fmt: skip
            pending.append(item)
        else:
            item |= {"status": status, "started_at": iso(started), "nodes": [], "links": []}
            running.append(item)
    # In queue order: the last round's order first, then jobs it has not seen (new, held) by their place in line.
    pending.sort(key=lambda j: (j["position"] is None, j["position"] or 0, j.pop("_seq")))
    if running:
        hosts: dict[int, set[str]] = defaultdict(set)
        for job_id, host in (
            Allocation.objects.filter(active=True, job__pool__cluster_id=c.id)
            .values_list("job_id", "gpu__node__hostname")
            .distinct()
        ):
            hosts[job_id].add(host)
        topo = c.cabling.topology
        for item in running:
            item["nodes"] = sorted(hosts.get(item["id"], ()), key=natural_key)
            item["links"] = topo.job_links(item["nodes"])
        running.sort(key=lambda j: (j["started_at"] or "", j["id"]))
    recent = [
        {"job": job_id, "name": name, "tenant": tenant, "kind": RECENT_KINDS[to], "reason": why, "at": iso(at)}
        for job_id, name, tenant, to, why, at in JobEvent.objects.filter(
            job__pool__cluster_id=c.id, to_status__in=list(RECENT_KINDS)
        )
        .order_by("-at", "-id")
        .values_list("job_id", "job__name", "job__tenant__name", "to_status", "reason", "at")[:RECENT_LIMIT]
    ]
    return {"pending": pending, "running": running, "recent": recent}


def for_tenant(data: dict, tenant: str) -> dict:
    """The queue topic as one tenant sees it: its own jobs only (positions stay global)."""
    return {
        "pending": [j for j in data["pending"] if j["tenant"] == tenant],
        "running": [j for j in data["running"] if j["tenant"] == tenant],
        "recent": [e for e in data["recent"] if e["tenant"] == tenant],
    }


BUILDERS = {"fabric": fabric, "gpus": gpus, "alerts": alerts, "queue": queue}


def build(cluster_id: int, topics: Iterable[str], *, trend: list[dict] | None = None) -> dict[str, dict] | None:
    """The current state of each topic, or None when the cluster does not exist."""
    c = _Cluster(cluster_id)
    if c.row is None:
        return None
    out: dict[str, dict] = {}
    for topic in topics:
        if topic == "overview":
            out[topic] = overview(c, trend)
        elif topic in BUILDERS:
            out[topic] = BUILDERS[topic](c)
        else:
            raise ValueError(f"unknown topic {topic!r}; known: {', '.join(TOPICS)}")
    return out


def cluster_exists(cluster_id: int) -> bool:
    return Cluster.objects.filter(pk=cluster_id).exists()
