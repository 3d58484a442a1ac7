"""Mutation testing of the pure cores: does the test suite notice a small change of behaviour?

    .venv/bin/python bench/mutation.py fabric/topology/spof.py            # one module
    .venv/bin/python bench/mutation.py fabric/telemetry                   # every module of a folder
    .venv/bin/python bench/mutation.py --all                              # the four pure cores, module by module
    options: --list (print the mutants, run nothing)  --only TEXT (mutants whose key holds TEXT)
             --keys FILE (the mutants named in FILE, one 'path | key' a line, e.g. an earlier run's survivors)
             --check-equivalent (run the allow-listed mutants too)  --retrace (redo the coverage pass)

A mutant is one small edit of the module's syntax tree, made in memory (the file on disk is never touched):
  compare   one comparison operator flipped: < <=, > >=, == !=, in / not in, is / is not (both ways)
  boolop    `and` <-> `or`
  int       an integer constant shifted by +1 and by -1
  float     the same for a float constant (0.0 -> 1.0, a tolerance 1e-9 -> 1.000000001)
  bool      True <-> False
  negate    the condition of an if / while / conditional expression / comprehension filter negated
  return    `return X` -> `return None`
Nothing in type annotations, under `if TYPE_CHECKING:` or in a decorator's `slots=` is mutated.

Each mutant runs, one after the other in a child forked from this process (which imported pytest and its
plugins once, never the project), `pytest -x -q -p no:django` on the pure tests of TEST_DIRS that exercise the
mutated code, with the mutant served to the import system in place of the module (PYTHONHASHSEED=0, the
hypothesis database in a temporary folder). Which tests exercise what comes from a coverage pass over TEST_DIRS
(sys.monitoring; cached per test file in bench/out/mutation/trace.json, redone for a file when it or the code
its tests called changed): per test, the project functions it called. A mutant inside a function runs the tests
that called that function, fastest first; a module-level mutant (a constant, a dataclass default) runs every
test that called code of a module importing it, directly or not, plus the test files that import one of those
modules. A mutant that survives its tests is run again on the whole test files of those tests (a fixture or
cache shared between tests is then exercised too) before it counts as survived. A test that fails must pass on
the unmodified code when run alone, else it is dropped and the mutant rerun. Tests that fail or are skipped
(xfail included) in the coverage pass judge nothing.

Outcome per mutant: killed (a test failed, or the mutant broke the import), timeout (more than TIMEOUT_FACTOR x
the tests' own time + TIMEOUT_EXTRA_S, and than that factor of the same tests' time on the unmodified code, timed
when it happens: counted as killed, an infinite loop is caught), survived (no test failed,
or no test runs the code), equivalent (allow-listed in EQUIVALENT: no behaviour change, with the reason).
Score = (killed + timeout) / (all - equivalent); the raw score (/ all) is printed beside it.
Results: a table per module on stdout and bench/out/mutation/<module>.json with every survivor's file:line
and diff. docs/testing.md has the measured scores.
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "mutation"
CORES = ("fabric/topology", "fabric/importers", "fabric/telemetry", "scheduler/core")
TEST_DIRS = (
    "tests/fabric/topology",
    "tests/fabric/importers",
    "tests/scheduler/core",
    "tests/fabric/telemetry",
    "tests/scheduler/sim",
)
PROJECT_PACKAGES = ("fabric", "scheduler", "clusterctl", "dashboard")
TIMEOUT_FACTOR = 4.0
TIMEOUT_EXTRA_S = 20.0

# Tests that cannot judge a mutant: node id prefix -> why.
DESELECT: dict[str, str] = {
    "tests/fabric/topology/test_layout.py::test_two_thousand_nodes_and_128_switches_lay_out_in_under_50_ms": (
        "wall-clock bound: fails on a loaded machine whatever the code does"
    ),
}

# Mutants with no behaviour change: "path | key" (as printed by --list) -> why.
_SPOF = "fabric/topology/spof.py | "
_SM = "fabric/telemetry/subnet_manager.py | "
_ONE_MASTER = "guarded by len(masters) == 1: the first master is the last"
_LIVE = "fabric/telemetry/liveness.py | "
_SPEC = "fabric/importers/spec.py | "
_ROOT_LINE = "the walker records the root's line under '' whenever there is a document (an empty one is refused first)"
_READER_POS = "the reader's position is never negative, and the character at 0 that it refuses is no newline"
_FT = "fabric/importers/fattree.py | "
_SP_DIVIDES = "sp divides up, so it divides every pod's cables (its leaves x up): the remainder is always 0"
_COMMON = "fabric/importers/_common.py | "
_CACHE_SIZE = "a cache's size (0: none) changes how fast, not what: the cached functions are pure"
_LINK_KEY = "the key only has to name the unordered pair the same way each time (a == b was refused above)"
_LOW_AT_LEAST_2 = (
    "every caller asks for at least 2: spines max(..., 2); a core group takes leaves * up / spines >= leaves > P "
    "cables (spines divide up), so ceil(cables / P) >= 2"
)
_ROW_WIDTH = "_read_row refused every GPU row whose width is not the header's devices plus its extras"
_NODE_PORTS = "the parser's own _Node: every one is made from a header, with the port count it gives"
_DROPPED = "the per-node pass keeps only misses after the node's newest answer and not expired: the extra one goes"
_STALL_MISSED = "a stall needs the newest round missed by >= stalled_fraction > 0 of its nodes, so at least one"
_ONE_PIECE = "one piece left (no split): it is the main part or has no host port, so cut_off finds nothing lost"
_SHORTCUT = (
    "the removed switch's own hosts: single-homed ones are in `sole`, the others are judged via their other switch"
)
_YAML_WIDTH = "the width only keeps hostlists on one line; no line of an export comes near a million characters"
_BIS = "fabric/topology/bisection.py | bisection_bandwidth: "
_BIG = "any value above every pod and level number sorts the pod-less (core) switches last as before"
_ZERO_ARC = "MaxFlow.add_edge drops an arc of capacity 0: the extra calls add nothing"
_PAIR = (
    "the switch pairs are full-duplex (the same capacity both ways) and sw_adj holds no loopback: keying a pair "
    "by (high, low) or admitting s == w builds the same network"
)
_EXP = "fabric/topology/export.py | "
_SAME_SET = (
    "every switch a host reaches is joined to the same set: uniting with the first or the last of them, and finding "
    "the root from either, is the same"
)
_SAME_TIER = "_check_clear_tiers refuses any cable between two switches of one tier before the hierarchy is built"
_LAY = "fabric/topology/layout.py | "
_NK = _LAY + "natural_key: int: (0, int(part), '') if part.isdigit() else (1, 0, part) -> "
_PRIO_CAP = (
    "the cap for a tenant without state only matters for priorities above it, and a job's priority is its class's "
    "PriorityClass.value, a 32-bit IntegerField (at most 2**31 - 1): a cap above that clamps "
    "nothing that reaches the core"
)
_OTHER_ROW = "neighbours are only recorded between different rows: row_of[t] - r is never 0"
_NK_ORDER = (
    "numbers still sort before words (first element lower) and words still compare by their text (the second "
    "element is the same for every word)"
)
_NEVER_EMPTY = "the list always holds bottom_width: the default is never used"
_DIST = "fabric/topology/distance.py | "
_SYMMETRIC = "the distance of a pair of groups is the same both ways; the cache key only has to be canonical"
_BFS_POSITIVE = "the fallback search returns -1 or a count of at least 1 cable (the groups are disjoint): never 0"
_AFTER_OPEN = "the ']' is searched from the '[' onwards, which is not ']': it is found at 1 or later, or not (-1)"
_ONE_RANGE = "that branch holds exactly one range: the first is the last"
_REP = "fabric/topology/report.py | "
_ALL_SCOPES = "find_spofs fills by_scope with every scope (dict.fromkeys(SCOPES, 0)): the default is never read"
_SLICE = "rows[:max_rows] is the whole list when it is not longer, and rows[:None] is too"
_MF = "fabric/topology/maxflow.py | "
_ZERO_ARCS = "capacities are never negative: the extra pairs of arcs have capacity 0 and carry nothing"
_T_NOT_S = "level 0 is the source's alone, and s == t returned before"
_NEG_MARK = "the mark is only tested for being negative (unvisited), and -2 is"
_DEAD_END = "an arc is followed only into level[v] + 1 >= 1: a dead end marked -2 or 0 is never entered again either"
EQUIVALENT: dict[str, str] = {
    _EXP + "_attach_hosts: int: low < 0 -> low < -1": "a switch with a live host cable is a leaf, an operator's "
    "tier or a dropped leaf candidate next to leaves: its level is never -1, so low is never below 0",
    "fabric/topology/tiers.py | _pods: int: comp = [-1] * n -> comp = [-2] * n": _NEG_MARK,
    "fabric/topology/tiers.py | _pods: int: c >= 0 -> c >= -1": "renumber has no key -1: a switch in no component "
    "gets -1 from .get either way",
    _MF + "MaxFlow.max_flow: int: pos = [0] * self.n -> pos = [-1] * self.n": "the scan starts at the last arc, then "
    "goes through all of them: other augmenting paths first, the same maximum",
    _MF + "MaxFlow.max_flow: int: level[v] = -1 -> level[v] = -2": _DEAD_END,
    _MF + "MaxFlow.max_flow: int: level[v] = -1 -> level[v] = -0": _DEAD_END,
    _MF + "MaxFlow._levels: int: level = [-1] * self.n -> level = [-2] * self.n": _NEG_MARK,
    _LAY + "layout: int: 0 in row_index -> -1 in row_index": "tier 0 is the lowest tier, so row_index[0], when "
    "there is one, is the last row: len(rows) - 1 either way",
    _MF + "MaxFlow._levels: int: level[s] = 0 -> level[s] = 1": "every level shifts by one: only level[t] < 0 and "
    "level[w] == level[v] + 1 are read, and both hold as before",
    _MF + "MaxFlow.add_edge: compare: cap <= 0 -> cap < 0": _ZERO_ARCS,
    _MF + "MaxFlow.add_edge: compare: reverse_cap <= 0 -> reverse_cap < 0": _ZERO_ARCS,
    _MF + "MaxFlow.add_edge: int: cap <= 0 -> cap <= -1": _ZERO_ARCS,
    _MF + "MaxFlow.add_edge: int: reverse_cap <= 0 -> reverse_cap <= -1": _ZERO_ARCS,
    _MF + "MaxFlow.max_flow: compare: level[t] < 0 -> level[t] <= 0": _T_NOT_S,
    _MF + "MaxFlow.max_flow: int: level[t] < 0 -> level[t] < 1": _T_NOT_S,
    _MF + "MaxFlow.max_flow: int: pos[v] += 1 -> pos[v] += 0": "the arc retried leads to the vertex just marked dead "
    "(level -1), so the scan passes it at once",
    _REP
    + "render_text: int: host_link = s.by_scope.get('host-link', 0) -> host_link = s.by_scope.get('host-link', 1)": (
        _ALL_SCOPES
    ),
    _REP
    + "render_text: int: host_link = s.by_scope.get('host-link', 0) -> host_link = s.by_scope.get('host-link', -1)": (
        _ALL_SCOPES
    ),
    _REP + "_table: boolop: max_rows is None or len(rows) <= max_rows -> max_rows is None and len(rows) <= max_rows": (
        _SLICE
    ),
    _REP + "_table: compare: len(rows) <= max_rows -> len(rows) < max_rows": _SLICE,
    _REP + "_table.<locals>.line: bool: zip(values, widths, numeric, strict=True) -> zip(values, widths, numeric, "
    "strict=False)": "every row is built with one value per header",
    "fabric/topology/hostlist.py | expand: compare: close_at < 0 -> close_at <= 0": _AFTER_OPEN,
    "fabric/topology/hostlist.py | expand: int: close_at < 0 -> close_at < 1": _AFTER_OPEN,
    "fabric/topology/hostlist.py | compress: compare: key < first[slot] -> key <= first[slot]": (
        "equal keys are equal values: keeping the old or the new one is the same"
    ),
    "fabric/topology/hostlist.py | compress: int: ranges[0] -> ranges[-1]": _ONE_RANGE,
    "fabric/topology/hostlist.py | compress: int: ranges[0] -> ranges[-1] #2": _ONE_RANGE,
    _DIST + "HopIndex.distance: negate: ga > gb -> not ga > gb": _SYMMETRIC,
    _DIST + "HopIndex.distance: compare: ga > gb -> ga >= gb": _SYMMETRIC,
    _DIST
    + "HopIndex._group_distance: boolop: not sa or not sb -> not sa and (not sb)": "a group without a live switch "
    "has no ancestor and the shortest path from or to nothing is -1: UNREACHABLE all the same, only later",
    _DIST
    + "HopIndex._group_distance: int: range(1, len(up_a) + len(up_b) - 1) -> range(0, len(up_a) + len(up_b) - 1)": (
        "t = 0 meets the two groups' own switches, known disjoint just above"
    ),
    _DIST + "HopIndex._group_distance: int: len(up_a) + len(up_b) - 1 -> len(up_a) + len(up_b) - 0": (
        "for t = len(up_a) + len(up_b) - 1 the range of i is empty"
    ),
    _DIST + "HopIndex._group_distance: compare: t >= 0 -> t > 0": _BFS_POSITIVE,
    _DIST + "HopIndex._group_distance: int: t >= 0 -> t >= 1": _BFS_POSITIVE,
    _DIST + "HopIndex._bfs: int: return -1 -> return -2": "every negative answer reads as unreachable",
    _DIST + "HopIndex._ancestors: int: lv < 0 -> lv < -1": "the walk starts at a host's switches, which always have a "
    "level (leaf, operator role, or a spine cabled to leaves), and only goes up: it never meets level -1",
    _LAY + "_sweep: int: len(rows) < 2 -> len(rows) < 1": "with one row neither sweep has a row to visit",
    _LAY + "_sweep: int: range(1, len(rows)) -> range(0, len(rows))": "the top row has no row above it: the down sweep "
    "leaves it as it is",
    _LAY
    + "_sweep: int: len(rows) - 2 -> len(rows) - 1": "the bottom row has no row below it: the up sweep leaves it as "
    "it is",
    _LAY + "_sweep: int: for direction in (1, -1):\n    indices = range(1, len(rows)) if direction == 1 else "
    "range(len(rows) - 2, -1, -1)\n    for ... -> for direction in (1, -2):\n    indices = range(1, len(rows)) if "
    "direction == 1 else range(len(rows) - 2, -1, -1)\n    for ...": "only the sign of the direction is read",
    _LAY + "_sweep: compare: (row_of[t] - r) * direction < 0 -> (row_of[t] - r) * direction <= 0": _OTHER_ROW,
    _LAY + "_sweep: int: (row_of[t] - r) * direction < 0 -> (row_of[t] - r) * direction < 1": _OTHER_ROW,
    _NK + "(-1, int(part), '') if part.isdigit() else (1, 0, part)": _NK_ORDER,
    _NK + "(0, int(part), '') if part.isdigit() else (2, 0, part)": _NK_ORDER,
    _NK + "(0, int(part), '') if part.isdigit() else (1, 1, part)": _NK_ORDER,
    _NK + "(0, int(part), '') if part.isdigit() else (1, -1, part)": _NK_ORDER,
    _LAY + "layout: float: width = max([bottom_width, *(len(row) * switch_gap for row in rows)], default=0.0) -> "
    "width = max([bottom_width, *(len(row) * switch_gap for row in rows)], default=1.0)": _NEVER_EMPTY,
    _LAY + "layout: float: width = max([bottom_width, *(len(row) * switch_gap for row in rows)], default=0.0) -> "
    "width = max([bottom_width, *(len(row) * switch_gap for row in rows)], default=-1.0)": _NEVER_EMPTY,
    "fabric/topology/graph.py | <module>: int: LOOPBACK = 3 -> LOOPBACK = 4": "the link kinds are labels compared "
    "for equality; 4 is as distinct from the other three as 3",
    _EXP + "_range_name: int: ordered[0] -> ordered[-1]": "that branch holds one name: first and last are the same",
    _EXP + "_groups: int: chosen[0] -> chosen[-1] #2": _SAME_SET,
    _EXP + "_groups: int: chosen[0] -> chosen[-1]": _SAME_SET,
    _EXP + "_upper_switches: compare: 0 <= level[w] < level[s] -> 0 <= level[w] <= level[s]": _SAME_TIER,
    _EXP + "_domains: compare: level[w] < t -> level[w] <= t": _SAME_TIER,
    _EXP
    + "_upper_switches: int: 0 <= level[w] < level[s] -> -1 <= level[w] < level[s]": "a switch of level -1 (no leaf "
    "reaches it) is never in `included`, which holds switches of level 1 and up: it adds no child either way",
    _EXP + "_domains: int: top = max((u.level for u in upper), default=0) -> top = max((u.level for u in upper), "
    "default=-1)": "with no upper switch range(1, top + 1) is empty for 0 and -1 alike",
    _EXP
    + "_domains.<locals>.item: boolop: level[s] == 0 and gi is not None -> level[s] == 0 or gi is not None": "item() "
    "is called for leaves in a group and for listed upper switches; an upper switch with its own hosts was joined "
    "to its group at its own tier, so its item and its group's are in one component",
    _EXP + "_domains: int: children[0] -> children[-1]": "a domain no switch of its tier joins is a component of one "
    "item: it has exactly one child",
    "fabric/topology/export_k8s.py | kueue: int: body = yaml.safe_dump(topology, sort_keys=False, "
    "default_flow_style=False, width=1000000) -> body = yaml.safe_dump(topology, sort_keys=False, "
    "default_flow_style=False, width=1000001)": _YAML_WIDTH,
    "fabric/topology/export_k8s.py | kueue: int: body = yaml.safe_dump(topology, sort_keys=False, "
    "default_flow_style=False, width=1000000) -> body = yaml.safe_dump(topology, sort_keys=False, "
    "default_flow_style=False, width=999999)": _YAML_WIDTH,
    "fabric/topology/export_k8s.py | volcano: int: body = yaml.safe_dump_all(objects, sort_keys=False, "
    "default_flow_style=False, width=1000000) -> body = yaml.safe_dump_all(objects, sort_keys=False, "
    "default_flow_style=False, width=1000001)": _YAML_WIDTH,
    "fabric/topology/export_k8s.py | volcano: int: body = yaml.safe_dump_all(objects, sort_keys=False, "
    "default_flow_style=False, width=1000000) -> body = yaml.safe_dump_all(objects, sort_keys=False, "
    "default_flow_style=False, width=999999)": _YAML_WIDTH,
    "fabric/topology/export_k8s.py | hypernodes: int: d.children[0] -> d.children[-1]": "a domain no switch of its "
    "tier joins is a component of one item: it has exactly one child",
    "fabric/topology/degraded.py | link_class: compare: _RANK[ra] > _RANK[rb] -> _RANK[ra] >= _RANK[rb]": "swapping "
    "two ends of the same rank writes the same name",
    "fabric/topology/degraded.py | usual_rates: bool: zip(graph.links, classes, strict=True) -> "
    "zip(graph.links, classes, strict=False)": "the classes are made from the same links, one each",
    "fabric/topology/degraded.py | usual_rates: int: c[link.capacity_gbps] += 1 -> c[link.capacity_gbps] += 2": (
        "doubling every count keeps the same most common rate"
    ),
    "fabric/topology/degraded.py | degraded_links: float: usual_cap = usual.get(cls, 0.0) -> "
    "usual_cap = usual.get(cls, -1.0)": "rates are never negative: -1 and 0 compare alike with them and "
    "max(supported, -1) = max(supported, 0)",
    _BIS + "int: big = 1 << 30 -> big = 2 << 30": _BIG,
    _BIS + "int: big = 1 << 30 -> big = 1 << 31": _BIG,
    _BIS + "int: big = 1 << 30 -> big = 1 << 29": _BIG,
    _BIS
    + "int: tiers.level[s] >= 0 -> tiers.level[s] >= -1": "a switch with a host port is a leaf, an operator's role "
    "(which fixes its level), or a dropped leaf candidate cabled to two leaves: its level is never -1",
    _BIS + "negate: s < w -> not s < w": _PAIR,
    _BIS + "compare: s < w -> s <= w": _PAIR,
    _BIS + "int: n_sw + 2 -> n_sw + 3": "one more vertex with no arc",
    _BIS + "compare: src_cap[s] > 0 -> src_cap[s] >= 0": _ZERO_ARC,
    _BIS + "int: src_cap[s] > 0 -> src_cap[s] > -1": _ZERO_ARC,
    _BIS + "compare: sink_cap[s] > 0 -> sink_cap[s] >= 0": _ZERO_ARC,
    _BIS + "int: sink_cap[s] > 0 -> sink_cap[s] > -1": _ZERO_ARC,
    "fabric/topology/convert.py | fabric_from_parsed: compare: (b.node_guid, b.port) < (a.node_guid, a.port) -> "
    "(b.node_guid, b.port) <= (a.node_guid, a.port)": "the two ends are equal only for a cable from a port to "
    "itself, and swapping two equal ends changes nothing",
    "fabric/topology/export_slurm.py | _block_note: return: return [] -> return None": "header() reads its extra "
    "notes as `extra_notes or []`",
    "fabric/topology/export_slurm.py | slurm_yaml: int: body = yaml.safe_dump(doc, sort_keys=False, "
    "default_flow_style=False, width=1000000) -> body = yaml.safe_dump(doc, sort_keys=False, "
    "default_flow_style=False, width=1000001)": _YAML_WIDTH,
    "fabric/topology/export_slurm.py | slurm_yaml: int: body = yaml.safe_dump(doc, sort_keys=False, "
    "default_flow_style=False, width=1000000) -> body = yaml.safe_dump(doc, sort_keys=False, "
    "default_flow_style=False, width=999999)": _YAML_WIDTH,
    _SPEC + "_Doc.line: int: return self.lines.get('', 0) -> return self.lines.get('', 1)": _ROOT_LINE,
    _SPEC + "_Doc.line: int: return self.lines.get('', 0) -> return self.lines.get('', -1)": _ROOT_LINE,
    _SPEC + "_reader_error: int: max(exc.position, 0) -> max(exc.position, 1)": _READER_POS,
    _SPEC + "_reader_error: int: max(exc.position, 0) -> max(exc.position, -1)": _READER_POS,
    _SPEC + "_Builder.link: bool: zip(a_ports, b_ports, strict=True) -> zip(a_ports, b_ports, strict=False)": (
        "ranges of different lengths were refused just above"
    ),
    _SPEC + "_Walker.walk: bool: return self.loader.construct_object(node, deep=True) -> "
    "return self.loader.construct_object(node, deep=False)": "only scalar nodes are constructed there; deep matters "
    "for collections",
    _SPEC + "_Builder._gpus: int: exc.args[0] -> exc.args[-1]": "the catalogue's KeyError has one argument",
    _COMMON + "LinkTable._merge_rate: boolop: not link.speed and rate.speed -> not link.speed or rate.speed": "it "
    "differs only when both ends know the speed and agree on width and speed: the assignment changes nothing",
    _FT + "_divisor_at_least: int: n + 1 -> n + 0": "n is the answer of the last resort either way (the return "
    "after the loop)",
    "fabric/importers/ibnetdiscover.py | _record_port_facts: boolop: pl.own_lid is not None and pl.node.prefix != "
    "'S' -> pl.own_lid is not None or pl.node.prefix != 'S'": "a line of a Ca/Rt block always carries its own LID "
    "(the grammar requires it) and a switch block's lines never do: both sides agree",
    _FT + "plan_fat_tree: int: 1 if k < cables % sp else 0 -> 2 if k < cables % sp else 0": _SP_DIVIDES,
    _FT + "plan_fat_tree: int: 1 if k < cables % sp else 0 -> 0 if k < cables % sp else 0": _SP_DIVIDES,
    _FT + "_Builder.above_leaves: compare: k >= len(pod_spines) -> k > len(pod_spines)": "every pod gets the spine "
    "count of a full pod, and k runs below it: the test never holds",
    _FT + "generate_fat_tree: int: exc.args[0] -> exc.args[-1]": "the catalogue's KeyError has one argument",
    "fabric/importers/spec.py | _parent: return: return path[:path.rindex('[')] -> return None": "the walker "
    "records the line of every list element, so _Doc.line never climbs to a missing one, and GUIDs are claimed "
    "at '.guid' paths",
    _COMMON + "<module>: int: lru_cache(maxsize=256) -> lru_cache(maxsize=257)": _CACHE_SIZE,
    _COMMON + "<module>: int: lru_cache(maxsize=256) -> lru_cache(maxsize=255)": _CACHE_SIZE,
    _COMMON + "<module>: int: 1 << 16 -> 2 << 16": _CACHE_SIZE,
    _COMMON + "<module>: int: 1 << 16 -> 0 << 16": _CACHE_SIZE,
    _COMMON + "<module>: int: 1 << 16 -> 1 << 17": _CACHE_SIZE,
    _COMMON + "<module>: int: 1 << 16 -> 1 << 15": _CACHE_SIZE,
    _COMMON + "LinkTable.add_link: negate: a < b -> not a < b": _LINK_KEY,
    _COMMON + "LinkTable.add_link: compare: a < b -> a <= b": _LINK_KEY,
    "fabric/importers/fattree.py | _divisor_at_least: int: max(low, 1) -> max(low, 2)": _LOW_AT_LEAST_2,
    "fabric/importers/fattree.py | _divisor_at_least: int: max(low, 1) -> max(low, 0)": _LOW_AT_LEAST_2,
    "fabric/importers/fattree.py | _divisor_at_least: int: n + 1 -> n + 2": "n + 1 never divides n: the loop "
    "ends as before and returns n",
    "fabric/importers/fattree.py | plan_flat_fat_tree: int: nodes < 1 -> nodes < 0": "0 nodes make 0 leaves, and "
    "plan_fat_tree(0, ...) refuses them in the same words",
    "fabric/importers/nvidia_topo.py | _check_matrix: compare: j < i -> j <= i": "on the diagonal both codes are X",
    "fabric/importers/nvidia_topo.py | _build: bool: zip(devices, codes, strict=True) -> "
    "zip(devices, codes, strict=False)": _ROW_WIDTH,
    "fabric/importers/nvidia_topo.py | _build: bool: zip(header.extras, extras, strict=True) -> "
    "zip(header.extras, extras, strict=False)": _ROW_WIDTH,
    "fabric/importers/fattree.py | plan_fat_tree: compare: hcas_per_node <= spine_down -> hcas_per_node < spine_down": (
        "at equality both branches give spine_down (spine_down // hcas * hcas = spine_down)"
    ),
    "fabric/importers/fattree.py | plan_fat_tree: compare: nodes < down -> nodes <= down": "at nodes == down, "
    "ceil(down / o) >= up (down = floor(up * o) > up * o - 1), so the uplinks stay `up` and down stays nodes",
    "fabric/importers/ibnetdiscover.py | <module>: int: port_count: int = 0 -> port_count: int = 1": _NODE_PORTS,
    "fabric/importers/ibnetdiscover.py | <module>: int: port_count: int = 0 -> port_count: int = -1": _NODE_PORTS,
    "fabric/importers/__init__.py | read_text: compare: 0 <= nul < exc.start -> 0 <= nul <= exc.start": "a NUL byte "
    "is valid UTF-8: a decoding error never starts at it",
    "fabric/importers/ibnetdiscover_ports.py | _describer.<locals>.describe: return: return guid -> return None": (
        "both ends of a line are recorded as nodes before the link table (the only caller) sees them"
    ),
    _LIVE + "judge: boolop: answers.newest.get(n, float('-inf')) < r.at and n not in expired -> "
    "answers.newest.get(n, float('-inf')) < r.at or n not in expired": _DROPPED,
    _LIVE + "judge: compare: answers.newest.get(n, float('-inf')) < r.at -> "
    "answers.newest.get(n, float('-inf')) <= r.at": _DROPPED,
    _LIVE + "_pipeline: int: missed = max(0, asked - answers.counts.get(at, 0)) -> "
    "missed = max(1, asked - answers.counts.get(at, 0))": _STALL_MISSED,
    _LIVE + "_pipeline: int: missed = max(0, asked - answers.counts.get(at, 0)) -> "
    "missed = max(-1, asked - answers.counts.get(at, 0))": _STALL_MISSED,
    _SM + "carry: int: kept.masters[0] -> kept.masters[-1]": _ONE_MASTER,
    _SM + "carry: int: current.masters[0] -> current.masters[-1]": _ONE_MASTER,
    _SM + "sm_findings: int: previous.masters[0] -> previous.masters[-1]": _ONE_MASTER,
    _SM + "sm_findings: int: masters[0] -> masters[-1]": _ONE_MASTER,
    _SM + "<module>: int: previous: SmView | None, current: SmView, *, tiers: int=2, hung_after_s: float=HUNG_AFTER_S "
    "-> previous: SmView | None, current: SmView, *, tiers: int=3, hung_after_s: float=HUNG_AFTER_S": "tiers is only "
    "compared with >= 2",
    _SPOF
    + "_tarjan: compare: disc[root] >= 0 -> disc[root] > 0": "only switch 0 gets disc 0, and it is the first root",
    _SPOF + "_tarjan: int: disc[root] >= 0 -> disc[root] >= 1": "only switch 0 gets disc 0, and it is the first root",
    _SPOF + "_tarjan: int: low = [0] * n -> low = [1] * n": "every low[v] is set when v is discovered, before a read",
    _SPOF + "_tarjan: int: low = [0] * n -> low = [-1] * n": "every low[v] is set when v is discovered, before a read",
    _SPOF + "_tarjan: int: disc = [-1] * n -> disc = [-2] * n": "disc is only tested against 0 (< 0: not visited)",
    _SPOF + "_tarjan: int: parent = [-1] * n -> parent = [-2] * n": "parent is only tested with >= 0",
    _SPOF + "_tarjan: int: pedge = [-1] * n -> pedge = [-2] * n": "pedge is compared with link indices, never negative",
    _SPOF
    + "_tarjan: int: cc = [-1] * n -> cc = [-2] * n": "every switch is visited (each is a root or reached), cc set",
    _SPOF
    + "_tarjan: int: cc = [-1] * n -> cc = [-0] * n": "every switch is visited (each is a root or reached), cc set",
    _SPOF + "_tarjan: compare: disc[w] < low[v] -> disc[w] <= low[v]": "on equality it assigns the value low[v] has",
    _SPOF + "_tarjan: compare: low[v] < low[p] -> low[v] <= low[p]": "on equality it assigns the value low[p] has",
    _SPOF + "find_spofs: int: prefix = [0] -> prefix = [1]": "prefix sums are only used as differences (range_ports)",
    _SPOF + "find_spofs: int: prefix = [0] -> prefix = [-1]": "prefix sums are only used as differences (range_ports)",
    _SPOF + "find_spofs: int: in_main[0] -> in_main[-1]": "read only when in_main has one element",
    _SPOF + "find_spofs: int: sws[0] -> sws[-1]": "read only when sws has one element",
    _SPOF + "find_spofs: int: len(parts) + (1 if rest_size else 0) >= 2 -> len(parts) + (1 if rest_size else 0) >= 1": (
        _ONE_PIECE
    ),
    _SPOF + "find_spofs: int: 1 if rest_size else 0 -> 2 if rest_size else 0": _ONE_PIECE,
    _SPOF + "find_spofs: int: 1 if rest_size else 0 -> 1 if rest_size else 1": _ONE_PIECE,
    _SPOF + "find_spofs: int: cc_hi - cc_lo - 1 -> cc_hi - cc_lo - 0": _ONE_PIECE + " (rest_size is only tested for 0)",
    _SPOF + "find_spofs: int: lost = cut_off([(lo, hi)], -1, 0 if sub_ports > rest_ports else -1) -> "
    "lost = cut_off([(lo, hi)], -2, 0 if sub_ports > rest_ports else -1)": "removed < 0 means none, -1 or -2 alike",
    _SPOF + "find_spofs.<locals>.cut_off: compare: pos < cc_hi -> pos <= cc_hi": "adds the empty range (cc_hi, cc_hi)",
    _SPOF + "find_spofs.<locals>.cut_off: compare: pos < lo -> pos <= lo": "adds the empty range (lo, lo)",
    _SPOF + "find_spofs.<locals>.cut_off: compare: removed >= 0 -> removed > 0": _SHORTCUT,
    _SPOF + "find_spofs.<locals>.cut_off: int: removed >= 0 -> removed >= 1": _SHORTCUT,
    _SPOF + "find_spofs.<locals>.cut_off: int: dfs.disc[removed] + 1 -> dfs.disc[removed] + 0": _SHORTCUT,
    _SPOF + "find_spofs.<locals>.cut_off: int: len(sws) == 1 -> len(sws) == 0": (
        "a shortcut: a host with one switch, on the lost side, fails the any() test as well"
    ),
    _SPOF + "find_spofs.<locals>.cut_off.<locals>.part_of: int: k >= 0 -> k >= -1": "k = -1 returns -1 either way",
    "scheduler/core/quotas.py | QuotaBook.check: compare: after <= guaranteed + 1e-09 -> after < guaranteed + 1e-09": (
        "differs only when the sum is exactly the bound plus the 1e-9 tolerance"
    ),
    "scheduler/core/quotas.py | QuotaBook.check: compare: after <= guaranteed + limit + 1e-09 -> "
    "after < guaranteed + limit + 1e-09": "differs only when the sum is exactly the bound plus the 1e-9 tolerance",
    "scheduler/core/quotas.py | QuotaBook.check: compare: need > guaranteed + limit + 1e-09 -> "
    "need >= guaranteed + limit + 1e-09": "differs only when the need is exactly the bound plus the 1e-9 tolerance",
    **{
        f"scheduler/core/quotas.py | <module>: float: _NO_QUOTA = (-1.0, -1.0) -> _NO_QUOTA = {t}": (
            "a sentinel tested by identity (`lim is _NO_QUOTA`); its values are never read"
        )
        for t in ("(-2.0, -1.0)", "(-0.0, -1.0)", "(-1.0, -2.0)", "(-1.0, -0.0)")
    },
    "scheduler/core/quotas.py | QuotaBook.refund: float: self.used.get(key, 0.0) -> self.used.get(key, -1.0)": (
        "the result is clamped at 0.0: from 0.0 or -1.0, minus a refund >= 0, it is 0.0"
    ),
    "fabric/telemetry/rates.py | <module>: bool: dataclass(frozen=True, slots=True) -> "
    "dataclass(frozen=False, slots=True)": "nothing assigns to or hashes a Delta (health reads .value)",
    "fabric/telemetry/rates.py | link_utilisation: compare: capacity_gbps <= 0 -> capacity_gbps < 0": (
        "a capacity of 0 is caught by `not capacity_gbps` first"
    ),
    "fabric/topology/oversubscription.py | _severity: float: row.ratio or 0.0 -> row.ratio or -1.0": (
        "every ratio that is not falsy is > 0, above 0.0 and -1.0 alike"
    ),
    "scheduler/core/topology.py | build_topology: int: names[0] -> names[-1]": "read only when names has one "
    "element (len(names) == 1): the first is the last",
    "scheduler/core/topology.py | Topology.group_level: negate: ga < gb -> not ga < gb": "the key becomes (high, "
    "low) instead of (low, high): still one key per unordered pair, and the cached level is symmetric "
    "(HopIndex.distance orders the two groups itself); _level_cache is private",
    "scheduler/core/topology.py | Topology.group_level: compare: ga < gb -> ga <= gb": "ga == gb returned "
    "LEVEL_LEAF_GROUP above: the two only differ when ga == gb",
    **{
        f"scheduler/core/topology.py | Topology.group_level: int: self.groups[{g}].hosts[0] -> "
        f"self.groups[{g}].hosts[-1]": "all hosts of a group have the same set of live switches, HopIndex groups "
        "hosts by exactly that set and its distance depends only on the two groups: any host of the group gives "
        "the same level"
        for g in ("ga", "gb")
    },
    "scheduler/core/topology.py | build_topology: compare: level[a] > level[b] -> level[a] >= level[b]": "the "
    "extra swap happens only when both ends have the same level: la and lb stay the same numbers and "
    "lb <= la skips the cable either way",
    "scheduler/core/topology.py | build_topology: int: la < 0 -> la < -1": "tiers.level is -1 (unknown) or >= 0, "
    "never below -1; a cable whose lower end is at -1 and is not skipped reaches neither the la == 0 nor the "
    "la == 1 branch, so nothing is recorded either way",
    "scheduler/core/topology.py | build_topology: int: p >= 0 -> p >= -1": "that branch is a level-0 switch: "
    "detect_tiers gives level 0 only to leaves (detected or operator), a leaf is in the pod tier and its "
    "component holds a leaf (itself), so tiers.pod of it is always >= 0",
    "scheduler/core/backfill.py | plan_reservation: compare: probes >= limit -> probes > limit": "reached after a "
    "failed try with probes == limit: instead of releasing ends[i + 1:] and trying once, the loop goes on, "
    "releasing the same entries in the same order and skipping every try (line 102) until the last entry, which "
    "is always tried (every entry is `useful`, see above; the exclusive skip there means fewer free GPUs than n "
    "in all the job's partitions, where find() returns None anyway): the same find() on the same state, and the "
    "start returned is `end` of the last entry, i.e. ends[-1][0]. If that fails, it tries once more on the same "
    "state and returns None. Same result; only the `evaluations` diagnostic counts one more failed search",
    **{
        f"scheduler/core/backfill.py | hold_reservation: int: sh = Share(g.id, 'whole', 100, g.memory_mib) -> "
        f"sh = Share(g.id, 'whole', {pct}, g.memory_mib)": "the held share is a 'whole' one: ClusterState.hold, "
        "release, share_fits and the journal's rollback read only its kind (excl += / -= 1) and its host fields "
        "(0), never compute_pct; res.holds is read only by release() and rehold(); the reservation's gpu_ids and "
        "nodes are built apart"
        for pct in (101, 99)
    },
    **{
        f"scheduler/core/reasons.py | num: {m}": "num only writes amounts, never negative (GPU counts; "
        "QuotaBook.used only grows by charges and is clamped at 0.0 by refund; quotas are PositiveIntegerFields, "
        "set_quota refuses negatives). For x >= 0 within 1e-9 of an integer k, f'{x:.2f}' is 'k.00' and strips "
        "to str(k), the text of the integer branch, so either branch writes the same; only negative x near 0 "
        "(-0.0 -> '-0') tells them apart"
        for m in (
            "compare: abs(x - round(x)) < 1e-09 -> abs(x - round(x)) <= 1e-09",
            "float: abs(x - round(x)) < 1e-09 -> abs(x - round(x)) < -0.999999999",
        )
    },
    **{
        f"scheduler/core/costmodel.py | ring_latency_s: {m}": "differs only for n == 1, where the formula gives "
        "2.0 * (1 - 1) * latency = 0.0, the early answer: the index min(level, len - 1) is in range for every "
        "level (the LEVEL_* numbers are 0..4, min() caps any higher one) and CostParams.latency_s holds finite "
        "seconds, so 0 x latency is 0.0"
        for m in ("compare: n <= 1 -> n < 1", "int: n <= 1 -> n <= 0")
    },
    "scheduler/core/costmodel.py | hca_reach: int: gpus_on_node <= 0 -> gpus_on_node <= 1": "differs only for a "
    "one-GPU node (G == 1); a ring has k >= 1 ranks on every node it touches, so k / G >= 1 and min(1.0, ...) "
    "gives 1.0, the early answer",
    "scheduler/core/costmodel.py | network_gbs: compare: u < b -> u <= b": "the extra assignment happens only when "
    "u == b: b keeps the same value",
    "scheduler/core/fragmentation.py | MpsFragmentation.node_num: compare: total > 0 -> total >= 0": (
        "free compute is never negative, so a total of 0 means every GPU has 0 % free: each class's fragment "
        "(its unfit GPUs' free % or all of it) is 0 and _fragment returns the 0 the shortcut gives"
    ),
    "scheduler/core/fragmentation.py | MpsFragmentation.node_num: int: total > 0 -> total > -1": (
        "free compute is never negative, so a total of 0 means every GPU has 0 % free: each class's fragment "
        "(its unfit GPUs' free % or all of it) is 0 and _fragment returns the 0 the shortcut gives"
    ),
    "scheduler/core/migration.py | <module>: int: _ERR, _HOT, _OVERLOAD, _BETTER = (0, 1, 2, 3) -> _ERR, "
    "_HOT, _OVERLOAD, _BETTER = (-1, 1, 2, 3)": (
        "the trigger numbers are only sort keys: -1 still sorts before 1, 2, 3"
    ),
    "scheduler/core/migration.py | <module>: int: _ERR, _HOT, _OVERLOAD, _BETTER = (0, 1, 2, 3) -> _ERR, "
    "_HOT, _OVERLOAD, _BETTER = (0, 1, 2, 4)": ("the trigger numbers are only sort keys: 4 still sorts after 0, 1, 2"),
    "scheduler/core/migration.py | _trigger: compare: len(groups) > 1 -> len(groups) >= 1": (
        "with one group the any() only pairs it with itself, LEVEL_LEAF_GROUP < LEVEL_POD_GROUP: false either way"
    ),
    "scheduler/core/migration.py | _trigger: int: len(groups) > 1 -> len(groups) > 0": (
        "with one group the any() only pairs it with itself, LEVEL_LEAF_GROUP < LEVEL_POD_GROUP: false either way"
    ),
    "scheduler/core/migration.py | _trigger: int: g >= 0 -> g >= -1": (
        "group_hot holds only topology groups (ids >= 0): for an unknown node's group -1 get() is None either way"
    ),
    "scheduler/core/migration.py | _trigger: int: island = node0.part.max_island if node0.part else 1 -> "
    "island = node0.part.max_island if node0.part else 2": (
        "island is read only under `not multi`; a single-node job on a node with no partition has free = 0 < "
        "n and never gets there"
    ),
    "scheduler/core/migration.py | _trigger: int: island = node0.part.max_island if node0.part else 1 -> "
    "island = node0.part.max_island if node0.part else 0": (
        "island is read only under `not multi`; a single-node job on a node with no partition has free = 0 < "
        "n and never gets there"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: float: oeff = st.group_oeff.get(g, 1.0) -> oeff "
    "= st.group_oeff.get(g, 2.0)": (
        "g >= 0 here (negative groups were skipped) and group_oeff holds every topology group: the default "
        "is never used"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: float: oeff = st.group_oeff.get(g, 1.0) -> oeff "
    "= st.group_oeff.get(g, 0.0)": (
        "g >= 0 here (negative groups were skipped) and group_oeff holds every topology group: the default "
        "is never used"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: compare: oeff <= 1.0 -> oeff < 1.0": (
        "oversubscription is never below 1; at exactly 1 the hosts fit the uplinks left (host <= uplink), so "
        "others = min(uplink, host + f x uplink) >= host and the credited value max(1, host / others) is 1 "
        "again"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: float: oeff <= 1.0 -> oeff <= 0.0": (
        "oversubscription is never below 1; at exactly 1 the hosts fit the uplinks left (host <= uplink), so "
        "others = min(uplink, host + f x uplink) >= host and the credited value max(1, host / others) is 1 "
        "again"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: compare: info.uplink_gbps <= 0 -> info.uplink_gbps < 0": (
        "no uplink at all: oversubscription is inf (or 1 with no hosts, skipped), avail = 0 and others = "
        "min(0, 0) = 0, so the `others > 0` guard keeps oeff as it was"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: int: info.uplink_gbps <= 0 -> info.uplink_gbps <= -1": (
        "no uplink at all: oversubscription is inf (or 1 with no hosts, skipped), avail = 0 and others = "
        "min(0, 0) = 0, so the `others > 0` guard keeps oeff as it was"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: compare: info.host_gbps <= 0 -> info.host_gbps < 0": (
        "a group with no host capacity has oversubscription 1 (costmodel.oversubscription), skipped by oeff <= 1"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: int: info.host_gbps <= 0 -> info.host_gbps <= -1": (
        "a group with no host capacity has oversubscription 1 (costmodel.oversubscription), skipped by oeff <= 1"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: boolop: oeff <= 1.0 or info.uplink_gbps <= 0 or "
    "info.host_gbps <= 0 -> oeff <= 1.0 and info.uplink_gbps <= 0 and (info.host_gbps <= 0)": (
        "each case the `or` skips ends where it began: oeff 1 credits back to 1 (host <= uplink); no uplink "
        "gives others = 0, kept by the `others > 0` guard; no hosts means oeff 1"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: float: f = min(1.0, k / cap) -> f = min(2.0, k / cap)": (
        "any f >= 1 already gives others = min(uplink, avail + f x uplink) = uplink (avail >= 0)"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: compare: others > 0 -> others >= 0": (
        "reached with uplink > 0 and f > 0 (the job has >= 1 GPU in the group, cap >= 1): others > 0 always"
    ),
    "scheduler/core/migration.py | _OwnTraffic.__init__: int: others > 0 -> others > -1": (
        "reached with uplink > 0 and f > 0 (the job has >= 1 GPU in the group, cap >= 1): others > 0 always"
    ),
    "scheduler/core/migration.py | _estimate: boolop: ctx is None or err -> ctx is None and err": (
        "Placer.context returns a non-empty reason exactly when it returns no context"
    ),
    "scheduler/core/migration.py | _estimate: compare: step_now <= 0 -> step_now < 0": (
        "steps are never negative: at step_now == 0 the other half, step_new >= 0 = step_now, holds anyway"
    ),
    "scheduler/core/migration.py | _estimate: int: step_now <= 0 -> step_now <= -1": (
        "steps are never negative: at step_now == 0 the other half, step_new >= 0 = step_now, holds anyway"
    ),
    "scheduler/core/migration.py | plan_migrations: int: len(LEVEL_NAMES) - 1 -> len(LEVEL_NAMES) - 0": (
        "a candidate's level is at most LEVEL_FABRIC = 4, the last index of LEVEL_NAMES: the min never clips"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: size = rng.choices(SIZES, SIZE_WEIGHTS)[0] "
    "-> size = rng.choices(SIZES, SIZE_WEIGHTS)[-1]": (
        "rng.choices(...) without k returns a one-element list: [0] and [-1] are the same element"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: size = rng.choices(SIZES, SIZE_WEIGHTS)[0] "
    "-> size = rng.choices(SIZES, SIZE_WEIGHTS)[-1] #2": (
        "rng.choices(...) without k returns a one-element list: [0] and [-1] are the same element"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: size = min(size, target - busy) or 1 -> size "
    "= min(size, target - busy) or 2": (
        "inside the loop busy < target, so target - busy >= 1 and size >= 1: min(...) is never 0, `or` never used"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: size = min(size, target - busy) or 1 -> size "
    "= min(size, target - busy) or 0": (
        "inside the loop busy < target, so target - busy >= 1 and size >= 1: min(...) is never 0, `or` never used"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: bool: zip(TENANTS, shares_of_quota, strict=True) "
    "-> zip(TENANTS, shares_of_quota, strict=False)": (
        "TENANTS and shares_of_quota are both fixed at six entries: strict never has a length mismatch to catch"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot.<locals>.new_request: int: prio < 100 -> prio < 99": (
        "prio is drawn from (100, 50, 50, 50, 10, 0): no value lies in [99, 100)"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: size >= 16 -> size >= 15": (
        "sizes come only from SIZES (1, 2, 4, 8, 16, 32, 64): no size is 15, so >= 15 and >= 16 agree"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: size >= 16 -> size >= 15 #2": (
        "sizes come only from SIZES (1, 2, 4, 8, 16, 32, 64): no size is 15, so >= 15 and >= 16 agree"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: hcas.get(n.hostname, 0) -> hcas.get(n.hostname, 1)": (
        "generate_fat_tree cables every compute server (8 rails) and storage server (2 HCAs) with host CAs, "
        "so every hostname looked up is in hcas and the default is never used"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: hcas.get(n.hostname, 0) -> hcas.get(n.hostname, -1)": (
        "generate_fat_tree cables every compute server (8 rails) and storage server (2 HCAs) with host CAs, "
        "so every hostname looked up is in hcas and the default is never used"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: hcas.get(h, 0) -> hcas.get(h, 1)": (
        "generate_fat_tree cables every compute server (8 rails) and storage server (2 HCAs) with host CAs, "
        "so every hostname looked up is in hcas and the default is never used"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: hcas.get(h, 0) -> hcas.get(h, -1)": (
        "generate_fat_tree cables every compute server (8 rails) and storage server (2 HCAs) with host CAs, "
        "so every hostname looked up is in hcas and the default is never used"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: int: 100 * prof.compute_fraction -> 101 * "
    "prof.compute_fraction": (
        "only 3g (3/7) and 1g (1/7) of the fixed H100 80 GB are laid out: round(42.86) = round(43.29) = 43 "
        "and round(14.29) = round(14.43) = 14"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: rng.random() < 0.001 -> rng.random() <= 0.001": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: r < 0.03 -> r <= 0.03": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: r < 0.17 -> r <= 0.17": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: r < 0.22 -> r <= 0.22": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: rng.random() < 0.1 -> rng.random() <= 0.1": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: rng.random() < 0.1 -> rng.random() <= 0.1 #2": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: rng.random() < 0.1 -> rng.random() <= 0.1 #3": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: rng.random() > 0.005 -> rng.random() >= 0.005": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: rng.random() > 0.002 -> rng.random() >= 0.002": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot: compare: rng.random() > 0.05 -> rng.random() >= 0.05": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/synthetic.py | synthetic_snapshot.<locals>.new_request: compare: rng.random() < 0.3 "
    "-> rng.random() <= 0.3": (
        "rng.random() is a multiple of 2**-53 and the threshold's float is not (denominator > 2**53): never equal"
    ),
    "scheduler/core/policies.py | PriorityFairSharePolicy.order.<locals>.line_of: compare: p <= m -> p < m": (
        "differs only for p == m, where the priority and the tenant's maximum it is clamped to are the same number"
    ),
    "scheduler/core/policies.py | PriorityFairSharePolicy.order: float: guaranteed = "
    "sum((q.guaranteed_gpus for q in t.quotas.values())) if t else 0.0 -> guaranteed = "
    "sum((q.guaranteed_gpus for q in t.quotas.values())) if t else 1.0": (
        "a tenant without state's guaranteed GPUs are read only through max(1.0, guaranteed): 0 and 1 give 1"
    ),
    "scheduler/core/policies.py | PriorityFairSharePolicy.order: float: guaranteed = "
    "sum((q.guaranteed_gpus for q in t.quotas.values())) if t else 0.0 -> guaranteed = "
    "sum((q.guaranteed_gpus for q in t.quotas.values())) if t else -1.0": (
        "a tenant without state's guaranteed GPUs are read only through max(1.0, guaranteed): 0 and -1 give 1"
    ),
    **{
        f"scheduler/core/policies.py | PriorityFairSharePolicy.order: int: big = 1 << 62 -> big = {m}": _PRIO_CAP
        for m in ("2 << 62", "1 << 63")
    },
    "scheduler/core/policies.py | ServiceRank.sort_keys: int: j.gpus > 0 -> j.gpus > 1": (
        "differs only for gpus == 1, where g is 1 either way (the job's own count or the fallback 1)"
    ),
    "scheduler/core/policies.py | ServiceRank.sort_keys: compare: lv > top -> lv >= top": (
        "differs only for lv == top, where lv is set to the value it already has"
    ),
    "scheduler/core/preemption.py | plan_preemption: compare: ctx.N == 1 -> ctx.N != 1": (
        "only reached with ctx.single true, and Placer.context makes an exclusive job single only when N == "
        "1 (then k = n, refused above max_G) or N is None and n <= max_G: the last term n <= max_G is always "
        "true there, so the first two terms never decide"
    ),
    "scheduler/core/preemption.py | plan_preemption: int: ctx.N == 1 -> ctx.N == 2": (
        "only reached with ctx.single true, and Placer.context makes an exclusive job single only when N == "
        "1 (then k = n, refused above max_G) or N is None and n <= max_G: the last term n <= max_G is always "
        "true there, so the first two terms never decide"
    ),
    "scheduler/core/preemption.py | plan_preemption: int: ctx.N == 1 -> ctx.N == 0": (
        "only reached with ctx.single true, and Placer.context makes an exclusive job single only when N == "
        "1 (then k = n, refused above max_G) or N is None and n <= max_G: the last term n <= max_G is always "
        "true there, so the first two terms never decide"
    ),
    "scheduler/core/preemption.py | plan_preemption: compare: ctx.require in ('island', 'node') -> "
    "ctx.require not in ('island', 'node')": (
        "only reached with ctx.single true, and Placer.context makes an exclusive job single only when N == "
        "1 (then k = n, refused above max_G) or N is None and n <= max_G: the last term n <= max_G is always "
        "true there, so the first two terms never decide"
    ),
    "scheduler/core/preemption.py | _plans_gang: boolop: ctx.N is not None and ctx.k is not None -> "
    "ctx.N is not None or ctx.k is not None": (
        "Placer.context sets N and k together (either given, it derives the other) or leaves both None"
    ),
    "scheduler/core/preemption.py | _plans_gang: int: g < 0 -> g < -1": (
        "group -1 is a node outside the topology, alone in its group (-1 - its index), and a gang here has N "
        ">= 2 (N == 1, or n <= max_G with no N, is single-node): pick() of one entry returns None either way"
    ),
    "scheduler/core/preemption.py | _cost: int: max((st.running[j].request.priority for j in victims), "
    "default=-1) -> max((st.running[j].request.priority for j in victims), default=-2)": (
        "the default is the priority of an empty victim set, whose cost starts with len 0 < 1: it only ever "
        "ties with another empty set, which has the same default, so no order changes"
    ),
    "scheduler/core/preemption.py | _cost: int: max((st.running[j].request.priority for j in victims), "
    "default=-1) -> max((st.running[j].request.priority for j in victims), default=-0)": (
        "the default is the priority of an empty victim set, whose cost starts with len 0 < 1: it only ever "
        "ties with another empty set, which has the same default, so no order changes"
    ),
    "scheduler/core/mig.py | _model_key: return: return m -> return None": (
        "reached only when the name holds none of the known models; every CATALOGUE model is one of them, so "
        "neither m nor None equals a catalogue model and variant finds nothing either way"
    ),
    "scheduler/core/mig.py | variant: compare: err <= best_err -> err < best_err": (
        "err == best_err needs |MiB - 1024 gb| = 122.88 gb (no class gb is a multiple of 25) or an exact tie "
        "between two classes of a model (H100 80/94 tie at 88511.06 MiB): no integer memory_mib reaches "
        "either"
    ),
    "scheduler/core/mig.py | MigProfile.max_instances: int: count, end = (0, -1) -> count, end = (0, -2)": (
        "starts are slice indices >= 0 (a negative one cannot even make a mask: negative shift), so s > -1 "
        "and s > -2 agree on every start"
    ),
    "scheduler/core/mig.py | _best_start: int: largest = 0 -> largest = 1": (
        "any profile that fits scores memory_slots * 10 + compute >= 11, so the start value only stands when "
        "nothing fits, the same for every start: 0 or 1 ranks the starts alike"
    ),
    "scheduler/core/mig.py | _best_start: int: largest = 0 -> largest = -1": (
        "any profile that fits scores >= 11, so the start value only stands when nothing fits, the same for "
        "every start: 0 or -1 ranks the starts alike"
    ),
    "scheduler/core/mig.py | _best_start: int: options = 0 -> options = 1": (
        "the same constant is added to every start's option count: the ranking of the starts is unchanged"
    ),
    "scheduler/core/mig.py | _best_start: int: options = 0 -> options = -1": (
        "the same constant is taken from every start's option count: the ranking of the starts is unchanged"
    ),
    "scheduler/core/mig.py | _best_start: compare: key > best -> key >= best": (
        "the key ends with -s and free_starts yields each start once, so two starts never have equal keys"
    ),
    "scheduler/core/mig.py | _best_start: int: q.memory_slots * 10 -> q.memory_slots * 11": (
        "compute slices are 1..7 (at most the GPU's 7), so any weight above 6 ranks by (memory slots, "
        "compute) lexicographically: 10 and 11 order every pair of real profiles alike"
    ),
    "scheduler/core/mig.py | _best_start: int: q.memory_slots * 10 -> q.memory_slots * 9": (
        "compute slices are 1..7 (at most the GPU's 7), so any weight above 6 ranks by (memory slots, "
        "compute) lexicographically: 10 and 9 order every pair of real profiles alike"
    ),
    # scheduler/core/placement.py, lines 558-1005: scoring, uplinks, MPS searches (issue 15)
    "scheduler/core/placement.py | Placer.saturated_slowdown: compare: b >= cand.bw -> b > cand.bw": (
        "at b == cand.bw the recomputed comm is ring_allreduce_s(n, S, bw) + ring_latency_s(n, level) with the "
        "candidate's own n, S, bw and level (ctx is the candidate's job's), the very expression _eval stored in "
        "cand.comm, and (comp + comm + io) / ideal is the expression of cand.slowdown: the same float either "
        "way"
    ),
    "scheduler/core/placement.py | Placer.saturated_slowdown: int: len(cand.picks) < 2 -> len(cand.picks) < 1": (
        "a whole-GPU candidate of one node has level island or node (_eval), below LEVEL_POD_GROUP, so the "
        "third test returns cand.slowdown for it anyway; no candidate has no picks and no shares"
    ),
    "scheduler/core/placement.py | Placer.saturated_slowdown: int: hosts = max(1, len(info.hosts)) -> hosts "
    "= max(0, len(info.hosts))": (
        "a leaf group is made from the hosts cabled to its switches (build_topology), and a pick's node is one "
        "of its group's hosts, so len(info.hosts) >= 1 and max(0, x) == max(1, x)"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer._mps_frag_host: float: best_frag = 0.0 -> best_frag = 1.0",
            "scheduler/core/placement.py | Placer._mps_frag_host: float: best_frag = 0.0 -> best_frag = -1.0",
            "scheduler/core/placement.py | Placer._mps_frag_single: float: best_frag = 0.0 -> best_frag = 1.0",
            "scheduler/core/placement.py | Placer._mps_frag_single: float: best_frag = 0.0 -> best_frag = -1.0",
        ),
        "best_frag is written together with best_key and best_g for every candidate that becomes the best; with "
        "none, best_g is None and _frag_winner returns None without reading it",
    ),
    "scheduler/core/placement.py | Placer._frag_winner: boolop: g is None or key is None -> g is None and "
    "key is None": (
        "both callers set best_key and best_g in the same assignment and start both at None, so g is None "
        "exactly when key is None"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer._uplinks: float: st.pod_oeff.get(pod, 1.0) -> "
            "st.pod_oeff.get(pod, 2.0)",
            "scheduler/core/placement.py | Placer._uplinks: float: st.pod_oeff.get(pod, 1.0) -> "
            "st.pod_oeff.get(pod, 0.0)",
        ),
        "pod is a pick's node.pod and pods below 0 are skipped just before; every pod of the topology has its "
        "entry in pod_oeff (ClusterState._live_network), so the default is never read",
    ),
    "scheduler/core/placement.py | Placer._io_time: float: return 0.0 -> return -1.0": (
        "_eval keeps io = the largest _io_time of the picks, starting from 0.0: a node's -1.0 never raises it, "
        "as 0.0 never did (no other caller)"
    ),
    "scheduler/core/placement.py | Placer._io_time: float: min(1.0, k / node.G) -> min(2.0, k / node.G)": (
        "k is the number of the node's GPUs in the pick, never more than node.G: k / node.G <= 1.0 < 2.0 either way"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer._io_time: float: st.oeff(dg) if dg is not None else 1.0 -> "
            "st.oeff(dg) if dg is not None else 2.0",
            "scheduler/core/placement.py | Placer._io_time: float: st.oeff(dg) if dg is not None else 1.0 -> "
            "st.oeff(dg) if dg is not None else 0.0",
            "scheduler/core/placement.py | Placer._io_time: int: ds_pod = st.topo.groups[dg].pod if dg is not "
            "None else -1 -> ds_pod = st.topo.groups[dg].pod if dg is not None else -2",
            "scheduler/core/placement.py | Placer._io_time: int: ds_pod = st.topo.groups[dg].pod if dg is not "
            "None else -1 -> ds_pod = st.topo.groups[dg].pod if dg is not None else -0",
        ),
        "_io_time runs only with ctx.D > 0, and _price sets D > 0 only together with a ds_group that is not "
        "None: the else branch is dead",
    ),
    "scheduler/core/placement.py | Placer._io_time: float: st.pod_oeff.get(node.pod, 1.0) -> "
    "st.pod_oeff.get(node.pod, 0.0)": (
        "the other operand of the max, pod_oeff.get(ds_pod, 1.0), is never below 1 (oversubscription() is at "
        "least 1.0, or inf), so max(0.0, x) == max(1.0, x)"
    ),
    "scheduler/core/placement.py | Placer._io_time: float: st.pod_oeff.get(ds_pod, 1.0) -> "
    "st.pod_oeff.get(ds_pod, 0.0)": (
        "the other operand of the max, pod_oeff.get(node.pod, 1.0), is never below 1 (oversubscription() is at "
        "least 1.0, or inf), so max(x, 0.0) == max(x, 1.0)"
    ),
    "scheduler/core/placement.py | Placer._io_time: float: st.pod_oeff.get(ds_pod, 1.0) -> "
    "st.pod_oeff.get(ds_pod, 2.0)": (
        "the default is read only when the dataset's group is in no pod: its switches are then core or unknown "
        "tier (every leaf is in a pod), whose cables never count as group uplinks (build_topology counts a "
        "leaf's only), so oeff(dg) = oversubscription(host, 0) = inf (or the dataset node has no host link "
        "capacity, ds_net = 0): b is already 0 before the pod division and io is inf either way; a job on the "
        "dataset's own group stays below LEVEL_POD_GROUP and never reaches it"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer._mps_frag_host: compare: len(members) > 1 -> len(members) >= 1",
            "scheduler/core/placement.py | Placer._mps_frag_host: int: len(members) > 1 -> len(members) > 0",
        ),
        "the min by rank of a state's only member is that member, as next(iter(members)) is (a state with no "
        "member is deleted from the index)",
    ),
    "scheduler/core/placement.py | Placer._mps_frag_host: bool: zip(where, deltas, strict=True) -> "
    "zip(where, deltas, strict=False)": (
        "delta_node returns one change per index of idxs, and where has one entry per index of idxs (appended "
        "together): the lengths are always equal, so strict never raises"
    ),
    "scheduler/core/placement.py | Placer._mps_frag_host: compare: key < best_key -> key <= best_key": (
        "a key ends with (the node's rank by hostname, the GPU's position), and each GPU of each node is priced "
        "at most once, so no two keys are equal"
    ),
    "scheduler/core/placement.py | Placer._mps_frag_host: compare: free > floor -> free >= floor": (
        "at free == floor both sides of the conditional give the same number (free is floor)"
    ),
    "scheduler/core/placement.py | Placer._eval: compare: ctx.D > 0 -> ctx.D >= 0": (
        "with D == 0, _io_time returns io_s(0 * k / n, b) = 0.0 (io_s returns 0.0 for no bytes before it looks "
        "at b) and io starts at 0.0; nothing else in _io_time can raise (ds_group None reads as LEVEL_FABRIC, "
        "the pod defaults to 1.0)"
    ),
    "scheduler/core/placement.py | Placer._eval: int: node0, mask0 = picks[0] -> node0, mask0 = picks[-1]": (
        "this branch runs only with nn == len(picks) == 1, where picks[-1] is picks[0]"
    ),
    "scheduler/core/placement.py | Placer._eval: compare: k > 1 -> k >= 1": (
        "for one GPU on a node intra_node_gbs returns inf, which never lowers bw (the lines before only read the node)"
    ),
    "scheduler/core/placement.py | Placer._eval: int: k > 1 -> k > 0": (
        "for one GPU on a node intra_node_gbs returns inf, which never lowers bw; a pick always has at least one GPU"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer._eval: compare: b < bw -> b <= bw",
            "scheduler/core/placement.py | Placer._eval: compare: b < bw -> b <= bw #2",
        ),
        "at b == bw the assignment stores the same value",
    ),
    "scheduler/core/placement.py | Placer._eval: int: ctx.D > 0 -> ctx.D > -1": (
        "for -1 < D <= 0 _io_time returns io_s(D * k / n, b) = 0.0 (io_s returns 0.0 for no bytes before it "
        "looks at b) and io starts at 0.0; nothing else in _io_time can raise (ds_group None reads as "
        "LEVEL_FABRIC, the pod defaults to 1.0)"
    ),
    "scheduler/core/placement.py | Placer._eval: compare: t > io -> t >= io": (
        "at t == io the assignment stores the same value"
    ),
    "scheduler/core/placement.py | Placer._eval: int: free = part.gfree.get(g, 0) -> free = part.gfree.get(g, 1)": (
        "gfree and gcap get their keys together (ClusterState._build: the groups of the partition's eligible "
        "nodes); for a group in neither (a running job's drained node priced by migration) gcap.get(g, -1) is "
        "-1, which free never equals when it is 1, and with 0 it did not either"
    ),
    "scheduler/core/placement.py | Placer._eval: int: free = part.gfree.get(g, 0) -> free = part.gfree.get(g, -1)": (
        "gfree and gcap get their keys together (ClusterState._build: the groups of the partition's eligible "
        "nodes); for a group in neither, free = -1 equals gcap.get(g, -1) = -1 but free - used = -1 - used is "
        "below 0, so no leaf is counted broken, as with 0"
    ),
    "scheduler/core/placement.py | Placer._eval: compare: n > 1 -> n >= 1": (
        "for n == 1 ring_allreduce_s and ring_latency_s both return 0.0 (n <= 1), and 0.0 + 0.0 is the 0.0 of "
        "the else branch"
    ),
    "scheduler/core/placement.py | Placer._find_mps_frag: compare: found[0] < best[0] -> found[0] <= best[0]": (
        "the keys are (score, the node's rank by hostname, ...), and each partition's candidate is on a node of "
        "its own (a node is in one partition): two keys are never equal"
    ),
    "scheduler/core/placement.py | Placer._frag_winner: int: key[2] -> key[1]": (
        "the key's third element is only compared between partitions (_find_mps_frag) when score and rank are "
        "equal, which needs the same node, and a node is in one partition: (score, rank, rank) orders the "
        "candidates as (score, rank, position) does"
    ),
    "scheduler/core/placement.py | Placer._find_shared: int: ctx.parts[0] -> ctx.parts[-1]": (
        "every partition of a job's context is of the job's pool (Placer.context filters "
        "st.pool_parts[job.pool]), so parts[-1].pool is parts[0].pool"
    ),
    "scheduler/core/placement.py | Placer._mps_frag_single.<locals>.consider: compare: key < best_key -> "
    "key <= best_key": (
        "a key ends with (the node's rank by hostname, the GPU's position) and no GPU is priced twice: used "
        "GPUs (compute left below 100) and empty ones are different GPUs, each count of empty GPUs is priced on "
        "one node of its own bucket, and the tie scan only takes nodes whose rank is below the best's so far, "
        "which drops with each node it prices: no two keys are equal"
    ),
    "scheduler/core/placement.py | Placer._eval: int: n > 1 -> n > 0": (
        "a job has at least one GPU (context refuses fewer); for n == 1 ring_allreduce_s and ring_latency_s "
        "both return 0.0, the else branch's value"
    ),
    "scheduler/core/placement.py | Placer._eval: compare: lv > level -> lv >= level": (
        "at lv == level the assignment stores the same value"
    ),
    "scheduler/core/placement.py | Placer._eval: compare: g.util > util -> g.util >= util": (
        "at g.util == util the assignment stores the same value"
    ),
    # scheduler/core/placement.py, lines 1-557: context, pricing, the searches (issue 15)
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | JobCtx.__init__: float: self.ds_net = 0.0 -> self.ds_net = 1.0",
            "scheduler/core/placement.py | JobCtx.__init__: float: self.ds_net = 0.0 -> self.ds_net = -1.0",
        ),
        "ds_net is read only where ctx.D > 0 (_ideal_step's io term, _io_time from _eval under ctx.D > 0), and "
        "_price sets D > 0 only in the branch that also sets ds_net from the node's rate; reprice resets it to "
        "0.0 itself",
    ),
    "scheduler/core/placement.py | Placer._price: float: ctx.D = 0.0 -> ctx.D = -1.0": (
        "every read of ctx.D is `ctx.D > 0` or sits under it (_ideal_step, _search_single, _groups_by_dataset's "
        "callers, _eval, the explanation): -1.0 and 0.0 are both not above 0"
    ),
    "scheduler/core/placement.py | Placer._ideal_step: int: nodes = 1 -> nodes = 0": (
        "nodes is only read as max(1, nodes) (the io term's bytes per node), and max(1, 0) == max(1, 1); the "
        "multi-node branch overwrites it"
    ),
    "scheduler/core/placement.py | Placer._ideal_step: compare: n > 1 -> n >= 1": (
        "n == 1 then enters the comm branch, but context() leaves N at 1 or None for one GPU (1 % N != 0 "
        "otherwise) and max_G >= 1, so one of the two single-node formulas runs: ring_allreduce_s and "
        "ring_latency_s of one rank are 0.0 (S is 0.0 too), and nodes stays 1"
    ),
    "scheduler/core/placement.py | Placer._ideal_step: compare: ctx.D > 0 -> ctx.D >= 0": (
        "with D == 0 the branch computes io_s(0 / nodes, b), which returns 0.0 for no bytes before it looks at "
        "b; nothing in it can fail (max_G >= 1), so io stays 0.0"
    ),
    "scheduler/core/placement.py | Placer._search_multi: return: return best -> return None #4": (
        "reached only with require == 'pod' after `if best is not None and (not best.flagged or ctx.require == "
        "'pod'): return best`, which returns every candidate a pod-bound job has: best is None there"
    ),
    "scheduler/core/placement.py | Placer.context: int: ctx.mps_pct = job.mps_compute_pct or 0 -> "
    "ctx.mps_pct = job.mps_compute_pct or -1": (
        "ctx.mps_pct is read only for MPS jobs (context's check, the MPS search, _share_for's MPS branch, "
        "fail_reason, need_equiv), and an MPS job with no percentage (None or 0) is refused by `not (1 <= "
        "ctx.mps_pct <= 100)` with the same reason whether it reads 0 or -1"
    ),
    "scheduler/core/placement.py | Placer.context: int: ctx.mps_mem = job.mps_memory_mib or 0 -> "
    "ctx.mps_mem = job.mps_memory_mib or -1": (
        "ctx.mps_mem is read only for MPS jobs (context's check, the MPS search, _share_for's MPS branch, "
        "fail_reason), and an MPS job with no memory limit (None or 0) is refused by `not (0 < ctx.mps_mem <= "
        "mem_cap)` with the same reason whether it reads 0 or -1"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer.reprice: float: c.ds_name, c.ds_group, c.ds_net = (None, "
            "None, 0.0) -> c.ds_name, c.ds_group, c.ds_net = (None, None, 1.0)",
            "scheduler/core/placement.py | Placer.reprice: float: c.ds_name, c.ds_group, c.ds_net = (None, "
            "None, 0.0) -> c.ds_name, c.ds_group, c.ds_net = (None, None, -1.0)",
        ),
        "_price runs right after: it sets ds_net in the branch that makes D > 0, and ds_net is read only where D > 0",
    ),
    "scheduler/core/placement.py | Placer._price: compare: ctx.n > 1 -> ctx.n >= 1": (
        "ctx.S is read only as ring_allreduce_s(ctx.n, ctx.S, ...) (_ideal_step, _eval, saturated_slowdown, "
        "_eval_shared), which returns 0.0 for one rank before it reads the size"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer._price: float: ctx.S = S if ctx.n > 1 else 0.0 -> ctx.S = S "
            "if ctx.n > 1 else 1.0",
            "scheduler/core/placement.py | Placer._price: float: ctx.S = S if ctx.n > 1 else 0.0 -> ctx.S = S "
            "if ctx.n > 1 else -1.0",
        ),
        "ctx.S is read only as ring_allreduce_s(ctx.n, ctx.S, ...), which returns 0.0 for one rank before it "
        "reads the size",
    ),
    "scheduler/core/placement.py | Placer._ideal_step: int: n > 1 -> n > 0": (
        "context() refuses n < 1, so n > 0 holds exactly when n >= 1: the same as the `n > 1 -> n >= 1` mutant "
        "(n == 1 gives comm 0.0 in either branch)"
    ),
    "scheduler/core/placement.py | Placer._ideal_step: int: ctx.D > 0 -> ctx.D > -1": (
        "for D in (-1, 0] (no dataset: 0.0; or a non-positive io_bytes_per_step) the branch computes io_s(D / "
        "nodes, b), which returns 0.0 for no bytes before it looks at b"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer._pick_in_node: int: best_cnt = 1 << 30 -> best_cnt = 2 << 30",
            "scheduler/core/placement.py | Placer._pick_in_node: int: best_cnt = 1 << 30 -> best_cnt = 1 << 31",
            "scheduler/core/placement.py | Placer._pick_in_node: int: best_cnt = 1 << 30 -> best_cnt = 1 << 29",
        ),
        "a sentinel above any island's free count (a node has a few dozen GPUs at most), read only in n <= c < "
        "best_cnt: any value above the largest island gives the same first pick",
    ),
    "scheduler/core/placement.py | Placer._picks_from: int: range(G, 0, -1) -> range(G, -1, -1)": (
        "j == 0 adds the nodes with no free GPU after every other: to pool_nodes only while total < n (they add "
        "0; _balanced gives them 0 and `if t:` skips them, the others' split unchanged as they are filled "
        "first), to spare (the packed remainder needs n_free >= r >= 1) or to warm (last in it, adding 0): the "
        "same picks"
    ),
    "scheduler/core/placement.py | Placer.context: int: N or 1 -> N or 0": (
        "in `(N or 1) > 1` (a shared job on one node) only N None reads differently: 0 > 1 and 1 > 1 are both False"
    ),
    "scheduler/core/placement.py | Placer.context: int: N or 1 -> N or 0 #2": (
        "in `(N or 1) > 1` (an island job on one node) only N None reads differently: 0 > 1 and 1 > 1 are both False"
    ),
    "scheduler/core/placement.py | Placer._price: int: ctx.n > 1 -> ctx.n > 0": (
        "context() refuses n < 1, so this is `ctx.n >= 1`: ctx.S is read only as ring_allreduce_s(ctx.n, ctx.S, "
        "...), which returns 0.0 for one rank"
    ),
    "scheduler/core/placement.py | Placer._pick_in_node: compare: c <= need -> c < need": (
        "with c == need, _lowest_util(node, piece, need) finds exactly need GPUs in the piece and returns them "
        "all (it sorts and cuts only when there are more): the whole piece either way"
    ),
    "scheduler/core/placement.py | Placer._pick_in_node: int: need == 0 -> need == -1": (
        "once need is 0 the further pieces (each has a free GPU) go to _lowest_util(node, piece, 0), which "
        "returns the empty mask 0, and need stays 0: the mask is unchanged"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer._search_multi: int: N, k = (ctx.N, ctx.k) if fixed else "
            "(math.ceil(n / G), 0) -> N, k = (ctx.N, ctx.k) if fixed else (math.ceil(n / G), 1)",
            "scheduler/core/placement.py | Placer._search_multi: int: N, k = (ctx.N, ctx.k) if fixed else "
            "(math.ceil(n / G), 0) -> N, k = (ctx.N, ctx.k) if fixed else (math.ceil(n / G), -1)",
        ),
        "k of a free-shape job is read nowhere: capacity() reads it only when fixed, and _picks_from's "
        "free-shape branch never reads k",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer.find: compare: len(ctx.parts) > 1 -> len(ctx.parts) >= 1",
            "scheduler/core/placement.py | Placer.find: int: len(ctx.parts) > 1 -> len(ctx.parts) > 0",
        ),
        "with one partition the break ends a loop that ends after it anyway",
    ),
    "scheduler/core/placement.py | Placer.find: int: ctx.N == 1 -> ctx.N == 0": (
        "ctx.N is never 0 (context refuses it); the mutant sends a one-node job (N == 1, single) to "
        "_search_multi when _search_single found nothing, but _search_multi only takes reachable, host-fitting "
        "nodes with >= k = n free GPUs, all of which _search_single already scored (it returns a candidate "
        "whenever one node has n free and fits the host request): still None"
    ),
    # scheduler/core/placement.py, lines 1006-1459: shared searches, explain, RingLoad (issue 15)
    "scheduler/core/placement.py | _island_of: return: return 0 -> return None": (
        "unreachable: NodeSlot.__init__ gives every GPU not named in an NVLink island a singleton island of its "
        "own, and _island_of is only asked about GPUs of that node, so the loop always returns from inside"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | _island_of: int: return 0 -> return 1",
            "scheduler/core/placement.py | _island_of: int: return 0 -> return -1",
        ),
        "unreachable: NodeSlot.__init__ gives every GPU not named in an NVLink island a singleton island of its "
        "own, so the loop always returns from inside",
    ),
    "scheduler/core/placement.py | _lowest_util: compare: len(gs) > n -> len(gs) >= n": (
        "with exactly n GPUs the sort and the [:n] cut keep the same n GPUs (sorted in place on a local list): "
        "the same mask"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | _room: float: return 0.0 -> return 1.0",
            "scheduler/core/placement.py | _room: float: return 0.0 -> return -1.0",
        ),
        "only time-sliced shares reach the last return (_room is called for shared modes only): there every GPU "
        "gets the same constant, so the (island, room) sorts keep their order, and _eval_shared replaces the "
        "room term by the replicas used for time-slicing",
    ),
    "scheduler/core/placement.py | Placer._shared_single: compare: free > floor -> free >= floor": (
        "when free equals the floor both sides of the conditional expression are the same number"
    ),
    "scheduler/core/placement.py | Placer._eval_shared: compare: n > 1 -> n >= 1": (
        "for one GPU the branch gives what its defaults give: intra_node_gbs(1, ...) is inf, ring_allreduce_s "
        "and ring_latency_s of 1 rank are 0.0, and one GPU is in one island (LEVEL_ISLAND)"
    ),
    "scheduler/core/placement.py | Placer._eval_shared: int: n > 1 -> n > 0": (
        "n >= 1 always; for one GPU the branch gives what its defaults give: intra_node_gbs(1, ...) is inf, "
        "ring_allreduce_s and ring_latency_s of 1 rank are 0.0, and one GPU is in one island (LEVEL_ISLAND)"
    ),
    "scheduler/core/placement.py | Placer.fail_reason: boolop: ctx.N is not None and ctx.k is not None -> "
    "ctx.N is not None or ctx.k is not None": (
        "Placer.context sets both or neither: N from k (n // k) when only k is given, k from N when only N is "
        "(reprice copies them), so the two tests agree"
    ),
    "scheduler/core/placement.py | RingLoad.add: negate: a < b -> not a < b": (
        "the pairs a >= b are the pairs a < b reversed plus a == b: ClusterState.group_level is symmetric "
        "(TopologyIndex caches it under the ordered pair) and gives LEVEL_LEAF_GROUP, the starting level, for a "
        "== b, so the maximum is the same"
    ),
    "scheduler/core/placement.py | RingLoad.add: compare: a < b -> a <= b": (
        "the added pairs a == b give LEVEL_LEAF_GROUP (ClusterState.group_level of a group with itself), the "
        "starting level: the maximum is the same"
    ),
    "scheduler/core/placement.py | Placer._share_for: int: part.replicas + len(g.ts_reps) + 1 -> "
    "part.replicas + len(g.ts_reps) + 2": (
        "the first replica not in ts_reps is at most len(ts_reps) (pigeonhole over 0..len), inside the range "
        "either way: next() returns the same number"
    ),
    "scheduler/core/placement.py | Placer._share_for: int: part.replicas + len(g.ts_reps) + 1 -> "
    "part.replicas + len(g.ts_reps) + 0": (
        "the first replica not in ts_reps is at most len(ts_reps) (pigeonhole over 0..len), and replicas >= 1 "
        "(Partition takes max(1, ...)), so it is inside range(replicas + len) too: the same number"
    ),
    "scheduler/core/placement.py | Placer._eval_shared: int: chosen[0] -> chosen[1]": (
        "inside `if n > 1` chosen has n >= 2 entries, all GPUs of one node (_shared_multi and _pick_shared pick "
        "from one node's GPUs): the same node"
    ),
    "scheduler/core/placement.py | Placer._eval_shared: int: chosen[0] -> chosen[-1]": (
        "all chosen GPUs are on one node (_shared_multi and _pick_shared pick from one node's GPUs): the last "
        "one's node is the same node"
    ),
    "scheduler/core/placement.py | Placer.explain: int: cand.shares[0] -> cand.shares[-1]": (
        "g0 gives the GPU index only for one GPU (n == 1: one share, [-1] is [0]) and otherwise its node's "
        "name, the same for every share (shared jobs sit on one node)"
    ),
    "scheduler/core/placement.py | Placer.explain: int: node, mask = cand.picks[0] -> node, mask = cand.picks[-1]": (
        "inside `len(cand.picks) == 1`: the last pick is the first"
    ),
    "scheduler/core/placement.py | Placer.explain: int: groups[0] -> groups[-1] #2": (
        "the leaf label is read only when len(groups) == 1: the last group is the first"
    ),
    "scheduler/core/placement.py | Placer.explain: int: groups[0] >= 0 -> groups[0] >= -1": (
        "at LEVEL_POD_GROUP no group is negative: ClusterState.group_level gives LEVEL_FABRIC for a negative "
        "group (a node in no leaf), and _eval's level is the highest group_level of its groups, so the test is "
        "true either way"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer.explain: int: pod = st.topo.groups[groups[0]].pod if "
            "groups[0] >= 0 else -1 -> pod = st.topo.groups[groups[0]].pod if groups[0] >= 0 else -2",
            "scheduler/core/placement.py | Placer.explain: int: pod = st.topo.groups[groups[0]].pod if "
            "groups[0] >= 0 else -1 -> pod = st.topo.groups[groups[0]].pod if groups[0] >= 0 else -0",
        ),
        "unreachable else: at LEVEL_POD_GROUP no group is negative (ClusterState.group_level gives LEVEL_FABRIC "
        "for a negative group, and _eval's level is the highest group_level of its groups)",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer.explain: int: groups[0] -> groups[1]",
            "scheduler/core/placement.py | Placer.explain: int: groups[0] -> groups[1] #3",
        ),
        "at LEVEL_POD_GROUP there are >= 2 groups, none negative, and all meet through a spine without the "
        "core, so they are in one pod (tiers' pods are the connected leaf-and-spine components): the second "
        "group's pod, and its sign, are the first's",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | Placer.explain: int: groups[0] -> groups[-1]",
            "scheduler/core/placement.py | Placer.explain: int: groups[0] -> groups[-1] #3",
        ),
        "at LEVEL_POD_GROUP the groups, none negative, all meet through a spine without the core, so they are "
        "in one pod (tiers' pods are the connected leaf-and-spine components): the last group's pod, and its "
        "sign, are the first's",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/placement.py | _balanced: int: alloc = [0] * len(frees) -> alloc = [1] * len(frees)",
            "scheduler/core/placement.py | _balanced: int: alloc = [0] * len(frees) -> alloc = [-1] * len(frees)",
        ),
        "the loop runs over `order`, a permutation of every index, and writes alloc[i] for each before the list "
        "is returned: the initial values are never read",
    ),
    "scheduler/core/placement.py | Placer.fail_reason: int: largest, where = (0, '') -> largest, where = (-1, '')": (
        "a node in bucket j >= 1 has a free GPU, so an island with c >= 1 free: it beats 0 and -1 alike; with "
        "no such node largest stays at its start, and island_block words any largest <= 0 the same (no node has "
        "a free GPU)"
    ),
    "scheduler/core/placement.py | Placer.fail_reason: int: largest, where = (0, '') -> largest, where = (-1, '') #2": (
        "a non-empty bucket j >= 1 beats 0 and -1 alike; with none largest stays at its start, and node_block "
        "words any largest <= 0 the same (no node has a free GPU)"
    ),
    "scheduler/core/placement.py | Placer.fail_reason: int: best, where = (0, '') -> best, where = (-1, '')": (
        "a domain with c >= 1 beats 0 and -1 alike; domains with c == 0 only make best 0 with a name that "
        "leaf_block and pod_block never print: both word any best <= 0 the same (no leaf / pod has a free GPU)"
    ),
    "scheduler/core/placement.py | Placer.fail_reason: int: range(p.G, 0, -1) -> range(p.G, -1, -1)": (
        "buckets[0] is always empty (ClusterState._set_node_free files a node under its count only when it is "
        "not 0), so the extra j = 0 finds no node, and largest >= 0 then ends the loop as its end would"
    ),
    "scheduler/core/placement.py | Placer.fail_reason: int: range(p.G, 0, -1) -> range(p.G, -1, -1) #2": (
        "buckets[0] is always empty (ClusterState._set_node_free files a node under its count only when it is "
        "not 0): the extra j = 0 changes nothing"
    ),
    "scheduler/core/placement.py | Placer.fail_reason: compare: largest >= j -> largest > j": (
        "going on below bucket j when largest == j: nodes there have at most j - 1 free GPUs, so no island "
        "beats largest"
    ),
    # scheduler/core/engine.py (issue 15)
    **dict.fromkeys(
        (
            "scheduler/core/engine.py | _Round._forget: negate: s is not None -> not s is not None",
            "scheduler/core/engine.py | _Round._forget: compare: s is not None -> s is None",
        ),
        "s is never None (ClusterState adds every node of a job's job_gpus to jobs_on_node in the same loop), "
        "so the mutant only leaves the requeued job's id in jobs_on_node; both readers drop such ids: "
        "backfill.plan_reservation keeps only ids in st.running (popped by _forget; nothing re-adds one), "
        "preemption._plans_shared only ids in the victim index, built from job_gpus (popped by _forget) after "
        "the failures phase",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/engine.py | _Round.__init__: int: self.counters: dict[str, int] = {'pending': 0, "
            "'placed': 0, 'placed_backfill_window': 0, 'class_skips': 0, 'searches': 0... -> self.counters: "
            "dict[str, int] = {'pending': 1, 'placed': 0, 'placed_backfill_window': 0, 'class_skips': 0, "
            "'searches': 0...",
            "scheduler/core/engine.py | _Round.__init__: int: self.counters: dict[str, int] = {'pending': 0, "
            "'placed': 0, 'placed_backfill_window': 0, 'class_skips': 0, 'searches': 0... -> self.counters: "
            "dict[str, int] = {'pending': -1, 'placed': 0, 'placed_backfill_window': 0, 'class_skips': 0, "
            "'searches': ...",
        ),
        "run() sets counters['pending'] = len(ordered) before anything reads the counters (the key keeps its "
        "place in the dict)",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/engine.py | _Round.__init__: int: ...on_attempts': 0, 'victims': 0, 'reservations': "
            "0, 'claims': 0, 'claims_started': 0, 'claims_dropped': 0, 'min_run_protec... -> ...on_attempts': "
            "0, 'victims': 0, 'reservations': 0, 'claims': 1, 'claims_started': 0, 'claims_dropped': 0, "
            "'min_run_protec...",
            "scheduler/core/engine.py | _Round.__init__: int: ...on_attempts': 0, 'victims': 0, 'reservations': "
            "0, 'claims': 0, 'claims_started': 0, 'claims_dropped': 0, 'min_run_protec... -> ...on_attempts': "
            "0, 'victims': 0, 'reservations': 0, 'claims': -1, 'claims_started': 0, 'claims_dropped': 0, "
            "'min_run_prote...",
        ),
        "_place_all sets counters['claims'] = len(claims) before anything reads it (the key keeps its place in "
        "the dict)",
    ),
    "scheduler/core/engine.py | _Round._place_all: compare: p < min_victim.get(req.pool, big) -> p <= "
    "min_victim.get(req.pool, big)": (
        "a running minimum: on p equal to the pool's current minimum the mutant stores the same value again "
        "(and p == big only where big is already the default get() gives back)"
    ),
    "scheduler/core/engine.py | _describe: int: node, mask = cand.picks[0] -> node, mask = cand.picks[-1]": (
        "that branch is taken only when len(cand.picks) == 1: picks[-1] is picks[0]"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/engine.py | need_equiv: float: prof.compute_fraction if prof else 1.0 -> "
            "prof.compute_fraction if prof else 2.0",
            "scheduler/core/engine.py | need_equiv: float: prof.compute_fraction if prof else 1.0 -> "
            "prof.compute_fraction if prof else 0.0",
        ),
        "unreachable: every JobCtx comes from Placer.context (reprice copies its parts), which refuses a MIG "
        "job without a profile and keeps only the partitions whose profiles hold it, so "
        "parts[0].profiles.get(...) is never None for a MIG job",
    ),
    "scheduler/core/engine.py | _Round._place_all: compare: r > svc_max.get(k3, -1) -> r >= svc_max.get(k3, -1)": (
        "a running maximum: on r equal to the current maximum the mutant stores the same value again (levels "
        "are >= 0, so never equal to the default -1)"
    ),
    "scheduler/core/engine.py | _Round._place_all: int: svc_max.get(k3, -1) -> svc_max.get(k3, -2)": (
        "service levels are >= 0, so r > -1 and r > -2 hold alike: every preemptible running job's level is "
        "compared as before"
    ),
    "scheduler/core/engine.py | _Round._place_all: int: svc_max.get(k3, -1) -> svc_max.get(k3, -0)": (
        "only a line whose highest level is 0 loses its entry; service_floor then returns None for it, and did "
        "before: its floor is a level + 1 >= 1 (0 + 1 when starving), and top 0 >= floor never holds"
    ),
    "scheduler/core/engine.py | _Round._place_all.<locals>.process: compare: p <= m -> p < m": (
        "min(p, m) written out: where p == m the mutant takes m, the same number"
    ),
    "scheduler/core/engine.py | _Round._place_all.<locals>.process: compare: p0 <= maxp.get(job.tenant, "
    "big) -> p0 < maxp.get(job.tenant, big)": (
        "min(p0, max priority) written out: where they are equal the mutant takes the maximum, the same number"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/engine.py | _Round._place_all: int: max((p.G for p in parts), default=0) -> "
            "max((p.G for p in parts), default=1)",
            "scheduler/core/engine.py | _Round._place_all: int: max((p.G for p in parts), default=0) -> "
            "max((p.G for p in parts), default=-1)",
            "scheduler/core/engine.py | _Round._place_all: int: max_g.get(pool, 0) -> max_g.get(pool, 1)",
            "scheduler/core/engine.py | _Round._place_all: int: max_g.get(pool, 0) -> max_g.get(pool, -1)",
        ),
        "a pool with no partitions (or none in pool_parts) changes only multi_waiting of that pool, and "
        "multi_waiting is read only for a job of that pool that has a placement (_leaf_wait); with no "
        "partitions Placer.context finds no GPUs for its jobs (invalid request), so nothing reads it",
    ),
    "scheduler/core/engine.py | _describe: int: cand.shares[0] -> cand.shares[-1] #2": (
        "every share of one candidate is of the job's one sharing kind (the placer builds them all with "
        "_share_for for ctx.sharing): the last share's kind is the first's"
    ),
    "scheduler/core/engine.py | need_equiv: int: ctx.parts[0] -> ctx.parts[-1]": (
        "for a MIG job every partition of ctx.parts holds its profile (Placer.context keeps only those), and a "
        "profile name fixes its fraction: '<g>g.<mem>gb' is g / 7 on every 7-slice GPU, and the A30's names "
        "(1g.6gb, 2g.12gb, 4g.24gb, g / 4) are no other GPU's; other sharing modes never read parts[0] here"
    ),
    "scheduler/core/engine.py | _Round._place_all: int: nodes or 1 -> nodes or 0": (
        "the value is only compared with > 1: for nodes None (or 0) both 1 and 0 are not above 1"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/engine.py | _Round._place_all.<locals>.process: float: need_equiv(c) if c is not "
            "None else 0.0 -> need_equiv(c) if c is not None else 1.0",
            "scheduler/core/engine.py | _Round._place_all.<locals>.process: float: need_equiv(c) if c is not "
            "None else 0.0 -> need_equiv(c) if c is not None else -1.0",
        ),
        "entry[2] is read only after the 'ctx is None: invalid, return' check, so the need stored for a context "
        "that is None is never read",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/engine.py | _Round._place_all.<locals>.process: int: multi_waiting.get(pool, 0) -> "
            "multi_waiting.get(pool, 1)",
            "scheduler/core/engine.py | _Round._place_all.<locals>.process: int: multi_waiting.get(pool, 0) -> "
            "multi_waiting.get(pool, -1)",
        ),
        "the default reaches _cross_cost as others = default - 1, which is only tested with others > 0: -1 (0), "
        "0 (1) and -2 (-1) all take the no-others branch",
    ),
    "scheduler/core/engine.py | _Round._leaf_wait: int: lcand.picks[0] -> lcand.picks[-1]": (
        "lcand is a placement with require='leaf': all its picks are in one leaf group, so the last pick's "
        "group label is the first's"
    ),
    "scheduler/core/engine.py | _Round._preempt: float: young.get(v, 0.0) -> young.get(v, -1.0)": (
        "young holds only positive waits, so the max is the same whenever the later plan has a young victim; "
        "with none it is -1.0 instead of 0.0, and the value is only ever shown through reasons.duration, which "
        "clamps it to 0 s either way"
    ),
    # scheduler/core/state.py (issue 15)
    "scheduler/core/state.py | NodeSlot.__init__: bool: self.eligible = False -> self.eligible = True": (
        "a NodeSlot is only built in ClusterState._build, whose loop sets node.eligible (pid is not None and up "
        "and schedulable and G > 0) for every node right after building it, before anything reads it"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | NodeSlot.__init__: float: self.net_gbs = 0.0 -> self.net_gbs = 1.0",
            "scheduler/core/state.py | NodeSlot.__init__: float: self.net_gbs = 0.0 -> self.net_gbs = -1.0",
        ),
        "a NodeSlot is only built in ClusterState._build, which sets node.net_gbs = _node_net.get(name, 0.0) "
        "for every node right after building it, before anything reads it",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | ClusterState.share_fits: int: part.replicas if part else 1 -> "
            "part.replicas if part else 2",
            "scheduler/core/state.py | ClusterState.share_fits: int: part.replicas if part else 1 -> "
            "part.replicas if part else 0",
        ),
        "share_fits has already returned False for a GPU whose node is not eligible, and an eligible node (pool "
        "set, G > 0) always gets node.part in _build: part is never None at that line",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | NodeSlot.__init__: float: self.nominal_gbs = 0.0 -> self.nominal_gbs = 1.0",
            "scheduler/core/state.py | NodeSlot.__init__: float: self.nominal_gbs = 0.0 -> self.nominal_gbs = -1.0",
        ),
        "a NodeSlot is only built in ClusterState._build, which sets node.nominal_gbs = _node_nominal.get(name, "
        "0.0) for every node right after building it, before anything reads it",
    ),
    "scheduler/core/state.py | NodeSlot.__init__: bool: self.hot = False -> self.hot = True": (
        "a NodeSlot is only built in ClusterState._build, which sets node.hot = name in _node_hot for every "
        "node right after building it, before anything reads it"
    ),
    "scheduler/core/state.py | NodeSlot.__init__: bool: self.err = False -> self.err = True": (
        "a NodeSlot is only built in ClusterState._build, which sets node.err = name in _node_err for every "
        "node right after building it, before anything reads it"
    ),
    "scheduler/core/state.py | NodeSlot.__init__: bool: self.reachable = False -> self.reachable = True": (
        "a NodeSlot is only built in ClusterState._build, which sets node.reachable in both branches (in a leaf "
        "group: True; else: not off_fabric) right after building it, before anything reads it"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | Partition.__init__: float: self.nvlink_gbps = 0.0 -> self.nvlink_gbps = 1.0",
            "scheduler/core/state.py | Partition.__init__: float: self.nvlink_gbps = 0.0 -> self.nvlink_gbps = -1.0",
        ),
        "a Partition is only built in ClusterState._build, whose second loop sets nvlink_gbps = max(...) for "
        "every partition before anything reads it",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | Partition.__init__: int: self.G = 0 -> self.G = 1",
            "scheduler/core/state.py | Partition.__init__: int: self.G = 0 -> self.G = -1",
        ),
        "a Partition is only built in ClusterState._build, whose second loop sets part.G (the most GPUs of its "
        "nodes) for every partition before anything reads it",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | Partition.__init__: int: self.max_island = 0 -> self.max_island = 1",
            "scheduler/core/state.py | Partition.__init__: int: self.max_island = 0 -> self.max_island = -1",
        ),
        "a Partition is only built in ClusterState._build, whose second loop sets max_island = max(..., "
        "default=1) for every partition before anything reads it",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | Partition.__init__: float: self.nominal_net = 0.0 -> self.nominal_net = 1.0",
            "scheduler/core/state.py | Partition.__init__: float: self.nominal_net = 0.0 -> self.nominal_net = -1.0",
        ),
        "a Partition is only built in ClusterState._build, whose second loop sets nominal_net = max(...) for "
        "every partition before anything reads it",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | NodeSlot.__init__: int: self.group = -1 -> self.group = -2",
            "scheduler/core/state.py | NodeSlot.__init__: int: self.group = -1 -> self.group = -0",
        ),
        "a NodeSlot is only built in ClusterState._build, which sets node.group in both branches (its leaf "
        "group's id, or -1 - i) right after building it, before anything reads it",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | ClusterState.__init__: int: self._journal_depth = 0 -> self._journal_depth = 1",
            "scheduler/core/state.py | ClusterState.__init__: int: self._journal_depth = 0 -> self._journal_depth = -1",
        ),
        "the depth is only read by _close_journal (rollback, keep) after a journal(); journal() resets it to 0 "
        "whenever it opens a log (journal_log None, as at the start); a keep() with no journal open leaves "
        "journal_log None with any depth, and the next journal() resets the depth again",
    ),
    "scheduler/core/state.py | Partition.__init__: int: range(101) -> range(102)": (
        "an extra, always empty bucket 101: an MPS key is 100 - mps_pct with mps_pct >= 0, so at most 100, and "
        "the placer reads mps_b only at indexes up to 100 (range(pct, 100), range(pct, 101), mps_b[100])"
    ),
    "scheduler/core/state.py | Partition.__init__: int: range(9) -> range(10)": (
        "an extra, always empty bucket 9 per MIG profile: a MIG key is min(8, ...), and the placer only "
        "iterates the buckets (an empty one yields nothing)"
    ),
    "scheduler/core/state.py | ClusterState._build: int: G + 1 -> G + 2": (
        "an extra, always empty bucket G + 1 in part.buckets: no node has more than G free GPUs, and every "
        "reader stops at G (range(n, G + 1), range(G, 0, -1), range(k, p.G + 1))"
    ),
    "scheduler/core/state.py | ClusterState._build: int: G + 1 -> G + 2 #2": (
        "an extra, always empty bucket G + 1 in part.gbuckets[group]: no node has more than G free GPUs; "
        "readers stop at G (range(j, G + 1), range(G, 0, -1)) or sum bucket sizes (nodes_with_at_least), where "
        "an empty bucket adds 0"
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | ClusterState._build: float: part.nvlink_gbps = max((g.nvlink for n in "
            "part.nodes for g in n.gpus), default=0.0) -> part.nvlink_gbps = max((g.nvlink for n in part.nodes "
            "for g in n.gpus), default=1.0)",
            "scheduler/core/state.py | ClusterState._build: float: part.nvlink_gbps = max((g.nvlink for n in "
            "part.nodes for g in n.gpus), default=0.0) -> part.nvlink_gbps = max((g.nvlink for n in part.nodes "
            "for g in n.gpus), default=-1.0)",
        ),
        "a partition is made for a node with G > 0 and holds it: the generator is never empty, the default never used",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | ClusterState._build: int: part.max_island = max((im.bit_count() for n in "
            "part.nodes for im in n.islands), default=1) -> part.max_island = max((im.bit_count() for n in "
            "part.nodes for im in n.islands), default=2)",
            "scheduler/core/state.py | ClusterState._build: int: part.max_island = max((im.bit_count() for n in "
            "part.nodes for im in n.islands), default=1) -> part.max_island = max((im.bit_count() for n in "
            "part.nodes for im in n.islands), default=0)",
        ),
        "a partition's nodes have G > 0 and NodeSlot puts every GPU in an island (its own when no NVLink island "
        "names it): the generator is never empty, the default never used",
    ),
    **dict.fromkeys(
        (
            "scheduler/core/state.py | ClusterState._build: float: part.nominal_net = max((n.nominal_gbs for n "
            "in part.nodes), default=0.0) -> part.nominal_net = max((n.nominal_gbs for n in part.nodes), "
            "default=1.0)",
            "scheduler/core/state.py | ClusterState._build: float: part.nominal_net = max((n.nominal_gbs for n "
            "in part.nodes), default=0.0) -> part.nominal_net = max((n.nominal_gbs for n in part.nodes), "
            "default=-1.0)",
        ),
        "a partition is made for a node and holds it: part.nodes is never empty, the default never used",
    ),
    "scheduler/core/state.py | ClusterState._set_node_free: boolop: part is None or not node.eligible -> "
    "part is None and (not node.eligible)": (
        "both forms are False on every call: _set_node_free only runs for a changed mask, and only an eligible "
        "node's mask changes (_build calls it under node.eligible; _refresh on a GPU of an ineligible node "
        "computes mask & ~bit from a mask that is still 0); eligibility is fixed after _build, and an eligible "
        "node (pool set, G > 0) always has a part"
    ),
    "scheduler/core/state.py | ClusterState._refresh: int: key = min(8, max(0, free_slots)) -> key = min(9, "
    "max(0, free_slots))": (
        "free_slots = total_slots - (bits of the mask within total_slots) is at most total_slots <= 8"
    ),
    "scheduler/core/state.py | ClusterState._refresh: int: max(0, free_slots) -> max(1, free_slots)": (
        "free_slots is 0 only when every slot of the GPU is taken; then no profile has a free start (each "
        "profile's mask is a non-empty set of those slots), so key stays None whatever max gives"
    ),
    "scheduler/core/state.py | ClusterState._refresh: int: max(0, free_slots) -> max(-1, free_slots)": (
        "free_slots = total_slots - (bits of the mask within total_slots) is never negative"
    ),
    "scheduler/core/state.py | ClusterState._refresh: int: 1 << prof.total_slots -> 2 << prof.total_slots": (
        "the mask has a bit at or above total_slots only for an unknown profile (0xFF) on a 4-slot A30; then "
        "every slot is taken, no profile has a free start and key stays None, whatever free_slots comes to"
    ),
    "scheduler/core/state.py | ClusterState._refresh: int: 1 << prof.total_slots -> 0 << prof.total_slots": (
        "(0 << n) - 1 = -1 keeps the whole mask; it has a bit at or above total_slots only for an unknown "
        "profile (0xFF) on a 4-slot A30; then every slot is taken, no profile has a free start and key stays "
        "None"
    ),
    "scheduler/core/state.py | ClusterState._live_network: float: util.get(key, 0.0) -> util.get(key, -1.0)": (
        "the default only answers `> 0` for an erroring link with no utilisation entry: -1.0 > 0 and 0.0 > 0 "
        "are both False"
    ),
}


#
# Mutants
#

_COMPARE_FLIP: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True, slots=True)
class Mutant:
    path: str  # relative to the repository
    node: int  # position of the mutated node in ast.walk order
    variant: int
    kind: str
    scope: str | None  # qualified name of the innermost enclosing function; None at module or class level
    line: int
    before: str
    after: str
    key: str  # stable across edits elsewhere in the file: scope, kind, before -> after (#n for repeats)

    @property
    def ident(self) -> str:
        return f"{self.path} | {self.key}"


def module_name(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _scopes_and_skips(tree: ast.Module) -> tuple[dict[int, str | None], set[int]]:
    """id(node) -> enclosing function's qualname (None: runs at import); ids of nodes never mutated."""
    scope: dict[int, str | None] = {}
    skip: set[int] = set()

    def mark_skip(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    def visit(node: ast.AST, func: str | None, qual: str) -> None:
        scope[id(node)] = func
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            mark_skip(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None:
                    mark_skip(a.annotation)
            mark_skip(node.returns)
            _skip_slots(node.decorator_list, mark_skip)
            for outer in [*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d is not None)]:
                visit(outer, func, qual)
            inner = f"{qual}{node.name}"
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None:
                    visit(a, inner, "")
            for stmt in node.body:
                visit(stmt, inner, f"{inner}.<locals>.")
            return
        if isinstance(node, ast.ClassDef):
            _skip_slots(node.decorator_list, mark_skip)
            for outer in [*node.decorator_list, *node.bases, *node.keywords]:
                visit(outer, func, qual)
            for stmt in node.body:
                visit(stmt, func, f"{qual}{node.name}.")
            return
        if isinstance(node, ast.AnnAssign):
            mark_skip(node.annotation)
        for child in ast.iter_child_nodes(node):
            visit(child, func, qual)

    visit(tree, None, "")
    return scope, skip


def _skip_slots(decorators: list[ast.expr], mark_skip) -> None:
    """`@dataclass(slots=True)`: a memory layout, not behaviour (only the `__dict__` of instances goes)."""
    for d in decorators:
        if isinstance(d, ast.Call):
            for k in d.keywords:
                if k.arg == "slots":
                    mark_skip(k.value)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _variants(node: ast.AST) -> Iterator[tuple[int, str]]:
    """(variant, kind) of every mutant of this node."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE_FLIP:
                yield i, "compare"
    elif isinstance(node, ast.BoolOp):
        yield 0, "boolop"
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield 0, "bool"
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        kind = type(node.value).__name__
        yield 0, kind
        yield 1, kind
    elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
        yield 0, "negate"
    elif isinstance(node, ast.comprehension):
        for i in range(len(node.ifs)):
            yield i, "negate"
    elif isinstance(node, ast.Return) and node.value is not None:
        v = node.value
        if not (isinstance(v, ast.Constant) and (v.value is None or isinstance(v.value, bool))):
            yield 0, "return"


def _apply(node: ast.AST, variant: int) -> ast.AST:
    """Mutate `node` in place and return it."""
    if isinstance(node, ast.Compare):
        node.ops[variant] = _COMPARE_FLIP[type(node.ops[variant])]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        node.value = not node.value
    elif isinstance(node, ast.Constant):
        node.value = node.value + (1 if variant == 0 else -1)
    elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
        node.test = ast.copy_location(ast.UnaryOp(ast.Not(), node.test), node.test)
    elif isinstance(node, ast.comprehension):
        node.ifs[variant] = ast.copy_location(ast.UnaryOp(ast.Not(), node.ifs[variant]), node.ifs[variant])
    elif isinstance(node, ast.Return):
        assert node.value is not None
        node.value = ast.copy_location(ast.Constant(None), node.value)
    return node


def _shown(node: ast.AST, variant: int) -> ast.AST:
    """The part of `node` that a mutant's text shows (an if statement: its condition only)."""
    if isinstance(node, (ast.If, ast.While, ast.IfExp)):
        return node.test
    if isinstance(node, ast.comprehension):
        return node.ifs[variant]
    return node


def _texts(before: ast.AST, after: ast.AST, limit: int = 120) -> tuple[str, str]:
    """Source of the two nodes; a long pair is cut to the same window around its first difference."""
    a, b = ast.unparse(before), ast.unparse(after)
    if max(len(a), len(b)) <= limit:
        return a, b
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, i - limit // 2)

    def cut(t: str) -> str:
        return ("..." if lo else "") + t[lo : lo + limit] + ("..." if lo + limit < len(t) else "")

    return cut(a), cut(b)


# A bare number says little: it is shown in the expression around it, climbing through these.
_CONTAINERS = (ast.UnaryOp, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.keyword, ast.Slice)
_SHORT_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)


def mutants(path: str) -> list[Mutant]:
    source = (ROOT / path).read_text()
    tree = ast.parse(source)
    scope, skip = _scopes_and_skips(tree)
    parent = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        for variant, kind in _variants(node):
            if isinstance(node, ast.Constant):
                around = parent[id(node)]
                while isinstance(around, _CONTAINERS) and id(around) in parent:
                    around = parent[id(around)]
                stmt = parent.get(id(around))
                if isinstance(stmt, _SHORT_STATEMENTS) and len(ast.unparse(stmt)) <= 100:
                    around = stmt  # `disc = [-1] * n` says which list
                old = node.value
                original = copy.deepcopy(around)
                _apply(node, variant)
                mutated = copy.deepcopy(around)
                node.value = old
            else:
                original = _shown(node, variant)
                mutated = _shown(_apply(copy.deepcopy(node), variant), variant)
            if ast.dump(original) == ast.dump(mutated):
                continue
            before, after = _texts(original, mutated)
            where = scope.get(id(node)) or "<module>"
            key = f"{where}: {kind}: {before} -> {after}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                key = f"{key} #{seen[key]}"
            out.append(
                Mutant(
                    path, index, variant, kind, scope.get(id(node)), _shown(node, variant).lineno, before, after, key
                )
            )
    return out


def mutated_tree(source: str, index: int, variant: int) -> ast.Module:
    tree = ast.parse(source)
    for i, node in enumerate(ast.walk(tree)):
        if i == index:
            _apply(node, variant)
            return ast.fix_missing_locations(tree)
    raise LookupError(f"no node {index}")


def diff(m: Mutant) -> list[str]:
    lines = (ROOT / m.path).read_text().splitlines()
    return [f"{m.path}:{m.line}: {lines[m.line - 1].strip()}", f"  - {m.before}", f"  + {m.after}"]


#
# The child process: pytest with one mutant in place of its module
#


class _MutantLoader(importlib.abc.Loader):
    def __init__(self, code) -> None:
        self.code = code

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        exec(self.code, module.__dict__)


class _MutantFinder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, path: Path, code) -> None:
        self.name, self.path, self.code = name, path, code
        self.loaded = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        self.loaded = True
        package = [str(self.path.parent)] if self.path.name == "__init__.py" else None
        return importlib.util.spec_from_file_location(
            fullname, self.path, loader=_MutantLoader(self.code), submodule_search_locations=package
        )


class _FirstFailure:
    def __init__(self) -> None:
        self.failed: str | None = None

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed and self.failed is None:
            self.failed = report.nodeid

    def pytest_collectreport(self, report) -> None:
        if report.failed and self.failed is None:
            self.failed = f"collect:{report.nodeid}"


class _Trace:
    """Per test: the project functions it called (sys.monitoring PY_START, each code object reported once per test)."""

    def __init__(self) -> None:
        self.prefixes = tuple(str(ROOT / p) + os.sep for p in PROJECT_PACKAGES)
        self.current: set[tuple[str, str]] = set()
        self.tests: dict[str, dict] = {}
        self.mon = getattr(sys, "monitoring", None)
        if self.mon is not None:
            self.tool = self.mon.PROFILER_ID
            self.mon.use_tool_id(self.tool, "bench/mutation.py")
            self.mon.register_callback(self.tool, self.mon.events.PY_START, self._started)
            self.mon.set_events(self.tool, self.mon.events.PY_START)
        else:  # Python 3.11: a profile hook on every call (slower)
            sys.setprofile(self._profile)
            import threading

            threading.setprofile(self._profile)

    def _record(self, code) -> None:
        if code.co_filename.startswith(self.prefixes):
            name = getattr(code, "co_qualname", code.co_name)
            self.current.add((os.path.relpath(code.co_filename, ROOT), name))

    def _started(self, code, offset):
        self._record(code)
        return self.mon.DISABLE

    def _profile(self, frame, event, arg) -> None:
        if event == "call":
            self._record(frame.f_code)

    def pytest_runtest_protocol(self, item, nextitem):
        if self.mon is not None:
            self.mon.restart_events()
        self.current = set()
        self.tests[item.nodeid] = {"file": item.nodeid.split("::")[0], "duration": 0.0, "outcome": "passed"}

    def pytest_runtest_logreport(self, report) -> None:
        entry = self.tests.get(report.nodeid)
        if entry is None:
            return
        entry["duration"] += report.duration
        if report.failed:
            entry["outcome"] = "failed"
        elif report.skipped and entry["outcome"] == "passed":
            entry["outcome"] = "skipped"
        if report.when == "teardown":
            entry["calls"] = sorted(f"{p}::{q}" for p, q in self.current)


def _pytest_args(extra: list[str]) -> list[str]:
    return [
        "-q",
        "-p",
        "no:django",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "--rootdir",
        str(ROOT),
        "-W",
        "ignore::pytest.PytestConfigWarning",
        *extra,
    ]


def _child(spec: dict) -> None:
    """In the forked child: pytest on spec["args"], with the mutant (if any) in place of its module."""
    import pytest

    sys.path.insert(0, str(ROOT))
    finder = None
    if spec.get("path"):
        path = ROOT / spec["path"]
        tree = mutated_tree(path.read_text(), spec["node"], spec["variant"])
        code = compile(tree, str(path), "exec", dont_inherit=True)
        finder = _MutantFinder(module_name(spec["path"]), path, code)
        sys.meta_path.insert(0, finder)
    result: dict = {}
    if spec["mode"] == "trace":
        trace = _Trace()
        rc = pytest.main(_pytest_args(spec["args"]), plugins=[trace])
        result["tests"] = trace.tests
    else:
        first = _FirstFailure()
        rc = pytest.main(_pytest_args(["-x", *spec["args"]]), plugins=[first])
        result["failed"] = first.failed
    result["rc"] = int(rc)
    result["loaded"] = bool(finder and finder.loaded)
    Path(spec["result"]).write_text(json.dumps(result))


def _preload() -> None:
    """Import pytest and its plugins' third-party modules once, before forking: each run then starts in
    milliseconds instead of seconds. Nothing of the project is imported here (the mutant must be the first)."""
    from importlib.metadata import entry_points

    import pytest  # noqa: F401

    for ep in entry_points(group="pytest11"):
        if ep.name != "django" and not ep.value.startswith(PROJECT_PACKAGES):
            try:
                importlib.import_module(ep.value.split(":")[0])
            except Exception:  # a plugin that cannot load here will not load in the child either
                pass
    for name in ("hypothesis", "yaml"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    assert not [m for m in sys.modules if m.split(".")[0] in PROJECT_PACKAGES], "a project module was preloaded"


#
# The parent: coverage pass, selection, runs
#


def _run_child(spec: dict, timeout: float | None, log: Path) -> tuple[dict | None, float]:
    """Fork, run `_child` there with its output in `log`; (result, seconds), result None on a timeout."""
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        spec = {**spec, "result": str(Path(tmp) / "result.json")}
        sys.stdout.flush()
        sys.stderr.flush()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child
            code = 0
            try:
                os.setsid()
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                _child(spec)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        deadline = None if timeout is None else t0 + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if deadline is not None and time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None, time.monotonic() - t0
            time.sleep(0.02)
        elapsed = time.monotonic() - t0
        result_file = Path(spec["result"])
        if not result_file.exists():  # the child died (a mutant that crashes the interpreter)
            return {"rc": -1, "failed": f"crash:status={status}", "loaded": True}, elapsed
        return json.loads(result_file.read_text()), elapsed


def _digest(rel: str) -> str:
    p = ROOT / rel
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.exists() else "-"


def _test_files() -> tuple[list[str], str]:
    """The test files of TEST_DIRS, and a digest of what every one of them depends on (conftest files, helper
    modules beside the tests, the deselection list)."""
    files: list[str] = []
    shared = hashlib.sha256(json.dumps([TEST_DIRS, sorted(DESELECT)]).encode())
    helpers = {"tests/conftest.py"}
    for d in TEST_DIRS:
        for p in sorted((ROOT / d).rglob("*.py")):
            rel = str(p.relative_to(ROOT))
            if p.name.startswith("test_"):
                files.append(rel)
            else:
                helpers.add(rel)
    for rel in sorted(helpers):
        shared.update(f"{rel}={_digest(rel)}".encode())
    return files, shared.hexdigest()[:16]


def coverage_pass(retrace: bool) -> dict[str, dict]:
    """Per test: duration, outcome and the project functions it called. Cached per test file in
    bench/out/mutation/trace.json; a file is traced again when it, or a project file its tests called, changed
    (and every file when a conftest or a helper module of the tests did)."""
    OUT.mkdir(parents=True, exist_ok=True)
    cache_file = OUT / "trace.json"
    files, shared = _test_files()
    try:
        cache = json.loads(cache_file.read_text()) if cache_file.exists() and not retrace else {}
    except json.JSONDecodeError:  # a run killed mid-write; trace again
        cache = {}
    if cache.get("shared") != shared:
        cache = {"shared": shared, "files": {}}
    digests: dict[str, str] = {}

    def digest(rel: str) -> str:
        if rel not in digests:
            digests[rel] = _digest(rel)
        return digests[rel]

    stale = [
        f
        for f in files
        if f not in cache["files"]
        or cache["files"][f]["digest"] != digest(f)
        or any(digest(src) != d for src, d in cache["files"][f]["sources"].items())
    ]
    cache["files"] = {f: v for f, v in cache["files"].items() if f in files and f not in stale}
    if stale:
        print(f"coverage pass over {len(stale)} of {len(files)} test files ...", flush=True)
        deselect = [arg for prefix in DESELECT for arg in ("--deselect", prefix)]
        result, elapsed = _run_child({"mode": "trace", "args": [*deselect, *stale]}, None, OUT / "trace.log")
        assert result is not None
        by_file: dict[str, dict] = {f: {} for f in stale}
        for k, v in result["tests"].items():
            if "calls" in v and not any(k.startswith(d) for d in DESELECT) and v["file"] in by_file:
                by_file[v["file"]][k] = v
        for f, tests in by_file.items():
            sources = sorted({call.split("::")[0] for v in tests.values() for call in v["calls"]})
            cache["files"][f] = {"digest": digest(f), "sources": {s: digest(s) for s in sources}, "tests": tests}
        failed = sorted(k for t in by_file.values() for k, v in t.items() if v["outcome"] == "failed")
        if failed:
            print(f"  {len(failed)} tests fail on the unmodified code and are left out: {failed[:5]}", flush=True)
        print(f"  {sum(len(t) for t in by_file.values())} tests in {elapsed:.0f} s", flush=True)
        # Write then rename: two runs side by side never read half a cache.
        tmp = cache_file.with_name(f"trace.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache))
        os.replace(tmp, cache_file)
    return {k: v for entry in cache["files"].values() for k, v in entry["tests"].items()}


def _imports(path: Path, name: str) -> set[str]:
    """Project modules a file imports (a `from package import name` counts name when it is a module)."""
    out: set[str] = set()
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError:
        return out
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] in PROJECT_PACKAGES}


class Selector:
    def __init__(self, tests: dict[str, dict]) -> None:
        self.tests = {k: v for k, v in tests.items() if v["outcome"] == "passed"}
        self.bad: set[str] = set()  # tests that fail alone on the unmodified code
        self.by_call: dict[str, list[str]] = {}
        self.by_file: dict[str, set[str]] = {}
        for nodeid, entry in self.tests.items():
            for call in entry["calls"]:
                self.by_call.setdefault(call, []).append(nodeid)
                self.by_file.setdefault(call.split("::")[0], set()).add(nodeid)
        modules = {}
        for folder in PROJECT_PACKAGES:
            for p in (ROOT / folder).rglob("*.py"):
                rel = str(p.relative_to(ROOT))
                modules[module_name(rel)] = rel
        self.modules = modules
        self.importers: dict[str, set[str]] = {}
        for name, rel in modules.items():
            for target in _imports(ROOT / rel, name):
                self.importers.setdefault(target, set()).add(name)
        self.test_imports: dict[str, set[str]] = {}
        for entry in self.tests.values():
            f = entry["file"]
            if f not in self.test_imports:
                self.test_imports[f] = _imports(ROOT / f, module_name(f))
        self._closure: dict[str, set[str]] = {}

    def closure(self, name: str) -> set[str]:
        """The module and every project module importing it, directly or not (a package's __init__ included)."""
        if name not in self._closure:
            seen, todo = {name}, [name]
            while todo:
                for up in self.importers.get(todo.pop(), ()):
                    if up not in seen:
                        seen.add(up)
                        todo.append(up)
            self._closure[name] = seen
        return self._closure[name]

    def for_mutant(self, m: Mutant) -> list[str]:
        if m.scope is not None:
            chosen = set(self.by_call.get(f"{m.path}::{m.scope}", ()))
        else:
            names = self.closure(module_name(m.path))
            chosen = set()
            for name in names:
                rel = self.modules.get(name)
                if rel:
                    chosen |= self.by_file.get(rel, set())
            files = {f for f, imported in self.test_imports.items() if imported & names}
            chosen |= {k for k, v in self.tests.items() if v["file"] in files}
        return sorted(chosen - self.bad, key=lambda k: (self.tests[k]["duration"], k))

    def whole_files(self, nodeids: list[str]) -> list[str]:
        files = {self.tests[k]["file"] for k in nodeids}
        chosen = {k for k, v in self.tests.items() if v["file"] in files}
        return sorted(chosen - self.bad, key=lambda k: (self.tests[k]["duration"], k))

    def timeout(self, nodeids: list[str]) -> float:
        return TIMEOUT_FACTOR * sum(self.tests[k]["duration"] for k in nodeids) + TIMEOUT_EXTRA_S


@dataclass(slots=True)
class Outcome:
    mutant: Mutant
    status: str  # killed / timeout / survived / equivalent / error (pytest itself failed: counted as survived)
    by: str | None = None  # the test that failed
    tests: int = 0
    seconds: float = 0.0
    reason: str = ""
    diff: list[str] = field(default_factory=list)


def _passes_alone(nodeid: str, sel: Selector, verified: set[str]) -> bool:
    if nodeid in verified:
        return True
    if nodeid.startswith(("collect:", "crash:")):
        return True  # the mutant broke the import or the interpreter: the unmodified module imports fine
    result, _ = _run_child({"mode": "run", "args": [nodeid]}, sel.timeout([nodeid]) * 2, OUT / "verify.log")
    ok = result is not None and result["rc"] == 0
    if ok:
        verified.add(nodeid)
    else:
        sel.bad.add(nodeid)
        print(f"    ! {nodeid} fails alone on the unmodified code: left out", flush=True)
    return ok


def _confirm_timeout(spec: dict, chosen: list[str], sel: Selector, log: Path) -> dict | None:
    """A mutant ran past its limit: time the same tests on the unmodified code now, and give the mutant
    TIMEOUT_FACTOR x that (+ TIMEOUT_EXTRA_S) when it is more than it had. The limit from the coverage pass counts
    neither collection nor fixtures nor a busier machine; a slow run is not a kill. The mutant's result, or None
    when it still times out."""
    _, elapsed = _run_child({"mode": "run", "args": chosen}, None, OUT / "baseline.log")  # no limit: never None
    limit = TIMEOUT_FACTOR * elapsed + TIMEOUT_EXTRA_S
    if limit <= sel.timeout(chosen):
        return None
    result, _ = _run_child({**spec, "args": chosen}, limit, log)
    return result


def run_mutant(m: Mutant, sel: Selector, verified: set[str]) -> Outcome:
    spec = {"mode": "run", "path": m.path, "node": m.node, "variant": m.variant}
    log = OUT / "mutant.log"
    started = time.monotonic()
    for stage in ("tests", "files"):
        while True:
            chosen = sel.for_mutant(m)
            if stage == "files":
                chosen = sel.whole_files(chosen)
            if not chosen:
                return Outcome(m, "survived", None, 0, time.monotonic() - started, "no test runs this code")
            result, _ = _run_child({**spec, "args": chosen}, sel.timeout(chosen), log)
            if result is None:
                result = _confirm_timeout(spec, chosen, sel, log)
            if result is None:
                return Outcome(m, "timeout", None, len(chosen), time.monotonic() - started)
            if result["rc"] == 0:
                break
            failed = result.get("failed")
            # A test module that no longer imports (its module-level setup calls the mutant) makes pytest answer
            # "not found" (rc 4) for the tests asked by id: the suite is red, as it is for a failing test.
            broke_collection = bool(failed and failed.startswith("collect:"))
            # otherwise rc 3 internal error, 4 usage, 5 nothing collected: pytest itself failed
            if (result["rc"] not in (1, 2, -1) and not broke_collection) or not failed:
                return Outcome(m, "error", f"pytest rc {result['rc']}", len(chosen), time.monotonic() - started)
            if _passes_alone(failed, sel, verified):
                return Outcome(m, "killed", failed, len(chosen), time.monotonic() - started)
    return Outcome(m, "survived", None, len(chosen), time.monotonic() - started)


def run_module(
    path: str, sel: Selector, only: str | None, check_equivalent: bool, keys: set[str] | None = None
) -> dict:
    ms = [m for m in mutants(path) if (only is None or only in m.key) and (keys is None or _one_line(m.ident) in keys)]
    print(f"\n== {path}: {len(ms)} mutants", flush=True)
    outcomes: list[Outcome] = []
    verified: set[str] = set()
    t0 = time.monotonic()
    for i, m in enumerate(ms, 1):
        reason = EQUIVALENT.get(m.ident)
        if reason is not None and not check_equivalent:
            o = Outcome(m, "equivalent", reason=reason)
        else:
            o = run_mutant(m, sel, verified)
            if reason is not None:
                o.reason = reason
                if o.status != "survived":
                    print(f"    ! allow-listed as equivalent but {o.status}: {m.ident}", flush=True)
                o.status = "equivalent" if o.status == "survived" else o.status
        o.diff = diff(m)
        outcomes.append(o)
        mark = {"killed": ".", "timeout": "T", "survived": "S", "equivalent": "e", "error": "E"}[o.status]
        print(f"  [{i}/{len(ms)}] {mark} {m.path}:{m.line} {m.kind}: {m.before} -> {m.after}", flush=True)
    statuses = ("killed", "timeout", "survived", "equivalent", "error")
    counts = {s: sum(o.status == s for o in outcomes) for s in statuses}
    judged = len(outcomes) - counts["equivalent"]
    caught = counts["killed"] + counts["timeout"]
    summary = {
        "module": path,
        "mutants": len(outcomes),
        **counts,
        "score": round(100 * caught / judged, 1) if judged else None,
        "raw_score": round(100 * caught / len(outcomes), 1) if outcomes else None,
        "seconds": round(time.monotonic() - t0),
        "outcomes": [{**asdict(o), "mutant": {**asdict(o.mutant), "ident": o.mutant.ident}} for o in outcomes],
    }
    if only is None and keys is None:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / (path.replace("/", ".") + ".json")).write_text(json.dumps(summary, indent=1))
    survivors = [o for o in outcomes if o.status in ("survived", "error")]
    for o in survivors:
        print("\n".join([f"  {o.status.upper()} " + o.mutant.ident, *("    " + line for line in o.diff)]))
        if o.reason:
            print(f"    ({o.reason})")
    print(
        f"== {path}: {len(outcomes)} mutants, killed {counts['killed']}, timeout {counts['timeout']}, "
        f"survived {counts['survived']}, errors {counts['error']}, equivalent {counts['equivalent']}: "
        f"score {summary['score']} % "
        f"(raw {summary['raw_score']} %), {summary['seconds']} s",
        flush=True,
    )
    return summary


def _one_line(ident: str) -> str:
    """A key as --list prints it and --keys reads it: a mutant of a statement over two lines has a newline."""
    return ident.replace("\n", "\\n")


def _modules(targets: list[str]) -> list[str]:
    out: list[str] = []
    for t in targets:
        p = ROOT / t
        if p.is_dir():
            out.extend(str(q.relative_to(ROOT)) for q in sorted(p.glob("*.py")))
        elif p.suffix == ".py" and p.exists():
            out.append(str(p.relative_to(ROOT)))
        else:
            raise SystemExit(f"{t}: not a module or folder of the repository")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", help="modules or folders, relative to the repository")
    ap.add_argument("--all", action="store_true", help="every module of the four pure cores")
    ap.add_argument("--list", action="store_true", help="print the mutants and run nothing")
    ap.add_argument("--only", help="only the mutants whose key contains this text (results are not saved)")
    ap.add_argument(
        "--keys",
        type=Path,
        help="a file of mutant keys as --list prints them ('path | key'), one a line: run only those (e.g. the "
        "survivors of an earlier run; results are not saved)",
    )
    ap.add_argument("--check-equivalent", action="store_true", help="run the allow-listed mutants too")
    ap.add_argument("--retrace", action="store_true", help="redo the coverage pass even when it is cached")
    args = ap.parse_args(argv)
    targets = _modules([*args.targets, *(CORES if args.all else ())])
    if not targets:
        ap.error("name modules or folders, or --all")
    if args.list:
        for path in targets:
            for m in mutants(path):
                eq = "  [equivalent]" if m.ident in EQUIVALENT else ""
                print(f"{m.path}:{m.line}  {_one_line(m.ident)}{eq}")
        return 0
    known = {m.ident for path in targets for m in mutants(path)}
    keys = {line.strip() for line in args.keys.read_text().splitlines() if line.strip()} if args.keys else None
    for key in sorted((keys or set()) - {_one_line(k) for k in known}):
        print(f"! --keys names no mutant of the targets (a typo, or the code changed): {key}", flush=True)
    for ident in EQUIVALENT:
        if ident.split(" | ")[0] in targets and ident not in known:
            print(f"! allow-list entry matches no mutant (stale): {ident}", flush=True)
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory(prefix="mutation-hypothesis-") as scratch:
        # hypothesis reads its storage folder when imported (in _preload): none of it goes into the tree.
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = scratch
        _preload()
        sel = Selector(coverage_pass(args.retrace))
        summaries = [run_module(path, sel, args.only, args.check_equivalent, keys) for path in targets]
    print("\nmodule                                    mutants killed timeout survived equiv  score   raw")
    for s in summaries:
        print(
            f"{s['module']:<42}{s['mutants']:>7}{s['killed']:>7}{s['timeout']:>8}{s['survived']:>9}"
            f"{s['equivalent']:>6}{s['score']!s:>7}{s['raw_score']!s:>6}"
        )
    return 0


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":  # one hash seed for every run: results that repeat
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    sys.exit(main())
