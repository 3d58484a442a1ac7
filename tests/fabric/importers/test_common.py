"""fabric.importers._common: what every parser shares (junk detection, excerpts, GUIDs, CA identities)."""

from __future__ import annotations

import pytest

from fabric.importers._common import (
    LinkTable,
    ca_identity,
    check_text,
    excerpt,
    guid_or_empty,
    name_unnamed_by_system,
    parse_link_rate,
)
from fabric.importers.types import ParsedCA, ParseError


@pytest.mark.parametrize(
    ("text", "line", "column"), [("ab\0", 1, 3), ("\0", 1, 1), ("\n\0", 2, 1), ("x\nab\x01c", 2, 3)]
)
def test_junk_is_reported_at_its_line_and_column(text, line, column) -> None:
    with pytest.raises(ParseError, match=f"at column {column}$") as exc:
        check_text(text)
    assert exc.value.line == line


def test_an_excerpt_of_100_characters_is_whole_and_of_101_is_cut() -> None:
    assert excerpt("a" * 100) == repr("a" * 100)
    assert excerpt("a" * 101) == repr("a" * 100 + "...")


@pytest.mark.parametrize(
    ("token", "guid"),
    [
        ("S-f452140300356b90", "f452140300356b90"),
        ("H-0x2c903002db103", "0002c903002db103"),
        ("0x2C9", "00000000000002c9"),
    ],
)
def test_a_guid_with_a_node_id_prefix_is_read(token, guid) -> None:
    assert guid_or_empty(token) == guid


def test_what_is_not_a_guid_is_empty() -> None:
    assert guid_or_empty("not-a-guid") == ""


def test_a_ca_is_a_host_unless_told_it_is_a_router() -> None:
    assert ca_identity("gpu01 mlx5_0") == ("gpu01", "mlx5_0", "host")
    assert ca_identity("gpu01 mlx5_0", router=True) == ("", "", "router")


def test_warnings_about_unnamed_adapters_name_the_input_when_it_has_no_name() -> None:
    ca = ParsedCA(guid="0000000000000001", description="MT4129 ConnectX7 Mellanox Technologies", hostname="", device="")
    (warning,) = name_unnamed_by_system([ca], "")
    assert warning.startswith("input: 1 channel adapter(s) have no host name")
    (warning,) = name_unnamed_by_system([ca], "fabric.topo")
    assert warning.startswith("fabric.topo: 1 channel adapter(s) have no host name")


def test_a_one_word_description_is_a_host_name_without_a_device() -> None:
    assert ca_identity("gpu01") == ("gpu01", "", "host")


def test_the_unnamed_adapters_warning_shows_the_first_as_its_example() -> None:
    cas = [
        ParsedCA(guid=f"000000000000000{i}", description=f"MT4129 ConnectX7 Mellanox Technologies {i}", hostname="",
                 device="")
        for i in (1, 2)
    ]  # fmt: skip
    (warning,) = name_unnamed_by_system(cas, "f")
    assert "e.g. 0000000000000001 'MT4129 ConnectX7 Mellanox Technologies 1'" in warning


@pytest.mark.parametrize("order", [("4xHDR", "4x???"), ("4x???", "4xHDR")])
def test_a_link_keeps_the_speed_one_end_knows_whichever_end_comes_first(order) -> None:
    table = LinkTable("t", str)
    first, second = order
    table.add_link(("a", 1), ("b", 2), parse_link_rate(first, 1, "t"), 1)
    table.add_link(("b", 2), ("a", 1), parse_link_rate(second, 2, "t"), 2)
    (link,) = table.links()
    assert (link.width, link.speed, link.degraded) == (4, "HDR", "")
