"""Real ibnetdiscover outputs published by other sites (tests/fixtures/SOURCES.md), read as a careful person would.

Every expected figure below was counted by hand (grep/awk on the file, or by reading it), never taken from
the parser's output; the counting is written next to each assertion.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from fabric.importers import read_text
from fabric.importers.ibnetdiscover import parse_ibnetdiscover
from fabric.importers.ibnetdiscover_ports import parse_ibnetdiscover_ports
from fabric.importers.types import ParsedFabric, ParseError, PortRef
from fabric.topology.convert import fabric_from_parsed
from fabric.topology.graph import FabricGraph
from fabric.topology.tiers import LEAF, detect_tiers

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MANPAGE = FIXTURES / "ibnetdiscover_manpage_example.topo"
IBM = FIXTURES / "ibnetdiscover_ibm_sdr_2host.topo"
LOOPS = FIXTURES / "ibnetdiscover_nvidia_switchib_loopbacks.topo"
SUN = FIXTURES / "ibnetdiscover_oracle_sun_dcs36.topo"
X5 = FIXTURES / "ibnetdiscover_psmn_x5_unnamed_hcas.topo"
X5_MAP = FIXTURES / "ibnetdiscover_psmn_x5.map"
PORTS3 = FIXTURES / "ibnetdiscover_ports_test3.out"
NDR = FIXTURES / "ibnetdiscover_topograph_ndr_dgx.topo"
GB200 = FIXTURES / "ibnetdiscover_topograph_gb200_lone_ca.topo"
NCAR = FIXTURES / "ibnetdiscover_ports_ncar_docstring.out"


def parse(path: Path) -> ParsedFabric:
    return parse_ibnetdiscover(read_text(path), path.name)


def rates(fabric: ParsedFabric) -> Counter[str]:
    return Counter(f"{link.width}x{link.speed}" for link in fabric.links)


# --- the ibnetdiscover man page's example (infiniband-diags) ---------------------------------------
# 2 Switch blocks (ISR9024, 24 ports; SW-6IB4, 8 ports), 4 Ca blocks, every Ca described
# "MT23108 InfiniHost Mellanox Technologies" (the firmware default) and none with a sysimgguid line.
# Port lines: 5 + 4 + 1 + 1 + 1 + 2 = 14, each cable printed from both ends: 7 cables, 2 between the
# switches (ISR[10]-6IB4[1], ISR[6]-6IB4[3]) and 5 to CAs.


def test_manpage_example_reads_past_its_non_chassis_nodes_heading() -> None:
    fabric = parse(MANPAGE)
    assert (len(fabric.switches), len(fabric.cas), len(fabric.links)) == (2, 4, 7)


def test_manpage_example_cas_are_four_unnamed_hosts() -> None:
    fabric = parse(MANPAGE)
    assert fabric.hosts() == set()
    # No sysimgguid in the Ca blocks: each CA is its own system, keyed by its node GUID.
    assert sorted(fabric.unnamed_hosts()) == [
        "0008f10403960558",
        "0008f10403960984",
        "0008f10403961354",
        "005442b100004900",
    ]
    assert fabric.host_count() == 4


def test_manpage_example_two_cables_are_degraded_at_1x() -> None:
    # Line 15: ISR[10] -> 6IB4[1] "4xSDR"; line 26: 6IB4[1] -> ISR[10] "1xSDR".
    # Line 18: ISR[12] -> CA 0558 port 1 "4xSDR"; line 52: that CA port -> ISR[12] "1xSDR".
    fabric = parse(MANPAGE)
    degraded = {(link.a, link.b): (link.width, link.speed, link.degraded) for link in fabric.links if link.degraded}
    isr, sw6, ca = "005442ba00003080", "0008f10400410015", "0008f10403960558"
    assert set(degraded) == {(PortRef(isr, 10), PortRef(sw6, 1)), (PortRef(isr, 12), PortRef(ca, 1))}
    assert degraded[PortRef(isr, 10), PortRef(sw6, 1)][:2] == (1, "SDR")
    assert "4xSDR (line 15) and 1xSDR (line 26)" in degraded[PortRef(isr, 10), PortRef(sw6, 1)][2]
    assert "4xSDR (line 18) and 1xSDR (line 52)" in degraded[PortRef(isr, 12), PortRef(ca, 1)][2]
    # 7 cables: 5 at 4xSDR, the 2 above at 1xSDR.
    assert rates(fabric) == Counter({"4xSDR": 5, "1xSDR": 2})


def test_manpage_example_warns_once_per_degraded_cable_and_once_for_the_unnamed() -> None:
    warnings = parse(MANPAGE).warnings
    assert [w.split(": ")[0] for w in warnings if "different rates" in w] == [
        "ibnetdiscover_manpage_example.topo:26",
        "ibnetdiscover_manpage_example.topo:52",
    ]
    assert sum("have no host name" in w for w in warnings) == 1


# --- IBM Platform Cluster Manager support page: 1 switch, 2 hosts, SDR --------------------------------
# Switch 8 "MT43132 Mellanox Technologies" (a firmware-default switch description), 2 Ca blocks
# "compute-00-01 HCA-1" and "compute-00-00 HCA-1" (the latter cabled from its port 2), 4 port lines.


def test_ibm_page_has_one_switch_two_hosts_two_sdr_cables() -> None:
    fabric = parse(IBM)
    assert [s.name for s in fabric.switches] == ["MT43132 Mellanox Technologies"]
    assert fabric.hosts() == {"compute-00-00", "compute-00-01"}
    assert rates(fabric) == Counter({"4xSDR": 2})
    assert fabric.warnings == []


def test_ibm_page_ca_cabled_from_its_second_port() -> None:
    fabric = parse(IBM)
    link = next(link for link in fabric.links if "0002c9030002847c" in (link.a.node_guid, link.b.node_guid))
    assert {link.a, link.b} == {PortRef("000b8cffff0053ee", 2), PortRef("0002c9030002847c", 2)}


# --- NVIDIA community ibdiagpath how-to: a SwitchIB cabled to itself, and stderr in the capture -------
# Line 1 is libibnetdisc's stderr ("src/query_smp.c:195; umad (...) bad status 110; Connection timed out").
# Switch e470 (SwitchIB, 36 ports) lists 9 port lines, 6 of them to itself: [1]<->[2], [19]<->[21],
# [29]<->[30] (3 loopback cables); [3] goes to the SX6012 (12 ports) and [34], [35] to hosts.
# SX6012 lists 5: SwitchIB[3] and 4 hosts. 6 Ca blocks for 5 hosts (r-ufm101 has HCA-1 and HCA-2).
# 20 port lines = 10 cables: 3 loopbacks + 1 inter-switch + 6 host cables.


def test_switchib_capture_reads_past_the_stderr_line_with_a_warning() -> None:
    fabric = parse(LOOPS)
    (warning,) = [w for w in fabric.warnings if "diagnostic" in w]
    assert warning.startswith("ibnetdiscover_nvidia_switchib_loopbacks.topo:1: ")
    assert "bad status 110" in warning


def test_switchib_capture_counts() -> None:
    fabric = parse(LOOPS)
    assert (len(fabric.switches), len(fabric.cas), len(fabric.links)) == (2, 6, 10)
    assert fabric.hosts() == {"r-ufm96", "r-ufm100", "r-ufm101", "r-ufm111", "r-ufm216"}


def test_switchib_capture_keeps_three_loopbacks_on_the_switchib() -> None:
    e470 = "e41d2d030003e470"
    loops = {frozenset({link.a.port, link.b.port}) for link in parse(LOOPS).links if link.loopback}
    assert loops == {frozenset({1, 2}), frozenset({19, 21}), frozenset({29, 30})}
    assert all(link.a.node_guid == e470 for link in parse(LOOPS).links if link.loopback)


def test_switchib_capture_loopbacks_are_no_path_and_no_tier_input() -> None:
    graph = FabricGraph.build(fabric_from_parsed(parse(LOOPS)))  # raised "connects switch ... to itself" before
    e470 = graph.switch_index["e41d2d030003e470"]
    assert len(graph.loopbacks) == 3
    # Its only switch neighbour is the SX6012, over its port 3 cable.
    assert [graph.switch_keys[w] for w, _ in graph.sw_adj[e470]] == ["f4521403005764b0"]


def test_switchib_capture_rates_per_cable() -> None:
    # Loopbacks 3 x 4xEDR, SwitchIB-SX6012 4xFDR, hosts: ufm216 4xEDR, ufm111 4xFDR, ufm101 HCA-1 and
    # HCA-2 4xQDR, ufm100 4xFDR, ufm96 4xSDR.
    assert rates(parse(LOOPS)) == Counter({"4xEDR": 4, "4xFDR": 3, "4xQDR": 2, "4xSDR": 1})


# --- Oracle Sun Datacenter InfiniBand Switch 36 documentation ------------------------------------------
# 1 Switch block ("Sun DCS 36 QDR switch localhost", 36 ports), 1 Ca ("nsn33-43 HCA-1", port 2), 1 cable,
# and a line holding one space between the blocks.


def test_sun_dcs36_one_switch_one_host_one_qdr_cable() -> None:
    fabric = parse(SUN)
    assert [(s.name, s.port_count) for s in fabric.switches] == [("Sun DCS 36 QDR switch localhost", 36)]
    assert fabric.hosts() == {"nsn33-43"}
    assert [(link.a, link.b, link.width, link.speed) for link in fabric.links] == [
        (PortRef("0021283a8389a0a0", 23), PortRef("0003ba000100e388", 2), 4, "QDR")
    ]


# --- PSMN's X5 cluster (ENS de Lyon): 11 QDR switches, 89 HCAs none of which was ever named ----------
# grep: 11 "Switch" blocks, 89 "Ca" blocks, 318 port lines; every Ca says
# "MT25408 ConnectX Mellanox Technologies"; 89 sysimgguid lines before the Ca headers, all distinct.
# awk over (node:port, peer:port) pairs: 159 cables, each printed twice; 89 CA-switch (each CA has one
# port line), 140 switch-switch lines = 70 inter-switch cables; no self-cable; no pair with two rates.
# Rates: 46 "4xDDR" lines = 23 DDR host cables (the 23 devid 0x6732 CAs); all else 4xQDR.
# Host ports per switch (awk over switch blocks): 200b50 21, 417670 24, 2036b4 24, 4827b0 9, 20369c 5,
# 108bba 6 (= 89); the other 5 switches carry no host, and are the ones the site lists in X5.spine.


@pytest.fixture(scope="module")
def x5() -> ParsedFabric:
    return parse(X5)


def test_x5_counts(x5: ParsedFabric) -> None:
    assert (len(x5.switches), len(x5.cas), len(x5.links)) == (11, 89, 159)


def test_x5_all_89_hcas_are_unnamed_hosts_one_per_system(x5: ParsedFabric) -> None:
    assert x5.hosts() == set()
    assert len(x5.unnamed_hosts()) == 89
    assert x5.host_count() == 89
    assert all(ca.kind == "host" and ca.system_guid for ca in x5.cas)


def test_x5_unnamed_hca_is_grouped_by_its_system_image_guid(x5: ParsedFabric) -> None:
    # Lines 919 and 921: sysimgguid=0x2c90300080e87, then Ca "H-0002c90300080e84" (r510gluster1 in X5.map).
    ca = next(ca for ca in x5.cas if ca.guid == "0002c90300080e84")
    assert (ca.system_guid, ca.system_key, ca.hostname) == ("0002c90300080e87", "0002c90300080e87", "")


def test_x5_rates(x5: ParsedFabric) -> None:
    assert rates(x5) == Counter({"4xQDR": 136, "4xDDR": 23})  # 66 QDR host + 70 inter-switch; 23 DDR host


def test_x5_switches_without_hosts_are_the_sites_spines(x5: ParsedFabric) -> None:
    # X5.spine (not copied: five "S-<guid>" lines) lists the site's spines:
    site_spines = {"0008f105001086a2", "0008f10500108098", "0008f10500108c5c", "0008f10500108530", "0008f1050010851e"}
    graph = FabricGraph.build(fabric_from_parsed(x5))
    tiers = detect_tiers(graph)
    leaves = {graph.switch_keys[i] for i in range(graph.n_switches) if tiers.role[i] == LEAF}
    assert leaves == {s.guid for s in x5.switches} - site_spines
    per_leaf = {graph.switch_keys[s][-6:]: len(graph.sw_hosts[s]) for s in range(graph.n_switches) if graph.sw_hosts[s]}
    assert per_leaf == {"200b50": 21, "417670": 24, "2036b4": 24, "4827b0": 9, "20369c": 5, "108bba": 6}


def test_x5_site_map_names_86_of_the_89(x5: ParsedFabric) -> None:
    # X5.map: a comment line and 86 "H-<guid> <hostname>" lines, every GUID one of the file's Ca blocks.
    names = dict(line.split() for line in X5_MAP.read_text().splitlines() if line and not line.startswith("#"))
    guids = {f"H-{ca.guid}" for ca in x5.cas}
    assert len(names) == 86 and set(names) <= guids


# --- infiniband_exporter's test3.out: `ibnetdiscover -p` printing a description unquoted ---------------


def test_ports_report_with_an_unquoted_description() -> None:
    fabric = parse_ibnetdiscover_ports(read_text(PORTS3), PORTS3.name)
    assert [(s.guid, s.name, s.lid) for s in fabric.switches] == [
        ("0002c9020040f161", "Infiniscale-IV Mellanox Technologies", 479)
    ]
    assert [(p.ref, p.width, p.speed) for p in fabric.down_ports] == [(PortRef("0002c9020040f161", 22), 4, "QDR")]
    assert fabric.links == []


# --- NVIDIA topograph's example.out: an NDR DGX H100 fabric of 40 Quantum-2 switches --------------------
# The fabric issue 13 describes (40 switches, 582 CAs, 69 firmware-default). Counted with grep/awk:
# 40 "Switch\t65" blocks, every description "MF0;<name>:MQM9701/U1": 31 named *-IBLEAF-*, 9 *-IBSPINE-*.
# 582 Ca blocks: 40 "Mellanox Technologies Aggregation Node" (each on port [65] of its own switch, the port
# past the 64 NDR ports), 542 host HCAs: 69 "MT4129 ConnectX7   Mellanox Technologies" (the firmware default)
# and 3 "localhost HCA-n" name no host; the other 470 name 121 hosts (109 with 4 HCAs, 10 with 3, 2 with 2).
# Each of the 72 unnamed has a sysimgguid line of its own, none shared with a named HCA: 72 unnamed systems.
# 2228 port lines, all "4xNDR", every cable printed from both ends: 1114 cables; no self-cable.
# Host ports per switch: the 9 spines carry none; the 31 leaves carry hosts.


@pytest.fixture(scope="module")
def ndr() -> ParsedFabric:
    return parse(NDR)


def test_ndr_dgx_counts(ndr: ParsedFabric) -> None:
    assert (len(ndr.switches), len(ndr.cas), len(ndr.links)) == (40, 582, 1114)


def test_ndr_dgx_switches_are_65_port_mqm9701(ndr: ParsedFabric) -> None:
    assert {(s.port_count, s.model) for s in ndr.switches} == {(65, "MQM9701")}
    assert sum("IBLEAF" in s.name for s in ndr.switches) == 31
    assert sum("IBSPINE" in s.name for s in ndr.switches) == 9


def test_ndr_dgx_aggregation_nodes_hang_off_port_65_one_per_switch(ndr: ParsedFabric) -> None:
    aggregation = {ca.guid for ca in ndr.cas if ca.kind == "aggregation"}
    assert len(aggregation) == 40
    switch_ends = {}
    for link in ndr.links:
        for own, other in ((link.a, link.b), (link.b, link.a)):
            if own.node_guid in aggregation:
                switch_ends[own.node_guid] = other
    assert {end.port for end in switch_ends.values()} == {65}
    assert len({end.node_guid for end in switch_ends.values()}) == 40


def test_ndr_dgx_hosts_named_and_unnamed(ndr: ParsedFabric) -> None:
    assert len(ndr.hosts()) == 121
    unnamed = [ca for ca in ndr.cas if ca.unnamed]
    assert Counter(ca.description.split()[0] for ca in unnamed) == Counter({"MT4129": 69, "localhost": 3})
    assert len(ndr.unnamed_hosts()) == 72
    assert ndr.host_count() == 121 + 72


def test_ndr_dgx_hcas_per_named_host(ndr: ParsedFabric) -> None:
    per_host = Counter(ca.hostname for ca in ndr.cas if ca.hostname)
    assert Counter(per_host.values()) == Counter({4: 109, 3: 10, 2: 2})


def test_ndr_dgx_every_cable_is_4x_ndr_and_none_degraded_or_looped(ndr: ParsedFabric) -> None:
    assert rates(ndr) == Counter({"4xNDR": 1114})
    assert not any(link.degraded or link.loopback for link in ndr.links)


def test_ndr_dgx_tiers_are_the_31_leaves_and_9_spines(ndr: ParsedFabric) -> None:
    graph = FabricGraph.build(fabric_from_parsed(ndr))
    tiers = detect_tiers(graph)
    leaves = {graph.switch_keys[i] for i in range(graph.n_switches) if tiers.role[i] == LEAF}
    assert leaves == {s.guid for s in ndr.switches if "IBLEAF" in s.name}


def test_ndr_dgx_warns_once_for_its_72_unnamed_hcas(ndr: ParsedFabric) -> None:
    (warning,) = ndr.warnings
    assert "72 channel adapter(s) have no host name" in warning


# --- NVIDIA topograph's example-bad.out: one GB200 HCA on no switch ------------------------------------------
# 10 lines: the header comments, then a lone Ca block ("dgx-gb200-n01-c1 HCA-1") with no port line.


def test_gb200_lone_ca_is_one_host_with_no_cable() -> None:
    fabric = parse(GB200)
    assert (len(fabric.switches), len(fabric.links), fabric.hosts()) == (0, 0, {"dgx-gb200-n01-c1"})
    assert [(ca.guid, ca.device, ca.system_guid) for ca in fabric.cas] == [
        ("b8e92403009ca838", "HCA-1", "b8e92403009ca838")
    ]


# --- NCAR's ops_tracking_toolkit: three `ibnetdiscover -p` lines from two of its fabrics -------------------
# Line 1: CA lid 44 port 1 (0x0002c9030045f121, 'localhost HCA-1') 4x FDR to switch lid 2 port 17
# ('MF0;js01ib2:SX60XX/U1'); line 2: that switch's port 19, 4x SDR, no peer; line 3: another switch
# (lid 82, 'r1i0s0 SW1', an SGI ICE blade switch) port 19, "4x ???", no peer.


def test_ncar_ports_excerpt_counts() -> None:
    fabric = parse_ibnetdiscover_ports(read_text(NCAR), NCAR.name)
    assert [(s.guid, s.lid) for s in fabric.switches] == [("0002c903006e1430", 2), ("7cfe900300bdf4f0", 82)]
    assert [(link.a, link.b, link.width, link.speed) for link in fabric.links] == [
        (PortRef("0002c9030045f121", 1), PortRef("0002c903006e1430", 17), 4, "FDR")
    ]
    assert [(p.ref, p.width, p.speed) for p in fabric.down_ports] == [
        (PortRef("0002c903006e1430", 19), 4, "SDR"),
        (PortRef("7cfe900300bdf4f0", 19), 4, ""),
    ]


def test_ncar_ports_excerpt_localhost_hca_is_unnamed() -> None:
    fabric = parse_ibnetdiscover_ports(read_text(NCAR), NCAR.name)
    assert fabric.hosts() == set() and list(fabric.unnamed_hosts()) == ["0002c9030045f121"]


def test_ncar_ports_excerpt_names_the_managed_switch_as_the_default_format_does() -> None:
    fabric = parse_ibnetdiscover_ports(read_text(NCAR), NCAR.name)
    assert [(s.name, s.model) for s in fabric.switches] == [("js01ib2", "SX60XX"), ("r1i0s0 SW1", "")]


# --- quoted excerpts of captures that cannot be imported as published ----------------------------------
# charlie0129/blog, content/post/ib-perf-test/index.md (no licence: quoted, not copied): a Quantum-2
# MQM9700 in split mode (129 ports, 2xNDR host ports) whose GUIDs the author replaced with "<redacted>".
REDACTED_NDR = (
    "vendid=0x2c9\n"
    "devid=0xd2f2\n"
    "sysimgguid=0x9c05<redacted>\n"
    "switchguid=0x9c05<redacted>(9c05<redacted>)\n"
    'Switch\t129 "S-9c05<redacted>"\t\t# "MF0;CNTSN-POD229-QM97-IB-02:MQM9700/U1" enhanced port 0 lid 1 lmc 0\n'
    '[1]\t"H-b83f<redacted>"[1](b83f<redacted>) \t\t# "tj01-4090-node005 mlx5_2" lid 22 2xNDR\n'
    "...omitted\n"
)


def test_redacted_capture_is_refused_at_the_first_redacted_guid() -> None:
    with pytest.raises(ParseError) as info:
        parse_ibnetdiscover(REDACTED_NDR, "blog.topo")
    assert info.value.line == 5
    assert info.value.message == "bad GUID '9c05<redacted>': expected up to 16 hex digits"


# gary-minghuili/infiniband-exporter, data/ibdiagnet2/ibdiagnet2.ibnetdiscover @ 7fc101b (no licence: quoted, not
# copied): ibdiagnet 2.10's copy of a real Quantum-2 NDR fabric, which labels every port after its number
# ("ASIC/Cage/Port" on the switches, "[65](65)" for the aggregation node, "(1)" or the PCI function
# "(B193D0F0/0/0/1)" on the CAs). Lines 19, 23, 74, 75, 107, 108, 377, 378, 441 and 442, unchanged. The whole file
# (not stored here) reads, by grep: 9 switches, 263 CAs of which 7 aggregation nodes, 256 HCAs on 32 hosts (8 each),
# 542 port lines = 271 cables, all 4xNDR; the importer gives the same.
IBDIAGNET_NDR = "\n".join(
    [
        'Switch  65 "S-b0cf0e0300d33fc0"      # "MF0;ib-switch-sequoia:MQM9700/U1" enhanced port 0 lid 180 lmc 0',
        '[4](1/2/2) "S-fc6a1c03008a5c00"[63]      # "Quantum-2 Mellanox Technologies" lid 10 4xNDR',
        "",
        'Switch  65 "S-fc6a1c03008a5c00"      # "Quantum-2 Mellanox Technologies" base port 0 lid 10 lmc 0',
        '[1](1/1/1) "H-5c25730300e68e86"[1](5c25730300e68e86)      # "is-north-7-compute-1 mlx5_11" lid 171 4xNDR',
        '[63](1/32/1) "S-b0cf0e0300d33fc0"[4]      # "MF0;ib-switch-sequoia:MQM9700/U1" lid 180 4xNDR',
        '[65](65) "H-fc6a1c03008a5c08"[1](fc6a1c03008a5c08)      # "Mellanox Technologies Aggregation Node" '
        "lid 26 4xNDR",
        "",
        'Ca  1 "H-fc6a1c03008a5c08"      # "Mellanox Technologies Aggregation Node"',
        '[1](1)(fc6a1c03008a5c08) "S-fc6a1c03008a5c00"[65] # lid 26 lmc 0 "Quantum-2 Mellanox Technologies" '
        "lid 10 4xNDR",
        'Ca  1 "H-5c25730300e68e86"      # "is-north-7-compute-1 mlx5_11"',
        '[1](B193D0F0/0/0/1)(5c25730300e68e86) "S-fc6a1c03008a5c00"[1] # lid 171 lmc 0 "Quantum-2 Mellanox '
        'Technologies" lid 10 4xNDR',
    ]
)


def test_ibdiagnet_port_labels_are_read_past() -> None:
    fabric = parse_ibnetdiscover(IBDIAGNET_NDR, "ibdiagnet2.ibnetdiscover")
    spine, leaf, agg, host = "b0cf0e0300d33fc0", "fc6a1c03008a5c00", "fc6a1c03008a5c08", "5c25730300e68e86"
    assert {frozenset([(link.a.node_guid, link.a.port), (link.b.node_guid, link.b.port)]) for link in fabric.links} == {
        frozenset([(spine, 4), (leaf, 63)]),
        frozenset([(leaf, 1), (host, 1)]),
        frozenset([(leaf, 65), (agg, 1)]),
    }
    assert rates(fabric) == Counter({"4xNDR": 3}) and fabric.warnings == []


def test_ibdiagnet_labelled_ca_lines_keep_their_port_guid_and_host() -> None:
    fabric = parse_ibnetdiscover(IBDIAGNET_NDR, "ibdiagnet2.ibnetdiscover")
    cas = {ca.guid: ca for ca in fabric.cas}
    assert (cas["5c25730300e68e86"].hostname, cas["5c25730300e68e86"].device) == ("is-north-7-compute-1", "mlx5_11")
    assert cas["5c25730300e68e86"].port_guids == {1: "5c25730300e68e86"}
    assert cas["fc6a1c03008a5c08"].kind == "aggregation"
