"""No input makes an importer raise anything but its own error (issue 13): fuzzed with hypothesis, bounded.

Each parser gets arbitrary text and, more to the point, real samples mutated line by line (lines dropped,
repeated, swapped, cut short, a character changed, a line from another format or a stderr line put in).
The contract: a parser returns its result or raises ParseError (perfquery: ValueError) naming a line; any other
exception is a bug. Derandomized, so a failure is the same on every run; a few seconds per parser.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric.collectors.perfquery import parse_ibswitches, parse_perfquery
from fabric.importers import FORMATS, parse_nvidia_topo, read_text
from fabric.importers.types import ParseError

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"

SAMPLES: dict[str, list[str]] = {
    "ibnetdiscover": [
        "ibnetdiscover_manpage_example.topo",
        "ibnetdiscover_nvidia_switchib_loopbacks.topo",
        "ibnetdiscover_ibm_sdr_2host.topo",
        "ibnetdiscover_oracle_sun_dcs36.topo",
        "ibnetdiscover_topograph_gb200_lone_ca.topo",
    ],
    "ibnetdiscover-ports": [
        *(f"ibnetdiscover_ports_test{n}.out" for n in ("", "2", "3")),
        "ibnetdiscover_ports_ncar_docstring.out",
    ],
    "spec": [str(ROOT / "docs" / "examples" / "small-cluster.yaml")],
    "nvidia-topo": ["nvidia_smi_topo_m_dgx_a100.txt", "nvidia_smi_topo_mp_dgx1_v100.txt"],
    "perfquery": [
        "perfquery_lx_switch_0x7cfe9003009ce5b0.out",
        "perfquery_lx_hca_0x7cfe9003003b4bde.out",
        "perfquery_E_switch_0x7cfe9003009ce5b0-1.out",
    ],
}
TEXTS = {fmt: [(FIXTURES / name).read_text() for name in names] for fmt, names in SAMPLES.items()}
ALL_LINES = sorted({line for texts in TEXTS.values() for text in texts for line in text.split("\n")})
NOISE = [
    "ibwarn: [1234] main: sim_connect: attached as client 1",
    "src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,1,31 Attr 0x11:0) bad status 110; Connection timed out",
    "Non-Chassis Nodes",
    "Chassis 2 (guid 0x0008f10400410015)",
    "\x00\x01garbage",
    "\ufffd",
    "[",
    '"',
    "#",
    "=",
    "x" * 300,
]
FUZZ = settings(
    max_examples=300, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


@st.composite
def mutated(draw: st.DrawFn, fmt: str) -> str:
    lines = draw(st.sampled_from(TEXTS[fmt])).split("\n")
    for _ in range(draw(st.integers(1, 6))):
        if not lines:
            lines.append("")
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "repeat", "swap", "cut", "char", "insert"]))
        if op == "drop":
            del lines[i]
        elif op == "repeat":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, max(len(lines[i]) - 1, 0)))]
        elif op == "char" and lines[i]:
            k = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:k] + draw(st.characters(codec="utf-8")) + lines[i][k + 1 :]
        else:
            lines.insert(i, draw(st.sampled_from(ALL_LINES + NOISE)))
    return "\n".join(lines)


def parser(fmt: str) -> Callable[[str], object]:
    if fmt == "nvidia-topo":
        return lambda text: parse_nvidia_topo(text, "fuzz")
    if fmt == "perfquery":
        return lambda text: parse_perfquery(text, "0x7cfe9003009ce5b0", warnings=[])
    return lambda text: FORMATS[fmt](text, "fuzz")


def holds_the_contract(fmt: str, text: str) -> None:
    expected = ValueError if fmt == "perfquery" else ParseError
    try:
        parser(fmt)(text)
    except expected as exc:
        assert str(exc), "an error must say what is wrong"
        if isinstance(exc, ParseError):
            assert exc.line >= 0 and exc.message


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_mutated_real_samples(fmt: str) -> None:
    @FUZZ
    @given(text=mutated(fmt))
    def run(text: str) -> None:
        holds_the_contract(fmt, text)

    run()


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_arbitrary_text(fmt: str) -> None:
    alphabet = st.sampled_from(sorted(set("".join(ALL_LINES[:400])) | set("\t\n\r\"'[]()#=-;:")))

    @settings(FUZZ, max_examples=150)
    @given(text=st.one_of(st.text(alphabet, max_size=400), st.text(max_size=200)))
    def run(text: str) -> None:
        holds_the_contract(fmt, text)

    run()


def test_ibswitches_listing() -> None:
    @settings(FUZZ, max_examples=150)
    @given(text=st.text(max_size=300))
    def run(text: str) -> None:
        try:
            parse_ibswitches(text)
        except ValueError as exc:
            assert "ibswitches line" in str(exc)

    run()


def test_read_text_on_arbitrary_bytes(tmp_path: Path) -> None:
    path = tmp_path / "capture"

    @settings(FUZZ, max_examples=100)
    @given(data=st.binary(max_size=200))
    def run(data: bytes) -> None:
        path.write_bytes(data)
        try:
            read_text(path)
        except ParseError as exc:
            assert exc.line >= 1

    run()
