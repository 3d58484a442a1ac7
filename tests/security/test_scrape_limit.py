"""The Prometheus scrape (fabric/collectors/prometheus.py) reads at most its cap: a page over it, declared or streamed
without a length, is an error in the sample naming the URL, and nothing of it is parsed."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fabric.collectors.prometheus import PrometheusCollector

L4 = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm_exporter_metrics_L4_kops.prom"
LINE = b'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 1\n'  # 20 + 9 + 2 + 1 = 32 bytes


class _Handler(BaseHTTPRequestHandler):
    """/big: `lines` metric lines, with a Content-Length; /stream: the same chunked, no length; /l4: a real page."""

    lines = 0

    def do_GET(self):
        if self.path == "/l4":
            body = L4.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        chunked = self.path == "/stream"
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(LINE) * self.lines))
        self.end_headers()
        block = LINE * 1000
        try:
            for _ in range(self.lines // 1000):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the scraper stopped reading

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


@pytest.fixture
def exporter():
    _Handler.lines = 1_000_000  # 32 MB on offer
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_declared_length_over_the_cap_is_refused_unread(exporter):
    sample = PrometheusCollector(url=f"{exporter}/big", timeout=5, max_bytes=1_000_000).collect("n1")
    assert sample.gpus == []
    assert sample.errors == [
        f"scrape {exporter}/big: response of 32,000,000 bytes is over the 1,000,000-byte scrape limit"
    ]


def test_a_stream_without_a_length_is_cut_off_at_the_cap(exporter):
    sample = PrometheusCollector(url=f"{exporter}/stream", timeout=5, max_bytes=1_000_000).collect("n1")
    assert sample.gpus == []
    assert sample.errors == [
        f"scrape {exporter}/stream: response is over the 1,000,000-byte scrape limit; stopped reading there"
    ]


def test_a_page_under_the_cap_is_parsed(exporter):
    sample = PrometheusCollector(url=f"{exporter}/l4", timeout=5, max_bytes=L4.stat().st_size).collect("n1")
    assert sample.errors == [] and sample.gpus[0].name == "NVIDIA L4"


def test_the_cap_comes_from_settings(settings):
    from fabric.collectors.registry import get_collector

    assert settings.COLLECTOR_OPTIONS["prometheus"]["max_bytes"] == 32 * 1024 * 1024
    assert get_collector("prometheus", **settings.COLLECTOR_OPTIONS["prometheus"]).max_bytes == 32 * 1024 * 1024
