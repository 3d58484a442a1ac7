"""perfquery output captured with its stderr (issue 13 point 4): the diagnostic lines are warnings, the ports read.

The real text is infiniband_exporter's `perfquery -x -l -a` fixture of switch 0x7cfe9003009ce5b0 (2 ports); the
stderr lines are those libibmad and perfquery print (IBWARN and IBEXIT formats), inserted by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.collectors.perfquery import PerfqueryCollector, parse_perfquery

SWITCH_LX = Path(__file__).resolve().parents[2] / "fixtures" / "perfquery_lx_switch_0x7cfe9003009ce5b0.out"
IBWARN = "ibwarn: [3178] mad_rpc: _do_madrpc failed; dport (Lid 1719)"
IBERROR = "perfquery: iberror: [pid 3178] main: failed: perfextquery"


def with_lines(text: str, at: dict[int, str]) -> str:
    """`text` with each of `at`'s lines inserted before the given 1-based line."""
    lines = text.split("\n")
    for number in sorted(at, reverse=True):
        lines.insert(number - 1, at[number])
    return "\n".join(lines)


def test_real_switch_text_with_stderr_between_and_inside_blocks_reads_both_ports() -> None:
    clean = SWITCH_LX.read_text()
    # Line 27 starts port 2's block; line 10 is inside port 1's.
    messy = with_lines(clean, {10: IBWARN, 27: IBERROR})
    warnings: list[str] = []
    ports = parse_perfquery(messy, source="0x7cfe9003009ce5b0", warnings=warnings)
    assert [(p.port, p.counters) for p in ports] == [(p.port, p.counters) for p in parse_perfquery(clean)]
    # The second insert lands on line 28: the first one, above it, moved it down by one.
    where = [w.split(": diagnostic")[0] for w in warnings]
    assert where == ["0x7cfe9003009ce5b0: line 10", "0x7cfe9003009ce5b0: line 28"]


def test_minimal_block_after_an_ibwarn_line() -> None:
    warnings: list[str] = []
    (port,) = parse_perfquery(f"{IBWARN}\n# Port counters: Lid 5 port 3\nPortXmitWait:....12\n", warnings=warnings)
    assert (port.lid, port.port, port.counters) == (5, 3, {"port_xmit_wait": 12})
    assert len(warnings) == 1 and warnings[0].startswith("line 1: ")


def test_garbage_is_still_refused_with_its_line() -> None:
    with pytest.raises(ValueError, match=r"^sw1: line 3: expected 'Name:....value'"):
        parse_perfquery(f"# Port counters: Lid 5 port 3\n{IBWARN}\nPortXmitWait 12\n", source="sw1")


def test_collector_keeps_the_ports_and_reports_the_stderr_line(tmp_path: Path) -> None:
    path = tmp_path / "messy.out"
    path.write_text(with_lines(SWITCH_LX.read_text(), {27: IBERROR}))
    sample = PerfqueryCollector(file=str(path)).collect("0x7cfe9003009ce5b0")
    assert [p.port for p in sample.ports] == [1, 2]
    (error,) = sample.errors
    assert error.startswith("messy.out: warning: 0x7cfe9003009ce5b0: line 27: diagnostic output of perfquery")
