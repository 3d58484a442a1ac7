"""Switch-port polling with perfquery: a fake `perfquery` on PATH prints the real treydock/infiniband_exporter
fixtures for some switch GUIDs, fails, hangs or prints junk for others; every call it gets is logged."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

import pytest

from fabric.collectors.perfquery import PerfqueryCollector, parse_ibswitches, parse_perfquery, switch_guid

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SWITCH_LX = FIXTURES / "perfquery_lx_switch_0x7cfe9003009ce5b0.out"
HCA_LX = FIXTURES / "perfquery_lx_hca_0x7cfe9003003b4bde.out"
SWITCH_E = FIXTURES / "perfquery_E_switch_0x7cfe9003009ce5b0-1.out"

SW = "0x7cfe9003009ce5b0"  # the fixture switch: ports 1 and 2 (-x), port 1 (-E)
SW2 = "0x7cfe9003003b4bde"  # answers with the one-port fixture (an HCA's, but any node's PMA answers alike)
FAILS = "0x0002c90300000bad"
HANGS = "0x0002c9030000510e"
JUNK = "0x0002c9030000ba5e"
SLOW = [f"0x00000000000000{i:02x}" for i in range(1, 7)]  # answer after 0.3 s: for the concurrency bound

# Real `ibswitches` output (a tab after "Switch"): a 4-switch fabric, two SX6036 switches and two Obsidian Longbow
# range extenders, as published in the example section of a public InfiniBand tools guide (ibswitches page). Same
# shape as ibswitches(8) prints: 'Switch : <guid> ports N "<description>" base|enhanced port 0 lid L lmc M'.
IBSWITCHES_REAL = (
    'Switch\t: 0xe41d2d03003bfb80 ports 36 "MF0;node231:SX6036/U1" enhanced port 0 lid 12 lmc 0\n'
    'Switch\t: 0x001777fffe2b5b65 ports 2 "Obsidian Longbow C400 - LBC4xxxxx" base port 0 lid 11 lmc 0\n'
    'Switch\t: 0x001777fffea79b9f ports 2 "Obsidian Longbow C400 - LBC4xxxxx" base port 0 lid 13 lmc 0\n'
    'Switch\t: 0xe41d2d03003251c0 ports 36 "MF0;node245:SX6036/U1" enhanced port 0 lid 16 lmc 0\n'
)

FAKE_PERFQUERY = """\
#!{python}
import json, os, sys, time
start = time.time()
argv = sys.argv[1:]
guid = argv[argv.index("-G") + 1] if "-G" in argv else ""
port = argv[argv.index("-G") + 2] if "-E" in argv and len(argv) > argv.index("-G") + 2 else None
def log():
    line = json.dumps({{"argv": argv, "start": start, "end": time.time()}}) + "\\n"
    fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, line.encode())
    os.close(fd)
def show(path):
    sys.stdout.write(open(path).read())
    log()
    sys.exit(0)
def fail(msg):
    sys.stderr.write("ibwarn: [4242] main: iberror: failed: " + msg + "\\n")
    log()
    sys.exit(255)
if "-E" in argv:
    if guid == {sw!r} and port == "1":
        show({switch_e!r})
    fail("cannot query PortRcvErrorDetails")
if argv[:3] != ["-x", "-l", "-a"]:
    fail("unexpected arguments " + " ".join(argv))
if guid == {sw!r}:
    show({switch_lx!r})
if guid == {sw2!r}:
    show({hca_lx!r})
if guid == {hangs!r}:
    time.sleep(30)
if guid == {junk!r}:
    print("ibwarn: [4242] _do_madrpc: recv failed: Connection timed out")
    log()
    sys.exit(0)
if guid in {slow!r}:
    time.sleep(0.3)
    show({switch_lx!r})
fail("can't resolve destination port " + guid)
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """`perfquery` and `ibswitches` first on PATH; returns the list of perfquery calls (read after the run)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "perfquery.log"
    _executable(
        bindir / "perfquery",
        FAKE_PERFQUERY.format(
            python=sys.executable, log=str(log), sw=SW, sw2=SW2, hangs=HANGS, junk=JUNK, slow=SLOW,
            switch_lx=str(SWITCH_LX), switch_e=str(SWITCH_E), hca_lx=str(HCA_LX),
        ),
    )  # fmt: skip
    listing = tmp_path / "ibswitches.txt"
    listing.write_text(
        f'Switch\t: {SW} ports 36 "MF0;leaf-1:MQM8700/U1" enhanced port 0 lid 1719 lmc 0\n'
        f'Switch\t: {FAILS} ports 36 "MF0;leaf-2:MQM8700/U1" enhanced port 0 lid 1720 lmc 0\n'
    )
    _executable(bindir / "ibswitches", f"#!/bin/sh\ncat {listing}\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")

    def calls() -> list[dict]:
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    return calls


def _max_overlap(calls: list[dict]) -> int:
    events = sorted([(c["start"], 1) for c in calls] + [(c["end"], -1) for c in calls], key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


def test_switches_merged_failures_named_and_others_still_read(fake_tools):
    began = time.monotonic()
    collector = PerfqueryCollector(timeout=2.0)
    s = collector.collect_switches("ib-agent-1", [SW, FAILS, HANGS, JUNK, SW2])
    assert time.monotonic() - began < 10  # the hung one was killed at its timeout
    assert (s.node, s.collector) == ("ib-agent-1", "perfquery")
    # ports of the two that answered, in the order the switches were given
    assert [(p.device, p.guid, p.lid, p.port) for p in s.ports] == [
        (SW, SW, 1719, 1),
        (SW, SW, 1719, 2),
        (SW2, SW2, 134, 1),
    ]
    assert s.ports[0].counters["port_xmit_data"] == 36298026860928
    assert s.ports[1].counters["port_xmit_wait"] == 36510964
    assert s.ports[2].counters["port_rcv_data"] == 9752484588300
    assert all(p.counter_bits == {"port_xmit_wait": 32} for p in s.ports)  # 32-bit width marks kept
    # one error per failed switch, each naming it, in the same order
    assert len(s.errors) == 3
    assert s.errors[0].startswith(f"switch {FAILS}: ")
    assert (
        f"exit status 255: ibwarn: [4242] main: iberror: failed: can't resolve destination port {FAILS}" in s.errors[0]
    )
    assert s.errors[1].startswith(f"switch {HANGS}: ") and s.errors[1].endswith("timed out after 2 s")
    # its only line is perfquery's stderr (issue 13: a warning, not garbage), so it printed no counters
    assert s.errors[2] == (
        f"switch {JUNK}: perfquery printed no port counters (line 1: diagnostic output of perfquery, skipped: "
        "'ibwarn: [4242] _do_madrpc: recv failed: Connection timed out')"
    )
    # exactly the read-only invocation, once per switch: never -r/-R, never a reset mask
    argvs = sorted(c["argv"] for c in fake_tools())
    assert argvs == sorted(["-x", "-l", "-a", "-G", g] for g in (SW, FAILS, JUNK, SW2))  # the hung one never logged
    assert not any({"-r", "-R"} & set(a) for a in argvs)


def test_rcv_error_details_merge_into_the_extended_block(fake_tools):
    s = PerfqueryCollector(timeout=5.0, rcv_error_details=True).collect_switches("ib-agent-1", [SW])
    p1, p2 = s.ports
    assert p1.counters["port_xmit_data"] == 36298026860928  # -x
    assert p1.counters["port_looping_errors"] == 0  # -E, same port
    assert p1.counters["port_dlid_mapping_errors"] == 0
    assert len(p1.counters) == 22 + 6
    assert p1.counter_bits == {"port_xmit_wait": 32}
    # port 2's -E failed: its -x counters stay, one error names switch and port
    assert p2.counters["port_xmit_data"] == 26006570014026 and "port_looping_errors" not in p2.counters
    assert len(s.errors) == 1
    assert s.errors[0].startswith(f"switch {SW} port 2: ") and "cannot query PortRcvErrorDetails" in s.errors[0]
    # the -E reads: one per port, port given, no reset mask after it
    e_calls = sorted(c["argv"] for c in fake_tools() if "-E" in c["argv"])
    assert e_calls == [["-E", "-G", SW, "1"], ["-E", "-G", SW, "2"]]
    # the same result as parsing the concatenated outputs
    merged = parse_perfquery(SWITCH_LX.read_text() + SWITCH_E.read_text(), source=SW)
    assert p1.counters == merged[0].counters


def test_concurrency_is_bounded_by_max_workers(fake_tools):
    s = PerfqueryCollector(timeout=5.0, max_workers=2).collect_switches("ib-agent-1", SLOW)
    assert s.errors == [] and len(s.ports) == 2 * len(SLOW)
    assert [p.device for p in s.ports[::2]] == SLOW
    calls = fake_tools()
    assert len(calls) == len(SLOW)
    assert _max_overlap(calls) == 2  # never more than max_workers at once, and really in parallel


def test_default_max_workers_is_8():
    assert PerfqueryCollector().max_workers == 8


def test_discovery_with_ibswitches(fake_tools):
    s = PerfqueryCollector(switches="all", timeout=5.0).collect("ib-agent-1")
    assert {p.device for p in s.ports} == {SW}
    assert len(s.errors) == 1 and s.errors[0].startswith(f"switch {FAILS}: ")
    # collect_switches without GUIDs discovers too
    assert [p.port for p in PerfqueryCollector(timeout=5.0).collect_switches("ib-agent-1").ports] == [1, 2]


def test_discovery_failure_is_one_error(tmp_path):
    c = PerfqueryCollector(switches="all", ibswitches_command=[str(tmp_path / "absent")])
    s = c.collect("ib-agent-1")
    assert s.ports == [] and s.errors == [f"switch discovery: {tmp_path / 'absent'}: command not found"]
    junk = [sys.executable, "-c", "print('ibwarn: no SM')"]
    s = PerfqueryCollector(switches="all", ibswitches_command=junk).collect("n")
    assert s.errors == ["switch discovery: ibswitches line 1: expected 'Switch : 0x<16 hex> ports N ...', "
                        "got 'ibwarn: no SM'"]  # fmt: skip
    s = PerfqueryCollector(switches="all", ibswitches_command=[sys.executable, "-c", ""]).collect("n")
    assert s.errors == ["switch discovery: no switches found"]


def test_command_prefix_instead_of_path(tmp_path):
    # perfquery_command= is the program and its own options (sudo, -C <ca> -P <port>, a full path)
    script = tmp_path / "pq.py"
    script.write_text(
        f"import sys\nassert sys.argv[1:4] == ['-x', '-l', '-a']\nprint(open({str(SWITCH_LX)!r}).read())\n"
    )
    c = PerfqueryCollector(perfquery_command=[sys.executable, str(script)], switches=[SW.upper().replace("0X", "")])
    s = c.collect("ib-agent-1")
    assert s.errors == [] and [p.device for p in s.ports] == [SW, SW]


def test_guids_are_validated_and_normalised(fake_tools):
    assert switch_guid("0x7CFE9003009CE5B0") == SW
    assert switch_guid("7cfe9003009ce5b0") == SW  # the database's form
    for bad in ("0x7cfe", "7cfe9003009ce5b0ff", "0xzzfe9003009ce5b0", "", "S-7cfe9003009ce5b0"):
        with pytest.raises(ValueError, match=r"not a switch node GUID \(0x and 16 hex digits\)"):
            switch_guid(bad)
    # a bad GUID in the list is an error of its own; the good ones are read, repeats once
    s = PerfqueryCollector(timeout=5.0).collect_switches("n", ["leaf-1", SW, SW.upper()])
    assert s.errors == ["not a switch node GUID (0x and 16 hex digits): 'leaf-1'"]
    assert [p.port for p in s.ports] == [1, 2]
    # in the constructor (configuration) it raises
    with pytest.raises(ValueError, match="'leaf-1'"):
        PerfqueryCollector(switches=["leaf-1"])


def test_empty_guid_list_reads_nothing(fake_tools):
    s = PerfqueryCollector().collect_switches("n", [])
    assert s.ports == [] and s.errors == [] and fake_tools() == []


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"perfquery_command": ["perfquery", "-R"]}, "must not reset counters"),
        ({"perfquery_command": "perfquery -xr"}, "must not reset counters"),
        ({"perfquery_command": ["perfquery", "--reset_after_read"]}, "must not reset counters"),
        ({"command": ["perfquery", "-x", "-r"]}, "must not reset counters"),
        ({"max_workers": 0}, "max_workers"),
        ({"timeout": 0}, "timeout"),
        ({"budget": 0}, "budget"),
        ({"switches": []}, "polls nothing"),
        ({"switches": SW}, "list of switch GUIDs or 'all'"),
        ({"switches": [SW], "command": ["perfquery"]}, "perfquery_command"),
        ({"switches": "all", "file": "x.out"}, "exactly one switch GUID"),
        ({"switches": [SW, SW2], "file": "x.out"}, "exactly one switch GUID"),
        ({"directory": "d", "file": "x.out"}, "directory= or file="),
    ],
)
def test_bad_options(kwargs, what):
    with pytest.raises(ValueError, match=what):
        PerfqueryCollector(**kwargs)


def test_file_holds_one_switch():
    s = PerfqueryCollector(file=str(SWITCH_LX), switches=[SW]).collect("ib-agent-1")
    assert s.node == "ib-agent-1" and s.errors == []
    assert [(p.device, p.guid, p.port) for p in s.ports] == [(SW, SW, 1), (SW, SW, 2)]


def test_directory_mode(tmp_path):
    d = tmp_path / "pq"
    d.mkdir()
    shutil.copy(SWITCH_LX, d / f"{SW}.out")
    shutil.copy(SWITCH_E, d / f"{SW}-1.out")  # treydock's layout for -E: <guid>-<port>.out
    shutil.copy(HCA_LX, d / f"{SW2}.out")
    (d / "notes.txt").write_text("not a switch")
    # discovered from the file names (sorted)
    s = PerfqueryCollector(directory=str(d)).collect("ib-agent-1")
    assert s.errors == [] and [(p.device, p.port) for p in s.ports] == [(SW2, 1), (SW, 1), (SW, 2)]
    # with -E details: port 1's file merges, port 2 has none
    s = PerfqueryCollector(directory=str(d), rcv_error_details=True, switches=[SW]).collect("ib-agent-1")
    assert s.ports[0].counters["port_looping_errors"] == 0 and s.ports[0].counters["port_xmit_data"] == 36298026860928
    assert len(s.errors) == 1 and s.errors[0].startswith(f"switch {SW} port 2: ") and f"{SW}-2.out" in s.errors[0]
    # an ibswitches.out there is the switch list; a GUID without a file is that switch's error
    (d / "ibswitches.out").write_text(f'Switch\t: {SW} ports 2 "leaf" base port 0 lid 1719 lmc 0\n'
                                      f'Switch\t: {FAILS} ports 36 "leaf-2" base port 0 lid 2 lmc 0\n')  # fmt: skip
    s = PerfqueryCollector(directory=str(d)).collect("ib-agent-1")
    assert [p.device for p in s.ports] == [SW, SW]
    assert len(s.errors) == 1 and s.errors[0].startswith(f"switch {FAILS}: ") and "No such file" in s.errors[0]


def test_parse_ibswitches_real_output():
    assert parse_ibswitches(IBSWITCHES_REAL) == [
        "0xe41d2d03003bfb80",
        "0x001777fffe2b5b65",
        "0x001777fffea79b9f",
        "0xe41d2d03003251c0",
    ]
    # upper-case hex, blank lines, a repeat
    text = '\nSwitch\t: 0xE41D2D03003BFB80 ports 36 "x" enhanced port 0 lid 12 lmc 0\n\n' + IBSWITCHES_REAL
    assert parse_ibswitches(text)[0] == "0xe41d2d03003bfb80" and len(parse_ibswitches(text)) == 4
    assert parse_ibswitches("") == []


@pytest.mark.parametrize(
    "line",
    [
        'Ca\t: 0x7cfe900300a66ca0 ports 2 "node41 HCA-1"',
        'Switch\t: 0x2c903008f8700 ports 36 "short guid" base port 0 lid 60 lmc 0',
        "ibwarn: [1234] mad_rpc_open_port: can't open UMAD port",
    ],
)
def test_parse_ibswitches_rejects_other_lines(line):
    with pytest.raises(ValueError, match=r"^ibswitches line 2: expected"):
        parse_ibswitches(IBSWITCHES_REAL.splitlines()[0] + "\n" + line + "\n")


def test_budget_stops_starting_new_reads(fake_tools):
    s = PerfqueryCollector(timeout=5.0, max_workers=1, budget=0.1).collect_switches("ib-agent-1", SLOW)
    assert [p.device for p in s.ports] == [SLOW[0], SLOW[0]]  # started at once, finished past the budget
    assert s.errors == [f"switch {g}: not read, the poll's budget of 0.1 s was spent" for g in SLOW[1:]]
    assert len(fake_tools()) == 1
