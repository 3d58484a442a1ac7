"""The fabric page's layout at 2,000 servers (pure, no database): target under 50 ms.

    .venv/bin/python bench/bench_layout.py [--runs 5]

Lays out the test suite's 64-leaf fat tree (2,048 nodes, 128 switches, 6,144 links) with nodes aggregated per leaf
and with every node placed; prints the best and the median of `--runs` runs of each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric.topology.layout import layout
from tests.fabric.topology.test_layout import fat_tree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    switches, nodes, links = fat_tree(64, 64, 32, storage_every=100)
    for label, aggregate_above in (("aggregated", 256), ("every node", 10_000)):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            layout(switches, nodes, links, aggregate_above=aggregate_above)
            times.append(time.perf_counter() - t0)
        print(
            f"layout {label}: {len(nodes)} nodes, {len(switches)} switches, {len(links)} links: "
            f"best {min(times) * 1000:.1f} ms, median {statistics.median(times) * 1000:.1f} ms (target < 50 ms)"
        )


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    main()
    print(peak_rss_line())
