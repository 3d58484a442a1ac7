"""bench/decisions_ab.py: the same code decides the same; a changed decision is found and named."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "decisions_ab.py"


def ab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), "--quick", *args], capture_output=True, text=True, timeout=300)


def test_the_same_code_records_the_same_decisions(tmp_path):
    recorded = tmp_path / "before.pkl"
    assert ab("--out", str(recorded)).returncode == 0
    out = ab("--compare", str(recorded))
    # One size, three variants, a filling round and four churn rounds each: 15 rounds.
    assert (out.returncode, out.stdout.strip()) == (0, "15 rounds: the same decisions")


def test_a_changed_placement_is_found_in_its_round(tmp_path):
    recorded = tmp_path / "before.pkl"
    assert ab("--out", str(recorded)).returncode == 0
    rows = pickle.loads(recorded.read_bytes())
    rows[3]["placements"] = rows[3]["placements"][1:]  # as if round 3 had placed one job fewer
    recorded.write_bytes(pickle.dumps(rows))
    out = ab("--compare", str(recorded))
    assert (out.returncode, out.stdout.strip()) == (1, "placements: 1 of 15 rounds differ")
