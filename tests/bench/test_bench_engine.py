"""bench/bench_engine.py --growth-from: the two sizes timed in one run, and the ratio of cost beside that of work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_engine.py"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300)


def test_growth_times_the_reference_then_the_asked_size_and_prints_both_ratios():
    out = bench("--gpus", "400", "--pending", "1200", "--rounds", "1", "--churn", "0.01", "--growth-from", "200,600")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines.index("== reference: 200 GPUs, 600 pending") < lines.index("== asked: 400 GPUs, 1,200 pending")
    (growth,) = [line for line in lines if line.startswith("growth: ")]
    # (400 + 1,200) / (200 + 600) = 2: twice the GPUs and twice the queue.
    assert "for 2.00x the work (2.00x the GPUs, 2.00x the queue)" in growth


def test_a_growth_size_that_is_not_two_numbers_is_refused_by_name():
    out = bench("--gpus", "400", "--pending", "1200", "--growth-from", "10k")
    assert out.returncode == 2
    assert "--growth-from takes GPUS,PENDING (e.g. 10000,50000), not '10k'" in out.stderr
