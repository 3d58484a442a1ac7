"""ParsedFabric (what an importer or the generator returns) -> Fabric (what the analyses read).

* A host is a server: every HCA with the same hostname becomes one vertex keyed by
  that hostname, so a dual-rail server has two links to the fabric.
* SHARP aggregation nodes and routers are not hosts; their links are left out
  (they would otherwise count as cut-off hosts or as host-facing capacity).
* HCAs with no host name are one host per system image GUID, "unnamed-<guid>".
* A loopback (two ports of one switch cabled together) stays a link; the graph keeps it out of
  every path (fabric.topology.graph.LOOPBACK).
* Link capacity is the data rate from `link_speeds.py` (0 when the speed is "???").
* Ports in `down_ports` have no peer and are not links.
"""

from __future__ import annotations

from collections.abc import Mapping

from fabric.importers.types import ParsedCA, ParsedFabric
from fabric.topology.link_speeds import data_rate_gbps
from fabric.topology.types import Fabric, THost, TLink, TSwitch


def _host_key(ca: ParsedCA) -> str:
    if ca.hostname:
        return ca.hostname
    # An HCA whose description names no host is still a server's: one host per system image GUID
    # (else node GUID), keyed as the import names its placeholder node (fabric.actions).
    return unnamed_host_name(ca.system_key)


def unnamed_host_name(system_key: str) -> str:
    """The placeholder host name of an unnamed system, until an operator or a later import names it."""
    return f"unnamed-{system_key}"


def fabric_from_parsed(parsed: ParsedFabric, host_roles: Mapping[str, str] | None = None) -> Fabric:
    """Build the analysis input. `host_roles` overrides roles by hostname (e.g. {"tank1": "storage"});
    otherwise roles come from `parsed.nodes`, then default to "compute"."""
    roles = {n.hostname: n.role for n in parsed.nodes}
    if host_roles:
        roles.update(host_roles)

    switches = [TSwitch(key=s.guid, name=s.name or s.guid, role=s.role) for s in parsed.switches]
    switch_guids = {s.guid for s in parsed.switches}

    ca_host: dict[str, str] = {}  # CA GUID -> host key, hosts only
    host_keys: list[str] = []
    seen_hosts: set[str] = set()
    for ca in parsed.cas:
        if ca.kind != "host":
            continue
        key = _host_key(ca)
        ca_host[ca.guid] = key
        if key not in seen_hosts:
            seen_hosts.add(key)
            host_keys.append(key)
    for node in parsed.nodes:  # servers the input knows with no HCA on the fabric (yet)
        if node.hostname not in seen_hosts:
            seen_hosts.add(node.hostname)
            host_keys.append(node.hostname)
    hosts = [THost(key=k, role=roles.get(k, "compute")) for k in host_keys]

    links: list[TLink] = []
    seen_links: set[str] = set()
    rate_cache: dict[tuple[int, str], float] = {}
    for pl in parsed.links:
        a, b = pl.a, pl.b
        ea = a.node_guid if a.node_guid in switch_guids else ca_host.get(a.node_guid, "")
        eb = b.node_guid if b.node_guid in switch_guids else ca_host.get(b.node_guid, "")
        if not ea or not eb:
            continue  # aggregation node, router, or a CA the input does not describe
        if (b.node_guid, b.port) < (a.node_guid, a.port):  # canonical order, so the key is stable
            a, b, ea, eb = b, a, eb, ea
        key = f"{a.node_guid}:{a.port}-{b.node_guid}:{b.port}"
        if key in seen_links:  # an input that lists a cable from both ends
            continue
        seen_links.add(key)
        rate = rate_cache.get((pl.width, pl.speed))
        if rate is None:
            rate = rate_cache[(pl.width, pl.speed)] = data_rate_gbps(pl.width, pl.speed.upper())
        links.append(
            TLink(
                key=key,
                a=ea,
                b=eb,
                capacity_gbps=rate,
                up=True,
                width=pl.width,
                speed=pl.speed,
                a_port=a.port,
                b_port=b.port,
            )
        )
    return Fabric(switches=switches, hosts=hosts, links=links)
