"""bench/bench_pages.py: how it reads a page's timings (pure), and a whole run at 16 servers in Debian's Chromium.

The run starts its own PostgreSQL database and Redis database (scripts/with_services.py, as the bench is meant to be
run), a Celery worker and uvicorn, and takes about a minute; it is skipped, with the reason, without Chromium."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("bench_pages", ROOT / "bench" / "bench_pages.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_pages_are_named_from_the_dashboards_urls():
    assert bench.parse_pages("all") == list(bench.ALL_PAGES)
    assert bench.parse_pages(" fabric, overview,fabric ") == ["fabric", "overview"]
    with pytest.raises(ValueError, match="unknown page"):
        bench.parse_pages("overview,my")
    urls = bench.page_urls(3, 41)
    assert urls["fabric"] == "/clusters/3/fabric/" and urls["job"] == "/clusters/3/jobs/41/"
    assert "job" not in bench.page_urls(3, None)
    assert bench.goal_ms(2000) == 3000 and bench.goal_ms(10000) == 5000


def frame(url: str, kind: str, topic: str, at: float, start: float, end: float) -> dict:
    """A frame as the init script records it: arrival (MessageEvent.timeStamp), the page's handler start and end."""
    return {"url": url, "type": kind, "topic": topic, "at": at, "start": start, "end": end}


def test_where_the_time_went_counts_the_snapshots_that_came_before_the_draw():
    ws = "ws://127.0.0.1:1/ws/clusters/1/fabric/"
    got = {
        "drawn": 900.0,
        "nav": {"requestStart": 10.0, "responseStart": 110.0, "responseEnd": 130.0, "dcl": 300.0},
        "sockets": [{"url": ws + "?topics=fabric", "created": 320.0, "opened": 340.0}],
        "frames": [
            frame(ws + "?topics=fabric", "snapshot", "fabric", 700.0, 710.0, 800.0),
            frame(ws + "?topics=fabric", "delta", "fabric", 850.0, 850.0, 851.0),
            frame(ws + "?topics=queue", "snapshot", "queue", 950.0, 950.0, 960.0),  # after the draw
        ],
        "longtasks": [[700.0, 120.0], [1500.0, 300.0], [5000.0, 900.0]],
        "settle_ms": 1000.0,
    }
    p = bench.phases(got)
    assert p["html"] == 120 and p["ttfb"] == 100 and p["dcl"] == 300
    assert p["socket_wait"] == 700 - 320  # the queue snapshot came after the draw: not counted
    assert p["handlers"] == 90 and p["queued"] == 10 and p["after"] == 100
    assert p["longtask_max"] == 300 and p["longtasks"] == 2  # the one 4 s after drawn + settle is left out
    assert bench.phases({"drawn": None})["drawn"] is None


def test_the_table_flags_slow_pages_and_frames_over_budget():
    rows = [
        {"label": "fabric", "phases": {"drawn": 6200.0}, "frames": 2, "max_frame": 600 * 1024, "ws_bytes": 700 * 1024},
        {"label": "gpus", "phases": {"drawn": 1200.0}, "frames": 1, "max_frame": 300 * 1024, "ws_bytes": 300 * 1024},
        {"label": "alerts", "phases": {"drawn": None}, "frames": 0, "closed": ["1011"]},
    ]
    text = bench.table(rows, bench.goal_ms(10000))
    lines = text.splitlines()
    assert lines[0].startswith("page") and len(lines) == 2 + len(rows)
    assert "> 5 s" in lines[2] and "frame > 512 KB" in lines[2]
    assert lines[3].rstrip().endswith("ok")
    assert "TIMEOUT" in lines[4] and "NOT DRAWN" in lines[4] and "socket closed" in lines[4]


def _chromium() -> str | None:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    return path if os.path.exists(path) else None


@pytest.mark.skipif(_chromium() is None, reason="Debian's Chromium is not installed (apt-get install chromium)")
def test_a_run_at_16_servers_draws_the_pages_and_prints_its_table():
    pytest.importorskip("playwright")
    # A database and a Redis database of its own, whatever this test run uses (the bench empties both).
    theirs = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in theirs}
    argv = [sys.executable, "scripts/with_services.py", "--", sys.executable, "bench/bench_pages.py",
            "--nodes", "16", "--pages", "fabric,gpus", "--storm", "20", "--timeout", "400"]  # fmt: skip
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    assert "== 16 servers (12 switches, 20 nodes, 216 links, 128 GPUs)" in text, text[-4000:]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^(fabric|gpus)\s+\|\s+([0-9,]+) \|", text, re.M)}
    assert set(rows) == {"fabric", "gpus"}, text[-4000:]
    assert all(int(v.replace(",", "")) > 0 for v in rows.values())
    assert "misses: none" in text or "> 3 s" in text  # a slow shared host may miss the goal; nothing else
    assert "web log: no exceptions" in text and "page failures: none" in text
    assert re.search(r"stopped worker \(pid \d+\), web \(pid \d+\)", text)
