"""Importers: pure parsers from tool output or a design file to the dataclasses of `types`.

`FORMATS` holds the parsers that describe a fabric (switches, CAs, links); `NODE_FORMATS` those
that describe one server's insides (`nvidia-smi topo -m`). Every parser takes `(text, source)`
and raises ParseError with a line number on bad input. `read_text` is the only I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from .ibnetdiscover import parse_ibnetdiscover
from .ibnetdiscover_ports import parse_ibnetdiscover_ports
from .nvidia_topo import closest_nics, parse_nvidia_topo
from .spec import parse_spec
from .types import ParsedFabric, ParsedNodeTopology, ParseError

FabricParser = Callable[[str, str], ParsedFabric]
NodeTopologyParser = Callable[[str, str], ParsedNodeTopology]

FORMATS: dict[str, FabricParser] = {
    "ibnetdiscover": parse_ibnetdiscover,
    "ibnetdiscover-ports": parse_ibnetdiscover_ports,
    "spec": parse_spec,
}
NODE_FORMATS: dict[str, NodeTopologyParser] = {
    "nvidia-topo": parse_nvidia_topo,
}

_LOOKS_LIKE = (
    ("ibnetdiscover", re.compile(r"^(Switch|Ca|Rt)\s+\d+\s+\"[SHR]-|^(vendid|switchguid|caguid)=", re.MULTILINE)),
    ("ibnetdiscover-ports", re.compile(r"^\s*(CA|SW|RT)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s", re.MULTILINE)),
    ("nvidia-topo", re.compile(r"^\s+GPU0\s", re.MULTILINE)),
)

__all__ = [
    "FORMATS",
    "NODE_FORMATS",
    "FabricParser",
    "NodeTopologyParser",
    "ParseError",
    "closest_nics",
    "guess_format",
    "parser_for",
    "read_text",
]


def parser_for(name: str) -> FabricParser:
    """The fabric parser registered under `name`; KeyError lists the known formats."""
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}; known: {', '.join(FORMATS)}") from None


def guess_format(text: str) -> str:
    """Best guess at the format of `text` (a key of FORMATS or NODE_FORMATS); "spec" otherwise.

    For a command's `--format auto`: tool outputs have unmistakable lines, anything else is
    taken for a hand-written spec, whose parser then says precisely what is wrong with it.
    """
    head = text[:20_000]
    for name, pattern in _LOOKS_LIKE:
        if pattern.search(head):
            return name
    return "spec"


def read_text(path: str | Path) -> str:
    """Read a file as strict UTF-8 text (a BOM is dropped).

    Raises ParseError, with the line of the first bad byte, for binary junk: bytes that are not
    UTF-8, or NUL bytes. OSError (missing file, no permission) propagates unchanged.
    """
    data = Path(path).read_bytes()
    source = str(path)
    nul = data.find(b"\0")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if 0 <= nul < exc.start:
            raise ParseError("binary data: NUL byte", _line_of(data, nul), source) from None
        message = f"not UTF-8 text: byte 0x{data[exc.start]:02x} (binary data?)"
        raise ParseError(message, _line_of(data, exc.start), source) from None
    if nul >= 0:
        raise ParseError("binary data: NUL byte", _line_of(data, nul), source)
    return text


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1
