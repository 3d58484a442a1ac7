"""python manage.py replay --trace KIND PATH --cluster-spec SPEC --policy NAME[,NAME...]: the policy lab.

Replays a real job trace through the production engine (`default`) and the published baselines
(`fifo`, `fjf`, `srtf`, `tiresias-l`, `tiresias-g`) and prints, per policy, the average / median / p95
job completion time, makespan, queueing delay, GPU utilisation, share of multi-GPU jobs placed in one
NVLink island / one leaf, preemptions and migrations (docs/policy-lab.md).

    python manage.py replay --trace tiresias ../shared/data/traces/tiresias_60_job.csv \\
        --cluster-spec 2x4 --policy fifo,srtf,tiresias-l,default --network-model off
    python manage.py replay --trace pollux ../shared/data/traces/pollux_workload-6.csv \\
        --cluster-spec 16x4/4:2 --policy default,default-blind --network-model on --plot out/
    python manage.py replay --trace alibaba ../shared/data/traces/alibaba_v2023_openb_pod_list_default.csv \\
        --policy best-fit,fgd,default

SPEC: `NODESxGPUS[/NODES_PER_LEAF][:OVERSUB]`, a Tiresias cluster-spec CSV (`n32g4.csv`), or the name of a
cluster in the database (its inventory, through the production adapter). This command is the adapter:
everything it runs lives in the pure `scheduler.sim` package.

    python manage.py replay --suite [--json suite.json] [--suite-cases tiresias-2x4,slurm-churn]

`--suite` runs every shipped trace under every policy (`scheduler.sim.suite`) and prints one table with the
ratios to each trace's peer; the trace files are looked up in `--traces-dir` (repeatable), else in
settings.WHATIF_TRACE_DIRS.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from scheduler.policy_lab import inventory_cluster
from scheduler.sim import load_trace, parse_policies
from scheduler.sim.cluster import SimCluster
from scheduler.sim.engine_policy import DEFAULT_ROUND_S
from scheduler.sim.fractional import format_fractional
from scheduler.sim.plots import write_plots
from scheduler.sim.report import format_table
from scheduler.sim.run import DEFAULT_POLICIES, UnknownCluster, resolve_cluster, run_fractional_file, run_jct
from scheduler.sim.suite import ALL_KEYS, find_in, format_suite, run_suite, select_cases
from scheduler.sim.traces import KINDS


class _Progress:
    """One progress bar per policy on stderr (tqdm)."""

    def __init__(self, enabled: bool, stream) -> None:
        self.enabled = enabled
        self.stream = stream
        self.bars: dict[str, tqdm] = {}

    def __call__(self, policy: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        bar = self.bars.get(policy)
        if bar is None:
            bar = self.bars[policy] = tqdm(
                total=total, desc=f"{policy:>14}", unit="job", file=self.stream, leave=True, mininterval=0.2
            )
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


class Command(BaseCommand):
    help = "Replay a GPU-cluster job trace through the production engine and the published baselines."

    def add_arguments(self, parser):
        parser.add_argument(
            "--trace",
            nargs=2,
            metavar=("KIND", "PATH"),
            default=None,
            help=f"trace kind ({', '.join(KINDS)}) and file",
        )
        parser.add_argument("--suite", action="store_true", help="every shipped trace under every policy, one table")
        parser.add_argument(
            "--suite-cases",
            default=None,
            help=f"with --suite: only these cases ({', '.join(ALL_KEYS)}; or 'variations', 'all')",
        )
        parser.add_argument(
            "--traces-dir",
            action="append",
            default=None,
            help="with --suite: a folder holding the trace files (repeatable; default settings.WHATIF_TRACE_DIRS)",
        )
        parser.add_argument(
            "--cluster-spec",
            default=None,
            help="NODESxGPUS[/NODES_PER_LEAF][:OVERSUB], a Tiresias spec CSV, or a cluster name",
        )
        parser.add_argument("--policy", default=None, help=f"comma-separated (default {DEFAULT_POLICIES})")
        parser.add_argument(
            "--network-model",
            choices=("on", "off"),
            default="on",
            help="on: placement-dependent progress and checkpoint costs; off: Tiresias' assumptions",
        )
        parser.add_argument(
            "--json",
            nargs="?",
            const="-",
            default=None,
            metavar="FILE",
            help="JSON instead of the table: on stdout, or written to FILE (then the table is printed too)",
        )
        parser.add_argument("--jobs", action="store_true", help="with --json: per-job records and utilisation series")
        parser.add_argument("--plot", metavar="DIR", default=None, help="write jct_cdf.png and utilisation.png here")
        parser.add_argument(
            "--round-s",
            type=float,
            default=DEFAULT_ROUND_S,
            help="seconds between the engine's periodic rounds (production: ROUND_INTERVAL_S)",
        )
        parser.add_argument("--gpu-model", default="V100", help="GPU model of a NODESxGPUS cluster (default V100)")
        parser.add_argument("--link-rate", default="EDR", help="HCA rate of a NODESxGPUS cluster (default EDR)")
        parser.add_argument("--seed", type=int, default=0, help="node order of default-blind")
        parser.add_argument("--limit", type=int, default=None, help="replay only the first N jobs")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, **o):
        if o["suite"]:
            return self._suite(o)
        if not o["trace"]:
            raise CommandError("--trace KIND PATH is required (or --suite)")
        kind, path = o["trace"]
        if kind not in KINDS:
            raise CommandError(f"unknown trace kind {kind!r}; known: {', '.join(KINDS)}")
        if not Path(path).exists():
            raise CommandError(f"trace file {path} does not exist")
        if o["round_s"] <= 0:
            raise CommandError("--round-s must be > 0")
        if o["plot"] and importlib.util.find_spec("matplotlib") is None:
            # Before the replay, not after minutes of it: the demo's install has no matplotlib.
            raise CommandError("--plot needs matplotlib: pip install '.[sim]' (the project's 'sim' extra)")
        progress = _Progress(not o["no_progress"], sys.stderr)
        if kind == "alibaba":
            return self._fractional(path, o, progress)
        if not o["cluster_spec"]:
            raise CommandError("--cluster-spec is required for a JCT trace")
        try:
            trace = load_trace(kind, path)
            policies = parse_policies(o["policy"] or DEFAULT_POLICIES)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        cluster = self._cluster(o["cluster_spec"], o["gpu_model"], o["link_rate"])
        try:
            run = run_jct(
                trace,
                cluster,
                policies,
                network_model=o["network_model"],
                round_s=o["round_s"],
                seed=o["seed"],
                limit=o["limit"],
                progress=progress,
            )
        finally:
            progress.close()
        trace, results = run.trace, run.results
        plots = []
        if o["plot"]:
            title = f"{trace.kind} on {cluster.label}, network model {o['network_model']}"
            plots = [str(p) for p in write_plots(results, o["plot"], title)]
        if o["json"]:
            doc = run.as_json(with_jobs=o["jobs"], plots=plots)
            if self._write_json(o["json"], doc):
                return
        self.stdout.write(format_table(trace, results))
        self.stdout.write(f"replayed {len(results)} policies in {run.wall_s:.1f} s")
        for p in plots:
            self.stdout.write(f"wrote {p}")

    # ------------------------------------------------------------------ adapters

    def _cluster(self, spec: str, gpu_model: str, link_rate: str) -> SimCluster:
        try:
            return resolve_cluster(spec, gpu_model, link_rate, inventory=inventory_cluster)
        except UnknownCluster as exc:
            raise CommandError(f"--cluster-spec {exc}") from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc

    def _fractional(self, path: str, o: dict, progress: _Progress) -> None:
        if o["cluster_spec"]:
            self.stderr.write("note: the Alibaba replay runs on the trace's own node list; --cluster-spec is ignored")
        try:
            result = run_fractional_file(path, o["policy"], limit=o["limit"], progress=progress)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            progress.close()
        if o["json"] and self._write_json(o["json"], result):
            return
        self.stdout.write(format_fractional(result))

    def _write_json(self, target: str, doc: dict) -> bool:
        """JSON on stdout (target "-": True, nothing else to print) or into a file (False: print the table too)."""
        text = json.dumps(doc, indent=2)
        if target == "-":
            self.stdout.write(text)
            return True
        try:
            Path(target).write_text(text + "\n")
        except OSError as exc:
            raise CommandError(f"cannot write --json {target}: {exc}") from exc
        self.stderr.write(f"wrote {target}")
        return False

    def _suite(self, o: dict) -> None:
        if o["trace"]:
            raise CommandError("--suite runs the shipped traces; it takes no --trace")
        try:
            cases = select_cases(o["suite_cases"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        dirs = o["traces_dir"] or list(settings.WHATIF_TRACE_DIRS)
        show = not o["no_progress"]
        state = {"last": None}

        def progress(case: str, policy: str, done: int, total: int) -> None:
            if show and (case, policy) != state["last"]:
                state["last"] = (case, policy)
                self.stderr.write(f"suite: {case}: {policy} ...")

        result = run_suite(
            lambda name: find_in(name, dirs),
            cases,
            round_s=o["round_s"],
            seed=o["seed"],
            limit=o["limit"],
            progress=progress,
        )
        result["trace_dirs"] = [str(d) for d in dirs]
        if o["json"] and self._write_json(o["json"], result):
            return
        self.stdout.write(format_suite(result))
