"""generate_fabric + fabric_report at 2,000 nodes / 16,000 GPUs, through the real actions and database.

    .venv/bin/python bench/bench_fabric.py [--nodes 2000] [--runs 3]

Uses a fresh SQLite file (embedded mode) unless DATABASE_URL is set. Prints the median of each phase.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="clusterctl-bench-")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tmp}/bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterctl.test_settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from fabric import actions
    from fabric.graph_from_db import fabric_for_cluster
    from fabric.models import Cluster
    from fabric.topology import analyse, render_text

    call_command("migrate", verbosity=0)
    print(f"database: {connection.vendor}; {args.nodes} nodes x 8 GPUs, 64-port leaves, 1:1, NDR; {args.runs} runs")
    phases: dict[str, list[float]] = {"generate+import": [], "reimport (no change)": [], "load graph": [], "report": []}
    for run in range(args.runs):
        name = f"bench{run}"
        params = {"nodes": args.nodes, "gpus_per_node": 8, "gpu_model": "H100", "leaf_ports": 64, "storage_nodes": 8}
        t = time.perf_counter()
        summary = actions.generate_fabric(name, **params)
        phases["generate+import"].append(time.perf_counter() - t)
        t = time.perf_counter()
        actions.generate_fabric(name, **params)
        phases["reimport (no change)"].append(time.perf_counter() - t)
        cluster = Cluster.objects.get(name=name)
        t = time.perf_counter()
        fabric = fabric_for_cluster(cluster)
        phases["load graph"].append(time.perf_counter() - t)
        t = time.perf_counter()
        report = analyse(fabric)
        render_text(report)
        phases["report"].append(time.perf_counter() - t)
    print(
        f"fabric: {summary.switches} switches {summary.changes['roles']}, {summary.hosts} hosts, "
        f"{summary.links} links, {summary.gpus} GPUs"
    )
    for phase, times in phases.items():
        print(f"  {phase:22} median {statistics.median(times):7.2f} s   (min {min(times):.2f}, max {max(times):.2f})")
    total = statistics.median(phases["generate+import"]) + statistics.median(phases["report"])
    print(f"  generate_fabric + fabric_report: {total:.2f} s (target: well under 60 s)")


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    main()
    print(peak_rss_line())
