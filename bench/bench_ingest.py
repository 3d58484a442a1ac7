"""Ingest throughput: one full poll of a generated cluster through fabric.ingest.ingest_samples, as one batch
the way the ingest_batch task takes it from the inbox: rates, health rules, latest state in the cache, time
series rows (COPY), alerts. 10,000 GPUs x 20 fields and 20,000 IB ports x 10 counters (10,000 host ports from the
node agents, 10,000 switch ports from the fabric agent's perfquery poll).

    .venv/bin/python scripts/with_services.py -- .venv/bin/python bench/bench_ingest.py [--gpus 10000] [--polls 3]

Growth (issue 16): `--gpus 50000 --switch-ports 50000 --growth-from 10000,10000` measures 10,000 GPUs first, then
the asked size, and prints the ratio of the medians beside the ratio of the GPUs and ports read.

Uses DATABASE_URL / REDIS_URL (PostgreSQL and Redis for figures worth quoting). Prints per-poll worker time,
samples/s and fields/s, medians over the polls after the first (the first only seeds the previous counters).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--polls", type=int, default=3)
    parser.add_argument("--switch-ports", type=int, default=10_000)
    parser.add_argument("--leaf-ports", type=int, default=64, help="switch radix (128 for 100,000 GPUs)")
    parser.add_argument(
        "--growth-from",
        metavar="GPUS,SWITCH_PORTS",
        help="growth (issue 16): measure this size first (radix 64), then the asked one, and print the ratio of their "
        "medians beside the ratio of the work",
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterctl.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from fabric import actions
    from fabric.collectors.samples import FABRIC_SOURCE, GpuSample, NodeSample, PortSample
    from fabric.ingest import ingest_samples
    from fabric.models import HCA, Cluster, GpuMetric, Port, PortMetric

    call_command("migrate", verbosity=0)

    def measure(gpus: int, switch_port_count: int, leaf_ports: int) -> tuple[float, int]:
        """One cluster of that size polled --polls times; prints its figures and returns the median whole call and
        the GPUs and ports it read."""
        name = f"bench-ingest-{gpus}"
        if Cluster.objects.filter(name=name).exists():
            from scheduler.actions import delete_cluster

            delete_cluster(Cluster.objects.get(name=name))
        actions.generate_fabric(name, nodes=gpus // 8, gpus_per_node=8, gpu_model="H100", leaf_ports=leaf_ports)
        cluster = Cluster.objects.get(name=name)
        devices: dict[str, list[str]] = {}
        for host, device in HCA.objects.filter(cluster=cluster).values_list("node__hostname", "device"):
            devices.setdefault(host, []).append(device)

        switch_ports = list(
            Port.objects.filter(cluster=cluster, switch__isnull=False, link__isnull=False)
            .order_by("pk")
            .values_list("switch__guid", "number")[:switch_port_count]
        )

        def counters(t: float) -> dict[str, int]:
            return {"port_xmit_data": int(t * 1e9), "port_rcv_data": int(t * 9e8), "port_xmit_packets": int(t * 1e6),
                    "port_rcv_packets": int(t * 1e6), "port_xmit_wait": 0, "symbol_error": 0, "link_downed": 0,
                    "port_rcv_errors": 0, "link_error_recovery": 0, "port_xmit_discards": 0}  # fmt: skip

        def poll(t: float) -> list[NodeSample]:
            samples = []
            for host, devs in devices.items():
                gpus = [GpuSample(index=i, utilisation_gpu_pct=50.0 + i, utilisation_memory_pct=30.0,
                                  memory_used_mib=40_000.0, memory_free_mib=41_559.0, memory_total_mib=81_559.0,
                                  temperature_c=55.0, temperature_limit_c=87.0, power_w=500.0, power_limit_w=700.0,
                                  sm_clock_mhz=1980.0, ecc_uncorrected=0, ecc_corrected=0, remapped_rows_pending=False,
                                  remapped_rows_failure=False, mig_enabled=False) for i in range(8)]  # fmt: skip
                ports = [PortSample(device=d, port=1, state="ACTIVE", phys_state="LinkUp", rate_gbps=400.0,
                                    counters=counters(t)) for d in devs]  # fmt: skip
                samples.append(NodeSample(node=host, collected_at=t, collector="bench", gpus=gpus, ports=ports))
            fabric = [PortSample(device="0x" + g, port=n, guid="0x" + g, state="ACTIVE", counters=counters(t))
                      for g, n in switch_ports]  # fmt: skip
            samples.append(NodeSample(node=FABRIC_SOURCE, collected_at=t, collector="bench", ports=fabric))
            return samples

        n_gpus = sum(8 for _ in devices)
        n_ports = sum(len(d) for d in devices.values()) + len(switch_ports)
        print(
            f"database: {connection.vendor}; {len(devices)} nodes, {n_gpus} GPUs x 20 fields, "
            f"{n_ports} ports x 10 counters"
        )
        phases: dict[str, list[float]] = {}
        start = time.time()
        for i in range(args.polls):
            samples = poll(start + i)
            t = time.perf_counter()
            result = ingest_samples(cluster.pk, samples)
            total = time.perf_counter() - t
            for name, secs in [*result.timings.items(), ("total", total)]:
                phases.setdefault(name, []).append(secs)
            print(f"  poll {i + 1}: {total:.2f} s worker time ({len(result.stored)} samples stored)")
        med = {name: statistics.median(v[1:] or v) for name, v in phases.items()}  # the first poll only seeds
        latest = med["read"] + med["rates_health"] + med["latest_write"]
        series = med["series"]
        fields = n_gpus * 20 + n_ports * 10
        print("median per full poll (polls after the first):")
        named = [n for n in phases if n != "total"]
        for name in [*named, "total"]:
            print(f"  {name:>13}: {med[name]:.3f} s")
        outside = statistics.median(
            [t - sum(phases[n][i] for n in named) for i, t in enumerate(phases["total"])][1:] or [0.0]
        )
        print(f"  {'outside them':>13}: {outside:.3f} s (the call's time that no phase holds: the bench's accounting)")
        print(
            f"latest state (read + rates + health + write): {latest:.2f} s = {fields / latest:,.0f} fields/s, "
            f"{(n_gpus + n_ports) / latest:,.0f} objects/s  (target < 1 s)"
        )
        print(f"time series (COPY of {n_gpus:,} GPU + {n_ports:,} port rows): {series:.2f} s = "
              f"{(n_gpus + n_ports) / series:,.0f} rows/s  (target < 10 s)")  # fmt: skip
        print(
            f"rows: {GpuMetric.objects.filter(gpu__node__cluster=cluster).count()} GPU metrics, "
            f"{PortMetric.objects.filter(port__cluster=cluster).count()} port metrics"
        )

        return med["total"], n_gpus + n_ports

    if not args.growth_from:
        measure(args.gpus, args.switch_ports, args.leaf_ports)
        return
    try:
        ref_gpus, ref_ports = (int(x) for x in args.growth_from.split(","))
    except ValueError:
        parser.error(f"--growth-from takes GPUS,SWITCH_PORTS (e.g. 10000,10000), not {args.growth_from!r}")
    print(f"== reference: {ref_gpus:,} GPUs, {ref_ports:,} switch ports")
    ref, ref_objects = measure(ref_gpus, ref_ports, 64)
    print(f"== asked: {args.gpus:,} GPUs, {args.switch_ports:,} switch ports")
    big, objects = measure(args.gpus, args.switch_ports, args.leaf_ports)
    work = objects / ref_objects
    cost = big / ref
    print(
        f"growth: one poll {big:.2f} s = {cost:.2f}x the reference's {ref:.2f} s, for {work:.2f}x the GPUs and ports "
        f"({objects:,} / {ref_objects:,}): "
        + ("no faster than the work" if cost <= work * 1.1 else "FASTER than the work")
        + " (10 % allowed for noise)"
    )


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    main()
    print(peak_rss_line())
