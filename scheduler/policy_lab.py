"""The policy lab's Django side: a cluster of the database as the replay's `SimCluster`, and the what-if replay
(the dashboard's /whatif/, docs/policy-lab.md "From the dashboard") as a thin Celery task.

A what-if run is disposable: it lives in the cache for a day under `whatif:run:<id>` (its parameters, status,
progress and, once done, the same JSON `manage.py replay --json` prints plus chart series), never in the database.
The task takes the run id, replays with `scheduler.sim.run` (what the command runs), and writes the outcome there.
A run of kind `suite` is the policy suite instead (`manage.py replay --suite`: `scheduler.sim.suite.run_suite` over
its cases, the trace files found in the folders the run names); it goes through the same queue, cap and record.

Replays go to their own queue (settings.WHATIF_QUEUE, routed by CELERY_TASK_ROUTES), consumed by a worker of their
own in production and by the embedded worker beside the default queue, so they never delay rounds and ingest; at
most WHATIF_MAX_CONCURRENT are queued or running on the whole site (`claim_slot`, checked before enqueueing).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import cache

from fabric.models import Cluster
from scheduler.sim.cluster import SimCluster
from scheduler.sim.fractional import POLICIES as FRACTIONAL_POLICIES
from scheduler.sim.policies import POLICY_NAMES
from scheduler.sim.run import (
    FRACTIONAL_KIND,
    jct_charts,
    parse_trace,
    resolve_cluster,
    run_fractional_file,
    run_jct,
    with_deadline,
)
from scheduler.sim.suite import find_in, run_suite, select_cases
from scheduler.sim.traces import load_trace
from scheduler.snapshot_from_db import build_snapshot

log = logging.getLogger(__name__)

RUN_TTL_S = 24 * 3600
RECENT_RUNS = 10
FINISHED = ("done", "failed")
PROGRESS_EVERY_S = 0.5
TIMEOUT_S = float(getattr(settings, "WHATIF_TIMEOUT_S", 300))
SUITE_KIND = "suite"  # a run's params["kind"] for the policy suite (every other kind is one trace)


def inventory_cluster(name: str) -> SimCluster | None:
    """The cluster of the database named `name` (its inventory through the production adapter), or None."""
    row = Cluster.objects.filter(name=name).first()
    if row is None:
        return None
    snapshot, _index = build_snapshot(row.pk)
    try:
        return SimCluster.from_inventory(snapshot.fabric, list(snapshot.nodes), snapshot.topology, label=row.name)
    except ValueError as exc:
        raise ValueError(f"cluster {row.name}: {exc}") from exc


#
# The run store (cache)
#


def run_key(run_id: str) -> str:
    return f"whatif:run:{run_id}"


def upload_key(run_id: str) -> str:
    return f"whatif:upload:{run_id}"


def user_key(user_id: int) -> str:
    """The run a user has in flight (one at a time)."""
    return f"whatif:user:{user_id}:active"


def recent_key(user_id: int) -> str:
    return f"whatif:user:{user_id}:recent"


def get_run(run_id: str) -> dict[str, Any] | None:
    return cache.get(run_key(run_id))


def save_run(record: dict[str, Any]) -> None:
    record["updated"] = time.time()
    cache.set(run_key(record["id"]), record, RUN_TTL_S)


def is_stale(record: dict[str, Any], now: float | None = None) -> bool:
    """Queued or running with no word for longer than a run may take: its worker is gone."""
    if record["status"] in FINISHED:
        return False
    return (now or time.time()) - record.get("updated", 0) > TIMEOUT_S + 120


def release_user(user_id: int, run_id: str) -> None:
    if cache.get(user_key(user_id)) == run_id:
        cache.delete(user_key(user_id))


#
# The site-wide cap: WHATIF_MAX_CONCURRENT slots, one per queued or running run
#


def slot_key(n: int) -> str:
    return f"whatif:slot:{n}"


def _holds_a_slot(run_id: str | None) -> bool:
    record = get_run(run_id) if run_id else None
    return record is not None and record["status"] not in FINISHED and not is_stale(record)


def claim_slot(run_id: str, slots: int, hold_s: float) -> int | None:
    """One of `slots` site-wide slots for run `run_id` (whose record is saved first), or None when every slot holds
    a queued or running run.

    A slot is a cache key taken with `add` (atomic on Redis and in LocMemCache) and given back by the task before it
    writes its final status. One whose run finished without giving it back, went stale (its worker is gone) or
    expired is taken over by one claimer only: the takeover of a given holder is itself an `add`, so two claimers that
    both found it stale cannot both get the slot, and a stale holder has no worker left to give it back meanwhile.
    """
    for n in range(slots):
        if cache.add(slot_key(n), run_id, hold_s):
            return n
    for n in range(slots):
        holder = cache.get(slot_key(n))
        if holder is not None:
            if _holds_a_slot(holder) or not cache.add(f"{slot_key(n)}:takeover:{holder}", run_id, 60):
                continue
            if cache.get(slot_key(n)) == holder:
                cache.delete(slot_key(n))
        if cache.add(slot_key(n), run_id, hold_s):
            return n
    return None


def release_slot(record: dict[str, Any]) -> None:
    n = record.get("slot")
    if n is not None and cache.get(slot_key(n)) == record["id"]:
        cache.delete(slot_key(n))


#
# The task
#


@shared_task(
    name="scheduler.policy_lab.whatif_replay",
    ignore_result=True,
    acks_late=False,  # a run lost with its worker is reported stale, never replayed again and again
    soft_time_limit=TIMEOUT_S + 30,
    time_limit=TIMEOUT_S + 60,
)
def whatif_replay(run_id: str) -> str:
    record = get_run(run_id)
    if record is None or record["status"] != "queued":
        return "gone" if record is None else record["status"]
    record["status"] = "running"
    record["started"] = time.time()
    save_run(record)
    try:
        record["result"] = _replay(record)
        record["status"] = "done"
    except (ValueError, RuntimeError, SoftTimeLimitExceeded) as exc:  # TraceError, SimError, ReplayTimeout ...
        record["status"], record["error"] = "failed", str(exc) or type(exc).__name__
        if isinstance(exc, SoftTimeLimitExceeded):
            record["error"] = f"the replay took longer than {TIMEOUT_S:g} s"
    except Exception as exc:  # a bug: say so on the page, keep the traceback in the log
        log.exception("what-if run %s failed", run_id)
        record["status"], record["error"] = "failed", f"internal error ({type(exc).__name__}): {exc}"
    finally:
        record["wall_s"] = round(time.time() - record["started"], 3)
        release_slot(record)  # before the final status: a finished run never holds a slot another run waits for
        save_run(record)
        cache.delete(upload_key(run_id))
        release_user(record["user"], run_id)
    return record["status"]


def _replay(record: dict[str, Any]) -> dict[str, Any]:
    p = record["params"]
    if p["kind"] == SUITE_KIND:
        return _suite(record)
    progress = with_deadline(_Progress(record), TIMEOUT_S)
    if p["kind"] == FRACTIONAL_KIND:
        return run_fractional_file(p["trace_path"], ",".join(p["policies"]), limit=p["limit"], progress=progress)
    if p.get("upload"):
        text = cache.get(upload_key(record["id"]))
        if text is None:
            raise ValueError("the uploaded trace is gone from the cache: submit it again")
        trace = parse_trace(p["kind"], text, p["trace_name"])
    else:
        trace = load_trace(p["kind"], p["trace_path"])
    spec_file = p.get("spec_file")
    cluster = resolve_cluster(
        p["cluster_spec"],
        p["gpu_model"],
        p["link_rate"],
        spec_file=lambda _spec: Path(spec_file) if spec_file else None,
        inventory=inventory_cluster,
    )
    run = run_jct(
        trace,
        cluster,
        p["policies"],
        network_model=p["network_model"],
        round_s=p["round_s"],
        seed=p["seed"],
        limit=p["limit"],
        progress=progress,
    )
    return run.as_json(plots=[], charts=jct_charts(run.results))


class _Progress:
    """progress(policy, done, total) -> the record's `progress`, written at most every PROGRESS_EVERY_S."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.n = max(1, len(record["params"]["policies"]))
        self.seen: list[str] = []
        self.last = 0.0

    def __call__(self, policy: str, done: int, total: int) -> None:
        if policy not in self.seen:
            self.seen.append(policy)
        index = self.seen.index(policy)
        fraction = (index + (done / total if total else 1.0)) / self.n
        self.record["progress"] = {
            "policy": policy,
            "done": done,
            "total": total,
            "index": index + 1,
            "policies": self.n,
            "fraction": round(min(1.0, fraction), 4),
        }
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S or done >= total:
            self.last = now
            save_run(self.record)


def suite_steps(cases, dirs: list[str]) -> list[tuple[str, str]]:
    """(case key, policy) in the order `run_suite` replays them: every JCT policy of a JCT case, every fractional
    policy of the Alibaba case, nothing for a case whose trace file is not in `dirs` (it is reported skipped)."""

    steps: list[tuple[str, str]] = []
    for case in cases:
        if case.generate is None and find_in(case.file, dirs) is None:
            continue
        names = FRACTIONAL_POLICIES if case.kind == "alibaba" else POLICY_NAMES
        steps += [(case.key, name) for name in names]
    return steps


def _suite(record: dict[str, Any]) -> dict[str, Any]:
    """The document `manage.py replay --suite --suite-cases ... --json` prints for the same trace folders."""
    p = record["params"]
    dirs = list(p["trace_dirs"])
    cases = select_cases(",".join(p["suite_cases"]))
    tracker = _SuiteProgress(record, suite_steps(cases, dirs))
    deadline = with_deadline(lambda *_: None, TIMEOUT_S)  # raises ReplayTimeout once the run is over its time

    def progress(case: str, policy: str, done: int, total: int) -> None:
        deadline(f"{case}: {policy}", done, total)
        tracker(case, policy, done, total)

    result = run_suite(
        lambda name: find_in(name, dirs),
        cases,
        round_s=p["round_s"],
        seed=p["seed"],
        limit=p["limit"],
        progress=progress,
    )
    result["trace_dirs"] = [str(d) for d in dirs]  # as the command adds them
    return result


class _SuiteProgress:
    """progress(case, policy, done, total) -> the record's `progress`, in the shape of a replay's (`policy`, `index`
    of `policies`, `fraction`) so the run page shows it alike, with the case beside; one step per (case, policy)."""

    def __init__(self, record: dict[str, Any], steps: list[tuple[str, str]]) -> None:
        self.record = record
        self.steps = list(steps)
        self.last = 0.0

    def __call__(self, case: str, policy: str, done: int, total: int) -> None:
        if (case, policy) not in self.steps:  # not foreseen by suite_steps: counted from now on
            self.steps.append((case, policy))
        index = self.steps.index((case, policy))
        fraction = (index + (done / total if total else 1.0)) / len(self.steps)
        self.record["progress"] = {
            "case": case,
            "policy": policy,
            "done": done,
            "total": total,
            "index": index + 1,
            "policies": len(self.steps),
            "fraction": round(min(1.0, fraction), 4),
        }
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S or done >= total:
            self.last = now
            save_run(self.record)
