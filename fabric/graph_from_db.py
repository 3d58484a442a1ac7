"""ORM rows -> the pure topology graph, in a constant number of queries."""

from __future__ import annotations

from django.db.models import Count

from fabric.choices import CaKind, LinkState, RoleSource
from fabric.models import GPU, Cluster, Link, Node, Port, Switch
from fabric.topology.export import ExportInput, HostFacts
from fabric.topology.types import Fabric, THost, TLink, TSwitch


def fabric_for_cluster(cluster: Cluster | int) -> Fabric:
    cluster_id = cluster.pk if isinstance(cluster, Cluster) else cluster
    switches = [
        TSwitch(key=guid, name=name, role=role if source == RoleSource.SET else "")
        for guid, name, role, source in Switch.objects.filter(cluster_id=cluster_id).values_list(
            "guid", "name", "role", "role_source"
        )
    ]
    hosts = [
        THost(key=hostname, role=role)
        for hostname, role in Node.objects.filter(cluster_id=cluster_id).values_list("hostname", "role")
    ]
    ends: dict[int, dict[str, tuple[str, int]]] = {}
    # In no order: one port per (link, end) (a constraint), so the order changes nothing. Port's default ordering (by
    # cluster, switch and HCA) joined two more tables and sorted every port: 1 of 1.2 s at 10,000 servers.
    port_rows = (
        Port.objects.filter(cluster_id=cluster_id, link__isnull=False)
        .order_by()
        .values_list("link_id", "link_end", "number", "switch__guid", "hca__kind", "hca__node__hostname")
    )
    for link_id, end, number, switch_guid, ca_kind, hostname in port_rows:
        if switch_guid:
            vertex = switch_guid
        elif ca_kind == CaKind.HOST and hostname:
            vertex = hostname
        else:
            continue  # aggregation nodes and routers hang off a switch; they are not part of host reachability
        ends.setdefault(link_id, {})[end] = (vertex, number)
    links = []
    # Link's default ordering (cluster, id) without the join to the cluster that ordering by it takes.
    link_rows = (
        Link.objects.filter(cluster_id=cluster_id)
        .order_by("pk")
        .values_list("pk", "capacity_gbps", "state", "width", "speed", "supported_gbps")
    )
    for pk, capacity, state, width, speed, supported in link_rows.iterator(chunk_size=5000):
        end = ends.get(pk, {})
        if "a" not in end or "b" not in end:
            continue
        links.append(
            TLink(
                key=str(pk),
                a=end["a"][0],
                b=end["b"][0],
                capacity_gbps=capacity,
                up=state != LinkState.DOWN,
                width=width,
                speed=speed,
                supported_gbps=supported,
                a_port=end["a"][1],
                b_port=end["b"][1],
            )
        )
    return Fabric(switches=switches, hosts=hosts, links=links)


def export_input_for_cluster(cluster: Cluster) -> ExportInput:
    """What the scheduler exports read (fabric.topology.export): the fabric and each host's facts, in bulk (the
    fabric's queries and two more, whatever the cluster's size)."""
    # Nodes with two or more GPUs on NVLink: joined inside the server.
    linked = {
        node_id
        for node_id, n in GPU.objects.filter(node__cluster_id=cluster.pk, nvlink_gbps__gt=0)
        .order_by()
        .values("node_id")
        .annotate(n=Count("pk"))
        .values_list("node_id", "n")
        if n > 1
    }
    hosts = {
        hostname: HostFacts(unnamed=unnamed, nvlink_domain=domain, nvlink=pk in linked)
        for pk, hostname, unnamed, domain in Node.objects.filter(cluster_id=cluster.pk).values_list(
            "pk", "hostname", "unnamed", "nvlink_domain"
        )
    }
    return ExportInput(cluster=cluster.name, fabric=fabric_for_cluster(cluster), hosts=hosts)
