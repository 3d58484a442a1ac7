"""Benchmark the ibnetdiscover parser: the real SX6036 file and a synthetic 2,000-switch fabric.

    .venv/bin/python bench/bench_parse.py [--runs 50] [--big-runs 3]

Prints the median wall time of each. The synthetic fabric is a two-tier fat tree written in
default `ibnetdiscover` format with every cable printed from both ends, as the tool does:
1,000 leaves with 16 hosts and 16 uplinks each, 1,000 spines with 16 downlinks each, 16,000
single-port HCAs, so 32,000 links and about 180,000 lines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fabric.importers import read_text  # noqa: E402
from fabric.importers.ibnetdiscover import parse_ibnetdiscover  # noqa: E402

SX6036 = ROOT / "tests" / "fixtures" / "ibnetdiscover_sx6036_8switch.topo"


def synthetic_fabric(leaves: int = 1000, spines: int = 1000, hosts_per_leaf: int = 16, uplinks: int = 16) -> str:
    """ibnetdiscover text for a two-tier fat tree; leaf l's uplink u goes to spine (l*uplinks+u) % spines."""
    leaf_guid = [f"{0xA000000000000000 + i:016x}" for i in range(leaves)]
    spine_guid = [f"{0xB000000000000000 + i:016x}" for i in range(spines)]
    spine_ports: list[list[tuple[int, int]]] = [[] for _ in range(spines)]  # spine -> [(leaf, leaf port)]
    out: list[str] = []
    for leaf in range(leaves):
        out += _switch_header(leaf_guid[leaf], f"leaf{leaf}", hosts_per_leaf + uplinks)
        for port in range(1, hosts_per_leaf + 1):
            host = leaf * hosts_per_leaf + port - 1
            guid = f"{0xC000000000000000 + host * 2:016x}"
            out.append(f'[{port}]\t"H-{guid}"[1]({guid[:-1]}1) \t\t# "node{host} mlx5_0" lid {host + 10000} 4xNDR')
        for u in range(uplinks):
            spine = (leaf * uplinks + u) % spines
            spine_ports[spine].append((leaf, hosts_per_leaf + 1 + u))
            spine_port = len(spine_ports[spine])
            out.append(
                f'[{hosts_per_leaf + 1 + u}]\t"S-{spine_guid[spine]}"[{spine_port}]\t\t'
                f'# "MF0;spine{spine}:QM9700/U1" lid {spine + 1} 4xNDR'
            )
        out.append("")
    for spine in range(spines):
        out += _switch_header(spine_guid[spine], f"spine{spine}", max(len(spine_ports[spine]), 1))
        for port, (leaf, leaf_port) in enumerate(spine_ports[spine], start=1):
            out.append(
                f'[{port}]\t"S-{leaf_guid[leaf]}"[{leaf_port}]\t\t# "MF0;leaf{leaf}:QM9700/U1" lid {leaf + 5000} 4xNDR'
            )
        out.append("")
    for host in range(leaves * hosts_per_leaf):
        leaf, port = divmod(host, hosts_per_leaf)
        guid = f"{0xC000000000000000 + host * 2:016x}"
        out += [
            "vendid=0x2c9",
            "devid=0x101b",
            f"caguid=0x{guid}",
            f'Ca\t1 "H-{guid}"\t\t# "node{host} mlx5_0"',
            f'[1]({guid[:-1]}1) \t"S-{leaf_guid[leaf]}"[{port + 1}]\t\t'
            f'# lid {host + 10000} lmc 0 "MF0;leaf{leaf}:QM9700/U1" lid {leaf + 5000} 4xNDR',
            "",
        ]
    return "\n".join(out)


def _switch_header(guid: str, name: str, ports: int) -> list[str]:
    lid = int(guid[-4:], 16) + (1 if name.startswith("spine") else 5000)
    return [
        "vendid=0x2c9",
        "devid=0xd2f0",
        f"switchguid=0x{guid}({guid})",
        f'Switch\t{ports} "S-{guid}"\t\t# "MF0;{name}:QM9700/U1" enhanced port 0 lid {lid} lmc 0',
    ]


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs of the SX6036 file")
    parser.add_argument("--big-runs", type=int, default=3, help="runs of the synthetic fabric")
    args = parser.parse_args()

    text = read_text(SX6036)
    fabric = parse_ibnetdiscover(text)
    small = median_seconds(lambda: parse_ibnetdiscover(text), args.runs)
    print(
        f"SX6036 ({len(fabric.switches)} switches, {len(fabric.cas)} CAs, {len(fabric.links)} links): "
        f"median {small * 1000:.1f} ms over {args.runs} runs"
    )

    big_text = synthetic_fabric()
    start = time.perf_counter()
    big = parse_ibnetdiscover(big_text)  # the first run is cold: the GUID cache is empty
    cold = time.perf_counter() - start
    assert (len(big.switches), len(big.cas), len(big.links)) == (2000, 16000, 32000)
    seconds = median_seconds(lambda: parse_ibnetdiscover(big_text), args.big_runs)
    lines = big_text.count("\n") + 1
    print(
        f"synthetic ({len(big.switches)} switches, {len(big.cas)} CAs, {len(big.links)} links, {lines} lines): "
        f"first run {cold:.2f} s, median {seconds:.2f} s over {args.big_runs} more ({lines / seconds:,.0f} lines/s)"
    )


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    main()
    print(peak_rss_line())
