"""bench/with_load.py: a bench run beside CPU-bound workers that live exactly as long as the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "bench" / "with_load.py"

# The command under load: are the workers named in BENCH_LOAD_WORKERS alive while it runs? Prints their count.
COUNT_ALIVE = (
    "import os\n"
    "pids = [int(p) for p in os.environ['BENCH_LOAD_WORKERS'].split(',') if p]\n"
    "alive = 0\n"
    "for pid in pids:\n"
    "    try:\n"
    "        os.kill(pid, 0)\n"
    "        alive += 1\n"
    "    except ProcessLookupError:\n"
    "        pass\n"
    "print(alive, ','.join(map(str, pids)))\n"
)


def gone(pid: int, within_s: float = 5.0) -> bool:
    """The process has exited (reaped, or a zombie: it runs nothing) within the time."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_the_workers_run_during_the_command_and_are_stopped_after_it():
    out = subprocess.run(
        [sys.executable, str(TOOL), "--workers", "2", "--", sys.executable, "-c", COUNT_ALIVE],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    alive, pids = out.stdout.split()
    assert alive == "2"
    assert "with_load: 2 CPU-bound workers" in out.stderr
    assert all(gone(int(p)) for p in pids.split(","))


def test_the_commands_exit_status_is_passed_on():
    out = subprocess.run(
        [sys.executable, str(TOOL), "--workers", "1", "--", sys.executable, "-c", "raise SystemExit(3)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 3


def test_without_a_command_it_says_what_is_missing():
    out = subprocess.run([sys.executable, str(TOOL), "--workers", "1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "no command to run: give it after --" in out.stderr


def test_a_killed_run_leaves_no_worker_spinning():
    # The wrapper is killed outright (no clean-up runs): its workers notice their parent is gone and stop.
    proc = subprocess.Popen(
        [sys.executable, str(TOOL), "--workers", "2", "--", sys.executable, "-c", "import time; time.sleep(30)"],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        first = proc.stderr.readline()  # "with_load: 2 CPU-bound workers on N CPUs (pids A,B); ..."
        pids = [int(p) for p in first.split("(pids ", 1)[1].split(")", 1)[0].split(",")]
        assert len(pids) == 2
        proc.kill()
        proc.wait(timeout=10)
        assert all(gone(pid) for pid in pids)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sleeping command too
        proc.stderr.close()
