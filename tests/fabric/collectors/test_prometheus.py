"""Prometheus scrape mapping, on real dcgm-exporter and node_exporter pages."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fabric.collectors.prometheus import (
    DCGM_FP64_BLANK,
    DCGM_INT32_BLANK,
    DCGM_INT64_BLANK,
    PrometheusCollector,
    dcgm_blank,
    parse_metrics,
)
from fabric.collectors.samples import MigInstance

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data"
L4 = FIXTURES / "dcgm_exporter_metrics_L4_kops.prom"


def _node_exporter_path() -> Path:
    name = "node_exporter_e2e_infiniband_metrics.prom"
    local = FIXTURES / name
    if local.exists():
        return local
    shared = SHARED / name
    if not shared.exists():
        pytest.skip(f"{name} neither in tests/fixtures nor in the shared data folder")
    return shared


def test_real_l4_dcgm_exporter_page():
    sample = parse_metrics(L4.read_text(), "i-030791dc5a37cd257", 1700000000.0)
    assert sample.collector == "prometheus" and sample.collected_at == 1700000000.0 and sample.errors == []
    assert sample.ports == []
    (gpu,) = sample.gpus
    assert gpu.index == 0
    assert gpu.uuid == "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
    assert gpu.name == "NVIDIA L4"
    assert gpu.sm_clock_mhz == 210
    assert gpu.temperature_c == 31
    assert gpu.power_w == pytest.approx(16.365)
    assert gpu.utilisation_gpu_pct == 0 and gpu.utilisation_memory_pct == 0
    assert gpu.memory_used_mib == 0 and gpu.memory_free_mib == 22563
    assert gpu.memory_total_mib == 0 + 22563 + 470  # used + free + reserved: no FB_TOTAL on this page
    assert gpu.remapped_rows_failure is False
    # not on this page: unknown, never 0
    assert gpu.ecc_uncorrected is None and gpu.ecc_corrected is None and gpu.power_limit_w is None
    assert gpu.remapped_rows_pending is None and gpu.temperature_limit_c is None
    assert gpu.xid_events == [] and gpu.mig_instances == [] and gpu.mig_enabled is None
    assert gpu.errors == {}


def _line(metric: str, gpu: int, value: object, mig: tuple[str, int] | None = None) -> str:
    labels = f'gpu="{gpu}",UUID="GPU-aaaa-{gpu}",device="nvidia{gpu}",modelName="NVIDIA A100-SXM4-80GB",Hostname="n1"'
    if mig:
        labels += f',GPU_I_PROFILE="{mig[0]}",GPU_I_ID="{mig[1]}"'
    return f"{metric}{{{labels}}} {value}"


MIG_PAGE = "\n".join(
    [
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge",
        _line("DCGM_FI_DEV_GPU_TEMP", 0, 41),
        _line("DCGM_FI_DEV_GPU_TEMP", 1, 43),
        "# TYPE DCGM_FI_DEV_FB_USED gauge",
        _line("DCGM_FI_DEV_FB_USED", 0, 10000, ("3g.40gb", 1)),
        _line("DCGM_FI_DEV_FB_USED", 0, 512, ("1g.10gb", 9)),
        _line("DCGM_FI_DEV_FB_USED", 1, 100),
        "# TYPE DCGM_FI_DEV_FB_FREE gauge",
        _line("DCGM_FI_DEV_FB_FREE", 0, 30192, ("3g.40gb", 1)),
        _line("DCGM_FI_DEV_FB_FREE", 0, 9216, ("1g.10gb", 9)),
        _line("DCGM_FI_DEV_FB_FREE", 1, 81820),
        "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge",
        _line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, 0.5, ("1g.10gb", 9)),
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        _line("DCGM_FI_DEV_GPU_UTIL", 1, DCGM_INT32_BLANK),
        "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter",
        _line("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1, "9.223372036854776e+18"),
        _line("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0, 2),
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
        _line("DCGM_FI_DEV_POWER_USAGE", 1, "140737488355328.000000"),
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
        _line("DCGM_FI_DEV_XID_ERRORS", 0, 79),
        _line("DCGM_FI_DEV_XID_ERRORS", 1, 0),
        "",
    ]
)


def test_mig_series_become_instances_of_their_parent_gpu():
    sample = parse_metrics(MIG_PAGE, "n1", 1.0)
    assert [g.index for g in sample.gpus] == [0, 1]  # MIG instances are not GPUs
    gpu0, gpu1 = sample.gpus
    assert gpu0.mig_enabled is True
    assert gpu0.mig_instances == [
        MigInstance(gpu_instance_id=1, profile="3g.40gb", memory_used_mib=10000.0, memory_total_mib=40192.0),
        MigInstance(gpu_instance_id=9, profile="1g.10gb", memory_used_mib=512.0, memory_total_mib=9728.0),
    ]
    # instance memory is not the GPU's memory
    assert gpu0.memory_used_mib is None and gpu0.temperature_c == 41
    assert gpu0.ecc_uncorrected == 2  # a counter: the parser's "_total" suffix does not hide it
    assert gpu1.mig_instances == [] and gpu1.memory_used_mib == 100 and gpu1.memory_total_mib == 81920


def test_dcgm_blank_sentinels_are_none_with_the_reason():
    gpu1 = parse_metrics(MIG_PAGE, "n1", 1.0).gpus[1]
    assert gpu1.utilisation_gpu_pct is None and gpu1.ecc_uncorrected is None and gpu1.power_w is None
    assert gpu1.errors == {
        "utilisation_gpu_pct": "DCGM blank",
        "ecc_uncorrected": "DCGM blank",
        "power_w": "DCGM blank",
    }
    assert gpu1.temperature_c == 43


@pytest.mark.parametrize(
    ("value", "blank"),
    [
        (DCGM_INT32_BLANK, True),
        (DCGM_INT32_BLANK + 2, True),  # NOT_SUPPORTED
        (float(DCGM_INT64_BLANK), True),
        (9.223372036854776e18, True),
        (DCGM_FP64_BLANK, True),
        (DCGM_FP64_BLANK + 3, True),  # NOT_PERMISSIONED
        (float("nan"), True),
        (0.0, False),
        (2147483647.0 - 100, False),
        (4742776.0, False),
        (1e15, False),
    ],
)
def test_blank_detection(value, blank):
    assert dcgm_blank(value) is blank


def test_xid_last_value_reported_once_by_the_collector(tmp_path):
    page = tmp_path / "metrics.prom"
    page.write_text(MIG_PAGE)
    assert parse_metrics(MIG_PAGE, "n1", 1.0).gpus[0].xid_events == [79]
    collector = PrometheusCollector(file=str(page))
    first, second = collector.collect("n1"), collector.collect("n1")
    assert [g.xid_events for g in first.gpus] == [[79], []]
    assert [g.xid_events for g in second.gpus] == [[], []]  # the same last XID again: not new
    page.write_text(MIG_PAGE.replace("} 79", "} 48"))
    assert collector.collect("n1").gpus[0].xid_events == [48]


def test_node_exporter_ports_in_sysfs_names_and_4_octet_units():
    sample = parse_metrics(_node_exporter_path().read_text(), "n1", 1.0)
    assert sample.gpus == [] and sample.errors == []
    ports = {(p.device, p.port): p for p in sample.ports}
    assert set(ports) == {("i40iw0", 1), ("mlx4_0", 1), ("mlx4_0", 2)}
    p1 = ports[("mlx4_0", 1)]
    assert p1.state == "ACTIVE" and p1.phys_state == "LinkUp" and p1.rate_gbps == 40.0
    # golden pair with the sysfs fixture: 3733440 units = 14933760 bytes
    assert p1.counters["port_xmit_data"] == 3733440 and p1.xmit_bytes == 14933760
    assert p1.counters["port_rcv_data"] == 4631917 and p1.rcv_bytes == 18527668
    assert p1.counters["port_xmit_data_64"] == 3733440
    assert p1.counters["port_xmit_discards"] == 5
    assert p1.counters["port_xmit_wait"] == 4294967295
    assert p1.counters["port_rcv_packets"] == 6825908347
    assert p1.counters["unicast_xmit_packets"] == 61239
    assert p1.counters["link_downed"] == 0
    p2 = ports[("mlx4_0", 2)]
    assert p2.counters["port_xmit_data"] == 0 and p2.counters["port_rcv_data_64"] == 4631917
    i40 = ports[("i40iw0", 1)]
    assert i40.counters == {} and i40.rate_gbps == 10.0 and i40.state == "ACTIVE"


def test_malformed_page_keeps_what_was_read():
    text = L4.read_text().split("# HELP DCGM_FI_DEV_GPU_UTIL")[0] + "DCGM_FI_DEV_GPU_UTIL{gpu=0 oops\n"
    sample = parse_metrics(text, "n1", 1.0)
    assert sample.gpus[0].sm_clock_mhz == 210 and sample.gpus[0].temperature_c == 31
    assert len(sample.errors) == 1 and sample.errors[0].startswith("metrics parse error")


class _Handler(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def metrics_server():
    _Handler.body = L4.read_bytes()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.timeout = 1
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_url_fetch(metrics_server):
    sample = PrometheusCollector(url=f"{metrics_server}/metrics", timeout=5).collect("i-030791dc5a37cd257")
    assert sample.errors == [] and sample.collector == "prometheus" and sample.node == "i-030791dc5a37cd257"
    assert sample.gpus[0].name == "NVIDIA L4" and sample.gpus[0].memory_free_mib == 22563
    missing = PrometheusCollector(url=f"{metrics_server}/nope", timeout=5).collect("n1")
    assert missing.gpus == [] and "404" in missing.errors[0]


def test_unreachable_url_is_an_error_in_the_sample():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sample = PrometheusCollector(url=f"http://127.0.0.1:{port}/metrics", timeout=2).collect("n1")
    assert sample.gpus == [] and sample.ports == []
    assert len(sample.errors) == 1 and sample.errors[0].startswith(f"scrape http://127.0.0.1:{port}/metrics")


def test_missing_file_and_no_source_are_errors():
    assert PrometheusCollector(file="/nonexistent/metrics.prom").collect("n1").errors
    assert PrometheusCollector().collect("n1").errors == ["scrape None: no url or file given"]
