"""Run a bench on a loaded host: issue 16 quotes each figure on a quiet host beside a loaded run of the same bench.

    python bench/with_load.py [--workers N] [--max-seconds S] -- COMMAND [ARG...]
    python bench/with_load.py -- .venv/bin/python bench/bench_engine.py --churn 0.01 --rounds 7

Starts N CPU-bound worker processes (default: one per CPU, so that with the bench itself the host has more work than
it can run at once), runs COMMAND in the foreground with the workers' ids in BENCH_LOAD_WORKERS, then stops them.
On stderr it says how many workers ran, the 1-minute load average before and at the end, and the command's wall
time; it exits with the command's status.

The loaded figure may be slower than the quiet one by what the load explains: with one worker per CPU, a bench that
keeps one CPU busy gets about CPUs / (CPUs + 1) of a CPU (2/3 on 2 CPUs, so 1.5x its quiet time), one that keeps two
busy (the engine and PostgreSQL) about half as much again. A cliff (several times slower) is a finding.

The workers stop on their own after --max-seconds or as soon as this process is gone, so a killed run leaves nothing
spinning.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

# A worker: arithmetic in slices of about a millisecond, between which it checks that its parent still runs and that
# its time is not up.
WORKER = """
import os, sys, time
parent, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
x = 0
while os.getppid() == parent and time.monotonic() < deadline:
    for i in range(20000):
        x = (x + i * i) % 1000003
"""


def start_workers(n: int, max_seconds: float) -> list[subprocess.Popen]:
    return [
        subprocess.Popen([sys.executable, "-c", WORKER, str(os.getpid()), str(max_seconds)], stdin=subprocess.DEVNULL)
        for _ in range(n)
    ]


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for w in workers:
        w.terminate()
    for w in workers:
        try:
            w.wait(timeout=5)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], usage="%(prog)s [options] -- COMMAND [ARG...]")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="CPU-bound processes (default: CPUs)")
    ap.add_argument("--max-seconds", type=float, default=1800.0, help="a worker stops after this long whatever happens")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command to run: give it after --, e.g. -- python bench/bench_engine.py")
    if args.workers < 0:
        ap.error(f"--workers must be 0 or more, not {args.workers}")
    if args.max_seconds <= 0:
        ap.error(f"--max-seconds must be above 0, not {args.max_seconds:g}")
    before = os.getloadavg()[0]
    workers = start_workers(args.workers, args.max_seconds)
    env = {**os.environ, "BENCH_LOAD_WORKERS": ",".join(str(w.pid) for w in workers)}
    print(
        f"with_load: {len(workers)} CPU-bound workers on {os.cpu_count()} CPUs "
        f"(pids {env['BENCH_LOAD_WORKERS'] or '-'}); load average before {before:.2f}",
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        rc = subprocess.call(command, env=env)
    except FileNotFoundError:
        print(f"with_load: no such command: {command[0]}", file=sys.stderr)
        rc = 127
    finally:
        wall = time.perf_counter() - t0
        end = os.getloadavg()[0]
        stop_workers(workers)
    print(f"with_load: command took {wall:.1f} s; load average at its end {end:.2f}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
