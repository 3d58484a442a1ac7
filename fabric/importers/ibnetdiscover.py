"""Parse the default output of `ibnetdiscover` into a ParsedFabric.

The input is a sequence of node blocks::

    vendid=0x2c9
    devid=0xc738
    switchguid=0xf4521403001165a0(f4521403001165a0)
    Switch  36 "S-f4521403001165a0"  # "MF0;ib5:SX6036/U1" enhanced port 0 lid 128 lmc 0
    [1]     "H-24be05ffff980030"[1](24be05ffff980031)   # "stage114 mlx4_0" lid 105 4xQDR
    [21]    "S-f4521403007ea570"[26]                    # "MF0;ib8:SX6036/U1" lid 1 4xFDR10

    Ca      2 "H-24be05ffff985d90"  # "stage97 mlx4_0"
    [1](24be05ffff985d91)   "S-f4521403001165a0"[32]    # lid 121 lmc 0 "MF0;ib5:SX6036/U1" lid 128 4xQDR

Behaviour, beyond what the line grammar says:

* Node ids: "S-" switch, "H-" channel adapter, "R-" router; the header keyword must agree
  (Switch/S-, Ca/H-, Rt/R-). A peer referenced with a prefix that contradicts its own block is an
  "unknown node id" error.
* Every peer a port line names must have a block of its own somewhere in the file (before or
  after): ibnetdiscover prints one for every node it links to, so a peer without one is a cut or
  edited file. Kept, it would be a phantom node that reshapes the tiers; it is refused at the
  first line naming it ("is never declared").
* Every cable is printed twice, once from each end; links are deduped by the unordered pair of
  (GUID, port) ends.
* Contradictions are errors: one port cabled to two different peers, a port listed twice in one
  block with different peers, the same node declared twice, a port above the node's declared port
  count (own side and peer side; a Quantum-2 in split mode declares 129 ports, so port 128 is
  fine), port 0 on a link (switch port 0 is the management port; it has no cable), a port naming
  itself as its peer.
* The two ends of one cable printing different known rates (4xSDR against 1xSDR) is a warning
  naming both lines: the slower rate is kept and the link marked degraded (ParsedLink.degraded).
  "4x???" (unknown speed, speed "") agrees with anything.
* Two ports of one switch cabled together is a loopback: kept (ParsedLink.loopback), never routed
  over (fabric.topology.graph.LOOPBACK).
* `vendid=`, `devid=`, `sysimgguid=` lines fill vendor_id/device_id/system_guid of the next node
  header; other `key=value` lines (switchguid, caguid, rtguid) are accepted and ignored, with or
  without a trailing `# ...` comment (-g puts the chassis there). Lines starting with `#` and blank
  lines are ignored, and so are the -g headings ("Non-Chassis Nodes", "Chassis 3 (guid 0x...)",
  "Hostname: ..."). A line the tools print on stderr (`ibwarn: [1234] ...`, `src/query_smp.c:195;
  ... bad status 110; ...`, `<tool>: iberror: ...`) is a warning with its line number; the block
  around it is read on. Any other line is an error ("unrecognised line").
* Port lines may end with the -f details ("s=4 w=2 v=3 e=1") and Xsigo's "slot N" / "(scp)", and may carry
  ibdiagnet's port label after the port number (ibdiagnet2.ibnetdiscover: "[1](1/1/1)" on a Quantum-2 switch,
  "[1](1/1/1/1)" in split mode, "[1](B9D0F0/0/0/1)(portguid)" on a CA): read, not stored.
* Switch names: Mellanox managed switches describe themselves as "MF0;<name>:<model>/<slot>",
  giving name "ib5" and model "SX6036"; other descriptions give the stripped description as name
  (or the GUID when the description is empty). Names are not guaranteed unique.
* CA descriptions "<host> <device>" give hostname and device; SHARP "Aggregation Node" CAs get
  kind "aggregation" and no hostname; routers (Rt, "R-") kind "router" and no hostname. A
  firmware-default description ("MT4129 ConnectX7   Mellanox Technologies"), an empty one or
  "localhost ..." names no host: the HCA is kept as an unnamed host's adapter (ParsedCA.unnamed),
  grouped with the HCAs of its system image GUID; one with the system image GUID of a named HCA
  takes that host name. One warning sums the unnamed up.
* Errors carry the 1-based line number. Semantic checks (peers, prefixes) run after the whole
  text is read, in line order, so the first bad line is reported. A file cut mid-line fails the
  grammar; one cut at a line boundary names a peer whose block is missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabric.topology.link_speeds import LinkRate

from ._common import (
    LinkTable,
    ca_identity,
    check_text,
    diagnostic_warning,
    excerpt,
    guid_or_empty,
    is_diagnostic,
    iter_lines,
    name_unnamed_by_system,
    parse_guid,
    parse_link_rate,
)
from .types import ParsedCA, ParsedFabric, ParsedSwitch, ParseError

_HEADER_BY_PREFIX = {"S": "Switch", "H": "Ca", "R": "Rt"}
_PREFIX_BY_HEADER = {header: prefix for prefix, header in _HEADER_BY_PREFIX.items()}

# `key=value`, optionally followed by a comment: with -g the sysimgguid line ends "\t\t# Chassis 3 (...)"
# and the switchguid line "\t# <chassis type> <slot>".
_KEY_VALUE = re.compile(r"^(?P<key>\w+)=(?P<value>[^\s#]+)\s*(?:#.*)?$")
# Grouping (-g) headers between node blocks: "Chassis 3 (guid 0x...)", "Non-Chassis Nodes", and the
# "Hostname: <name>" line printed for Xsigo chassis. The man page's example starts "Non-Chassis Nodes".
_GROUP_HEADER = re.compile(r"^(?:Non-Chassis Nodes|Chassis\s+\d+(?:\s+\(guid\s+0x[0-9a-fA-F]+\))?|Hostname:\s.*)$")
_HEADER_START = re.compile(r"^(Switch|Ca|Rt)\s")
_SWITCH_HEADER = re.compile(
    r"""^Switch\s+(?P<nports>\d+)\s+"(?P<prefix>[^"-]*)-(?P<guid>[^"]*)"\s*\#\s*"(?P<desc>.*)"
        \s+(?:(?:enhanced|base)\s+port\s+0\s+)?lid\s+(?P<lid>\d+)\s+lmc\s+\d+\s*$""",
    re.VERBOSE,
)
_CA_HEADER = re.compile(
    r"""^(?P<keyword>Ca|Rt)\s+(?P<nports>\d+)\s+"(?P<prefix>[^"-]*)-(?P<guid>[^"]*)"\s*\#\s*"(?P<desc>.*)"
        (?:\s+\(scp\))?\s*$""",
    re.VERBOSE,
)
_PEER = r'\s*"(?P<prefix>[^"-]*)-(?P<guid>[^"]*)"\[(?P<pport>\d+)\](?:\[ext\s+\d+\])?\s*(?:\((?P<ppguid>[^)]*)\))?'
# The rate may be followed by the -f (full) details "s=4 w=2 v=3 e=1" and by Xsigo's "slot N" / "(scp)".
_RATE_TAIL = (
    r"\s+lid\s+(?P<plid>\d+)\s+(?P<rate>\S+)(?:\s+s=\d+\s+w=\d+\s+v=\d+(?:\s+e=\d+)?)?"
    r"(?:\s+slot\s+\d+|\s+\(scp\))?\s*$"
)
# ibdiagnet's copy of the topology (ibdiagnet2.ibnetdiscover) labels each port after its number: a switch port
# "[1](1/1/1)" (Quantum-2: ASIC/cage/port, split mode ASIC/cage/port/split; Quantum: port[/split]), a CA port
# "[1](1)(portguid)" or "[1](B9D0F0/0/0/1)(portguid)" (its PCI function). Read, not stored. On a CA line the port
# GUID's parentheses follow it, so a lone "(portguid)" is never taken for a label.
_LABEL = r"(?:\((?P<label>[0-9A-Za-z]+(?:/[0-9A-Za-z]+)*)\))?"
# Switch blocks: `[p]  "H-guid"[q](portguid)  # "peer desc" lid L 4xQDR`
_PORT_FROM_SWITCH = re.compile(
    r"^\[(?P<port>\d+)\]" + _LABEL + r"(?:\[ext\s+\d+\])?" + _PEER + r'\s*\#\s*"(?P<pdesc>.*)"' + _RATE_TAIL,
    re.VERBOSE,
)
# Ca/Rt blocks: `[p](portguid)  "S-guid"[q]  # lid L lmc 0 "peer desc" lid L2 4xQDR`
_PORT_FROM_CA = re.compile(
    r"^\[(?P<port>\d+)\]"
    + _LABEL
    + r"\s*\((?P<oguid>[^)]*)\)"
    + _PEER
    + r'\s*\#\s*lid\s+(?P<olid>\d+)\s+lmc\s+\d+\s+"(?P<pdesc>.*)"'
    + _RATE_TAIL,
    re.VERBOSE,
)
# "MF0;ib5:SX6036/U1": Mellanox managed switch, "<fabric id>;<host name>:<model>/<unit>".
_MELLANOX_SWITCH_DESC = re.compile(r"^[^;]*;(?P<name>[^:;]+):(?P<model>[^/]+)(?:/.*)?$")


@dataclass(slots=True)
class _Node:
    prefix: str  # "S", "H" or "R"
    guid: str
    description: str
    line: int  # of its header
    port_count: int = 0
    lid: int | None = None
    vendor_id: str = ""
    device_id: str = ""
    system_guid: str = ""
    port_guids: dict[int, str] = field(default_factory=dict)
    lids: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class _PortLine:
    line: int
    node: _Node
    port: int
    peer_prefix: str
    peer_guid: str
    peer_port: int
    peer_description: str
    peer_lid: int
    rate: LinkRate
    port_guid: str = ""  # own port GUID (Ca/Rt blocks)
    own_lid: int | None = None
    peer_port_guid: str = ""


def parse_ibnetdiscover(text: str, source: str = "") -> ParsedFabric:
    """Parse `ibnetdiscover` output; raise ParseError (with its line) on malformed input.

    What is read with a warning instead (ParsedFabric.warnings, each "file:line: ..."): stderr lines
    of the tools, the two ends of a cable reporting different rates (the slower is kept, the link
    marked degraded), and HCAs with no host name (kept as unnamed hosts).
    """
    check_text(text, source)
    warnings: list[str] = []
    nodes, port_lines = _read_blocks(text, source, warnings)
    if not nodes and not port_lines:
        raise ParseError("no switches or channel adapters found", 0, source)
    links = _link_ports(nodes, port_lines, source)
    cas = [_ca(n) for n in nodes.values() if n.prefix != "S"]
    return ParsedFabric(
        switches=[_switch(n) for n in nodes.values() if n.prefix == "S"],
        cas=cas,
        links=links.links(),
        source="ibnetdiscover",
        warnings=warnings + links.warnings + name_unnamed_by_system(cas, source),
    )


def _read_blocks(text: str, source: str, warnings: list[str]) -> tuple[dict[str, _Node], list[_PortLine]]:
    """First pass: the grammar of every line, and what each block declares."""
    nodes: dict[str, _Node] = {}
    port_lines: list[_PortLine] = []
    pending: dict[str, str] = {}  # vendid/devid/sysimgguid lines waiting for their node header
    current: _Node | None = None
    for number, raw in iter_lines(text):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if m := _KEY_VALUE.match(line):
            pending[m["key"]] = m["value"]
        elif _HEADER_START.match(line):
            current = _read_header(line, number, source, pending)
            _declare(nodes, current, source)
            pending = {}
        elif line.startswith("["):
            if current is None:
                raise ParseError("port line before any Switch, Ca or Rt header", number, source)
            port_lines.append(_read_port_line(line, number, source, current))
        elif _GROUP_HEADER.match(line):
            current = None  # a chassis heading (-g): the next block starts with its own header
        elif is_diagnostic(line):
            warnings.append(diagnostic_warning(line, number, source))  # the block goes on after it
        else:
            raise ParseError(f"unrecognised line: {excerpt(line)}", number, source)
    return nodes, port_lines


def _read_header(line: str, number: int, source: str, pending: dict[str, str]) -> _Node:
    m = _SWITCH_HEADER.match(line) or _CA_HEADER.match(line)
    if not m:
        keyword = line.split()[0]
        tail = "enhanced port 0 lid <lid> lmc <lmc>" if keyword == "Switch" else ""
        expected = f'{keyword} <ports> "{_PREFIX_BY_HEADER[keyword]}-<guid>" # "<description>" {tail}'.strip()
        raise ParseError(f"malformed {keyword} header (expected '{expected}'): {excerpt(line)}", number, source)
    keyword = m.groupdict().get("keyword") or "Switch"
    prefix = _node_prefix(m["prefix"], m["guid"], number, source)
    if prefix != _PREFIX_BY_HEADER[keyword]:
        raise ParseError(
            f"{keyword} header with node id '{prefix}-{m['guid']}' (a {keyword} id starts with "
            f"'{_PREFIX_BY_HEADER[keyword]}-')",
            number,
            source,
        )
    lid = m.groupdict().get("lid")
    return _Node(
        prefix=prefix,
        guid=parse_guid(m["guid"], number, source),
        description=m["desc"],
        line=number,
        port_count=int(m["nports"]),
        lid=int(lid) if lid is not None else None,
        vendor_id=pending.get("vendid", ""),
        device_id=pending.get("devid", ""),
        system_guid=_system_guid(pending.get("sysimgguid", "")),
    )


def _system_guid(value: str) -> str:
    """The sysimgguid of a block, normalised; "" when absent or not a GUID (it only groups HCAs)."""
    return guid_or_empty(value)


def _declare(nodes: dict[str, _Node], node: _Node, source: str) -> None:
    first = nodes.get(node.guid)
    if first is not None:
        raise ParseError(f"node {node.guid} is declared twice (first at line {first.line})", node.line, source)
    nodes[node.guid] = node


def _read_port_line(line: str, number: int, source: str, node: _Node) -> _PortLine:
    m = _PORT_FROM_SWITCH.match(line) or _PORT_FROM_CA.match(line)
    if not m:
        raise ParseError(f"malformed port line: {excerpt(line)}", number, source)
    port = _check_port(int(m["port"]), node, number, source)
    groups = m.groupdict()
    port_line = _PortLine(
        line=number,
        node=node,
        port=port,
        peer_prefix=_node_prefix(m["prefix"], m["guid"], number, source),
        peer_guid=parse_guid(m["guid"], number, source),
        peer_port=int(m["pport"]),
        peer_description=m["pdesc"],
        peer_lid=int(m["plid"]),
        rate=parse_link_rate(m["rate"], number, source),
    )
    if groups.get("oguid") is not None:
        port_line.port_guid = parse_guid(groups["oguid"], number, source, "port GUID")
        port_line.own_lid = int(groups["olid"])
    if m["ppguid"] is not None:
        port_line.peer_port_guid = parse_guid(m["ppguid"], number, source, "port GUID")
    return port_line


def _check_port(port: int, node: _Node, number: int, source: str) -> int:
    if port == 0:
        raise ParseError(f"port 0 of {_name(node)} cannot carry a link", number, source)
    if node.port_count and port > node.port_count:
        raise ParseError(f"port {port} is beyond the {node.port_count} ports {_name(node)} declares", number, source)
    return port


def _link_ports(nodes: dict[str, _Node], port_lines: list[_PortLine], source: str) -> LinkTable:
    """Second pass, in line order: resolve peers, check them, record and dedupe the links."""
    links = LinkTable(source, lambda guid: _name(nodes[guid]))
    for pl in port_lines:
        peer = _resolve_peer(nodes, pl, source)
        _check_port(pl.peer_port, peer, pl.line, source)
        _record_port_facts(pl, peer)
        links.add_link((pl.node.guid, pl.port), (peer.guid, pl.peer_port), pl.rate, pl.line)
    return links


def _resolve_peer(nodes: dict[str, _Node], pl: _PortLine, source: str) -> _Node:
    peer = nodes.get(pl.peer_guid)
    if peer is None:
        raise ParseError(
            f"peer '{pl.peer_prefix}-{pl.peer_guid}' (\"{pl.peer_description}\") is never declared: the file has "
            f"no {_HEADER_BY_PREFIX[pl.peer_prefix]} block for it, and ibnetdiscover prints one for every node "
            "it links to (cut short or edited?)",
            pl.line,
            source,
        )
    if peer.prefix != pl.peer_prefix:
        raise ParseError(
            f"unknown node id '{pl.peer_prefix}-{pl.peer_guid}': that GUID is declared as "
            f"{_HEADER_BY_PREFIX[peer.prefix]} at line {peer.line}",
            pl.line,
            source,
        )
    return peer


def _record_port_facts(pl: _PortLine, peer: _Node) -> None:
    """Port GUIDs and LIDs of CA ports: a block's own lines win over what peers say of it."""
    if pl.port_guid:
        pl.node.port_guids[pl.port] = pl.port_guid
    if pl.own_lid is not None and pl.node.prefix != "S":
        pl.node.lids[pl.port] = pl.own_lid
    if peer.prefix != "S":
        if pl.peer_port_guid:
            peer.port_guids.setdefault(pl.peer_port, pl.peer_port_guid)
        peer.lids.setdefault(pl.peer_port, pl.peer_lid)


def _node_prefix(prefix: str, guid: str, number: int, source: str) -> str:
    if prefix not in _HEADER_BY_PREFIX:
        raise ParseError(f"bad node id '{prefix}-{guid}': expected 'S-', 'H-' or 'R-' before the GUID", number, source)
    return prefix


def switch_name_and_model(description: str) -> tuple[str, str]:
    """Name and model of a switch: "MF0;ib5:SX6036/U1" -> ("ib5", "SX6036"), else (stripped description, "")."""
    m = _MELLANOX_SWITCH_DESC.match(description.strip())
    if m:
        return m["name"].strip(), m["model"].strip()
    return description.strip(), ""


def _switch(node: _Node) -> ParsedSwitch:
    name, model = switch_name_and_model(node.description)
    return ParsedSwitch(
        guid=node.guid,
        name=name or node.guid,
        description=node.description,
        port_count=node.port_count,
        lid=node.lid,
        vendor_id=node.vendor_id,
        device_id=node.device_id,
        model=model,
    )


def _ca(node: _Node) -> ParsedCA:
    hostname, device, kind = ca_identity(node.description, router=node.prefix == "R")
    return ParsedCA(
        guid=node.guid,
        description=node.description,
        hostname=hostname,
        device=device,
        kind=kind,
        port_guids=dict(sorted(node.port_guids.items())),
        lids=dict(sorted(node.lids.items())),
        vendor_id=node.vendor_id,
        device_id=node.device_id,
        system_guid=node.system_guid,
    )


def _name(node: _Node) -> str:
    if node.prefix == "S":
        name = switch_name_and_model(node.description)[0]
        return f"switch {name} ({node.guid})" if name else f"switch {node.guid}"
    kind = "router" if node.prefix == "R" else "CA"
    desc = node.description.strip()
    return f"{kind} '{desc}' ({node.guid})" if desc else f"{kind} {node.guid}"
