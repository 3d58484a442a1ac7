"""The fractional replay's targets on variations of the Alibaba 2023 OpenB trace, not only the file itself.

    .venv/bin/python bench/bench_fractional_variations.py [--only NAME ...] [--json OUT]

Issue 12's targets for `default` (the engine) on the fractional trace: its unallocated GPUs when arrivals
reach 100 % of capacity no more than fgd's, and its first failed GPU pod no earlier than best-fit's. Besides
the trace as shipped (trace order, seed 42) they are checked on: pod order shuffled (seeds 1-3); the node
list without one GPU type (G3, the big-host 8-GPU nodes; P100) or with only the two most common (G2, T4);
every other node (half the cluster); the node list reversed or shuffled (seed 7: hostnames stay, so
`default` must not care); every other pod (half the trace, the rest drawn by inflation); inflation to 150 %
with seed 43. Each line: best-fit, fgd and default (unallocated % at 100 %, first failure at % arrived),
then whether each target holds. Reads the trace where it lies (`../shared/data/traces/`); about 3 minutes on
one core.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.sim.fractional import run_fractional
from scheduler.sim.traces.alibaba import load_nodes, load_pods

TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
POD_LIST = TRACES / "alibaba_v2023_openb_pod_list_default.csv"
NODE_LIST = TRACES / "alibaba_v2023_openb_node_list_gpu_node.csv"


def variations(pods, nodes):
    yield "as shipped", pods, nodes, {}
    for s in (1, 2, 3):
        yield f"shuffled s{s}", pods, nodes, {"order": "shuffled", "seed": s}
    yield "no G3 nodes", pods, [n for n in nodes if n.model != "G3"], {}
    yield "no P100 nodes", pods, [n for n in nodes if n.model != "P100"], {}
    yield "G2 + T4 only", pods, [n for n in nodes if n.model in ("G2", "T4")], {}
    yield "half the nodes", pods, nodes[::2], {}
    yield "nodes reversed", pods, nodes[::-1], {}
    shuffled = list(nodes)
    random.Random(7).shuffle(shuffled)
    yield "nodes shuffled", pods, shuffled, {}
    yield "half the pods", pods[::2], nodes, {}
    yield "to 150 %, s43", pods, nodes, {"inflate_to": 1.5, "seed": 43}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="variation names to run (default: all)")
    ap.add_argument("--json", metavar="OUT", help="write the figures here")
    args = ap.parse_args(argv)
    pods, nodes = load_pods(POD_LIST), load_nodes(NODE_LIST)
    rows = []
    t0 = time.perf_counter()
    print(f"{'variation':<16}{'best-fit':>16}{'fgd':>16}{'default':>16}   unalloc<=fgd  1st fail>=best-fit")
    for name, ps, ns, kw in variations(pods, nodes):
        if args.only and name not in args.only:
            continue
        r = run_fractional(ps, ns, "best-fit,fgd,default", **kw)
        fig = {p: (x["at"]["100"]["unallocated_pct"], x["first_failure_arrived_pct"]) for p, x in r["policies"].items()}
        d, f, b = fig["default"], fig["fgd"], fig["best-fit"]
        unalloc_ok = d[0] <= f[0]
        fail_ok = (d[1] if d[1] is not None else 1e9) >= (b[1] if b[1] is not None else 1e9)
        row: dict = {"variation": name, "unallocated_ok": unalloc_ok, "first_failure_ok": fail_ok}
        for p, (u, ff) in fig.items():
            row[p] = {"unallocated_pct": u, "first_failure_pct": ff}
        rows.append(row)

        def cell(v):
            return f"{v[0]:6.2f} @{v[1]:5.1f}" if v[1] is not None else f"{v[0]:6.2f}   none"

        print(
            f"{name:<16}{cell(b):>16}{cell(f):>16}{cell(d):>16}   {'yes' if unalloc_ok else 'NO':>12}"
            f"  {'yes' if fail_ok else 'NO':>18}",
            flush=True,
        )
    print(
        f"{sum(r['unallocated_ok'] for r in rows)}/{len(rows)} unallocated <= fgd, "
        f"{sum(r['first_failure_ok'] for r in rows)}/{len(rows)} first failure >= best-fit "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    rc = main()
    print(peak_rss_line())
    raise SystemExit(rc)
