"""Small fabrics built by hand for the topology tests, plus the real SX6036 file.

Switch keys are "guid-<name>" on purpose, so a test catches code that mixes keys and names.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fabric.importers.types import ParsedFabric
from fabric.topology.types import Fabric, THost, TLink, TSwitch

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SX6036 = FIXTURES / "ibnetdiscover_sx6036_8switch.topo"


class FabricBuilder:
    def __init__(self) -> None:
        self.fabric = Fabric()
        self._links = 0

    def switch(self, name: str, role: str = "") -> str:
        key = f"guid-{name}"
        self.fabric.switches.append(TSwitch(key=key, name=name, role=role))
        return key

    def host(self, name: str, role: str = "compute") -> str:
        self.fabric.hosts.append(THost(key=name, role=role))
        return name

    def link(
        self, a: str, b: str, gbps: float = 400.0, *, count: int = 1, up: bool = True, supported: float = 0.0
    ) -> list[str]:
        keys = []
        for _ in range(count):
            self._links += 1
            key = f"l{self._links}"
            self.fabric.links.append(TLink(key, a, b, gbps, up=up, supported_gbps=supported))
            keys.append(key)
        return keys


def two_tier(
    leaves: int = 4,
    spines: int = 2,
    hosts_per_leaf: int = 4,
    links_per_pair: int = 2,
    host_gbps: float = 400.0,
    up_gbps: float = 400.0,
) -> FabricBuilder:
    """leaf1..leafN, spine1..spineM, every leaf cabled to every spine; hosts h<leaf>-<i>, single-homed."""
    b = FabricBuilder()
    spine_keys = [b.switch(f"spine{s + 1}") for s in range(spines)]
    for lf in range(leaves):
        leaf = b.switch(f"leaf{lf + 1}")
        for i in range(hosts_per_leaf):
            b.link(b.host(f"h{lf + 1}-{i + 1}"), leaf, host_gbps)
        for sp in spine_keys:
            b.link(leaf, sp, up_gbps, count=links_per_pair)
    return b


def three_tier(
    pods: int = 2,
    leaves_per_pod: int = 2,
    spines_per_pod: int = 2,
    cores: int = 2,
    hosts_per_leaf: int = 2,
    gbps: float = 400.0,
) -> FabricBuilder:
    """p<P>leaf<L> / p<P>spine<S> / core<C>: leaves to every spine of their pod, spines to every core."""
    b = FabricBuilder()
    core_keys = [b.switch(f"core{c + 1}") for c in range(cores)]
    for p in range(pods):
        pod_spines = [b.switch(f"p{p + 1}spine{s + 1}") for s in range(spines_per_pod)]
        for sp in pod_spines:
            for core in core_keys:
                b.link(sp, core, gbps)
        for lf in range(leaves_per_pod):
            leaf = b.switch(f"p{p + 1}leaf{lf + 1}")
            for i in range(hosts_per_leaf):
                b.link(b.host(f"p{p + 1}h{lf + 1}-{i + 1}"), leaf, gbps)
            for sp in pod_spines:
                b.link(leaf, sp, gbps)
    return b


def strip_roles(fabric: Fabric) -> Fabric:
    """The same fabric with every operator role cleared, so tiers must be detected."""
    return Fabric(
        switches=[dataclasses.replace(s, role="") for s in fabric.switches],
        hosts=list(fabric.hosts),
        links=list(fabric.links),
    )


def load_sx6036() -> ParsedFabric:
    """The real 8-switch SX6036 fabric, parsed by the project's ibnetdiscover importer."""
    from fabric.importers.ibnetdiscover import parse_ibnetdiscover

    return parse_ibnetdiscover(SX6036.read_text(), str(SX6036))
