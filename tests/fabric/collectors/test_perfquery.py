"""perfquery parser and collector against real perfquery output (treydock/infiniband_exporter fixtures)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fabric.collectors.perfquery import PERFQUERY_TO_SYSFS, PerfqueryCollector, counter_name, parse_perfquery

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SWITCH_LX = FIXTURES / "perfquery_lx_switch_0x7cfe9003009ce5b0.out"
HCA_LX = FIXTURES / "perfquery_lx_hca_0x7cfe9003003b4bde.out"
SWITCH_E = FIXTURES / "perfquery_E_switch_0x7cfe9003009ce5b0-1.out"

ERRORS_ZERO = [
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
    "qp1_dropped",
]


def test_switch_lx_two_ports_exact():
    ports = parse_perfquery(SWITCH_LX.read_text(), source="0x7cfe9003009ce5b0")
    assert [(p.device, p.guid, p.lid, p.port) for p in ports] == [
        ("0x7cfe9003009ce5b0", "0x7cfe9003009ce5b0", 1719, 1),
        ("0x7cfe9003009ce5b0", "0x7cfe9003009ce5b0", 1719, 2),
    ]
    p1, p2 = ports
    assert p1.counters["port_xmit_data"] == 36298026860928
    assert p1.counters["port_rcv_data"] == 12279028775751
    assert p1.counters["port_xmit_packets"] == 101733204203
    assert p1.counters["port_rcv_packets"] == 32262508468
    assert p1.counters["unicast_xmit_packets"] == 101708165289
    assert p1.counters["unicast_rcv_packets"] == 26677661727
    assert p1.counters["multicast_xmit_packets"] == 25038914
    assert p1.counters["multicast_rcv_packets"] == 5584846741
    assert p1.counters["port_xmit_wait"] == 22730501
    assert p1.xmit_bytes == 36298026860928 * 4 and p1.rcv_bytes == 12279028775751 * 4
    assert p2.counters["port_xmit_data"] == 26006570014026
    assert p2.counters["port_rcv_data"] == 39078804993378
    assert p2.counters["port_xmit_packets"] == 122978948297
    assert p2.counters["port_rcv_packets"] == 93660802641
    assert p2.counters["multicast_xmit_packets"] == 0
    assert p2.counters["port_xmit_wait"] == 36510964
    for p in ports:
        assert len(p.counters) == 8 + 13 + 1  # data/packets, error counters + QP1Dropped, PortXmitWait
        assert all(p.counters[name] == 0 for name in ERRORS_ZERO)
        assert not {"port_select", "counter_select", "counter_select2"} & set(p.counters)
        assert p.counter_bits == {"port_xmit_wait": 32}
        assert p.state is None and p.rate_gbps is None  # perfquery does not say


def test_hca_lx_exact():
    (p,) = parse_perfquery(HCA_LX.read_text(), source="0x7cfe9003003b4bde")
    assert (p.lid, p.port, p.guid) == (134, 1, "0x7cfe9003003b4bde")
    assert p.counters["port_xmit_data"] == 9049592493976
    assert p.counters["port_rcv_data"] == 9752484588300
    assert p.counters["port_xmit_packets"] == 28825338611
    assert p.counters["port_rcv_packets"] == 33038722564
    assert p.counters["unicast_xmit_packets"] == 28824617123
    assert p.counters["unicast_rcv_packets"] == 29306563974
    assert p.counters["multicast_xmit_packets"] == 721488
    assert p.counters["multicast_rcv_packets"] == 3732158589
    assert p.counters["port_xmit_wait"] == 0
    assert all(p.counters[name] == 0 for name in ERRORS_ZERO)


def test_rcv_error_details_exact():
    (p,) = parse_perfquery(SWITCH_E.read_text(), source="0x7cfe9003009ce5b0")
    assert (p.lid, p.port) == (1719, 1)
    assert p.counters == {
        "port_local_physical_errors": 0,
        "port_malformed_pkt_errors": 0,
        "port_buffer_overrun_errors": 0,
        "port_dlid_mapping_errors": 0,
        "port_vl_mapping_errors": 0,
        "port_looping_errors": 0,
    }
    assert p.counter_bits == {}


def test_lx_and_E_blocks_of_the_same_port_merge():
    ports = parse_perfquery(SWITCH_LX.read_text() + SWITCH_E.read_text(), source="0x7cfe9003009ce5b0")
    assert [p.port for p in ports] == [1, 2]
    assert ports[0].counters["port_xmit_data"] == 36298026860928
    assert ports[0].counters["port_looping_errors"] == 0
    assert "port_looping_errors" not in ports[1].counters


def test_without_source_device_is_the_lid():
    (p,) = parse_perfquery(HCA_LX.read_text())
    assert (p.device, p.guid) == ("lid:134", "")
    (p,) = parse_perfquery(HCA_LX.read_text(), source="gpu-node-07")
    assert (p.device, p.guid) == ("gpu-node-07", "")


def test_name_mapping():
    assert counter_name("PortXmitData") == "port_xmit_data"
    assert counter_name("PortRcvData") == "port_rcv_data"
    assert counter_name("PortXmitPkts") == "port_xmit_packets"
    assert counter_name("PortRcvPkts") == "port_rcv_packets"
    assert counter_name("SymbolErrorCounter") == "symbol_error"
    assert counter_name("LinkDownedCounter") == "link_downed"
    assert counter_name("PortRcvErrors") == "port_rcv_errors"
    assert counter_name("PortXmitWait") == "port_xmit_wait"
    assert counter_name("VL15Dropped") == "VL15_dropped"
    assert counter_name("XmtData") == "port_xmit_data"  # older perfquery spelling
    # unknown ones: their own snake_case name
    assert counter_name("QP1Dropped") == "qp1_dropped"
    assert counter_name("PortDLIDMappingErrors") == "port_dlid_mapping_errors"
    assert counter_name("PortVLMappingErrors") == "port_vl_mapping_errors"
    # every mapped name is a real sysfs counters/ file name
    sysfs = FIXTURES / "sysfs_infiniband_node_exporter" / "class" / "infiniband"
    sysfs_names = {f.name for f in sysfs.glob("*/ports/*/counters/*")}
    assert set(PERFQUERY_TO_SYSFS.values()) <= sysfs_names


def test_legacy_port_counters_block_is_32bit():
    text = "# Port counters: Lid 5 port 3\nPortSelect:......3\nPortXmitData:....4294967295\nPortXmitWait:....12\n"
    (p,) = parse_perfquery(text)
    assert p.counters == {"port_xmit_data": 4294967295, "port_xmit_wait": 12}
    assert p.counter_bits == {"port_xmit_data": 32, "port_xmit_wait": 32}


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("PortXmitData:....1\n", 1, "before any"),
        ("# Port extended counters: Lid 1 port 1\nPortXmitData:....lots\n", 2, "PortXmitData is not an integer"),
        ("# Port extended counters: Lid 1 port 1\nPortXmitData:....1\nmad timeout\n", 3, "expected"),
        ("\n# Port extended counters: Lid x port 1\n", 2, "unrecognised header"),
        ("# Port extended counters: Lid 1 port 2\nPortSelect:......1\n", 2, "PortSelect 1"),
    ],
)
def test_malformed_input_names_the_line(text, line, what):
    with pytest.raises(ValueError, match=rf"^sw1: line {line}: .*") as exc:
        parse_perfquery(text, source="sw1")
    assert what in str(exc.value)


def test_empty_text_is_no_ports():
    assert parse_perfquery("") == []


def test_collector_reads_a_file():
    s = PerfqueryCollector(file=str(SWITCH_LX)).collect("0x7cfe9003009ce5b0")
    assert s.collector == "perfquery" and s.node == "0x7cfe9003009ce5b0" and s.errors == []
    assert [(p.device, p.port) for p in s.ports] == [("0x7cfe9003009ce5b0", 1), ("0x7cfe9003009ce5b0", 2)]
    assert s.ports[0].counters["port_xmit_data"] == 36298026860928


def test_collector_missing_file_and_bad_file(tmp_path):
    s = PerfqueryCollector(file=str(tmp_path / "absent.out")).collect("sw1")
    assert s.ports == [] and len(s.errors) == 1 and "absent.out" in s.errors[0]
    bad = tmp_path / "bad.out"
    bad.write_text("# Port extended counters: Lid 1 port 1\nPortXmitData:....?\n")
    s = PerfqueryCollector(file=str(bad)).collect("sw1")
    assert s.ports == [] and s.errors == ["bad.out: sw1: line 2: PortXmitData is not an integer: '?'"]


def test_collector_missing_command():
    s = PerfqueryCollector(command=["/nonexistent/perfquery", "-l", "-x"]).collect("sw1")
    assert s.ports == [] and s.errors == ["/nonexistent/perfquery: command not found"]


def test_collector_runs_a_command():
    cmd = [sys.executable, "-c", f"print(open({str(HCA_LX)!r}).read())"]
    s = PerfqueryCollector(command=cmd).collect("0x7cfe9003003b4bde")
    assert s.errors == [] and s.ports[0].counters["port_rcv_data"] == 9752484588300


def test_collector_command_failure_and_timeout():
    cmd = [sys.executable, "-c", "import sys; sys.stderr.write('ibwarn: port not found\\n'); sys.exit(2)"]
    s = PerfqueryCollector(command=cmd).collect("sw1")
    assert s.ports == [] and len(s.errors) == 1 and "exit status 2: ibwarn: port not found" in s.errors[0]
    s = PerfqueryCollector(command=[sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.2).collect("sw1")
    assert s.ports == [] and len(s.errors) == 1 and "timed out after 0.2 s" in s.errors[0]


def test_collector_options():
    assert PerfqueryCollector().command == ["perfquery", "-l", "-x"]
    with pytest.raises(ValueError):
        PerfqueryCollector(file="a", command=["perfquery"])
