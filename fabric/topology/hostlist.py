"""Slurm hostlist expressions: `compress(["gpu001", ..., "gpu032"])` -> "gpu[001-032]", and back with `expand`. PURE.

Written to Slurm's own rules (src/common/hostlist.c, `_parse_single_range`), so that what `compress` writes expands
in slurmctld to exactly the names given:

* Only the trailing digits of a name are ranged: "a05-p1-dgx-01-c07" is prefix "a05-p1-dgx-01-c" and number "07".
* A range takes the width of its low bound: "n[08-10]" is n08 n09 n10 and "n[9-10]" is n9 n10. A zero-padded number
  ("007") joins a range only with numbers written at the same width, so "n7" and "n07" (two different hosts) never
  merge, and "n099,n100" is "n[099-100]" (100 written at width 3 is "100").
* Names with the same prefix share one bracket ("stage[1-24,26]"); prefixes follow each other in the order their
  first name sorts ("atlas,booster[1-4],rocket").

Characters that mean something in a hostlist or in a Slurm configuration line (brackets, commas, whitespace, `=`,
`#`) cannot be written in one: `invalid_name` says which a name carries, and `compress` refuses such a name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fabric.topology.graph import natural_key

_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")
_FORBIDDEN = re.compile(r"[\[\],=#\s\"'\\]")


def invalid_name(name: str) -> str:
    """Why `name` cannot be a Slurm node or switch name in a hostlist ("" when it can)."""
    if not name:
        return "an empty name"
    bad = _FORBIDDEN.search(name)
    if bad:
        return f"the character {bad.group()!r}, which has a meaning in a Slurm hostlist or configuration line"
    return ""


def _split(name: str) -> tuple[str, str]:
    m = _TRAILING_DIGITS.match(name)
    return (m.group(1), m.group(2)) if m else (name, "")


def _ranges(numbers: list[str]) -> list[str]:
    """Distinct digit strings of one prefix -> range texts ("001-032", "7"), each expanding to exactly its own."""
    present = set(numbers)
    used: set[str] = set()
    out: list[str] = []
    # Value order, the narrower spelling first: "7" and "07" are two hosts, and each starts its own run.
    for start in sorted(present, key=lambda s: (int(s), len(s))):
        if start in used:
            continue
        used.add(start)
        width, value, end = len(start), int(start), start
        while (nxt := f"{value + 1:0{width}d}") in present and nxt not in used:
            used.add(nxt)
            value, end = value + 1, nxt
        out.append(start if end == start else f"{start}-{end}")
    return out


def compress(names: Iterable[str]) -> str:
    """The shortest Slurm hostlist of these names (duplicates dropped). Raises ValueError naming a name that
    cannot be written in a hostlist."""
    by_prefix: dict[str, list[str]] = {}
    plain: set[str] = set()
    first: dict[str, tuple[object, ...]] = {}
    for name in names:
        why = invalid_name(name)
        if why:
            raise ValueError(f"{name!r} cannot be written in a Slurm hostlist: it holds {why}")
        prefix, digits = _split(name)
        key = natural_key(name)
        if digits:
            by_prefix.setdefault(prefix, []).append(digits)
            slot = ("n", prefix)
        else:
            plain.add(name)
            slot = ("p", name)
        if slot not in first or key < first[slot]:
            first[slot] = key
    parts: list[tuple[tuple[object, ...], str]] = []
    for name in plain:
        parts.append((first[("p", name)], name))
    for prefix, numbers in by_prefix.items():
        ranges = _ranges(numbers)
        text = prefix + ranges[0] if len(ranges) == 1 and "-" not in ranges[0] else f"{prefix}[{','.join(ranges)}]"
        parts.append((first[("n", prefix)], text))
    parts.sort(key=lambda p: (p[0], p[1]))
    return ",".join(text for _, text in parts)


def expand(expression: str) -> list[str]:
    """A hostlist expression -> its names, in order (the inverse of `compress`; one bracket per name, as
    `compress` writes and Slurm prints for a one-dimensional system). Raises ValueError on a malformed range."""
    names: list[str] = []
    for item in _top_level_items(expression):
        if "[" not in item:
            names.append(item)
            continue
        open_at = item.index("[")
        close_at = item.find("]", open_at)
        if close_at < 0:
            raise ValueError(f"unclosed '[' in {item!r}")
        prefix, body, suffix = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
        if "[" in suffix:
            raise ValueError(f"more than one range in {item!r}")
        for part in body.split(","):
            lo, sep, hi = part.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                raise ValueError(f"bad range {part!r} in {item!r}")
            width = len(lo)
            start, stop = int(lo), int(hi) if sep else int(lo)
            if stop < start:
                raise ValueError(f"range {part!r} runs backwards in {item!r}")
            names.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(start, stop + 1))
    return names


def _top_level_items(expression: str) -> list[str]:
    items, depth, current = [], 0, []
    for ch in expression:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        items.append("".join(current))
    return [i for i in items if i]
