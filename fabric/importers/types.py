"""What every importer returns: a plain description of a fabric, no database.

GUIDs are normalised to 16 lowercase hex digits without "0x" (`normalise_guid`).
`fabric/actions/imports.py` applies a ParsedFabric to the database in one transaction,
matching switches, HCAs and ports by GUID so re-imports update in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

CaKind = Literal["host", "aggregation", "router"]
SwitchRole = Literal["", "leaf", "spine", "core"]
NodeRole = Literal["compute", "storage", "login"]
PortState = Literal["active", "down"]


class ParseError(ValueError):
    """Malformed input. `line` is 1-based (0 when the problem is the file as a whole)."""

    def __init__(self, message: str, line: int = 0, source: str = "") -> None:
        self.message = message
        self.line = line
        self.source = source
        where = f"{source or 'input'}:{line}" if line else (source or "input")
        super().__init__(f"{where}: {message}")


def normalise_guid(text: str) -> str:
    """'0x0002c903002db102', '2c903002db103', 'S-f452...' -> 16 lowercase hex digits.

    Raises ValueError when the text is not hex or longer than 64 bits.
    """
    t = text.strip().lower()
    for prefix in ("s-", "h-", "r-"):
        if t.startswith(prefix):
            t = t[2:]
    if t.startswith("0x"):
        t = t[2:]
    if not t or len(t) > 16 or any(c not in "0123456789abcdef" for c in t):
        raise ValueError(f"not a 64-bit GUID: {text!r}")
    return t.rjust(16, "0")


@dataclass(frozen=True, slots=True)
class PortRef:
    """One end of a link: the node (switch or CA) GUID and its port number."""

    node_guid: str
    port: int


@dataclass(slots=True)
class ParsedSwitch:
    guid: str
    name: str  # short name an operator uses, e.g. "ib5" from "MF0;ib5:SX6036/U1"
    description: str  # the node description exactly as the fabric reported it
    port_count: int = 0  # 0 when the input does not say (ibnetdiscover -p)
    lid: int | None = None
    vendor_id: str = ""  # "0x2c9"
    device_id: str = ""  # "0xc738"
    model: str = ""  # "SX6036" when the description names it
    role: SwitchRole = ""  # set by spec/generator; detected from the graph otherwise
    rack: str = ""


@dataclass(slots=True)
class ParsedCA:
    """A channel adapter: an HCA in a server, a SHARP aggregation node, or a router."""

    guid: str  # node GUID
    description: str  # "stage114 mlx4_0"
    hostname: str  # "stage114"; "" for aggregation nodes, routers and unnamed HCAs
    device: str  # "mlx4_0", "HCA-1"
    kind: CaKind = "host"
    port_guids: dict[int, str] = field(default_factory=dict)  # port number -> port GUID
    lids: dict[int, int] = field(default_factory=dict)  # port number -> LID
    vendor_id: str = ""
    device_id: str = ""
    system_guid: str = ""  # system image GUID (`sysimgguid=`): shared by the HCAs of one system

    @property
    def unnamed(self) -> bool:
        """A host's adapter whose node description names no host (firmware default, never set)."""
        return self.kind == "host" and not self.hostname

    @property
    def system_key(self) -> str:
        """What identifies an unnamed HCA's host: its system image GUID, else its node GUID."""
        return self.system_guid or self.guid


@dataclass(slots=True)
class ParsedPort:
    """A port the input lists without a peer (ibnetdiscover -p prints these): down."""

    ref: PortRef
    width: int
    speed: str  # "" when unknown
    state: PortState = "down"


@dataclass(slots=True)
class ParsedLink:
    a: PortRef
    b: PortRef
    width: int  # lanes
    speed: str  # "QDR", ... "" when the fabric printed "???"
    # Why the link is degraded, "" when it is not: e.g. its two ends reported different rates (the
    # slower is kept in width/speed).
    degraded: str = ""

    @property
    def loopback(self) -> bool:
        """A cable between two ports of one node (a test plug, a miscabling): recorded, never routed."""
        return self.a.node_guid == self.b.node_guid


@dataclass(slots=True)
class ParsedGPU:
    index: int
    model: str
    memory_mib: int
    uuid: str = ""
    nvlink_generation: int = 0
    nvlink_gbps: float = 0.0
    mig_capable: bool = False


@dataclass(slots=True)
class ParsedNodeTopology:
    """`nvidia-smi topo -m` of one server.

    `gpu_links[(i, j)]` for i < j is the code between GPU i and GPU j ("NV12", "PIX", "SYS", ...);
    `nic_affinity[(gpu, nic)]` the code between a GPU index and a NIC name ("mlx5_0").
    """

    gpus: list[int]
    nics: list[str]
    gpu_links: dict[tuple[int, int], str]
    nic_affinity: dict[tuple[int, str], str]
    cpu_affinity: dict[int, str] = field(default_factory=dict)  # gpu -> "48-63,176-191"
    numa_affinity: dict[int, int | None] = field(default_factory=dict)  # gpu -> NUMA node


@dataclass(slots=True)
class ParsedNode:
    """A server, with what the input knows of it beyond its HCAs (spec, generator)."""

    hostname: str
    role: NodeRole = "compute"
    rack: str = ""
    gpu_model: str = ""
    gpus: list[ParsedGPU] = field(default_factory=list)
    topology: ParsedNodeTopology | None = None
    nvlink_domain: str = ""  # the multi-node NVLink domain (GB200 NVL72 rack) its GPUs share; "" = inside the node


@dataclass(slots=True)
class ParsedFabric:
    switches: list[ParsedSwitch] = field(default_factory=list)
    cas: list[ParsedCA] = field(default_factory=list)
    links: list[ParsedLink] = field(default_factory=list)
    down_ports: list[ParsedPort] = field(default_factory=list)
    nodes: list[ParsedNode] = field(default_factory=list)  # extra node facts; hosts also come from cas
    source: str = ""  # "ibnetdiscover", "ibnetdiscover-ports", "spec", "generated"
    warnings: list[str] = field(default_factory=list)  # lines skipped by a lenient parser, with why

    def hosts(self) -> set[str]:
        """Host names the input gives (unnamed HCAs are not among them: see `unnamed_hosts`)."""
        return {ca.hostname for ca in self.cas if ca.kind == "host" and ca.hostname} | {n.hostname for n in self.nodes}

    def unnamed_hosts(self) -> dict[str, list[ParsedCA]]:
        """Unnamed HCAs grouped by the system they belong to (`ParsedCA.system_key`), in input order."""
        groups: dict[str, list[ParsedCA]] = {}
        for ca in self.cas:
            if ca.unnamed:
                groups.setdefault(ca.system_key, []).append(ca)
        return groups

    def host_count(self) -> int:
        """Servers on the fabric: named hosts plus one per unnamed system."""
        return len(self.hosts()) + len(self.unnamed_hosts())
