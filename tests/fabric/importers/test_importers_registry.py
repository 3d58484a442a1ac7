"""fabric.importers: the format registry, format guessing, and read_text's refusal of binary junk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fabric.importers import FORMATS, NODE_FORMATS, guess_format, parser_for, read_text
from fabric.importers.types import ParsedFabric, ParsedNodeTopology, ParseError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "small-cluster.yaml"


def test_fabric_formats_are_registered() -> None:
    assert sorted(FORMATS) == ["ibnetdiscover", "ibnetdiscover-ports", "spec"]


def test_node_formats_are_registered() -> None:
    assert sorted(NODE_FORMATS) == ["nvidia-topo"]


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("ibnetdiscover", FIXTURES / "ibnetdiscover_sx6036_8switch.topo"),
        ("ibnetdiscover-ports", FIXTURES / "ibnetdiscover_ports_test.out"),
        ("spec", EXAMPLE),
    ],
)
def test_every_fabric_parser_reads_its_sample(name: str, path: Path) -> None:
    fabric = FORMATS[name](read_text(path), str(path))
    assert isinstance(fabric, ParsedFabric)
    assert fabric.source == name


def test_node_parser_reads_its_sample() -> None:
    path = FIXTURES / "nvidia_smi_topo_m_dgx_a100.txt"
    assert isinstance(NODE_FORMATS["nvidia-topo"](read_text(path), str(path)), ParsedNodeTopology)


def test_parser_for_unknown_format_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="unknown format 'lldp'; known: ibnetdiscover, ibnetdiscover-ports, spec"):
        parser_for("lldp")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (FIXTURES / "ibnetdiscover_sx6036_8switch.topo", "ibnetdiscover"),
        (FIXTURES / "ibnetdiscover_ports_test.out", "ibnetdiscover-ports"),
        (FIXTURES / "ibnetdiscover_ports_test2.out", "ibnetdiscover-ports"),
        (FIXTURES / "nvidia_smi_topo_m_dgx_a100.txt", "nvidia-topo"),
        (FIXTURES / "nvidia_smi_topo_mp_dgx1_v100.txt", "nvidia-topo"),
        (EXAMPLE, "spec"),
    ],
)
def test_guess_format(path: Path, expected: str) -> None:
    assert guess_format(path.read_text()) == expected


def test_read_text_drops_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"\xef\xbb\xbfrate: NDR\n")
    assert read_text(path) == "rate: NDR\n"


def test_read_text_refuses_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "topo"
    path.write_bytes(b"vendid=0x2c9\ndevid=0xc738\n\x1f\x8b\x08\x00gzip\n")
    with pytest.raises(ParseError) as info:
        read_text(path)
    assert (info.value.line, info.value.source) == (3, str(path))
    assert info.value.message == "not UTF-8 text: byte 0x8b (binary data?)"


def test_read_text_refuses_nul_bytes(tmp_path: Path) -> None:
    path = tmp_path / "topo"
    path.write_bytes(b"vendid=0x2c9\n\n\n\x00\x00\x00\n")
    with pytest.raises(ParseError) as info:
        read_text(path)
    assert (info.value.line, info.value.message) == (4, "binary data: NUL byte")


def test_read_text_reports_the_first_bad_byte_when_nul_comes_first(tmp_path: Path) -> None:
    path = tmp_path / "topo"
    path.write_bytes(b"a\n\x00\nb\n\xff\n")
    with pytest.raises(ParseError) as info:
        read_text(path)
    assert (info.value.line, info.value.message) == (2, "binary data: NUL byte")


def test_read_text_lets_a_missing_file_raise_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "absent")


def test_importers_import_no_django() -> None:
    # A fresh interpreter: under pytest-django, Django is already loaded in this one.
    code = (
        "import sys, fabric.importers, fabric.importers.ibnetdiscover, fabric.importers.ibnetdiscover_ports, "
        "fabric.importers.nvidia_topo, fabric.importers.spec; "
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    )
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# --- edges, worked by hand ----------------------------------------------------------------------------------------

# The start of a line `ibnetdiscover -p` prints, up to the blank after the GUID that recognising it needs.
PORT_LINE = "CA    12  1 0x0002c903002db103 "


def test_a_format_line_ending_at_the_20000th_character_is_recognised() -> None:
    text = "#" * (20_000 - len(PORT_LINE) - 1) + "\n" + PORT_LINE
    assert len(text) == 20_000
    assert guess_format(text) == "ibnetdiscover-ports"


def test_a_format_line_ending_past_the_20000th_character_is_not_looked_at() -> None:
    text = "#" * (20_001 - len(PORT_LINE) - 1) + "\n" + PORT_LINE
    assert len(text) == 20_001
    assert guess_format(text) == "spec"


def test_a_nul_as_the_very_first_byte_is_binary(tmp_path: Path) -> None:
    f = tmp_path / "junk.txt"
    f.write_bytes(b"\0switch")
    with pytest.raises(ParseError, match="binary data: NUL byte") as exc:
        read_text(f)
    assert exc.value.line == 1


def test_a_nul_first_then_a_bad_byte_reports_the_nul(tmp_path: Path) -> None:
    f = tmp_path / "junk.txt"
    f.write_bytes(b"\0ab\n\xff")
    with pytest.raises(ParseError, match="binary data: NUL byte") as exc:
        read_text(f)
    assert exc.value.line == 1


def test_a_bad_byte_without_any_nul_is_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "latin1.txt"
    f.write_bytes(b"caf\xe9\n")
    with pytest.raises(ParseError, match=r"not UTF-8 text: byte 0xe9") as exc:
        read_text(f)
    assert exc.value.line == 1


def test_a_bad_byte_right_after_a_leading_newline_is_on_line_two(tmp_path: Path) -> None:
    f = tmp_path / "junk.txt"
    f.write_bytes(b"\n\xff")
    with pytest.raises(ParseError) as exc:
        read_text(f)
    assert exc.value.line == 2
