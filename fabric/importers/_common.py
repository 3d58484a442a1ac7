"""Helpers shared by the text importers: input hygiene, GUIDs, rates, and the link table.

Everything here is pure: strings in, dataclasses or ParseError out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache

from fabric.topology.rates import LinkRate, RateError, parse_rate

from .types import CaKind, ParsedLink, ParsedPort, ParseError, PortRef, normalise_guid

# C0 control characters other than tab, LF and CR never occur in tool output or hand-written
# files; their presence means someone fed us a binary (a core dump, a gzip, a tarball). U+FFFD is
# what a lenient decoder leaves where the bytes were not UTF-8.
_JUNK = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
_HEX_GUID = re.compile(r"(?:0[xX])?([0-9a-fA-F]{1,16})")


def check_text(text: str, source: str = "") -> None:
    """Raise ParseError at the first line holding binary junk (NUL or control bytes, U+FFFD)."""
    m = _JUNK.search(text)
    if m is None:
        return
    line = text.count("\n", 0, m.start()) + 1
    column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    char = m.group()
    if char == "\ufffd":
        what = "undecodable bytes (U+FFFD)"
    else:
        what = "NUL byte" if char == "\0" else f"control character 0x{ord(char):02x}"
    raise ParseError(f"binary data: {what} at column {column}", line, source)


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its end) pairs.

    Splits on "\\n" only: str.splitlines also breaks on form feeds, U+2028 and friends, which
    would make our line numbers disagree with what an editor or `sed -n` shows.
    """
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")


def excerpt(line: str, limit: int = 100) -> str:
    """A line quoted for an error message, cut short when long."""
    return repr(line if len(line) <= limit else line[:limit] + "...")


def parse_guid(token: str, line: int, source: str, what: str = "GUID") -> str:
    guid = _guid(token)
    if guid is None:
        raise ParseError(f"bad {what} {token!r}: expected up to 16 hex digits", line, source)
    return guid


@lru_cache(maxsize=1 << 16)
def _guid(token: str) -> str | None:
    # Each GUID appears several times in a fabric dump (its block, every peer's line), so the
    # cache pays; the regex is the fast path for the plain hex that tools print.
    m = _HEX_GUID.fullmatch(token)
    if m:
        return m.group(1).lower().rjust(16, "0")
    try:
        return normalise_guid(token)
    except ValueError:
        return None


def parse_link_rate(token: str, line: int, source: str) -> LinkRate:
    try:
        return _rate(token)
    except RateError as exc:
        raise ParseError(f"bad link rate: {exc}", line, source) from None


@lru_cache(maxsize=256)
def _rate(token: str) -> LinkRate:
    return parse_rate(token)  # a fabric has a handful of distinct rate strings; errors are not cached


def ca_identity(description: str, router: bool = False) -> tuple[str, str, CaKind]:
    """(hostname, device, kind) of a channel adapter from its node description.

    The kernel sets a CA's description to "<hostname> <device>": "stage114 mlx4_0" gives
    ("stage114", "mlx4_0", "host"). SHARP aggregation nodes ("Mellanox Technologies Aggregation
    Node") are CAs inside switches and routers forward between subnets: neither is a host. A
    description still ending in "Mellanox Technologies" is the firmware default (no host name was
    ever set), so it names no host. A single word is taken as the host name.
    """
    if router:
        return "", "", "router"
    if "aggregation node" in description.lower():
        return "", "", "aggregation"
    words = description.split()
    if not words or description.strip().endswith("Mellanox Technologies"):
        return "", "", "host"
    return words[0], (words[-1] if len(words) > 1 else ""), "host"


End = tuple[str, int]  # (node GUID, port): a PortRef without the dataclass cost on hot paths


class LinkTable:
    """Collects the links an input states, each usually twice (once from each end).

    Dedupes by the unordered pair of (GUID, port) ends, and refuses contradictions: one port
    cabled to two different peers, a port listed both as unconnected and as linked, or the two
    ends of one cable reporting different rates (a port has one active width and speed, so the
    two reports of one link must agree; an unknown speed "???" agrees with anything).
    """

    def __init__(self, source: str, describe: Callable[[str], str], *, lenient: bool = False) -> None:
        self._source = source
        # Lenient: a line contradicting an earlier one is skipped with a warning instead of refused
        # (`ibnetdiscover -p` listings are often stitched together from several runs).
        self._lenient = lenient
        self.warnings: list[str] = []
        self._describe = describe  # GUID -> a readable node name for error messages
        self._claims: dict[End, tuple[End | None, int]] = {}  # end -> (its peer or None if down, line)
        self._links: dict[tuple[End, End], tuple[ParsedLink, int]] = {}  # sorted ends -> (link, first line)
        self._down: dict[End, ParsedPort] = {}

    def add_link(self, a: End, b: End, rate: LinkRate, line: int) -> None:
        if a == b:
            raise ParseError(f"{self._name(a)} is linked to itself", line, self._source)
        if not self._claim(a, b, line) or not self._claim(b, a, line):
            return
        key = (a, b) if a < b else (b, a)
        existing = self._links.get(key)
        if existing is None:
            link = ParsedLink(a=PortRef(*a), b=PortRef(*b), width=rate.width, speed=rate.speed)
            self._links[key] = (link, line)
        else:
            self._merge_rate(*existing, rate, line)

    def add_down(self, end: End, rate: LinkRate, line: int) -> None:
        if not self._claim(end, None, line):
            return
        if end not in self._down:
            self._down[end] = ParsedPort(ref=PortRef(*end), width=rate.width, speed=rate.speed)

    def links(self) -> list[ParsedLink]:
        return [link for link, _ in self._links.values()]

    def down_ports(self) -> list[ParsedPort]:
        return list(self._down.values())

    def _claim(self, end: End, peer: End | None, line: int) -> bool:
        """Record that `end` is cabled to `peer`; False (lenient) when an earlier line said otherwise."""
        previous = self._claims.setdefault(end, (peer, line))
        if previous[0] == peer:
            return True
        error = ParseError(
            f"two different peers for {self._name(end)}: {self._peer_name(previous[0])} "
            f"(line {previous[1]}) and {self._peer_name(peer)}",
            line,
            self._source,
        )
        if not self._lenient:
            raise error
        self.warnings.append(f"{error}; line {line} skipped, the first claim kept")
        return False

    def _merge_rate(self, link: ParsedLink, first_line: int, rate: LinkRate, line: int) -> None:
        if link.speed and rate.speed and (link.width, link.speed) != (rate.width, rate.speed):
            a, b = (link.a.node_guid, link.a.port), (link.b.node_guid, link.b.port)
            raise ParseError(
                f"the two ends of the link {self._name(a)} - {self._name(b)} disagree on its rate: "
                f"{link.width}x{link.speed} (line {first_line}) and {rate.label}",
                line,
                self._source,
            )
        if not link.speed and rate.speed:
            link.width, link.speed = rate.width, rate.speed

    def _name(self, end: End) -> str:
        return f"port {end[1]} of {self._describe(end[0])}"

    def _peer_name(self, peer: End | None) -> str:
        return "no peer (unconnected)" if peer is None else self._name(peer)
