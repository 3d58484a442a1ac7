"""parse_ibnetdiscover: the SX6036 fabric file, hand-written corner cases, and every malformed case.

Facts about the real file were counted independently with grep/awk before being asserted here:
8 `Switch` blocks, 144 `Ca` blocks with 144 distinct host names, 384 port lines (every cable
printed from both ends), 290 4xQDR lines (145 host cables: tank1 has two) and 94 4xFDR10 lines
(47 inter-switch cables: 6 leaves x 8 uplinks, less ib1's missing one).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from fabric.importers.ibnetdiscover import parse_ibnetdiscover
from fabric.importers.types import ParsedFabric, ParseError, PortRef

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "ibnetdiscover_sx6036_8switch.topo"
SX6036 = FIXTURE.read_text()

TANK1 = "f452140300081a20"
IB7 = "f4521403007eaa70"


@pytest.fixture(scope="module")
def fabric() -> ParsedFabric:
    return parse_ibnetdiscover(SX6036, "sx6036.topo")


def line_of(text: str, fragment: str) -> int:
    """1-based number of the only line containing `fragment`."""
    numbers = [n for n, line in enumerate(text.split("\n"), start=1) if fragment in line]
    assert len(numbers) == 1, (fragment, numbers)
    return numbers[0]


def replace_line(text: str, number: int, new: str) -> str:
    lines = text.split("\n")
    lines[number - 1] = new
    return "\n".join(lines)


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_ibnetdiscover(text, "t.topo")
    return info.value


def switch_names(fabric: ParsedFabric) -> dict[str, str]:
    return {s.guid: s.name for s in fabric.switches}


def links_by_switch(fabric: ParsedFabric) -> dict[str, Counter[str]]:
    """switch name -> Counter of "switch"/"host" cables on it."""
    names = switch_names(fabric)
    counts: dict[str, Counter[str]] = {name: Counter() for name in names.values()}
    for link in fabric.links:
        for end, other in ((link.a, link.b), (link.b, link.a)):
            if end.node_guid in names:
                counts[names[end.node_guid]]["switch" if other.node_guid in names else "host"] += 1
    return counts


# --- the real file -------------------------------------------------------------------------------


def test_real_file_has_eight_switches_ib1_to_ib8(fabric: ParsedFabric) -> None:
    assert sorted(s.name for s in fabric.switches) == [f"ib{i}" for i in range(1, 9)]


def test_real_file_has_144_cas(fabric: ParsedFabric) -> None:
    assert len(fabric.cas) == 144


def test_real_file_has_one_ca_per_host_name(fabric: ParsedFabric) -> None:
    assert len({ca.hostname for ca in fabric.cas}) == 144
    assert len(fabric.hosts()) == 144


def test_real_file_has_192_unique_links(fabric: ParsedFabric) -> None:
    assert len(fabric.links) == 192
    assert len({frozenset((link.a, link.b)) for link in fabric.links}) == 192


def test_real_file_host_links_are_4x_qdr(fabric: ParsedFabric) -> None:
    ca_guids = {ca.guid for ca in fabric.cas}
    host_links = [link for link in fabric.links if {link.a.node_guid, link.b.node_guid} & ca_guids]
    assert len(host_links) == 145
    assert {(link.width, link.speed) for link in host_links} == {(4, "QDR")}


def test_real_file_inter_switch_links_are_4x_fdr10(fabric: ParsedFabric) -> None:
    switch_guids = {s.guid for s in fabric.switches}
    isl = [link for link in fabric.links if {link.a.node_guid, link.b.node_guid} <= switch_guids]
    assert len(isl) == 47
    assert {(link.width, link.speed) for link in isl} == {(4, "FDR10")}


def test_real_file_leaf_ib1_has_one_uplink_fewer(fabric: ParsedFabric) -> None:
    uplinks = {name: c["switch"] for name, c in links_by_switch(fabric).items() if name not in ("ib7", "ib8")}
    assert uplinks == {"ib1": 7, "ib2": 8, "ib3": 8, "ib4": 8, "ib5": 8, "ib6": 8}


def test_real_file_spines_carry_the_uplinks(fabric: ParsedFabric) -> None:
    counts = links_by_switch(fabric)
    assert (counts["ib7"]["switch"], counts["ib8"]["switch"]) == (24, 23)
    assert counts["ib8"]["host"] == 0


def test_real_file_spine_ib7_carries_storage_hosts(fabric: ParsedFabric) -> None:
    assert links_by_switch(fabric)["ib7"]["host"] == 3  # tank1 (both ports) and tank2


def test_real_file_tank1_is_one_ca_with_both_ports_on_ib7(fabric: ParsedFabric) -> None:
    (tank1,) = [ca for ca in fabric.cas if ca.hostname == "tank1"]
    assert tank1.guid == TANK1
    assert tank1.port_guids == {1: "f452140300081a21", 2: "f452140300081a22"}
    assert tank1.lids == {1: 13, 2: 10}
    peers = {
        (link.a if link.b.node_guid == TANK1 else link.b)
        for link in fabric.links
        if TANK1 in (link.a.node_guid, link.b.node_guid)
    }
    assert peers == {PortRef(IB7, 12), PortRef(IB7, 9)}


def test_real_file_switch_header_fields(fabric: ParsedFabric) -> None:
    ib5 = next(s for s in fabric.switches if s.name == "ib5")
    assert (ib5.guid, ib5.lid, ib5.port_count) == ("f4521403001165a0", 128, 36)
    assert (ib5.model, ib5.description) == ("SX6036", "MF0;ib5:SX6036/U1")
    assert (ib5.vendor_id, ib5.device_id) == ("0x2c9", "0xc738")


def test_real_file_ca_description_gives_hostname_and_device(fabric: ParsedFabric) -> None:
    stage114 = next(ca for ca in fabric.cas if ca.hostname == "stage114")
    assert (stage114.description, stage114.device, stage114.kind) == ("stage114 mlx4_0", "mlx4_0", "host")
    assert stage114.lids == {1: 105}


def test_real_file_short_port_guid_is_padded_to_16_digits(fabric: ParsedFabric) -> None:
    atlas = next(ca for ca in fabric.cas if ca.hostname == "atlas")
    assert atlas.port_guids == {1: "0002c903002db103"}
    assert atlas.guid == "0002c903002db102"


def test_real_file_source_is_named(fabric: ParsedFabric) -> None:
    assert fabric.source == "ibnetdiscover"
    assert fabric.down_ports == []


def test_real_file_with_crlf_line_ends_parses_the_same(fabric: ParsedFabric) -> None:
    assert parse_ibnetdiscover(SX6036.replace("\n", "\r\n")) == fabric


# --- hand-written corner cases -------------------------------------------------------------------

SMALL = """\
vendid=0x2c9
devid=0xcf08
Switch\t40 "S-0000000000000001"\t\t# "Quantum Mellanox Technologies" base port 0 lid 5 lmc 0
[1]\t"H-00000000000000a0"[1](a1) \t\t# "gpu01 mlx5_0" lid 7 4xHDR
[2]\t"H-00000000000000b0"[1](b1) \t\t# "Mellanox Technologies Aggregation Node" lid 8 4xHDR
[3]\t"R-00000000000000c0"[1](c1) \t\t# "router-1" lid 9 4x???
[4]\t"S-0000000000000002"[7]\t\t# "MF0;sp1:QM8700/U1" lid 3 4xHDR

Ca\t1 "H-00000000000000a0"\t\t# "gpu01 mlx5_0"
[1](a1) \t"S-0000000000000001"[1]\t\t# lid 7 lmc 0 "Quantum Mellanox Technologies" lid 5 4xHDR

Rt\t1 "R-00000000000000c0"\t\t# "router-1"
[1](c1) \t"S-0000000000000001"[3]\t\t# lid 9 lmc 0 "Quantum Mellanox Technologies" lid 5 4x???

Ca\t1 "H-00000000000000b0"\t\t# "Mellanox Technologies Aggregation Node"
[1](b1) \t"S-0000000000000001"[2]\t\t# lid 8 lmc 0 "Quantum Mellanox Technologies" lid 5 4xHDR

vendid=0x2c9
devid=0xd2f0
Switch\t40 "S-0000000000000002"\t\t# "MF0;sp1:QM8700/U1" enhanced port 0 lid 3 lmc 0
[7]\t"S-0000000000000001"[4]\t\t# "Quantum Mellanox Technologies" lid 5 4xHDR
"""


def test_small_non_mellanox_switch_name_is_its_description() -> None:
    fabric = parse_ibnetdiscover(SMALL)
    assert fabric.switches[0].name == "Quantum Mellanox Technologies"
    assert fabric.switches[0].model == ""


def test_small_aggregation_node_is_not_a_host() -> None:
    fabric = parse_ibnetdiscover(SMALL)
    agg = next(ca for ca in fabric.cas if ca.guid == "00000000000000b0")
    assert (agg.kind, agg.hostname) == ("aggregation", "")
    assert "" not in fabric.hosts()


def test_small_router_block_gives_a_router() -> None:
    router = next(ca for ca in parse_ibnetdiscover(SMALL).cas if ca.guid == "00000000000000c0")
    assert (router.kind, router.hostname, router.port_guids) == ("router", "", {1: "00000000000000c1"})


def test_small_unknown_speed_is_empty_string() -> None:
    fabric = parse_ibnetdiscover(SMALL)
    link = next(link for link in fabric.links if "00000000000000c0" in (link.a.node_guid, link.b.node_guid))
    assert (link.width, link.speed) == (4, "")


def test_small_switch_named_as_a_peer_comes_from_its_own_block() -> None:
    fabric = parse_ibnetdiscover(SMALL)
    spine = next(s for s in fabric.switches if s.guid == "0000000000000002")
    assert (spine.name, spine.model, spine.lid, spine.port_count) == ("sp1", "QM8700", 3, 40)
    assert PortRef("0000000000000002", 7) in {link.b for link in fabric.links}


def test_small_aggregation_node_port_guid_and_lid() -> None:
    agg = next(ca for ca in parse_ibnetdiscover(SMALL).cas if ca.guid == "00000000000000b0")
    assert (agg.port_guids, agg.lids) == ({1: "00000000000000b1"}, {1: 8})


def test_small_links_seen_twice_are_deduped() -> None:
    assert len(parse_ibnetdiscover(SMALL).links) == 4


def test_unknown_speed_on_one_end_takes_the_known_one_from_the_other() -> None:
    text = SMALL.replace('"gpu01 mlx5_0" lid 7 4xHDR', '"gpu01 mlx5_0" lid 7 4x???')
    link = next(link for link in parse_ibnetdiscover(text).links if link.a.port == 1)
    assert link.speed == "HDR"


# --- malformed input: the whole file -------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\t\n", "#\n# Topology file\n#\n"])
def test_empty_input_is_an_error(text: str) -> None:
    err = parse_error(text)
    assert err.message == "no switches or channel adapters found"
    assert err.line == 0


def test_nul_bytes_are_binary_junk_with_their_line() -> None:
    err = parse_error(SX6036[:500] + "\0\0\x07ELF" + SX6036[500:])
    assert "binary data: NUL byte" in err.message
    assert err.line == SX6036[:500].count("\n") + 1


def test_undecodable_bytes_are_binary_junk() -> None:
    err = parse_error("vendid=0x2c9\n\ufffd\ufffdPK\n")
    assert "undecodable" in err.message
    assert err.line == 2


def test_error_names_source_and_line() -> None:
    err = parse_error("[1]\tjunk\n")
    assert str(err).startswith("t.topo:1: ")


# --- malformed input: single lines ---------------------------------------------------------------


def test_port_line_before_any_header() -> None:
    text = '[1]\t"S-0000000000000001"[2]\t\t# "sw" lid 1 4xQDR\n'
    err = parse_error(text)
    assert (err.line, err.message) == (1, "port line before any Switch, Ca or Rt header")


def test_port_line_not_matching_the_grammar() -> None:
    number = line_of(SX6036, '"stage112 mlx4_0" lid 113 4xQDR')
    err = parse_error(replace_line(SX6036, number, "[2]\tthis is not a port line"))
    assert err.line == number
    assert err.message.startswith("malformed port line")


def test_unrecognised_line() -> None:
    err = parse_error(replace_line(SX6036, 5, "hello world"))
    assert (err.line, err.message) == (5, "unrecognised line: 'hello world'")


def test_garbled_speed() -> None:
    number = line_of(SX6036, '"stage114 mlx4_0" lid 105 4xQDR')
    err = parse_error(SX6036.replace('"stage114 mlx4_0" lid 105 4xQDR', '"stage114 mlx4_0" lid 105 4xQXR'))
    assert err.line == number
    assert "bad link rate" in err.message and "'QXR'" in err.message


def test_garbled_width() -> None:
    number = line_of(SX6036, '"stage114 mlx4_0" lid 105 4xQDR')
    err = parse_error(SX6036.replace('"stage114 mlx4_0" lid 105 4xQDR', '"stage114 mlx4_0" lid 105 7xQDR'))
    assert err.line == number
    assert "link width 7x" in err.message


def test_bad_guid() -> None:
    number = line_of(SX6036, '[1]\t"H-24be05ffff980030"')
    err = parse_error(SX6036.replace('[1]\t"H-24be05ffff980030"', '[1]\t"H-24be05ffzz980030"'))
    assert err.line == number
    assert err.message == "bad GUID '24be05ffzz980030': expected up to 16 hex digits"


def test_bad_node_id_prefix() -> None:
    number = line_of(SX6036, '[1]\t"H-24be05ffff980030"')
    err = parse_error(SX6036.replace('[1]\t"H-24be05ffff980030"', '[1]\t"X-24be05ffff980030"'))
    assert err.line == number
    assert "expected 'S-', 'H-' or 'R-'" in err.message


def test_port_beyond_the_declared_count() -> None:
    fragment = '[35]\t"S-f4521403007eaa70"[32]'
    number = line_of(SX6036, fragment)
    err = parse_error(SX6036.replace(fragment, '[37]\t"S-f4521403007eaa70"[32]'))
    assert err.line == number
    assert err.message == "port 37 is beyond the 36 ports switch ib5 (f4521403001165a0) declares"


def test_peer_port_beyond_the_peers_declared_count() -> None:
    fragment = '[35]\t"S-f4521403007eaa70"[32]'
    number = line_of(SX6036, fragment)
    err = parse_error(SX6036.replace(fragment, '[35]\t"S-f4521403007eaa70"[40]'))
    assert err.line == number
    assert "port 40 is beyond the 36 ports switch ib7" in err.message


def test_port_zero_cannot_carry_a_link() -> None:
    err = parse_error(SMALL.replace('[4]\t"S-0000000000000002"[7]', '[0]\t"S-0000000000000002"[7]'))
    assert err.line == 7
    assert "port 0 of switch" in err.message


def test_two_different_peers_for_one_port() -> None:
    # ib7 port 9 claims tank1 port 1, which ib7 port 12 also claims.
    fragment = '[9]\t"H-f452140300081a20"[2](f452140300081a22)'
    second = line_of(SX6036, '[12]\t"H-f452140300081a20"[1]')
    err = parse_error(SX6036.replace(fragment, '[9]\t"H-f452140300081a20"[1](f452140300081a21)'))
    assert err.line == second
    assert err.message.startswith("two different peers for port 1 of CA 'tank1 mlx4_0' (f452140300081a20)")
    assert f"(line {line_of(SX6036, fragment)})" in err.message


def test_node_declared_twice() -> None:
    block = 'Ca\t1 "H-00000000000000a0"\t\t# "gpu01 mlx5_0"\n'
    err = parse_error(SMALL + block)
    assert err.line == len(SMALL.split("\n"))
    assert err.message == "node 00000000000000a0 is declared twice (first at line 9)"


def test_unknown_node_id_prefix_contradicts_the_declaration() -> None:
    # stage97's CA block references switch ib5 as if it were a CA.
    number = line_of(SX6036, '[1](24be05ffff985d91) \t"S-f4521403001165a0"[32]')
    err = parse_error(replace_line(SX6036, number, SX6036.split("\n")[number - 1].replace('"S-', '"H-')))
    assert err.line == number
    assert err.message == "unknown node id 'H-f4521403001165a0': that GUID is declared as Switch at line 10"


def test_unknown_node_id_switch_reference_to_a_declared_ca() -> None:
    err = parse_error(SMALL.replace('"H-00000000000000a0"[1](a1)', '"S-00000000000000a0"[1]'))
    assert err.line == 4
    assert "unknown node id 'S-00000000000000a0'" in err.message and "declared as Ca at line 9" in err.message


def test_header_keyword_must_match_the_node_id() -> None:
    err = parse_error('Ca\t2 "S-0000000000000001"\t\t# "x"\n')
    assert err.line == 1
    assert "Ca header with node id 'S-0000000000000001'" in err.message


def test_ends_of_one_cable_disagreeing_on_the_rate_keep_the_slower_and_warn() -> None:
    # Line 4 (switch side) says 4xHDR (200 Gb/s), line 10 (gpu01's side) 4xEDR (100 Gb/s): EDR is kept.
    text = SMALL.replace('# lid 7 lmc 0 "Quantum Mellanox Technologies" lid 5 4xHDR', '# lid 7 lmc 0 "x" lid 5 4xEDR')
    fabric = parse_ibnetdiscover(text, "t.topo")
    link = next(link for link in fabric.links if "00000000000000a0" in (link.a.node_guid, link.b.node_guid))
    assert (link.width, link.speed) == (4, "EDR")
    assert "4xHDR (line 4) and 4xEDR (line 10)" in link.degraded
    (warning,) = [w for w in fabric.warnings if "different rates" in w]
    assert warning.startswith("t.topo:10: ") and "marked degraded" in warning


def test_truncated_mid_line_is_reported_at_the_last_line() -> None:
    cut = SX6036.index('[2](f452140300081a22) \t"S-f4521403007eaa70"[9]') + 30
    truncated = SX6036[:cut]
    err = parse_error(truncated)
    assert err.line == truncated.count("\n") + 1
    assert err.message.startswith("malformed port line")


def test_truncated_header_is_reported() -> None:
    truncated = SX6036[: SX6036.index('Switch\t36 "S-f4521403001167a0"') + 20]
    err = parse_error(truncated)
    assert err.line == truncated.count("\n") + 1
    assert err.message.startswith("malformed Switch header")


def test_truncated_at_a_line_boundary_is_refused_at_the_first_undeclared_peer() -> None:
    # Cut right after ib5's block: its first port line names stage114, whose block was cut off.
    err = parse_error(SX6036[: SX6036.index("\n\nvendid", 200)])
    assert err.line == line_of(SX6036, '[1]\t"H-24be05ffff980030"')
    assert err.message.startswith("peer 'H-24be05ffff980030' (\"stage114 mlx4_0\") is never declared")


# --- peers that are never declared ---------------------------------------------------------------
# ibnetdiscover prints a block for every node it links to, so a peer without one is an edited or
# damaged file. Kept, it became a phantom switch that turned the SX6036's 2 spines into 3.

GHOST_SWITCH = '[17]\t"S-deadbeefdeadbeef"[1]\t\t# "MF0;ghost:SX6036/U1" lid 99 4xFDR10'
GHOST_CA = '[17]\t"H-00000000deadbeef"[1](00000000deadbee0) \t\t# "ghost01 mlx4_0" lid 98 4xQDR'
IB5_PORT_18 = '[18]\t"H-24be05ffff9910f0"'


def with_line_in_ib5(new: str) -> tuple[str, int]:
    """SX6036 with `new` inserted into ib5's block before its port 18 (free port 17); its line number."""
    number = line_of(SX6036, IB5_PORT_18)
    lines = SX6036.split("\n")
    lines.insert(number - 1, new)
    return "\n".join(lines), number


def test_switch_port_to_an_undeclared_switch_is_refused_with_its_line() -> None:
    text, number = with_line_in_ib5(GHOST_SWITCH)
    err = parse_error(text)
    assert number == 27
    assert err.line == 27
    assert err.message == (
        "peer 'S-deadbeefdeadbeef' (\"MF0;ghost:SX6036/U1\") is never declared: the file has no Switch block "
        "for it, and ibnetdiscover prints one for every node it links to (cut short or edited?)"
    )


def test_switch_port_to_an_undeclared_ca_is_refused_with_its_line() -> None:
    text, number = with_line_in_ib5(GHOST_CA)
    err = parse_error(text)
    assert err.line == number
    assert err.message.startswith("peer 'H-00000000deadbeef' (\"ghost01 mlx4_0\") is never declared")
    assert "no Ca block" in err.message


def test_ca_port_to_an_undeclared_switch_is_refused_with_its_line() -> None:
    # gpu01's own block names a switch that has no block (switch 01 still names gpu01 correctly).
    text = SMALL.replace('[1](a1) \t"S-0000000000000001"[1]', '[1](a1) \t"S-0000000000000009"[1]')
    err = parse_error(text)
    assert err.line == 10
    assert err.message.startswith("peer 'S-0000000000000009' (\"Quantum Mellanox Technologies\") is never declared")


def test_router_named_as_a_peer_without_a_block_is_refused() -> None:
    start = SMALL.index('Rt\t1 "R-00000000000000c0"')
    rt_block = SMALL[start : SMALL.index("\n\n", start) + 1]
    err = parse_error(SMALL.replace(rt_block, ""))
    assert err.line == 6
    assert "no Rt block" in err.message


# --- a CA's port facts: its own block first, its switch's line where the block is silent ---------------------------

SW_TO_GPU01 = '[1]\t"H-00000000000000a0"[1](a1) \t\t# "gpu01 mlx5_0" lid 7'
# The switch's line says port GUID a9 and LID 77 for gpu01's port 1; gpu01's own block says a1 and 7.
CONFLICT = SMALL.replace(SW_TO_GPU01, '[1]\t"H-00000000000000a0"[1](a9) \t\t# "gpu01 mlx5_0" lid 77')
GPU01_BLOCK = (
    'Ca\t1 "H-00000000000000a0"\t\t# "gpu01 mlx5_0"\n'
    '[1](a1) \t"S-0000000000000001"[1]\t\t# lid 7 lmc 0 "Quantum Mellanox Technologies" lid 5 4xHDR\n\n'
)
SPINE_PORT = '[4]\t"S-0000000000000002"[7]'


def _gpu01(text: str):
    return next(ca for ca in parse_ibnetdiscover(text).cas if ca.guid == "00000000000000a0")


def _second_port_on_switch_port_5(peer: str) -> str:
    """gpu01 declares 2 ports and lists port 1 only; the switch's port 5 reaches `peer` (its port 2), LID 11."""
    line = f'[5]\t"H-00000000000000a0"{peer} \t\t# "gpu01 mlx5_0" lid 11 4xHDR\n'
    return SMALL.replace(SPINE_PORT, line + SPINE_PORT).replace(
        'Ca\t1 "H-00000000000000a0"', 'Ca\t2 "H-00000000000000a0"'
    )


def test_a_cas_own_block_wins_over_its_switchs_line_when_it_comes_after() -> None:
    ca = _gpu01(CONFLICT)
    assert (ca.port_guids, ca.lids) == ({1: "00000000000000a1"}, {1: 7})


def test_a_cas_own_block_wins_over_its_switchs_line_when_it_comes_first() -> None:
    assert GPU01_BLOCK in CONFLICT
    ca = _gpu01(GPU01_BLOCK + CONFLICT.replace(GPU01_BLOCK, ""))
    assert (ca.port_guids, ca.lids) == ({1: "00000000000000a1"}, {1: 7})


def test_a_ca_port_only_its_switch_lists_takes_the_switchs_word() -> None:
    ca = _gpu01(_second_port_on_switch_port_5("[2](a2)"))
    assert (ca.port_guids, ca.lids) == ({1: "00000000000000a1", 2: "00000000000000a2"}, {1: 7, 2: 11})


def test_a_switch_line_without_the_cas_port_guid_gives_only_its_lid() -> None:
    ca = _gpu01(_second_port_on_switch_port_5("[2]"))
    assert (ca.port_guids, ca.lids) == ({1: "00000000000000a1"}, {1: 7, 2: 11})


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            'Switch\t40 "S-0000000000000001"',
            'Switch <ports> "S-<guid>" # "<description>" enhanced port 0 lid <lid> lmc <lmc>',
        ),
        ('Ca\t1 "H-00000000000000a0"', 'Ca <ports> "H-<guid>" # "<description>"'),
    ],
)
def test_a_malformed_header_says_what_its_kind_should_look_like(header, expected) -> None:
    err = parse_error(header + "\n")
    assert err.message.startswith(f"malformed {header.split()[0]} header (expected '{expected}'): ")
