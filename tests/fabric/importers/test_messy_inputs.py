"""Minimal synthetic inputs, one per class of issue 13: what a real fabric's capture holds besides clean topology.

Each sample is written here by hand (the lines copy the grammar of infiniband-diags' ibnetdiscover.c and
the samples quoted in issue 13 and tests/fixtures/SOURCES.md); the real files are in test_real_fabrics.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fabric.importers.ibnetdiscover import parse_ibnetdiscover
from fabric.importers.ibnetdiscover_ports import parse_ibnetdiscover_ports
from fabric.importers.types import ParsedFabric, ParsedLink, ParseError, PortRef

SW = "0002c90200aa0001"


def topo(*blocks: str) -> str:
    return "\n\n".join(blocks) + "\n"


def switch(guid: str, ports: int, desc: str, *lines: str, lid: int = 1) -> str:
    head = f'Switch\t{ports} "S-{guid}"\t\t# "{desc}" enhanced port 0 lid {lid} lmc 0'
    return "\n".join([f"switchguid=0x{guid}({guid})", head, *lines])


def ca(guid: str, desc: str, *lines: str, sysimg: str = "", ports: int = 1, keyword: str = "Ca") -> str:
    ids = ([f"sysimgguid=0x{sysimg}"] if sysimg else []) + [f"caguid=0x{guid}"]
    return "\n".join([*ids, f'{keyword}\t{ports} "{keyword[0].replace("C", "H")}-{guid}"\t\t# "{desc}"', *lines])


def sw_port(port: int, peer: str, pport: int, desc: str, rate: str, lid: int = 7) -> str:
    prefix = "S" if len(peer) == 16 and peer.startswith("0002c9020") else "H"
    tail = "" if prefix == "S" else f"({peer})"
    return f'[{port}]\t"{prefix}-{peer}"[{pport}]{tail} \t\t# "{desc}" lid {lid} {rate}'


def ca_port(port: int, sw: str, sport: int, rate: str, lid: int = 7, prefix: str = "S") -> str:
    return f'[{port}](ff{port:014x}) \t"{prefix}-{sw}"[{sport}]\t\t# lid {lid} lmc 0 "sw" lid 1 {rate}'


def one_host(desc: str, guid: str = "b8cef60300a1b2c4", sysimg: str = "") -> str:
    return topo(
        switch(SW, 36, "sw", sw_port(1, guid, 1, desc, "4xNDR")),
        ca(guid, desc, ca_port(1, SW, 1, "4xNDR"), sysimg=sysimg),
    )


# --- 1. unnamed HCAs ------------------------------------------------------------------------------


def test_firmware_default_description_is_an_unnamed_host() -> None:
    # The line issue 13 quotes from a real NDR fabric.
    fabric = parse_ibnetdiscover(one_host("MT4129 ConnectX7   Mellanox Technologies"))
    (hca,) = fabric.cas
    assert (hca.kind, hca.hostname, hca.unnamed) == ("host", "", True)
    assert fabric.unnamed_hosts() == {"b8cef60300a1b2c4": [hca]}


@pytest.mark.parametrize("desc", ["", "localhost mlx5_0", "MT4123 ConnectX6 something"])
def test_other_descriptions_that_name_no_host(desc: str) -> None:
    assert parse_ibnetdiscover(one_host(desc)).cas[0].unnamed


def test_unnamed_hcas_of_one_system_are_one_host() -> None:
    # Two functions of one adapter (one sysimgguid): one unnamed system, keyed by the sysimgguid.
    default = "MT4129 ConnectX7   Mellanox Technologies"
    text = topo(
        switch(
            SW,
            36,
            "sw",
            sw_port(1, "00000000000000a1", 1, default, "4xNDR"),
            sw_port(2, "00000000000000a2", 1, default, "4xNDR"),
        ),
        ca("00000000000000a1", default, ca_port(1, SW, 1, "4xNDR"), sysimg="00000000000000a0"),
        ca("00000000000000a2", default, ca_port(1, SW, 2, "4xNDR"), sysimg="00000000000000a0"),
    )
    fabric = parse_ibnetdiscover(text)
    assert list(fabric.unnamed_hosts()) == ["00000000000000a0"]
    assert fabric.host_count() == 1


def test_unnamed_hca_sharing_a_system_with_a_named_one_is_that_hosts() -> None:
    text = topo(
        switch(
            SW,
            36,
            "sw",
            sw_port(1, "00000000000000a1", 1, "gpu07 mlx5_0", "4xNDR"),
            sw_port(2, "00000000000000a2", 1, "MT4129 ConnectX7   Mellanox Technologies", "4xNDR"),
        ),
        ca("00000000000000a1", "gpu07 mlx5_0", ca_port(1, SW, 1, "4xNDR"), sysimg="00000000000000a0"),
        ca(
            "00000000000000a2",
            "MT4129 ConnectX7   Mellanox Technologies",
            ca_port(1, SW, 2, "4xNDR"),
            sysimg="00000000000000a0",
        ),
    )
    fabric = parse_ibnetdiscover(text)
    assert [ca.hostname for ca in fabric.cas] == ["gpu07", "gpu07"]
    assert fabric.unnamed_hosts() == {}
    assert any("shares system image GUID 00000000000000a0 with gpu07" in w for w in fabric.warnings)


# --- 2. SHARP aggregation nodes ---------------------------------------------------------------------


def test_aggregation_node_on_the_port_past_the_cages_is_part_of_the_switch() -> None:
    # A Quantum HDR switch declares 41 ports: 40 cages and its SHARP aggregation node on port 41.
    agg = "b8599f0300fc6dec"
    text = topo(
        switch(
            "b8599f0300fc6de4",
            41,
            "MF0;r-ufm-sw95:MQM8700/U1",
            sw_port(41, agg, 1, "Mellanox Technologies Aggregation Node", "4xHDR"),
        ),
        ca(agg, "Mellanox Technologies Aggregation Node", ca_port(41 - 40, "b8599f0300fc6de4", 41, "4xHDR")),
    )
    fabric = parse_ibnetdiscover(text)
    (node,) = fabric.cas
    assert (node.kind, node.hostname, node.unnamed) == ("aggregation", "", False)
    assert fabric.host_count() == 0


# --- 3. loopbacks -----------------------------------------------------------------------------------


def test_switch_cabled_to_itself_is_a_loopback() -> None:
    # The line issue 13 quotes, with the cable's other end.
    text = topo(
        switch(
            SW,
            36,
            "SwitchIB Mellanox Technologies",
            f'[1]\t"S-{SW}"[2]\t\t# "SwitchIB Mellanox Technologies" lid 12 4xEDR',
            f'[2]\t"S-{SW}"[1]\t\t# "SwitchIB Mellanox Technologies" lid 12 4xEDR',
            lid=12,
        )
    )
    (link,) = parse_ibnetdiscover(text).links
    assert link.loopback and {link.a, link.b} == {PortRef(SW, 1), PortRef(SW, 2)}


def test_port_naming_itself_as_its_peer_is_refused() -> None:
    text = topo(switch(SW, 36, "sw", f'[5]\t"S-{SW}"[5]\t\t# "sw" lid 1 4xEDR'))
    with pytest.raises(ParseError) as info:
        parse_ibnetdiscover(text, "t.topo")
    assert info.value.line == 3 and "names itself as its peer" in info.value.message


# --- 4. lines that are not topology -------------------------------------------------------------------

STDERR = [
    "src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,1,31 Attr 0x11:0) bad status 110; Connection timed out",
    'ibwarn: [1234] main: sim_connect: attached as client 1 at node "Switch1"',
    "ibnetdiscover: iberror: [pid 4242] main: failed: discover failed",
]


@pytest.mark.parametrize("noise", STDERR)
def test_stderr_line_inside_a_block_is_a_warning_and_the_block_goes_on(noise: str) -> None:
    lines = one_host("gpu01 mlx5_0").split("\n")
    lines.insert(3, noise)  # after the switch's port 1 line, before the blank line
    fabric = parse_ibnetdiscover("\n".join(lines), "t.topo")
    assert len(fabric.links) == 1
    assert [w.split(": diagnostic")[0] for w in fabric.warnings] == ["t.topo:4"]


def test_grouping_headers_and_chassis_comments_are_understood() -> None:
    # `ibnetdiscover -g`: chassis headings, and comments after sysimgguid/switchguid.
    text = "Chassis 1 (guid 0x0008f10400410015)\n\n# Spine Nodes\n" + one_host("gpu01 mlx5_0").replace(
        f"switchguid=0x{SW}({SW})",
        f"sysimgguid=0x{SW}\t\t# Chassis 1 (ISR9288)\nswitchguid=0x{SW}({SW})\t# ISR9288 Spine 1",
    ).replace("\n\ncaguid", "\n\nNon-Chassis Nodes\n\ncaguid")
    fabric = parse_ibnetdiscover(text)
    assert (len(fabric.switches), len(fabric.cas), len(fabric.links)) == (1, 1, 1)


def test_full_details_after_the_rate_are_read() -> None:
    # `ibnetdiscover -f` appends " s=4 w=2 v=3 e=1" to every port line.
    text = one_host("gpu01 mlx5_0").replace("4xNDR\n", "4xNDR s=4 w=2 v=3 e=1\n")
    assert parse_ibnetdiscover(text).links[0].speed == "NDR"


def test_real_garbage_is_still_refused_with_its_line() -> None:
    text = one_host("gpu01 mlx5_0")
    cut = text[: text.index("4xNDR")]  # a port line truncated mid-way
    with pytest.raises(ParseError, match="malformed port line") as info:
        parse_ibnetdiscover(cut, "t.topo")
    assert info.value.line == 3
    with pytest.raises(ParseError, match="unrecognised line"):
        parse_ibnetdiscover(text + "this is not ibnetdiscover output\n")
    with pytest.raises(ParseError, match="binary data"):
        parse_ibnetdiscover(text + "\x7fELF\x02\x01\n")


def test_ports_report_stderr_line_is_a_warning() -> None:
    text = (
        "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )\n"
        "ibwarn: [3178] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1)\n"
        "SW  1719 10 0x7cfe9003009ce5b0 4x EDR - CA   134  1 0x7cfe9003003b4bde ( 'ib-i1l1s01' - 'o0001 HCA-1' )\n"
    )
    fabric = parse_ibnetdiscover_ports(text, "p.out")
    assert len(fabric.links) == 1
    assert [w.split(": diagnostic")[0] for w in fabric.warnings] == ["p.out:2"]


# --- 5. ends that disagree ------------------------------------------------------------------------


def sdr_cable(first: str, second: str) -> str:
    return topo(
        switch(SW, 36, "sw", sw_port(1, "00000000000000a1", 1, "gpu01 mlx5_0", first)),
        ca("00000000000000a1", "gpu01 mlx5_0", ca_port(1, SW, 1, second)),
    )


def test_4x_against_1x_keeps_1x_marks_degraded_and_names_both_lines() -> None:
    fabric = parse_ibnetdiscover(sdr_cable("4xSDR", "1xSDR"), "t.topo")
    (link,) = fabric.links
    assert (link.width, link.speed) == (1, "SDR")
    assert link.degraded == (
        "its two ends report different rates: 4xSDR (line 3) and 1xSDR (line 7); the slower, 1xSDR, is kept"
    )
    assert fabric.warnings[0].startswith("t.topo:7: the link port 1 of switch sw")


@pytest.mark.parametrize(("first", "second"), [("2xHDR", "4xEDR"), ("4xEDR", "2xHDR")])
def test_equal_data_rates_keep_the_narrower_width_in_either_order(first: str, second: str) -> None:
    # 2xHDR and 4xEDR both carry 100 Gb/s: the tie goes to 2 lanes whichever end is printed first.
    (link,) = parse_ibnetdiscover(sdr_cable(first, second)).links
    assert (link.width, link.speed) == (2, "HDR")


def test_unknown_speed_against_a_known_one_is_not_degraded() -> None:
    (link,) = parse_ibnetdiscover(sdr_cable("4x???", "4xEDR")).links
    assert ((link.width, link.speed), link.degraded) == ((4, "EDR"), "")


# --- 6. formats --------------------------------------------------------------------------------------


def test_quantum2_split_ports_past_the_cage_count_at_2x_ndr() -> None:
    # An MQM9700 in split mode declares 129 ports (64 cages x 2, and its aggregation node): port 128 exists.
    q2 = "0002c90200aa0002"
    text = topo(
        switch(q2, 129, "MF0;q2-leaf01:MQM9700/U1", sw_port(128, "00000000000000a1", 1, "gpu01 mlx5_0", "2xNDR")),
        ca("00000000000000a1", "gpu01 mlx5_0", ca_port(1, q2, 128, "2xNDR")),
    )
    fabric = parse_ibnetdiscover(text)
    assert (fabric.switches[0].model, fabric.switches[0].port_count) == ("MQM9700", 129)
    assert [(link.a.port, link.width, link.speed) for link in fabric.links] == [(128, 2, "NDR")]
    with pytest.raises(ParseError, match="port 130 is beyond the 129 ports"):
        parse_ibnetdiscover(text.replace("[128]", "[130]"))


def test_ibdiagnet_split_mode_labels_on_a_129_port_quantum2() -> None:
    # ibdiagnet2.ibnetdiscover labels a Quantum-2 port in split mode ASIC/cage/port/split: port 128 is 1/32/2/2.
    q2, host = "0002c90200aa0002", "00000000000000a1"
    text = topo(
        switch(q2, 129, "MF0;q2:MQM9700/U1", f'[128](1/32/2/2) "H-{host}"[1]({host}) # "gpu01 mlx5_0" lid 7 2xNDR'),
        ca(host, "gpu01 mlx5_0", f'[1](B9D0F0/0/0/1)({host}) "S-{q2}"[128] # lid 7 lmc 0 "q2" lid 1 2xNDR'),
    )
    fabric = parse_ibnetdiscover(text)
    assert [(link.a.port, link.b.port, link.width, link.speed) for link in fabric.links] == [(128, 1, 2, "NDR")]
    assert fabric.cas[0].port_guids == {1: host}
    with pytest.raises(ParseError, match="malformed port line"):  # a label holds no spaces
        parse_ibnetdiscover(text.replace("(1/32/2/2)", "(1/32 /2/2)"))


def test_router_block_at_1x_xdr() -> None:
    # After zypgithub/sonic-mgmt's quoted Q3400 router sample: Rt 8 "R-..." # "MF0;mamba-2132:Q3400_RA/U2/RT".
    rt, q3 = "b8e924030000b928", "0002c90200aa0003"
    text = topo(
        switch(
            q3,
            150,
            "MF0;mamba-2132:Q3400_RA/U2",
            f'[149]\t"R-{rt}"[2](b8e924030000b929) \t\t# "MF0;mamba-2132:Q3400_RA/U2/RT" lid 9 1xXDR',
        ),
        "rtguid=0x" + rt + "\n" + f'Rt\t8 "R-{rt}"\t\t# "MF0;mamba-2132:Q3400_RA/U2/RT"\n'
        f'[2](b8e924030000b929) \t"S-{q3}"[149]\t\t# lid 9 lmc 0 "MF0;mamba-2132:Q3400_RA/U2" lid 8 1xXDR',
    )
    fabric = parse_ibnetdiscover(text)
    (router,) = fabric.cas
    assert (router.kind, router.hostname) == ("router", "")
    assert [(link.width, link.speed) for link in fabric.links] == [(1, "XDR")]
    assert fabric.host_count() == 0


def test_qlogic_switch_is_named_by_its_description() -> None:
    # Synthetic: QLogic (vendid 0x1175) switches describe themselves "QLogic 12300 GUID=0x...".
    q = "00066a00e3003c9b"
    text = topo(
        "vendid=0x1175\ndevid=0x7322\n"
        + switch(q, 36, "QLogic 12300 GUID=0x00066a00e3003c9b", sw_port(3, "00000000000000a1", 1, "n01 qib0", "4xQDR")),
        ca("00000000000000a1", "n01 qib0", ca_port(1, q, 3, "4xQDR")),
    )
    (s,) = parse_ibnetdiscover(text).switches
    assert (s.name, s.model, s.vendor_id) == ("QLogic 12300 GUID=0x00066a00e3003c9b", "", "0x1175")


# --- determinism ------------------------------------------------------------------------------------


def summary(fabric: ParsedFabric) -> tuple:
    def ends(link: ParsedLink) -> tuple:
        return tuple(sorted([(link.a.node_guid, link.a.port), (link.b.node_guid, link.b.port)]))

    links = sorted((ends(link), link.width, link.speed, bool(link.degraded)) for link in fabric.links)
    return (sorted(s.guid for s in fabric.switches), sorted((c.guid, c.hostname, c.kind) for c in fabric.cas), links)


def test_shuffled_blocks_give_the_same_fabric() -> None:
    # The man page's example has both degraded cables: which end is read first must not change the result.
    text = (Path(__file__).resolve().parents[2] / "fixtures" / "ibnetdiscover_manpage_example.topo").read_text()
    blocks = text.split("\n\n")
    head, body = blocks[:2], blocks[2:]
    expected = summary(parse_ibnetdiscover(text))
    rng = random.Random(13)
    for _ in range(5):
        rng.shuffle(body)
        assert summary(parse_ibnetdiscover("\n\n".join(head + body))) == expected
