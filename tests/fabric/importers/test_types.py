"""fabric.importers.types: the parsed dataclasses' defaults, ParseError's wording, GUID normalisation."""

from __future__ import annotations

import pytest

from fabric.importers.types import ParsedGPU, ParsedSwitch, ParseError, normalise_guid


def test_a_switch_whose_input_gives_no_port_count_has_zero() -> None:
    assert ParsedSwitch(guid="0002c903002db102", name="sw1", description="sw1").port_count == 0


def test_a_gpu_without_nvlink_or_mig_facts_has_none() -> None:
    g = ParsedGPU(index=0, model="H100", memory_mib=81559)
    assert (g.nvlink_generation, g.nvlink_gbps, g.mig_capable) == (0, 0.0, False)


@pytest.mark.parametrize(
    ("args", "text", "line"),
    [
        (("no switches",), "input: no switches", 0),
        (("no switches", 0, "a.topo"), "a.topo: no switches", 0),
        (("bad port", 3), "input:3: bad port", 3),
        (("bad port", 3, "a.topo"), "a.topo:3: bad port", 3),
    ],
)
def test_a_parse_error_names_its_source_and_line(args, text, line) -> None:
    e = ParseError(*args)
    assert (str(e), e.line, e.message) == (text, line, args[0])


@pytest.mark.parametrize(
    ("text", "guid"),
    [
        ("0x0002c903002db102", "0002c903002db102"),
        ("0X2C903002DB103", "0002c903002db103"),
        ("2c903002db103", "0002c903002db103"),
        ("S-f452140300356b90", "f452140300356b90"),
        ("H-0x0002c903002db102", "0002c903002db102"),
        ("ffffffffffffffff", "ffffffffffffffff"),
    ],
)
def test_guids_are_sixteen_lowercase_hex_digits(text, guid) -> None:
    assert normalise_guid(text) == guid


@pytest.mark.parametrize("text", ["1ffffffffffffffff", "0x", "", "0xg", "S-"])
def test_what_is_not_a_64_bit_guid_is_refused(text) -> None:
    with pytest.raises(ValueError, match="not a 64-bit GUID"):
        normalise_guid(text)
