"""bench/peak_rss.py: the high-water mark every bench prints at its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(code: str) -> str:
    # Through a shell that forks Python (the `; exit` keeps it from exec'ing): Linux carries ru_maxrss across fork
    # and exec, so Python started straight from this large pytest process would begin at pytest's size, while the
    # small shell passes on only its own.
    out = subprocess.run(
        [
            "sh",
            "-c",
            '"$0" "$@"; exit $?',
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(BENCH)!r}); {code}",
        ],
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
    before, after = map(float, _run(code).split())
    assert after - before >= 290


def test_line_gives_the_peak_in_mib():
    code = (
        "import psutil; from peak_rss import peak_rss_line; before = psutil.Process().memory_info().rss / 2**20; "
        "b = bytes(range(256)) * (400 * 1024); print(before); print(peak_rss_line())"
    )
    before, line = _run(code).splitlines()
    assert line.startswith("peak RSS: ") and line.endswith(" MiB (this process)")
    assert float(line.split()[2]) - float(before) >= 95
