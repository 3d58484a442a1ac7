"""Input of the fabric analysis: a graph of switches, hosts and links, no database.

`fabric/graph_from_db.py` builds a `Fabric` from inventory rows in bulk; tests and
benchmarks build one directly (or from a ParsedFabric with `from_parsed`).
A host is a server (all its HCAs merged into one vertex): losing one HCA link of
a dual-rail server does not cut it off, losing both does.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TSwitch:
    key: str  # switch GUID
    name: str
    role: str = ""  # "leaf" / "spine" / "core" set by an operator; "" = detect from the graph


@dataclass(frozen=True, slots=True)
class THost:
    key: str  # hostname
    role: str = "compute"  # "compute" / "storage" / "login"


@dataclass(frozen=True, slots=True)
class TLink:
    key: str  # stable id (database pk as text, or "guid:port-guid:port")
    a: str  # vertex key: a switch GUID or a hostname
    b: str
    capacity_gbps: float  # data rate of the link as it runs now (0 when unknown)
    up: bool = True
    width: int = 4
    speed: str = ""
    supported_gbps: float = 0.0  # the best rate both ends support; 0 when not known
    a_port: int = 0
    b_port: int = 0


@dataclass(slots=True)
class Fabric:
    switches: list[TSwitch] = field(default_factory=list)
    hosts: list[THost] = field(default_factory=list)
    links: list[TLink] = field(default_factory=list)
