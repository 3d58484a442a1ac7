"""Parse `ibnetdiscover -p` (the ports report) into a ParsedFabric.

One line per port of every discovered node::

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )
    SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'

that is `<type> <lid> <port> <port guid> <width> <speed>`, then either `- <type> <lid> <port> <port guid>
( '<own description>' - '<peer description>' )` for a linked port, or just `'<own description>'`
for a port without a peer. Types are CA, SW and RT (router).

Behaviour, beyond the grammar:

* This report prints PORT GUIDs and no node GUIDs. A switch's ports all share the switch GUID,
  so switches come out whole. A CA port's GUID differs from its node GUID and from its other
  ports: each CA port becomes a ParsedCA whose `guid` is that port GUID (with `port_guids` and
  `lids` holding the one port). Two ports of one dual-port HCA are therefore two CAs here; the
  default `ibnetdiscover` output (see ibnetdiscover.py) keeps them together.
* Switch port counts are not in the report: `port_count` is 0 (unknown). The LID of a switch
  line is the switch's LID, that of a CA line the port's LID.
* Links appear from both ends and are deduped by the unordered pair of (GUID, port) ends. A
  peer with no lines of its own is created from the reference (type, LID, description). The
  default format refuses such a peer because it has node blocks to check against; this report
  has none (every line names both ends in full), and -p listings are routinely excerpts or
  stitched from several runs (the published infiniband_exporter fixtures name switch
  0x7cfe900300b07320 only as a peer), so the check would refuse real files.
* Ports with no peer are down or unconnected: they go to `down_ports` (width, speed as printed).
  A width of "??" (unknown) is accepted there only, as width 0.
* Descriptions are kept exactly as printed (`' 5FB0406-spine-IB02 '` keeps its spaces); the
  switch name is the stripped description, or for a Mellanox managed switch its name and model as the
  default format reads them ("MF0;js01ib2:SX60XX/U1": js01ib2, SX60XX). CA descriptions give hostname
  and device as in the default format; "Aggregation Node" CAs are SHARP aggregation nodes (kind
  "aggregation").
* An unconnected port's description may be unquoted (older infiniband-diags).
* Warnings (with line numbers): a stderr line of the tools (see ibnetdiscover.py), a line that
  contradicts an earlier one (skipped, the first claim kept), the two ends of a cable printing
  different rates (the slower kept, the link marked degraded), CAs with no host name.
* Errors (with line numbers): empty input, binary junk, a line that does not match the grammar
  (including a truncated last line), a garbled rate or GUID, port 0, a node type other than
  CA/SW/RT, one GUID printed as two node types.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from fabric.topology.link_speeds import LinkRate

from ._common import (
    LinkTable,
    ca_identity,
    check_text,
    diagnostic_warning,
    excerpt,
    is_diagnostic,
    iter_lines,
    name_unnamed_by_system,
    parse_guid,
    parse_link_rate,
)
from .ibnetdiscover import switch_name_and_model
from .types import ParsedCA, ParsedFabric, ParsedSwitch, ParseError

_END = r"(?P<{0}type>\S+)\s+(?P<{0}lid>\d+)\s+(?P<{0}port>\d+)\s+(?P<{0}guid>\S+)"
_LINE = re.compile(
    r"^\s*" + _END.format("") + r"\s+(?P<width>\d+x|\?\?)\s*(?P<speed>\S+)\s+"
    r"(?:-\s+" + _END.format("p") + r"\s+\(\s*'(?P<desc>.*?)'\s+-\s+'(?P<pdesc>.*)'\s*\)"
    r"|'(?P<odesc>.*)'"
    # Older infiniband-diags printed an unconnected port's description unquoted (infiniband_exporter's
    # test3.out). It may not start with "-", so a link line cut short is still refused, not read as this.
    r"|(?P<bare>[^'\s-].*?))\s*$"
)
_TYPES = {"CA": "CA", "SW": "switch", "RT": "router"}  # as printed -> as named in messages


@dataclass(slots=True)
class _Node:
    type: str  # "CA", "SW" or "RT"
    guid: str
    description: str
    line: int  # first line that names it
    lid: int | None = None  # switch LID
    lids: dict[int, int] = field(default_factory=dict)  # CA/RT: port -> LID


@dataclass(slots=True)
class _End:
    type: str
    lid: int
    port: int
    guid: str


def parse_ibnetdiscover_ports(text: str, source: str = "") -> ParsedFabric:
    """Parse `ibnetdiscover -p` output; raise ParseError (with its line) on malformed input."""
    check_text(text, source)
    nodes: dict[str, _Node] = {}
    links = LinkTable(source, _describer(nodes), lenient=True)
    warnings: list[str] = []
    for number, raw in iter_lines(text):
        line = raw.strip()
        if not line:
            continue
        if is_diagnostic(line):
            warnings.append(diagnostic_warning(line, number, source))
            continue
        _read_line(raw, number, source, nodes, links)
    if not nodes:
        raise ParseError("no switches or channel adapters found", 0, source)
    cas = [_ca(n) for n in nodes.values() if n.type != "SW"]
    return ParsedFabric(
        switches=[_switch(n) for n in nodes.values() if n.type == "SW"],
        cas=cas,
        links=links.links(),
        down_ports=links.down_ports(),
        source="ibnetdiscover-ports",
        warnings=warnings + links.warnings + name_unnamed_by_system(cas, source),
    )


def _read_line(line: str, number: int, source: str, nodes: dict[str, _Node], links: LinkTable) -> None:
    m = _LINE.match(line)
    if not m:
        raise ParseError(f"malformed port line: {excerpt(line.strip())}", number, source)
    own = _end(m, "", number, source)
    rate = _rate(m["width"], m["speed"], number, source, linked=m["ptype"] is not None)
    if m["ptype"] is None:
        _node(nodes, own, m["odesc"] if m["odesc"] is not None else m["bare"], number, source)
        links.add_down((own.guid, own.port), rate, number)
        return
    peer = _end(m, "p", number, source)
    _node(nodes, own, m["desc"], number, source)
    _node(nodes, peer, m["pdesc"], number, source)
    links.add_link((own.guid, own.port), (peer.guid, peer.port), rate, number)


def _end(m: re.Match[str], prefix: str, number: int, source: str) -> _End:
    node_type = m[prefix + "type"]
    if node_type not in _TYPES:
        raise ParseError(f"unknown node type {node_type!r}: expected CA, SW or RT", number, source)
    port = int(m[prefix + "port"])
    if port == 0:
        raise ParseError("port 0 cannot carry a link", number, source)
    guid = parse_guid(m[prefix + "guid"], number, source)
    return _End(node_type, int(m[prefix + "lid"]), port, guid)


def _rate(width: str, speed: str, number: int, source: str, linked: bool) -> LinkRate:
    if width != "??":
        return parse_link_rate(f"{width}{speed}", number, source)
    # Only a port that never trained has no width to report; a live link always has one.
    if linked:
        raise ParseError("a link with unknown width '??'", number, source)
    return LinkRate(0, parse_link_rate(f"4x{speed}", number, source).speed)


def _node(nodes: dict[str, _Node], end: _End, description: str, number: int, source: str) -> None:
    """Create or update the node an end belongs to; one GUID must keep one node type."""
    node = nodes.get(end.guid)
    if node is None:
        node = nodes[end.guid] = _Node(end.type, end.guid, description, number)
    elif node.type != end.type:
        raise ParseError(
            f"GUID {end.guid} is a {end.type} here but a {node.type} at line {node.line}",
            number,
            source,
        )
    if end.type == "SW":
        if node.lid is None:
            node.lid = end.lid
    else:
        node.lids.setdefault(end.port, end.lid)


def _describer(nodes: dict[str, _Node]) -> Callable[[str], str]:
    """GUID -> readable node name for LinkTable's messages, from the nodes seen so far."""

    def describe(guid: str) -> str:
        node = nodes.get(guid)
        if node is None:
            return guid
        kind = _TYPES[node.type]
        desc = node.description.strip()
        return f"{kind} '{desc}' ({guid})" if desc else f"{kind} {guid}"

    return describe


def _switch(node: _Node) -> ParsedSwitch:
    # Named as the default format names it ("MF0;js01ib2:SX60XX/U1" -> js01ib2, model SX60XX), so importing one
    # fabric in either format gives its switches the same names.
    name, model = switch_name_and_model(node.description)
    return ParsedSwitch(
        guid=node.guid,
        name=name or node.guid,
        description=node.description,
        port_count=0,
        lid=node.lid,
        model=model,
    )


def _ca(node: _Node) -> ParsedCA:
    hostname, device, kind = ca_identity(node.description, router=node.type == "RT")
    port_guids = dict.fromkeys(sorted(node.lids), node.guid)  # the GUID printed is the port's own
    return ParsedCA(
        guid=node.guid,
        description=node.description,
        hostname=hostname,
        device=device,
        kind=kind,
        port_guids=port_guids,
        lids=dict(sorted(node.lids.items())),
    )
