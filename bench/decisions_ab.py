"""Check that a change to the engine decides exactly as before: record the decisions of fixed rounds, then compare.

    python bench/decisions_ab.py --out /tmp/before.pkl          # on the code before the change
    python bench/decisions_ab.py --compare /tmp/before.pkl      # on the code after it

The rounds: at each of four sizes (512 GPUs / 2,000 waiting jobs up to 10,000 / 50,000), a filling round and four
churn rounds (`synthetic.next_round`, 2 % of the running jobs end and as many arrive), three times: with a carry
between rounds as the worker keeps one, with no minimum run time (preemptions everywhere), and without a carry.
Recorded per round: placements, preemptions, reservations, migrations, requeues, failures, every pending reason, the
queue order and the counters, but the timings and the counters that count work rather than decide (`WORK_COUNTERS`).

`--compare` prints, per kind of decision, how many rounds differ, and exits 1 when any does. A speed-up should print
none; a fix that changes decisions should differ where its test says it does. Pickles are only for this tool's own
files: load none from elsewhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler.core.carry import RoundCarry
from scheduler.core.engine import schedule
from scheduler.core.synthetic import next_round, synthetic_snapshot

SIZES = ((512, 2000, 1), (2000, 8000, 2), (4000, 20000, 3), (10000, 50000, 0))  # GPUs, waiting jobs, seed
VARIANTS = ("carry", "no minimum run", "no carry")
KINDS = (
    "placements",
    "preemptions",
    "reservations",
    "migrations",
    "requeues",
    "failures",
    "pending_reasons",
    "queue_order",
)
WORK_COUNTERS = ("ms", "jobs_worked_out", "evaluations", "searches")  # how much work a round did, not what it decided


def record(sizes=SIZES, churn_rounds: int = 4) -> list[dict]:
    out = []
    for gpus, pending, seed in sizes:
        for variant in VARIANTS:
            snap = synthetic_snapshot(gpus, pending, 0.7, seed)
            if variant == "no minimum run":
                snap = dataclasses.replace(snap, config=dataclasses.replace(snap.config, preemption_min_run_s=0.0))
            carry = None if variant == "no carry" else RoundCarry()
            dec = schedule(snap, carry=carry)
            out.append(_decided(dec, gpus, variant, 0))
            for i in range(churn_rounds):
                snap = next_round(snap, dec, 0.02, seed=seed * 10 + i)
                dec = schedule(snap, carry=carry)
                out.append(_decided(dec, gpus, variant, i + 1))
    return out


def _decided(dec, gpus: int, variant: str, round_no: int) -> dict:
    row = {kind: getattr(dec, kind) for kind in KINDS}
    row["counters"] = {k: v for k, v in dec.stats.items() if k not in WORK_COUNTERS}
    row["round"] = (gpus, variant, round_no)
    return row


def compare(before: list[dict], after: list[dict]) -> dict[str, int]:
    """Rounds that differ, per kind of decision ("counters:NAME" per counter); "rounds" when the lists differ."""
    differ: dict[str, int] = {}
    if [r["round"] for r in before] != [r["round"] for r in after]:
        return {"rounds": abs(len(before) - len(after)) or 1}
    for b, a in zip(before, after, strict=True):
        for kind in KINDS:
            if b[kind] != a[kind]:
                differ[kind] = differ.get(kind, 0) + 1
        for name in sorted(b["counters"].keys() | a["counters"].keys()):
            if b["counters"].get(name) != a["counters"].get(name):
                differ[f"counters:{name}"] = differ.get(f"counters:{name}", 0) + 1
    return differ


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="record the decisions here")
    group.add_argument("--compare", type=Path, help="compare the decisions with those recorded here")
    ap.add_argument("--quick", action="store_true", help="the smallest size only (a check of this tool)")
    args = ap.parse_args(argv)
    rows = record(SIZES[:1] if args.quick else SIZES)
    if args.out:
        args.out.write_bytes(pickle.dumps(rows))
        print(f"{len(rows)} rounds recorded in {args.out}")
        return 0
    differ = compare(pickle.loads(args.compare.read_bytes()), rows)
    if not differ:
        print(f"{len(rows)} rounds: the same decisions")
        return 0
    for kind, n in sorted(differ.items()):
        print(f"{kind}: {n} of {len(rows)} rounds differ")
    return 1


if __name__ == "__main__":
    sys.exit(main())
