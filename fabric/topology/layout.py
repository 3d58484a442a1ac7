"""Positions for the fabric page: switches by tier (top tier first), nodes under their leaf.

    from fabric.topology.layout import LayoutLink, LayoutNode, LayoutSwitch, layout
    lay = layout(
        [LayoutSwitch(1, tier=1, name="spine01"), LayoutSwitch(3, tier=0, name="leaf01")],
        [LayoutNode(7, leaf=3, name="gpu0001"), LayoutNode(8, leaf=3, role="storage", name="tank1")],
        [LayoutLink(("switch", 1), ("switch", 3))],
    )
    lay.switches[3].x, lay.nodes[7].y, lay.aggregated

Rows from the top: the highest tier (core), ..., spines, leaves (tier 0), then the nodes; a switch of unknown
tier (< 0) sits in a row of its own above everything. The rows of switches are ordered by barycentre sweeps
over the switch-switch links (down and up, a few times), so a leaf sits under the spines it is cabled to and
crossings stay few; ties keep the natural order of the names, so the result depends only on the input's
content, never on its order. Each leaf gets a block of columns as wide as the nodes under it (a grid of at
most `max_cols` columns); switches above are spread evenly over the whole width. Nodes hang under their
`leaf` switch: under a leaf in its block, under an upper-tier switch (a storage node on a spine) in a short
grid just below that switch, and nodes with no known switch in a block of their own at the right end.

Above `aggregate_above` nodes, each switch's nodes become one group `"leaf:<switch id>"` (docs/dashboard.md's
aggregated snapshot), carrying its member and storage counts; `group_of` maps every node to its group.
Entries that already are groups (`members` > 1 or role "group") are placed as given.

Coordinates are screen-like: x to the right, y downwards, from (0, 0); units are abstract (the page scales).
PURE: no Django, no I/O.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

Endpoint = tuple[str, int | str]  # ("switch", id) or ("node", id), as in the fabric snapshot's links
UNATTACHED = "leaf:none"  # group id of nodes whose switch is unknown (as dashboard/selectors.py names it)


@dataclass(frozen=True, slots=True)
class LayoutSwitch:
    id: int
    tier: int  # 0 leaf, 1 spine, 2 core, ...; negative = unknown
    name: str = ""


@dataclass(frozen=True, slots=True)
class LayoutNode:
    id: int | str
    leaf: int | None  # the switch it hangs under (usually a leaf); None = not cabled
    role: str = "compute"  # compute / storage / login / group
    name: str = ""
    members: int = 1  # > 1 for an entry that already is a group
    storage: int = 0  # storage members of a group entry (a storage node counts itself)


@dataclass(frozen=True, slots=True)
class LayoutLink:
    a: Endpoint
    b: Endpoint


@dataclass(frozen=True, slots=True)
class Placed:
    x: float
    y: float
    row: int  # 0 = the top row; nodes are in rows below the leaves
    members: int = 1
    storage: int = 0  # storage nodes here: 0/1 for a node, a count for a group


@dataclass(slots=True)
class Layout:
    switches: dict[int, Placed]
    nodes: dict[int | str, Placed]  # node id -> place; group id ("leaf:3") -> place when aggregated
    aggregated: bool
    width: float
    height: float
    group_of: dict[int | str, str] = field(default_factory=dict)  # node id -> group id (aggregated only)
    order: list[list[int]] = field(default_factory=list)  # switch ids per row, top row first


_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple:
    """'leaf2' < 'leaf10'."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in _DIGITS.split(text) if part)


def _sort_key(name: str, ident: int | str) -> tuple:
    return natural_key(name), natural_key(str(ident))


def _group_id(leaf: int | None) -> str:
    return UNATTACHED if leaf is None else f"leaf:{leaf}"


def _aggregate(nodes: list[LayoutNode]) -> tuple[list[LayoutNode], dict[int | str, str]]:
    members: dict[int | None, int] = defaultdict(int)
    storage: dict[int | None, int] = defaultdict(int)
    group_of: dict[int | str, str] = {}
    for node in nodes:
        members[node.leaf] += node.members
        storage[node.leaf] += node.storage or int(node.role == "storage")
        group_of[node.id] = _group_id(node.leaf)
    groups = [
        LayoutNode(_group_id(leaf), leaf, "group", _group_id(leaf), members[leaf], storage[leaf]) for leaf in members
    ]
    return groups, group_of


def _sweep(rows: list[list[int]], neighbours: dict[int, list[int]], row_of: dict[int, int], sweeps: int) -> None:
    """Barycentre ordering in place: each row sorted by the mean relative position of its neighbours in the rows
    above (down sweep) or below (up sweep); a switch without such neighbours keeps its place."""
    if len(rows) < 2:
        return
    rel: dict[int, float] = {}

    def place(row: list[int]) -> None:
        n = len(row)
        for i, s in enumerate(row):
            rel[s] = (i + 0.5) / n

    for row in rows:
        place(row)
    for _ in range(sweeps):
        for direction in (1, -1):
            indices = range(1, len(rows)) if direction == 1 else range(len(rows) - 2, -1, -1)
            for r in indices:
                row = rows[r]
                keys = {}
                for s in row:
                    others = [rel[t] for t in neighbours.get(s, ()) if (row_of[t] - r) * direction < 0]
                    # fsum: the correctly rounded sum, the same in any order (a plain float sum of the same
                    # neighbours in another order can differ in its last bit and swap two tied switches)
                    keys[s] = (math.fsum(others) / len(others) if others else rel[s], rel[s])
                row.sort(key=keys.__getitem__)
                place(row)


def layout(
    switches: list[LayoutSwitch],
    nodes: list[LayoutNode],
    links: list[LayoutLink],
    *,
    aggregate_above: int = 256,
    switch_gap: float = 48.0,
    node_gap: float = 12.0,
    tier_gap: float = 120.0,
    max_cols: int = 8,
    sweeps: int = 4,
) -> Layout:
    """Positions of every switch and node (or node group); see the module docstring."""
    singles = [n for n in nodes if n.members <= 1 and n.role != "group"]
    aggregated = len(singles) > aggregate_above
    group_of: dict[int | str, str] = {}
    if aggregated:
        groups, group_of = _aggregate(singles)
        placed_nodes = [*(n for n in nodes if n.members > 1 or n.role == "group"), *groups]
    else:
        placed_nodes = list(nodes)

    # Rows of switches: highest tier first, unknown tiers on top.
    by_id = {s.id: s for s in switches}
    tiers = sorted({s.tier for s in switches if s.tier >= 0}, reverse=True)
    has_unknown = any(s.tier < 0 for s in switches)
    row_index = {t: i + int(has_unknown) for i, t in enumerate(tiers)}
    rows: list[list[int]] = [[] for _ in range(len(tiers) + int(has_unknown))]
    for s in sorted(switches, key=lambda s: _sort_key(s.name, s.id)):
        rows[row_index[s.tier] if s.tier >= 0 else 0].append(s.id)
    row_of = {s: r for r, row in enumerate(rows) for s in row}

    neighbours: dict[int, list[int]] = defaultdict(list)
    for link in links:
        if link.a[0] == "switch" and link.b[0] == "switch" and link.a[1] in row_of and link.b[1] in row_of:
            a, b = link.a[1], link.b[1]
            if row_of[a] != row_of[b]:
                neighbours[a].append(b)
                neighbours[b].append(a)
    _sweep(rows, neighbours, row_of, sweeps)

    # Nodes per switch, in natural order of their names.
    leaf_row = row_index[0] if 0 in row_index else len(rows) - 1  # -1: no switches at all
    under: dict[int | None, list[LayoutNode]] = defaultdict(list)
    for node in sorted(placed_nodes, key=lambda n: _sort_key(n.name, n.id)):
        under[node.leaf if node.leaf in by_id else None].append(node)

    # Bottom row: one block per leaf (as wide as its nodes' grid), then the unattached nodes.
    def grid_width(count: int) -> float:
        return min(max(count, 1), max_cols) * node_gap

    bottom = rows[leaf_row] if leaf_row >= 0 else []
    blocks = [(s, max(grid_width(len(under.get(s, ()))), switch_gap)) for s in bottom]
    if under.get(None):
        blocks.append((None, max(grid_width(len(under[None])), switch_gap)))
    bottom_width = sum(w for _, w in blocks)
    width = max([bottom_width, *(len(row) * switch_gap for row in rows)], default=0.0)

    out_switches: dict[int, Placed] = {}
    for r, row in enumerate(rows):
        if r == leaf_row:
            continue
        spacing = width / len(row)
        for i, s in enumerate(row):
            out_switches[s] = Placed(round((i + 0.5) * spacing, 2), round(r * tier_gap, 2), r)

    out_nodes: dict[int | str, Placed] = {}
    node_top = (max(leaf_row, 0) + 0.5) * tier_gap  # nodes half a tier below their leaves
    height = node_top if placed_nodes else max(len(rows) - 1, 0) * tier_gap

    def put_grid(members: list[LayoutNode], centre: float, top: float, cols: int, row: int) -> float:
        lowest = top
        for i, node in enumerate(members):
            col, line = i % cols, i // cols
            x = centre + (col - (min(cols, len(members)) - 1) / 2) * node_gap
            y = top + line * node_gap
            storage = node.storage or int(node.role == "storage")
            out_nodes[node.id] = Placed(round(x, 2), round(y, 2), row, node.members, storage)
            lowest = max(lowest, y)
        return lowest

    start = (width - bottom_width) / 2
    for s, block in blocks:
        centre = start + block / 2
        if s is not None:
            out_switches[s] = Placed(round(centre, 2), round(leaf_row * tier_gap, 2), leaf_row)
        members = under.get(s, [])
        if members:
            height = max(height, put_grid(members, centre, node_top, max_cols, leaf_row + 1))
        start += block

    # Nodes cabled to an upper-tier switch (storage on a spine): a grid just below that switch.
    for r, row in enumerate(rows):
        if r == leaf_row:
            continue
        cols = max(1, min(max_cols, int((width / len(row)) // node_gap) - 1))
        for s in row:
            if under.get(s):
                put_grid(under[s], out_switches[s].x, out_switches[s].y + tier_gap / 3, cols, r)

    return Layout(out_switches, out_nodes, aggregated, round(width, 2), round(height, 2), group_of, rows)
