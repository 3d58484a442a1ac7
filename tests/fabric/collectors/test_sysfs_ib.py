"""sysfs-ib collector against node_exporter's own fixture tree and its e2e output (a golden pair)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from fabric.collectors import sysfs_ib
from fabric.collectors.sysfs_ib import SysfsIbCollector, parse_lid, parse_rate, parse_state

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SYSFS_ROOT = FIXTURES / "sysfs_infiniband_node_exporter" / "class" / "infiniband"
PROM = FIXTURES / "node_exporter_e2e_infiniband_metrics.prom"

_LINE_RE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$")
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prom(text: str) -> dict[str, dict[tuple[str, int], float]]:
    """metric name -> {(device, port): value} for the per-port node_infiniband_* series."""
    out: dict[str, dict[tuple[str, int], float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE_RE.match(line)
        assert m, line
        labels = dict(_LABEL_RE.findall(m.group("labels")))
        if "port" not in labels:
            continue
        out.setdefault(m.group("name"), {})[(labels["device"], int(labels["port"]))] = float(m.group("value"))
    return out


# node_exporter metric -> how to get it from a PortSample
BYTES = {
    "node_infiniband_port_data_transmitted_bytes_total": lambda p: p.xmit_bytes,
    "node_infiniband_port_data_received_bytes_total": lambda p: p.rcv_bytes,
    # node_exporter calls the counters_ext/ values "legacy"; they are 4-octet units too
    "node_infiniband_legacy_data_transmitted_bytes_total": lambda p: _times4(p.counters.get("port_xmit_data_64")),
    "node_infiniband_legacy_data_received_bytes_total": lambda p: _times4(p.counters.get("port_rcv_data_64")),
}
COUNTERS = {
    "node_infiniband_link_downed_total": "link_downed",
    "node_infiniband_link_error_recovery_total": "link_error_recovery",
    "node_infiniband_port_constraint_errors_received_total": "port_rcv_constraint_errors",
    "node_infiniband_port_constraint_errors_transmitted_total": "port_xmit_constraint_errors",
    "node_infiniband_port_discards_received_total": "port_rcv_discards",
    "node_infiniband_port_discards_transmitted_total": "port_xmit_discards",
    "node_infiniband_port_errors_received_total": "port_rcv_errors",
    "node_infiniband_port_packets_received_total": "port_rcv_packets",
    "node_infiniband_port_packets_transmitted_total": "port_xmit_packets",
    "node_infiniband_port_transmit_wait_total": "port_xmit_wait",
    "node_infiniband_unicast_packets_received_total": "unicast_rcv_packets",
    "node_infiniband_unicast_packets_transmitted_total": "unicast_xmit_packets",
    "node_infiniband_multicast_packets_received_total": "multicast_rcv_packets",
    "node_infiniband_multicast_packets_transmitted_total": "multicast_xmit_packets",
    "node_infiniband_legacy_packets_received_total": "port_rcv_packets_64",
    "node_infiniband_legacy_packets_transmitted_total": "port_xmit_packets_64",
    "node_infiniband_legacy_unicast_packets_received_total": "port_unicast_rcv_packets",
    "node_infiniband_legacy_unicast_packets_transmitted_total": "port_unicast_xmit_packets",
    "node_infiniband_legacy_multicast_packets_received_total": "port_multicast_rcv_packets",
    "node_infiniband_legacy_multicast_packets_transmitted_total": "port_multicast_xmit_packets",
}
STATE_IDS = {"ACTIVE": 4, "DOWN": 1, "INIT": 2, "ARMED": 3}
PHYS_STATE_IDS = {"LinkUp": 5, "Polling": 2, "Disabled": 3, "Sleep": 1}


def _times4(v: int | None) -> int | None:
    return None if v is None else v * 4


@pytest.fixture(scope="module")
def golden():
    sample = SysfsIbCollector(str(SYSFS_ROOT)).collect("node1")
    ports = {(p.device, p.port): p for p in sample.ports}
    return sample, ports, parse_prom(PROM.read_text())


def test_golden_every_port_and_no_errors(golden):
    sample, ports, prom = golden
    assert sample.errors == []
    assert sample.collector == "sysfs-ib"
    assert set(ports) == {("i40iw0", 1), ("mlx4_0", 1), ("mlx4_0", 2)}
    # node_exporter reports state for exactly these ports
    assert set(prom["node_infiniband_state_id"]) == set(ports)


def test_golden_bytes(golden):
    _, ports, prom = golden
    checked = 0
    for metric, get in BYTES.items():
        expected = prom[metric]
        for key, port in ports.items():
            ours = get(port)
            if key in expected:
                assert ours == expected[key], (metric, key)
                checked += 1
            else:  # node_exporter has no series where we have no counter (i40iw0: "N/A (no PMA)")
                assert ours is None, (metric, key)
    assert checked == 8  # 2 mlx4_0 ports x (port tx, port rx, legacy tx, legacy rx)
    assert ports[("mlx4_0", 1)].xmit_bytes == 14933760  # 3733440 words x 4
    assert ports[("mlx4_0", 1)].rcv_bytes == 18527668


def test_golden_counters_and_errors(golden):
    _, ports, prom = golden
    checked = 0
    for metric, name in COUNTERS.items():
        expected = prom[metric]
        for key, port in ports.items():
            if key in expected:
                assert port.counters.get(name) == expected[key], (metric, key)
                checked += 1
            else:
                assert name not in port.counters, (metric, key)
    assert checked == 32  # 20 counter metrics; mlx4_0 port 2 lacks 8 of the counters/ files
    # every per-port counter series in the file is covered by the mapping above (or by state/rate)
    covered = (
        set(BYTES)
        | set(COUNTERS)
        | {
            "node_infiniband_state_id",
            "node_infiniband_physical_state_id",
            "node_infiniband_rate_bytes_per_second",
        }
    )
    assert set(prom) == covered


def test_golden_state_phys_state_rate(golden):
    _, ports, prom = golden
    for key, port in ports.items():
        assert STATE_IDS[port.state] == prom["node_infiniband_state_id"][key]
        assert PHYS_STATE_IDS[port.phys_state] == prom["node_infiniband_physical_state_id"][key]
        assert port.rate_gbps * 1e9 / 8 == prom["node_infiniband_rate_bytes_per_second"][key]


def test_fixture_attributes(golden):
    _, ports, _ = golden
    p = ports[("mlx4_0", 1)]
    assert (p.state, p.phys_state, p.rate_gbps, p.rate_text) == ("ACTIVE", "LinkUp", 40.0, "40 Gb/sec (4X QDR)")
    assert p.lid is None  # the fixture has no lid file
    assert p.counters["port_xmit_wait"] == 4294967295  # saturated 32-bit counter
    assert p.counter_bits == {"port_xmit_wait": 32}  # counters_ext present: data counters not marked
    iw = ports[("i40iw0", 1)]
    assert (iw.rate_gbps, iw.rate_text) == (10.0, "10 Gb/sec (4X)")
    assert iw.counters == {}  # every counter "N/A (no PMA)": not reported, never 0
    assert iw.xmit_bytes is None


def test_parsers():
    assert parse_state("4: ACTIVE") == "ACTIVE"
    assert parse_state("5: LinkUp") == "LinkUp"
    assert parse_state("1: DOWN\n") == "DOWN"
    assert parse_rate("40 Gb/sec (4X QDR)") == 40.0
    assert parse_rate("2.5 Gb/sec (1X SDR)") == 2.5
    assert parse_rate("53.125 Gb/sec (1X HDR)") == 53.125
    assert parse_rate("400 Gb/sec (4X NDR)") == 400.0
    assert parse_lid("0x1a") == 26
    assert parse_lid("0x6b7") == 1719
    with pytest.raises(ValueError):
        parse_rate("fast")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _make_port(root: Path, device: str, port: int, counters: dict[str, str], ext: dict[str, str] | None = None):
    base = root / device / "ports" / str(port)
    _write(base / "state", "4: ACTIVE")
    _write(base / "phys_state", "5: LinkUp")
    _write(base / "rate", "100 Gb/sec (4X EDR)")
    _write(base / "lid", "0x6b7")
    for name, value in counters.items():
        _write(base / "counters" / name, value)
    for name, value in (ext or {}).items():
        _write(base / "counters_ext" / name, value)
    return base


def test_missing_root(tmp_path):
    before = time.time()
    s = SysfsIbCollector(str(tmp_path / "nope")).collect("n1")
    assert s.ports == [] and len(s.errors) == 1 and "nope" in s.errors[0]
    assert s.node == "n1" and s.collector == "sysfs-ib" and s.collected_at >= before


def test_lid_rate_hw_counters_and_mlx4_32bit(tmp_path):
    data = {"port_xmit_data": "10", "port_rcv_data": "20", "port_xmit_packets": "1", "port_rcv_packets": "2"}
    _make_port(tmp_path, "mlx4_0", 1, {**data, "port_xmit_wait": "7", "symbol_error": "3"})
    base = _make_port(tmp_path, "mlx5_0", 1, data)
    _write(base / "hw_counters" / "out_of_buffer", "9")
    _write(base / "hw_counters" / "port_xmit_data", "11")  # collides with counters/: kept under its dir
    s = SysfsIbCollector(str(tmp_path)).collect("n1")
    assert s.errors == []
    mlx4, mlx5 = s.ports
    assert (mlx4.device, mlx4.lid, mlx4.rate_gbps) == ("mlx4_0", 1719, 100.0)
    assert mlx4.counter_bits == {k: 32 for k in [*data, "port_xmit_wait"]}  # no counters_ext on mlx4
    assert mlx4.counters["symbol_error"] == 3 and mlx4.xmit_bytes == 40
    assert mlx5.counter_bits == {}
    assert mlx5.counters["out_of_buffer"] == 9
    assert mlx5.counters["port_xmit_data"] == 10 and mlx5.counters["hw_counters/port_xmit_data"] == 11


def test_unreadable_and_garbage_counters_are_skipped(tmp_path, monkeypatch):
    base = _make_port(tmp_path, "mlx5_0", 1, {"port_xmit_data": "10", "symbol_error": "garbage", "link_downed": "1"})
    unreadable = base / "counters" / "port_rcv_data"
    _write(unreadable, "5")
    _make_port(tmp_path, "mlx5_1", 1, {"port_xmit_data": "4"})
    real_read = sysfs_ib._read_text

    def read(path):  # chmod 0 does not stop root, so fail the read itself
        if path == str(unreadable):
            raise PermissionError(13, "Permission denied", path)
        return real_read(path)

    monkeypatch.setattr(sysfs_ib, "_read_text", read)
    s = SysfsIbCollector(str(tmp_path)).collect("n1")
    ports = {p.device: p for p in s.ports}
    assert set(ports) == {"mlx5_0", "mlx5_1"}  # the rest of the sample survives
    assert ports["mlx5_0"].counters == {"port_xmit_data": 10, "link_downed": 1}
    assert ports["mlx5_0"].state == "ACTIVE"
    assert ports["mlx5_1"].counters == {"port_xmit_data": 4}
    assert len(s.errors) == 2
    assert any(str(base / "counters" / "symbol_error") in e and "garbage" in e for e in s.errors)
    assert any(str(unreadable) in e and "Permission denied" in e for e in s.errors)


def test_unlistable_device_recorded(tmp_path, monkeypatch):
    _make_port(tmp_path, "mlx5_0", 1, {"port_xmit_data": "1"})
    _make_port(tmp_path, "mlx5_1", 1, {"port_xmit_data": "2"})
    real_listdir = os.listdir
    bad = str(tmp_path / "mlx5_0" / "ports")

    def listdir(path):
        if str(path) == bad:
            raise PermissionError(13, "Permission denied", path)
        return real_listdir(path)

    monkeypatch.setattr(sysfs_ib.os, "listdir", listdir)
    s = SysfsIbCollector(str(tmp_path)).collect("n1")
    assert [p.device for p in s.ports] == ["mlx5_1"]
    assert len(s.errors) == 1 and bad in s.errors[0]


def test_unparseable_state_recorded(tmp_path):
    base = _make_port(tmp_path, "mlx5_0", 1, {"port_xmit_data": "1"})
    _write(base / "rate", "unknown")
    _write(base / "lid", "zz")
    s = SysfsIbCollector(str(tmp_path)).collect("n1")
    (p,) = s.ports
    assert p.rate_gbps is None and p.rate_text == "unknown" and p.lid is None
    assert p.state == "ACTIVE" and p.counters == {"port_xmit_data": 1}
    assert len(s.errors) == 2 and all(str(base) in e for e in s.errors)


# --- the node's own HCAs: GUIDs (issue 13: the node agent's hostname attaches an unnamed HCA) ----------------------

X5_GLUSTER1 = FIXTURES / "sysfs_infiniband_x5_gluster1" / "class" / "infiniband"


def test_hca_guids_are_read_from_node_guid_and_sys_image_guid():
    s = SysfsIbCollector(str(X5_GLUSTER1)).collect("r510gluster1")
    # The fixture's files say 0002:c903:0008:0e84, 0002:c903:0008:0e87 and "1: CA".
    assert [(h.device, h.node_guid, h.system_guid, h.node_type) for h in s.hcas] == [
        ("mlx4_0", "0002c90300080e84", "0002c90300080e87", "CA")
    ]
    assert [(p.device, p.port, p.state) for p in s.ports] == [("mlx4_0", 1, "ACTIVE")] and s.errors == []


def test_a_tree_without_node_guid_files_reports_no_hcas_and_no_error(golden):
    sample = golden[0]  # node_exporter's fixture has no node_guid files
    assert sample.hcas == [] and sample.errors == []


def test_a_malformed_node_guid_is_an_error_naming_its_file_and_the_ports_are_kept(tmp_path):
    _make_port(tmp_path, "mlx5_0", 1, {"port_xmit_data": "1"})
    _write(tmp_path / "mlx5_0" / "node_guid", "0x0002c90300080e84\n")
    s = SysfsIbCollector(str(tmp_path)).collect("n1")
    assert s.hcas == [] and [p.device for p in s.ports] == ["mlx5_0"]
    assert s.errors == [f"{tmp_path}/mlx5_0/node_guid: not a sysfs GUID (four groups of four hex digits): "
                        "'0x0002c90300080e84'"]  # fmt: skip


def test_parse_guid():
    assert sysfs_ib.parse_guid("b8ce:f603:00a1:b2c4\n") == "b8cef60300a1b2c4"
    with pytest.raises(ValueError, match="not a sysfs GUID"):
        sysfs_ib.parse_guid("b8ce:f603:00a1")
    with pytest.raises(ValueError, match="not a 64-bit GUID"):
        sysfs_ib.parse_guid("b8ce:f603:00a1:zzzz")
