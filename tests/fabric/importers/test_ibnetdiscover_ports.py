"""parse_ibnetdiscover_ports: the two `ibnetdiscover -p` fixtures, corner cases, malformed input.

test2.out, as published, is not a possible fabric: its line 5 cables the aggregation node's
port 1 (GUID 946dae0300630bfe, LID 60 there) to a spine, while line 1 has the same port (LID 78)
on leaf IB01. `-p` listings are often stitched from several runs, so the parser keeps the first
claim and reports line 5 as a warning; the other facts of the file are checked on the file minus
that line, and on the file as published.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.importers.ibnetdiscover_ports import parse_ibnetdiscover_ports
from fabric.importers.types import ParsedFabric, ParsedPort, ParseError, PortRef

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TEST1 = (FIXTURES / "ibnetdiscover_ports_test.out").read_text()
TEST2 = (FIXTURES / "ibnetdiscover_ports_test2.out").read_text()
TEST2_CONSISTENT = "\n".join(line for n, line in enumerate(TEST2.split("\n"), start=1) if n != 5)

AGG = "946dae0300630bfe"
LEAF_IB01 = "946dae0300630bf6"


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_ibnetdiscover_ports(text, "p.out")
    return info.value


def replace_line(text: str, number: int, new: str) -> str:
    lines = text.split("\n")
    lines[number - 1] = new
    return "\n".join(lines)


@pytest.fixture(scope="module")
def test1() -> ParsedFabric:
    return parse_ibnetdiscover_ports(TEST1, "test.out")


@pytest.fixture(scope="module")
def test2() -> ParsedFabric:
    return parse_ibnetdiscover_ports(TEST2_CONSISTENT, "test2.out")


# --- test.out ------------------------------------------------------------------------------------


def test_test1_links_seen_from_both_ends_are_deduped(test1: ParsedFabric) -> None:
    # 7 linked lines: 3 CA-SW cables printed twice, 1 SW-SW cable printed once.
    assert len(test1.links) == 4


def test_test1_links_are_4x_edr(test1: ParsedFabric) -> None:
    assert {(link.width, link.speed) for link in test1.links} == {(4, "EDR")}


def test_test1_cas_are_hosts_with_hca_devices(test1: ParsedFabric) -> None:
    assert sorted((ca.hostname, ca.device) for ca in test1.cas) == [
        ("o0001", "HCA-1"),
        ("o0002", "HCA-1"),
        ("p0001", "HCA-1"),
    ]


def test_test1_ca_guid_is_the_port_guid_and_lid_is_the_ports(test1: ParsedFabric) -> None:
    o0001 = next(ca for ca in test1.cas if ca.hostname == "o0001")
    assert o0001.guid == "7cfe9003003b4bde"
    assert (o0001.port_guids, o0001.lids) == ({1: "7cfe9003003b4bde"}, {1: 134})


def test_test1_switch_only_seen_as_a_peer_is_created(test1: ParsedFabric) -> None:
    peer = next(s for s in test1.switches if s.guid == "7cfe900300b07320")
    assert (peer.name, peer.lid, peer.port_count) == ("ib-i1l2s01", 1516, 0)


def test_test1_switch_port_counts_are_unknown(test1: ParsedFabric) -> None:
    assert {s.port_count for s in test1.switches} == {0}
    assert len(test1.switches) == 4


def test_test1_ports_without_peer_are_down(test1: ParsedFabric) -> None:
    assert test1.down_ports == [
        ParsedPort(PortRef("506b4b03005c2740", 37), width=4, speed="", state="down"),
        ParsedPort(PortRef("08c0eb0300add20e", 80), width=4, speed="SDR", state="down"),
    ]


def test_test1_source_is_named(test1: ParsedFabric) -> None:
    assert test1.source == "ibnetdiscover-ports"


# --- test2.out -----------------------------------------------------------------------------------


def test_test2_as_published_keeps_first_claim_and_warns() -> None:
    parsed = parse_ibnetdiscover_ports(TEST2, "test2.out")
    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].startswith(
        "test2.out:5: two different peers for port 1 of CA 'Mellanox Technologies Aggregation Node' "
        "(946dae0300630bfe): port 81 of switch '5FB0405-leaf-IB01' (946dae0300630bf6) (line 1) and "
        "port 81 of switch '5FB0406-spine-IB03' (946dae030053ec1a)"
    )
    assert "line 5 skipped" in parsed.warnings[0]


def test_test2_as_published_has_the_same_links_as_without_line_5(test2: ParsedFabric) -> None:
    parsed = parse_ibnetdiscover_ports(TEST2, "test2.out")
    assert parsed.links == test2.links
    assert parsed.down_ports == test2.down_ports


def test_test2_links_are_4x_hdr(test2: ParsedFabric) -> None:
    assert [(link.width, link.speed) for link in test2.links] == [(4, "HDR"), (4, "HDR")]


def test_test2_aggregation_node_is_not_a_host(test2: ParsedFabric) -> None:
    agg = next(ca for ca in test2.cas if ca.guid == AGG)
    assert (agg.kind, agg.hostname, agg.device) == ("aggregation", "", "")
    assert test2.hosts() == {"worker20"}


def test_test2_aggregation_node_is_linked_to_its_leaf(test2: ParsedFabric) -> None:
    assert PortRef(LEAF_IB01, 81) in {link.b for link in test2.links if link.a == PortRef(AGG, 1)}


def test_test2_descriptions_keep_their_spaces_and_names_do_not(test2: ParsedFabric) -> None:
    spine2 = next(s for s in test2.switches if s.guid == "946dae0300618c83")
    assert (spine2.description, spine2.name) == (" 5FB0406-spine-IB02 ", "5FB0406-spine-IB02")


def test_test2_down_ports(test2: ParsedFabric) -> None:
    assert [(p.ref.port, p.width, p.speed) for p in test2.down_ports] == [(1, 4, "SDR"), (1, 4, "SDR"), (22, 4, "QDR")]


def test_test2_switch_named_by_its_full_description(test2: ParsedFabric) -> None:
    assert "Infiniscale-IV Mellanox Technologies" in {s.name for s in test2.switches}


# --- hand-written corner cases -------------------------------------------------------------------

LINK = "SW     5  3 0x0000000000000001 4x NDR - CA     7  1 0x00000000000000a1 ( 'leaf' - 'gpu01 mlx5_0' )"


def test_unknown_width_is_accepted_on_a_down_port() -> None:
    fabric = parse_ibnetdiscover_ports("SW     5  9 0x0000000000000001 ?? ???                 'leaf'\n")
    assert fabric.down_ports == [ParsedPort(PortRef("0000000000000001", 9), width=0, speed="")]


def test_router_lines_give_routers() -> None:
    fabric = parse_ibnetdiscover_ports(LINK.replace("CA     7", "RT     7"))
    assert fabric.cas[0].kind == "router"


def test_trailing_blank_lines_and_crlf_are_fine() -> None:
    assert len(parse_ibnetdiscover_ports(LINK + "\r\n\r\n\n").links) == 1


# --- malformed input -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", " \n\n\t\n"])
def test_empty_input_is_an_error(text: str) -> None:
    err = parse_error(text)
    assert (err.line, err.message) == (0, "no switches or channel adapters found")


def test_nul_bytes_are_binary_junk() -> None:
    err = parse_error(TEST1.replace("SW  1719  1", "SW  1719\0 1"))
    assert err.line == 6
    assert "binary data: NUL byte" in err.message


def test_line_not_matching_the_grammar() -> None:
    err = parse_error(replace_line(TEST1, 3, "CA 1432 one 0x506b4b0300cc02a6 4x EDR"))
    assert err.line == 3
    assert err.message == "malformed port line: 'CA 1432 one 0x506b4b0300cc02a6 4x EDR'"


def test_truncated_last_line() -> None:
    truncated = TEST1[: TEST1.index("( 'ib-i4l1s01' - 'p0001")]
    err = parse_error(truncated)
    assert err.line == 7
    assert err.message.startswith("malformed port line")


def test_garbled_speed() -> None:
    err = parse_error(TEST1.replace("4x EDR - SW  1719 11", "4x EXR - SW  1719 11"))
    assert err.line == 2
    assert "bad link rate" in err.message and "'EXR'" in err.message


def test_garbled_width() -> None:
    err = parse_error(TEST1.replace("4x EDR - SW  1719 11", "7x EDR - SW  1719 11"))
    assert err.line == 2
    assert "link width 7x" in err.message


def test_unknown_width_on_a_link() -> None:
    err = parse_error(LINK.replace("4x NDR", "?? NDR"))
    assert (err.line, err.message) == (1, "a link with unknown width '??'")


def test_bad_guid() -> None:
    err = parse_error(TEST1.replace("0x7cfe9003003b4b96 4x", "0x7cfe90030g3b4b96 4x"))
    assert err.line == 2
    assert err.message == "bad GUID '0x7cfe90030g3b4b96': expected up to 16 hex digits"


def test_unknown_node_type() -> None:
    err = parse_error(replace_line(TEST1, 1, TEST1.split("\n")[0].replace("CA   134", "XX   134")))
    assert (err.line, err.message) == (1, "unknown node type 'XX': expected CA, SW or RT")


def test_one_guid_as_two_node_types() -> None:
    err = parse_error(TEST1.replace("SW  1719  1 0x7cfe9003009ce5b0", "CA  1719  1 0x7cfe9003009ce5b0"))
    assert err.line == 6
    assert err.message == "GUID 7cfe9003009ce5b0 is a CA here but a SW at line 1"


def test_port_zero() -> None:
    err = parse_error(LINK.replace("5  3", "5  0"))
    assert (err.line, err.message) == (1, "port 0 cannot carry a link")


def test_port_listed_down_after_linked_is_a_warning() -> None:
    down = "SW  1719 10 0x7cfe9003009ce5b0 4x SDR                                    'ib-i1l1s01'"
    parsed = parse_ibnetdiscover_ports(TEST1 + down + "\n", "test.out")
    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].startswith("test.out:11: two different peers for port 10 of switch 'ib-i1l1s01'")
    assert "and no peer (unconnected)" in parsed.warnings[0]
    assert ("7cfe9003009ce5b0", 10) not in {(p.ref.node_guid, p.ref.port) for p in parsed.down_ports}


def test_two_ends_disagreeing_on_the_rate_keep_the_slower_and_warn() -> None:
    # Line 2 says 4x EDR (100 Gb/s) for o0002's cable, line 5 (the switch's side) 4x HDR (200): EDR is kept.
    parsed = parse_ibnetdiscover_ports(
        TEST1.replace("SW  1719 11 0x7cfe9003009ce5b0 4x EDR", "SW  1719 11 0x7cfe9003009ce5b0 4x HDR"), "p.out"
    )
    link = next(link for link in parsed.links if PortRef("7cfe9003009ce5b0", 11) in (link.a, link.b))
    assert (link.width, link.speed) == (4, "EDR")
    assert "4xEDR (line 2) and 4xHDR (line 5)" in link.degraded
    assert any(w.startswith("p.out:5: ") and "marked degraded" in w for w in parsed.warnings)
