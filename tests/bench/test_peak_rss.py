"""bench/peak_rss.py: the high-water mark every bench prints at its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(BENCH)!r}); {code}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout


def test_peak_counts_memory_already_freed():
    # 300 MiB written then freed: the peak keeps it, a sample taken at the end would not.
    code = (
        "import psutil; from peak_rss import peak_rss_mib; before = psutil.Process().memory_info().rss / 2**20; "
        "b = bytes(range(256)) * (1200 * 1024); del b; print(before, peak_rss_mib())"
    )
    # Against the RSS now, not the peak so far: Linux carries ru_maxrss across fork and exec, so a child of this
    # (large) pytest process starts with the parent's high-water mark.
    before, after = map(float, _run(code).split())
    assert after - before >= 290


def test_line_gives_the_peak_in_mib():
    line = _run("b = bytes(range(256)) * (400 * 1024); from peak_rss import peak_rss_line; print(peak_rss_line())")
    assert line.startswith("peak RSS: ") and line.rstrip().endswith(" MiB (this process)")
    assert float(line.split()[2]) >= 100  # the 100 MiB just written
