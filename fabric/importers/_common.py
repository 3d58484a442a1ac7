"""Helpers shared by the text importers: input hygiene, GUIDs, rates, and the link table.

Everything here is pure: strings in, dataclasses or ParseError out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache

from fabric.topology.link_speeds import LinkRate, RateError, parse_rate

from .types import CaKind, ParsedCA, ParsedLink, ParsedPort, ParseError, PortRef, normalise_guid

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


# What infiniband-diags and the libraries under it print on stderr, which lands among the data when
# a capture was taken with 2>&1:
#   ibwarn: [1234] main: ...                    IBWARN (libibmad, libibumad, the tools); also ibpanic, ibdebug
#   ibnetdiscover: iberror: [pid 1234] ...     IBEXIT / IBERROR
#   src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,1,31 Attr 0x11:0) bad status 110; Connection timed out
#                                               libibnetdisc's IBND_ERROR ("<file>.c:<line>; ")
_DIAGNOSTIC = re.compile(
    r"^(?:(?:ibwarn|ibpanic|ibdebug|iberror):\s"
    r"|[\w.+-]+:\s+iberror:\s"
    r"|(?:[\w.+-]+/)*[\w.+-]+\.c:\d+;\s)"
)


def is_diagnostic(line: str) -> bool:
    """True for a line the tools print on stderr (a warning, not data): see _DIAGNOSTIC."""
    return _DIAGNOSTIC.match(line) is not None


def diagnostic_warning(line: str, number: int, source: str) -> str:
    """The warning for a stderr line met among the data (the data around it is still read)."""
    return str(ParseError(f"diagnostic output of the tool, not topology (skipped): {excerpt(line)}", number, source))


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


def guid_or_empty(token: str) -> str:
    """A GUID normalised, or "" when the token is not one (for optional, informative fields)."""
    return _guid(token) or ""


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


# Node descriptions that name no host. Mellanox/NVIDIA firmware sets "MT<device id> <family> Mellanox
# Technologies" (e.g. "MT4129 ConnectX7   Mellanox Technologies") until the driver or an admin sets
# "<hostname> <device>"; a server that booted before its host name was set says "localhost mlx5_0".
_FIRMWARE_DEFAULT = re.compile(r"^MT\d{4,5}\b|Mellanox Technologies\s*$")
_NO_HOST_NAMES = frozenset({"localhost", "localhost.localdomain", "(none)"})


def ca_identity(description: str, router: bool = False) -> tuple[str, str, CaKind]:
    """(hostname, device, kind) of a channel adapter from its node description.

    The kernel sets a CA's description to "<hostname> <device>": "stage114 mlx4_0" gives
    ("stage114", "mlx4_0", "host"). SHARP aggregation nodes ("Mellanox Technologies Aggregation
    Node") are CAs inside switches and routers forward between subnets: neither is a host. A
    firmware-default description ("MT4129 ConnectX7   Mellanox Technologies", anything starting
    "MT<digits>" or ending "Mellanox Technologies"), an empty one, or "localhost ..." names no host:
    hostname "" (an unnamed HCA, still a host's adapter). A single word is taken as the host name.
    """
    if router:
        return "", "", "router"
    if "aggregation node" in description.lower():
        return "", "", "aggregation"
    words = description.split()
    if not words or _FIRMWARE_DEFAULT.search(description.strip()) or words[0].lower() in _NO_HOST_NAMES:
        return "", "", "host"
    return words[0], (words[-1] if len(words) > 1 else ""), "host"


def name_unnamed_by_system(cas: list[ParsedCA], source: str) -> list[str]:
    """Give an unnamed HCA the host name of a named HCA with the same system image GUID.

    The functions of one adapter card (mlx5_0, mlx5_1) share a system image GUID; when one of them
    carries the host name and the other still has the firmware default, both are that host's.
    Returns one warning per HCA so named, and one summary of the HCAs that stay unnamed.
    """
    by_system: dict[str, set[str]] = {}
    for ca in cas:
        if ca.kind == "host" and ca.hostname and ca.system_guid:
            by_system.setdefault(ca.system_guid, set()).add(ca.hostname)
    warnings: list[str] = []
    left: list[ParsedCA] = []
    where = source or "input"
    for ca in cas:
        if not ca.unnamed:
            continue
        names = by_system.get(ca.system_guid) if ca.system_guid else None
        if names and len(names) == 1:
            (ca.hostname,) = names
            warnings.append(
                f"{where}: CA {ca.guid} ({ca.description.strip()!r}) has no host name; it shares system image "
                f"GUID {ca.system_guid} with {ca.hostname}'s adapter, so it is taken as {ca.hostname}'s"
            )
        else:
            left.append(ca)
    if left:
        systems = len({ca.system_key for ca in left})
        example = left[0]
        warnings.append(
            f"{where}: {len(left)} channel adapter(s) have no host name (firmware-default or empty node "
            f"description, e.g. {example.guid} {example.description.strip()!r}): kept as {systems} unnamed "
            "host(s) identified by system image GUID (else node GUID); name them, or set the node "
            "descriptions and import again"
        )
    return warnings


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
            # Two ports of one node cabled together is a loopback (kept, flagged); one port as its
            # own peer is no cable at all.
            raise ParseError(
                f"{self._name(a)} names itself as its peer (one port cannot be both ends of a cable)",
                line,
                self._source,
            )
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
            # A port has one active width and speed, so two different reports of one cable mean one
            # end is stale or misread. The slower is what the cable can be trusted to carry (ties of
            # data rate, 2xHDR against 4xEDR, go to the narrower width, whatever the line order).
            first = LinkRate(link.width, link.speed)
            slower = min(first, rate, key=lambda r: (r.data_gbps, r.width, r.speed))
            a, b = (link.a.node_guid, link.a.port), (link.b.node_guid, link.b.port)
            link.degraded = (
                f"its two ends report different rates: {first.label} (line {first_line}) and {rate.label} "
                f"(line {line}); the slower, {slower.label}, is kept"
            )
            link.width, link.speed = slower.width, slower.speed
            message = f"the link {self._name(a)} - {self._name(b)}: {link.degraded}; marked degraded"
            self.warnings.append(str(ParseError(message, line, self._source)))
            return
        if not link.speed and rate.speed:
            link.width, link.speed = rate.width, rate.speed

    def _name(self, end: End) -> str:
        return f"port {end[1]} of {self._describe(end[0])}"

    def _peer_name(self, peer: End | None) -> str:
        return "no peer (unconnected)" if peer is None else self._name(peer)
