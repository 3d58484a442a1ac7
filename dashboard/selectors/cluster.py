"""The cluster one build reads once (`_Cluster`: its row, the latest loads) and its cabling (`_Cabling`: tiers, each
host's leaf, paths between leaves; kept per process while fabric.selectors.fabric_version is unchanged), shared by
every topic of the build."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property

from django.db.models import Count

from fabric.choices import CaKind, LinkState, RoleSource
from fabric.collectors.samples import FABRIC_SOURCE
from fabric.latest import node_loads
from fabric.models import Alert, Cluster, Link, Node, Port, Switch
from fabric.selectors import fabric_version
from fabric.topology.graph import FabricGraph
from fabric.topology.tiers import Tiers, detect_tiers
from fabric.topology.types import Fabric, THost, TLink, TSwitch
from scheduler.models import Allocation


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
