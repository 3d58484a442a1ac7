"""python manage.py bench_scheduler --gpus 10000 --pending 50000 [--rounds 5] [--churn 0.01 --churn-rounds 10] [--json]

Builds a generated fat tree with that many GPUs, queues that many jobs from ten tenants, then
measures (1) the pure engine round on the same snapshot, (2) full rounds through the database:
snapshot load, engine, apply in one transaction, until the COMMIT returns (`duration_ms` is set after it;
the wall time around `run_round` is printed beside it), (3) churn rounds on the full cluster, as at 90 %
load in production: before each, `--churn` of the running jobs finish and as many new jobs arrive (outside
the timing), and the round that places them is timed. Prints medians and p99s; quote those, not means.

Before the full rounds the process warms up for the cluster as a worker does before its first round of a cluster
(scheduler.rounds.warm_up: it reads the cluster and works out the engine's carry without the cluster's lock); its time
is printed apart (`warm-up:`), as the snapshot's first load is.

A round starts at most SCHEDULER_MAX_PLACEMENTS_PER_ROUND jobs (1,500): the cluster then fills in several full rounds,
each followed by the next, and `--rounds` counts the full rounds besides those. `fill:` prints the rounds that placed
until the cluster was full, their time together and their placements per second.

`--history N` first leaves N jobs that finished within the last week, spread over it, as a cluster that has run a
while has (a week of a 10,000-GPU cluster is tens of thousands of jobs: Philly's trace ran about 9,000 a week on
2,500 GPUs, Alibaba PAI's about 140,000 on 6,500): fair share charges their tenants' decayed usage every round.
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import time
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection
from django.utils import timezone

from fabric import actions as fabric_actions
from fabric.models import Cluster
from scheduler import actions
from scheduler.choices import ACTIVE_STATUSES
from scheduler.core import schedule
from scheduler.models import Job, PriorityClass
from scheduler.rounds import run_round, warm_up
from scheduler.snapshot_from_db import build_snapshot

SIZES = [(1, 0.40), (2, 0.15), (4, 0.15), (8, 0.20), (16, 0.06), (32, 0.03), (64, 0.01)]


def _request(rng: random.Random, name: str, one_gpu: bool = False) -> dict:
    """One job of the bench's mix: SIZES GPUs (gangs of 8-GPU nodes from 16), a 10 min - 10 h estimate."""
    size = 1 if one_gpu else rng.choices(*zip(*SIZES, strict=True))[0]
    request = {"name": name, "gpus": size, "est_runtime_s": rng.randint(600, 36_000)}
    if size >= 16:
        request.update(nodes=size // 8, gpus_per_node=8)
    return request


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Command(BaseCommand):
    help = "Benchmark scheduling rounds on a generated cluster (engine alone, and full rounds with the database)."

    def add_arguments(self, parser):
        parser.add_argument("--gpus", type=int, default=10_000)
        parser.add_argument("--pending", type=int, default=50_000)
        parser.add_argument(
            "--rounds",
            type=int,
            default=5,
            help="engine rounds, and full rounds besides those that left jobs at their limit for the next",
        )
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument(
            "--churn", type=float, default=0.01, help="share of running jobs that finish per churn round"
        )
        parser.add_argument("--churn-rounds", type=int, default=10, help="churn rounds to time (0: none)")
        parser.add_argument(
            "--one-gpu", action="store_true", help="every job asks 1 GPU (a burst: --gpus 1024 --pending 1024)"
        )
        parser.add_argument(
            "--history",
            type=int,
            default=0,
            help="jobs that finished within the last week before the bench starts (fair share's usage reads them)",
        )
        parser.add_argument("--json", action="store_true")
        parser.add_argument(
            "--no-analyze",
            action="store_true",
            help="leave PostgreSQL's planner statistics as the generated rows left them (by default the bench "
            "analyzes its tables after generating them and after the filling round, as autovacuum does on a "
            "production server)",
        )

    def say(self, message: str) -> None:
        self.stderr.write(message)

    def handle(self, **o):
        rng = random.Random(o["seed"])
        self.one_gpu = o["one_gpu"]
        name = f"bench-{o['gpus']}"
        cluster = self._cluster(name, o["gpus"])
        pool = actions.ensure_scheduler(cluster)
        tenants = self._jobs(pool, o["pending"], rng)
        if o["history"]:
            self._history(pool, tenants, o["history"], rng)
        self._analyze(o)

        t = time.perf_counter()
        snapshot, _ = build_snapshot(cluster.pk)
        load_s = time.perf_counter() - t
        self.say(f"snapshot: {len(snapshot.nodes)} nodes, {len(snapshot.pending)} pending, loaded in {load_s:.2f} s")
        engine, placed_engine = [], 0
        for i in range(o["rounds"]):
            t = time.perf_counter()
            decisions = schedule(snapshot)
            engine.append(time.perf_counter() - t)
            placed_engine = len(decisions.placements)
            self.say(
                f"engine round {i + 1}: {engine[-1] * 1000:.0f} ms, {placed_engine} placements, "
                f"{decisions.stats['left_for_next_round']} left for the next round"
            )

        warm_ms = warm_up(cluster.pk)
        self.say(
            "warm-up: "
            + (f"{warm_ms:.0f} ms" if warm_ms is not None else "none (this process had the carry)")
            + " (a worker's, before its first round of the cluster, without the cluster's lock)"
        )
        # Full rounds: as many as asked besides those that started their limit of jobs (Config.
        # max_placements_per_round) and left some for the next round, which the worker's would follow at once.
        full, placed, left = [], [], 0
        i = limited = 0
        while i - limited < o["rounds"]:
            i += 1
            t = time.perf_counter()
            record = run_round(cluster.pk, "bench")
            wall = time.perf_counter() - t
            full.append(record.duration_ms / 1000)
            placed.append(record.placed)
            steps = " ".join(f"{n} {v:.0f}" for n, v in record.stats.get("load_steps_ms", {}).items())
            left = record.stats.get("left_for_next_round", 0)
            limited += left > 0
            self.say(
                f"full round {i}: {record.duration_ms:.0f} ms to its commit (wall {wall * 1000:.0f}; load "
                f"{record.stats['load_ms']:.0f} [{steps}], engine {record.engine_ms:.0f}, "
                f"apply {record.stats['apply_ms']:.0f} "
                f"of which queue {record.stats['queue_ms']:.0f}, commit {record.stats.get('commit_ms', 0):.0f} ms), "
                f"{record.placed} placed, {record.rejected_stale} stale"
                + (f", {left} left for the next round" if left else "")
            )
        self._analyze(o)
        churn, churn_placed = self._churn(cluster, pool, o, rng)
        result = {
            "gpus": o["gpus"],
            "pending": o["pending"],
            "engine_round_s": {"p50": statistics.median(engine), "p99": percentile(engine, 0.99), "runs": len(engine)},
            "engine_placements": placed_engine,
            "engine_placements_per_s": placed_engine / statistics.median(engine),
            "snapshot_load_s": load_s,
            "warm_up_s": warm_ms / 1000 if warm_ms is not None else None,
            "full_round_s": {"p50": statistics.median(full), "p99": percentile(full, 0.99), "runs": len(full)},
            "first_round_placed": placed[0],
            "committed_placements_per_s": placed[0] / full[0] if full[0] else 0.0,
            # The rounds that placed until the cluster was full (one if no round reached its limit), end to end.
            "fill": self._fill(full, placed),
        }
        if churn:
            result["churn_round_s"] = {
                "p50": statistics.median(churn),
                "p99": percentile(churn, 0.99),
                "runs": len(churn),
            }
            result["churn"] = o["churn"]
            result["churn_placed_median"] = statistics.median(churn_placed)
        # The process's high-water mark (issue 16: every bench says what it held): a worker's rounds, plus this
        # command's own generation of the cluster and its jobs, so an upper bound of what a worker holds.
        result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
        if o["json"]:
            self.stdout.write(json.dumps(result, indent=2))
            return
        e, f = result["engine_round_s"], result["full_round_s"]
        self.stdout.write(
            f"engine round:  p50 {e['p50'] * 1000:.0f} ms, p99 {e['p99'] * 1000:.0f} ms "
            f"({placed_engine} placements, {result['engine_placements_per_s']:.0f}/s)\n"
            f"full round:    p50 {f['p50'] * 1000:.0f} ms, p99 {f['p99'] * 1000:.0f} ms "
            f"(snapshot load {load_s:.2f} s)\n"
            f"committed:     {placed[0]} placements in the first round, "
            f"{result['committed_placements_per_s']:.0f} placements/s\n"
            f"fill:          {result['fill']['placed']} placements in {result['fill']['rounds']} rounds, "
            f"{result['fill']['s'] * 1000:.0f} ms of rounds, {result['fill']['placements_per_s']:.0f} placements/s "
            f"(at most {settings.SCHEDULER_MAX_PLACEMENTS_PER_ROUND or 'any number of'} starts a round)"
        )
        if churn:
            c = result["churn_round_s"]
            self.stdout.write(
                f"churn round:   p50 {c['p50'] * 1000:.0f} ms, p99 {c['p99'] * 1000:.0f} ms to the commit "
                f"({o['churn']:.1%} of the running jobs finish and as many arrive before each; "
                f"median {result['churn_placed_median']:.0f} placed)"
            )
        self.stdout.write(
            f"peak RSS: {result['peak_rss_mib']:.1f} MiB (this process: the generated cluster and jobs, the rounds)"
        )

    @staticmethod
    def _fill(full: list[float], placed: list[int]) -> dict:
        """The rounds up to the last that placed anything: how many, their time together, placements per second."""
        n = max((i + 1 for i, p in enumerate(placed) if p), default=1)
        s = sum(full[:n])
        return {"rounds": n, "placed": sum(placed[:n]), "s": s, "placements_per_s": sum(placed[:n]) / s if s else 0.0}

    def _analyze(self, o) -> None:
        """The planner's statistics of the tables just filled, as autovacuum keeps them on a production server (its
        default; a server with autovacuum off plans the round's reads from empty tables' statistics: scans)."""
        if o["no_analyze"] or connection.vendor != "postgresql":
            return
        t = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        self.say(f"analyzed the tables in {time.perf_counter() - t:.1f} s (not timed)")

    def _churn(self, cluster, pool, o, rng: random.Random) -> tuple[list[float], list[int]]:
        """Rounds on the full cluster: before each (untimed), a share of the running jobs finish through the
        node agent's action and as many new jobs are submitted; the round is timed to its commit."""
        times: list[float] = []
        placed: list[int] = []
        tenants = list({j.tenant for j in Job.objects.filter(pool=pool).select_related("tenant")[:1000]})
        classes = list(PriorityClass.objects.all())
        for i in range(o["churn_rounds"]):
            running = list(Job.objects.filter(pool=pool, status__in=ACTIVE_STATUSES).only("id"))
            k = max(1, round(o["churn"] * len(running))) if running else 0
            for job in rng.sample(running, k):
                actions.finish_job(Job.objects.get(pk=job.pk), succeeded=True, actor="bench")
            requests = [_request(rng, f"churn-{i}-{n}", self.one_gpu) for n in range(k)]
            if requests:
                actions.submit_jobs_bulk(rng.choice(tenants), pool, rng.choice(classes), requests, request_round=False)
            t = time.perf_counter()
            record = run_round(cluster.pk, "bench-churn")
            wall = time.perf_counter() - t
            times.append(record.duration_ms / 1000)
            placed.append(record.placed)
            st = record.stats
            steps = " ".join(f"{n} {v:.0f}" for n, v in st.get("load_steps_ms", {}).items())
            self.say(
                f"churn round {i + 1}: {k} finished, {k} arrived; {record.duration_ms:.0f} ms to its commit "
                f"(wall {wall * 1000:.0f}; load {st['load_ms']:.0f} [{steps}], engine {record.engine_ms:.0f} "
                f"[{st.get('jobs_worked_out', '?')} jobs worked out; "
                + " ".join(f"{n} {v:.0f}" for n, v in st.get("engine_phases_ms", {}).items() if n != "total")
                + "], "
                f"apply {st['apply_ms']:.0f}, commit {st.get('commit_ms', 0):.0f}), {record.placed} placed"
            )
        return times, placed

    def _cluster(self, name: str, gpus: int) -> Cluster:
        existing = Cluster.objects.filter(name=name).first()
        if existing is not None:
            self.say(f"removing the previous {name}")
            actions.delete_cluster(existing)
        self.say(f"generating {name}: {gpus // 8} nodes x 8 H100")
        fabric_actions.generate_fabric(name, nodes=gpus // 8, gpus_per_node=8, gpu_model="H100", leaf_ports=64)
        return Cluster.objects.get(name=name)

    def _cancel_leftovers(self, pool) -> None:
        """Quota changes may have requested rounds; the benchmark starts from an idle cluster."""
        for job in Job.objects.filter(pool=pool).exclude(status__in=["completed", "failed", "cancelled"]):
            actions.cancel_job(job, actor="bench")

    def _history(self, pool, tenants: list, n: int, rng: random.Random) -> None:
        """`n` jobs that finished within the last week, spread over it (recorded as finished, in bulk: set-up, not
        timed; finishing 50,000 jobs one by one through finish_job takes minutes)."""
        self.say(f"leaving {n} jobs finished within the last week")
        classes = list(PriorityClass.objects.all())
        now = timezone.now()
        for start in range(0, n, 5000):
            requests = [_request(rng, f"history-{i}", self.one_gpu) for i in range(start, min(n, start + 5000))]
            ends = [(now - timedelta(seconds=rng.uniform(0, 7 * 86400)), rng.uniform(600, 200_000)) for _ in requests]
            actions.record_finished_bulk(rng.choice(tenants), pool, rng.choice(classes), requests, ends, actor="bench")

    def _jobs(self, pool, pending: int, rng: random.Random) -> list:
        """Ten tenants with quotas, and `pending` jobs queued among them; returns the tenants."""
        tenants = [actions.create_tenant(f"bench-t{i}", max_priority="high") for i in range(10)]
        gpus = pool.cluster.nodes.count() * 8
        for t in tenants:
            actions.set_quota(t, pool, guaranteed_gpus=gpus // 10, borrow_limit=gpus // 5)
        self._cancel_leftovers(pool)
        classes = list(PriorityClass.objects.all())
        self.say(f"queueing {pending} jobs")
        per_tenant: dict[tuple, list[dict]] = {}
        for i in range(pending):
            request = _request(rng, f"bench-{i}", self.one_gpu)
            key = (rng.randrange(len(tenants)), rng.randrange(len(classes)))
            per_tenant.setdefault(key, []).append(request)
        for (t, c), requests in per_tenant.items():
            actions.submit_jobs_bulk(tenants[t], pool, classes[c], requests, request_round=False)
        return tenants
