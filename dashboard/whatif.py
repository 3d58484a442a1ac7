"""The what-if page's form and runs (/whatif/, docs/policy-lab.md "From the dashboard").

The form offers the trace files of settings.WHATIF_TRACE_DIRS (or an upload), a cluster spec with the syntax of
`manage.py replay --cluster-spec` (or a cluster of the database by name), policies and the network model, and
validates with the replay's own loaders and parsers, so an error reads as the command's would (`file:line: ...`).
A valid form becomes a run in the cache and a Celery task (scheduler.policy_lab.whatif_replay); one at a time per
user and WHATIF_MAX_CONCURRENT on the site, bounded by WHATIF_MAX_JOBS, WHATIF_MAX_GPUS, WHATIF_TIMEOUT_S and
WHATIF_UPLOAD_MAX_BYTES (checked as the upload streams: CappedUploadHandler).

The policy suite (`manage.py replay --suite`) is a run too: SuiteForm picks its cases, start_run queues it through the
same task, queue, cap and one-run rule, and suite_tables lays its document out as the command's table.
"""

from __future__ import annotations

import io
import shlex
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings
from django.core.cache import cache
from django.core.files.uploadedfile import InMemoryUploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.forms.utils import ErrorDict
from django.http import QueryDict
from django.utils.datastructures import MultiValueDict

from fabric.topology.catalog import GPU_MODELS
from fabric.topology.link_speeds import SPEEDS
from scheduler import policy_lab
from scheduler.sim import suite as policy_suite
from scheduler.sim.cluster import looks_like_spec, parse_cluster_spec
from scheduler.sim.engine_policy import DEFAULT_ROUND_S
from scheduler.sim.fractional import POLICIES as FRACTIONAL_POLICIES
from scheduler.sim.fractional import checkpoint_label
from scheduler.sim.policies import PLACEMENT_VARIANTS, POLICY_NAMES, parse_policies
from scheduler.sim.run import (
    DEFAULT_POLICIES,
    FRACTIONAL_KIND,
    UnknownCluster,
    guess_kind,
    is_cluster_spec_file,
    parse_trace,
    resolve_cluster,
)
from scheduler.sim.traces import KINDS, load_trace
from scheduler.sim.traces.alibaba import load_openb

SUITE_KIND = policy_lab.SUITE_KIND
SPEC_EXAMPLES = ("2x4", "4x4", "32x4", "16x4/4:2")
POLICY_HELP = {
    "fifo": "submission order, YARN-CS placement",
    "fjf": "first job that fits, YARN-CS placement",
    "srtf": "shortest remaining time (oracle durations)",
    "tiresias-l": "Tiresias 2D-LAS",
    "tiresias-g": "Tiresias Gittins index",
    "default": "our engine (production scheduler.core)",
    "default-blind": "our engine, topology-blind placement",
    "fifo@count": "fifo counting GPUs",
    "fjf@count": "fjf counting GPUs",
}
FRACTIONAL_HELP = {
    "best-fit": "tightest GPU",
    "fgd": "fragmentation gradient descent",
    "default": "our engine's placer on an MPS pool",
}


def limits() -> dict[str, Any]:
    return {
        "max_jobs": settings.WHATIF_MAX_JOBS,
        "max_gpus": settings.WHATIF_MAX_GPUS,
        "timeout_s": settings.WHATIF_TIMEOUT_S,
        "upload_max_bytes": settings.WHATIF_UPLOAD_MAX_BYTES,
    }


#
# Trace files on the server
#


@dataclass(frozen=True)
class TraceFile:
    value: str  # "<folder index>/<file name>": what the form posts (never a path)
    folder: str
    name: str
    kind: str | None  # None: a Tiresias cluster-spec CSV
    size: int

    @property
    def path(self) -> Path:
        return Path(self.folder) / self.name


def trace_files(dirs: list[str] | None = None) -> list[TraceFile]:
    """Trace files (and Tiresias cluster-spec CSVs) directly in the configured folders, by folder then name."""
    out = []
    for i, folder in enumerate(settings.WHATIF_TRACE_DIRS if dirs is None else dirs):
        root = Path(folder).expanduser()
        if not root.is_dir():
            continue
        for f in sorted(root.iterdir()):
            if not f.is_file() or f.name.startswith("."):
                continue
            kind = guess_kind(f.name)
            if kind is None and not is_cluster_spec_file(f):
                continue
            out.append(TraceFile(f"{i}/{f.name}", str(root), f.name, kind, f.stat().st_size))
    return out


#
# The upload, capped as it streams
#

# Room for the form's other fields and the multipart framing beside the file: a body declaring more than the cap plus
# this cannot hold an upload within the cap, and is refused unread.
FORM_FIELDS_BYTES = 64 * 1024


class CappedUploadHandler(FileUploadHandler):
    """The what-if form's only upload handler: the file is kept in memory and stopped at WHATIF_UPLOAD_MAX_BYTES as
    it streams, so an oversized trace is neither held nor written to disk (Django's default handlers spool anything
    over FILE_UPLOAD_MAX_MEMORY_SIZE to a temporary file, and the form saw its size only after that). A body whose
    Content-Length already says it cannot fit is not parsed at all. `refused` says why, once it refused."""

    def __init__(self, request, cap: int) -> None:
        super().__init__(request)
        self.cap = cap
        self.refused = ""
        self._buffer: io.BytesIO | None = None

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length > self.cap + FORM_FIELDS_BYTES:
            self.refused = f"the request is {content_length:,} bytes; an upload may be at most {self.cap:,} bytes"
            return QueryDict(encoding=encoding), MultiValueDict()  # nothing of it is read
        return None

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self._buffer = io.BytesIO()

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        if start + len(raw_data) > self.cap:
            self.refused = (
                f"{self.file_name}: more than {self.cap:,} bytes; an upload may be at most {self.cap:,} bytes"
            )
            self._buffer = None
            raise SkipFile  # the parser discards the rest of this file and goes on with the other fields
        assert self._buffer is not None
        self._buffer.write(raw_data)

    def file_complete(self, file_size: int) -> InMemoryUploadedFile | None:
        if self._buffer is None:
            return None
        self._buffer.seek(0)
        return InMemoryUploadedFile(
            self._buffer, self.field_name, self.file_name, self.content_type, file_size, self.charset,
            self.content_type_extra,
        )  # fmt: skip


#
# The form
#


class PolicyField(forms.MultipleChoiceField):
    """Checkboxes whose values the replay itself validates (WhatIfForm.clean), with its own error message."""

    widget = forms.CheckboxSelectMultiple

    def validate(self, value):
        if self.required and not value:
            raise forms.ValidationError(self.error_messages["required"], code="required")


class WhatIfForm(forms.Form):
    kind = forms.ChoiceField(
        choices=[("", "from the file name"), *((k, k) for k in KINDS)], required=False, label="Trace kind"
    )
    trace = forms.ChoiceField(choices=(), required=False, label="Trace file")
    upload = forms.FileField(required=False, label="or upload a trace")
    cluster_spec = forms.CharField(max_length=200, required=False, initial="2x4", label="Cluster")
    gpu_model = forms.ChoiceField(choices=[(m, m) for m in GPU_MODELS], initial="V100", label="GPU model")
    link_rate = forms.ChoiceField(choices=[(r, r) for r in SPEEDS], initial="EDR", label="HCA rate")
    policies = PolicyField(
        choices=[(p, POLICY_HELP[p]) for p in (*POLICY_NAMES, *PLACEMENT_VARIANTS) if p in POLICY_HELP],
        required=False,
        initial=DEFAULT_POLICIES.split(","),
    )
    fractional_policies = PolicyField(
        choices=[(p, FRACTIONAL_HELP.get(p, p)) for p in FRACTIONAL_POLICIES],
        required=False,
        initial=list(FRACTIONAL_POLICIES),
    )
    network_model = forms.BooleanField(required=False, initial=True, label="Network model")
    round_s = forms.FloatField(initial=DEFAULT_ROUND_S, min_value=0.1, max_value=3600, label="Round every (s)")
    seed = forms.IntegerField(initial=0, min_value=0, max_value=2**31 - 1, label="Seed (default-blind)")
    limit = forms.IntegerField(required=False, min_value=1, label="First N jobs")

    def __init__(
        self, *args, files_on_server: list[TraceFile] | None = None, upload_refused: str = "", **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.upload_refused = upload_refused  # CappedUploadHandler.refused: the upload was stopped as it streamed
        self.files_on_server = trace_files() if files_on_server is None else files_on_server
        self.by_value = {f.value: f for f in self.files_on_server}
        self.fields["trace"].choices = [("", "—"), *((f.value, f.name) for f in self.files_on_server if f.kind)]

    # --------------------------------------------------------------- helpers the template reads

    def trace_groups(self) -> list[dict[str, Any]]:
        groups: dict[str, list[TraceFile]] = {}
        for f in self.files_on_server:
            if f.kind:
                groups.setdefault(f.folder, []).append(f)
        return [{"folder": k, "files": v} for k, v in groups.items()]

    def spec_files(self) -> list[str]:
        return sorted({f.name for f in self.files_on_server if f.kind is None})

    def _spec_file(self, name: str) -> Path | None:
        for f in self.files_on_server:
            if f.kind is None and f.name == name:
                return f.path
        return None

    # --------------------------------------------------------------- validation

    def full_clean(self) -> None:
        if not self.upload_refused:
            super().full_clean()
            return
        # Say only that: the rest of the form is not judged against a trace that was never read.
        self._errors = ErrorDict()
        self.cleaned_data = {}
        self.add_error("upload", self.upload_refused)

    def clean_upload(self):
        f = self.cleaned_data.get("upload")
        if f is None:
            return None
        cap = settings.WHATIF_UPLOAD_MAX_BYTES
        if f.size > cap:
            raise forms.ValidationError(f"{f.name}: {f.size:,} bytes; an upload may be at most {cap:,} bytes")
        raw = f.read(cap + 1)
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise forms.ValidationError(f"{f.name}: not UTF-8 text (byte {exc.start})") from None
        return {"name": Path(f.name).name or "upload", "text": text}

    def clean_cluster_spec(self) -> str:
        return (self.cleaned_data.get("cluster_spec") or "").strip()

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        upload, chosen = data.get("upload"), data.get("trace")
        if upload and chosen:
            raise forms.ValidationError("Choose a trace file or upload one, not both.")
        if not upload and not chosen:
            self.add_error("trace", "Choose a trace file or upload one.")
            return data
        kind = data.get("kind") or guess_kind(upload["name"] if upload else self.by_value[chosen].name)
        if not kind:
            self.add_error("kind", "Which kind of trace is it? The file name does not say.")
            return data
        data["kind"] = kind
        self._clean_policies(data, kind)
        self._clean_trace(data, kind, upload, chosen)
        if kind != FRACTIONAL_KIND and not self.errors:
            self._clean_cluster(data)
        return data

    def _clean_policies(self, data: dict, kind: str) -> None:
        if kind == FRACTIONAL_KIND:
            names = data.get("fractional_policies") or []
            for n in names:
                if n not in FRACTIONAL_POLICIES:
                    msg = f"unknown policy {n!r} for the fractional trace; choose from {', '.join(FRACTIONAL_POLICIES)}"
                    self.add_error("fractional_policies", msg)
                    return
            if not names:
                self.add_error("fractional_policies", "Choose at least one policy.")
            data["policy_list"] = list(names)
            return
        names = data.get("policies") or []
        if not names:
            self.add_error("policies", "Choose at least one policy.")
            return
        try:
            data["policy_list"] = parse_policies(",".join(names))
        except ValueError as exc:
            self.add_error("policies", str(exc))

    def _clean_trace(self, data: dict, kind: str, upload: dict | None, chosen: str) -> None:
        field = "upload" if upload else "trace"
        limit = data.get("limit")
        try:
            if kind == FRACTIONAL_KIND:
                if upload:
                    self.add_error(
                        "upload",
                        "An Alibaba pod list needs its node list beside it: choose it from the trace files instead.",
                    )
                    return
                pods, _nodes = load_openb(self.by_value[chosen].path)
                jobs = len(pods)
            else:
                if upload:
                    trace = parse_trace(kind, upload["text"], upload["name"])
                else:
                    trace = load_trace(kind, self.by_value[chosen].path)
                jobs = len(trace.jobs)
        except (ValueError, OSError) as exc:  # TraceError: "file:line: problem"
            self.add_error(field, str(exc))
            return
        data["jobs"] = min(jobs, limit) if limit else jobs
        cap = settings.WHATIF_MAX_JOBS
        if data["jobs"] > cap:
            self.add_error(
                "limit",
                f"The trace has {jobs:,} {'pods' if kind == FRACTIONAL_KIND else 'jobs'}; a what-if run replays at "
                f"most {cap:,}: set “First N jobs” to {cap:,} or fewer.",
            )

    def _clean_cluster(self, data: dict) -> None:
        spec = data.get("cluster_spec")
        if not spec:
            self.add_error("cluster_spec", "A cluster is required for a JCT trace (e.g. 2x4, 16x4/4:2).")
            return
        cap = settings.WHATIF_MAX_GPUS
        try:
            shape = parse_cluster_spec(spec, data["gpu_model"], data["link_rate"]) if looks_like_spec(spec) else None
        except ValueError:
            shape = None  # resolve_cluster says what is wrong
        if shape is not None and shape.gpus > cap:  # refused before the fabric is built
            self.add_error("cluster_spec", f"{spec} has {shape.gpus:,} GPUs; a what-if run simulates at most {cap:,}.")
            return
        try:
            cluster = resolve_cluster(
                spec,
                data["gpu_model"],
                data["link_rate"],
                spec_file=self._spec_file,
                inventory=policy_lab.inventory_cluster,
            )
        except UnknownCluster as exc:
            self.add_error("cluster_spec", f"Cluster {exc}.")
            return
        except ValueError as exc:
            self.add_error("cluster_spec", str(exc))
            return
        if cluster.n_gpus > cap:
            self.add_error(
                "cluster_spec", f"{cluster.label} has {cluster.n_gpus:,} GPUs; a what-if run simulates at most {cap:,}."
            )
        spec_file = self._spec_file(spec)
        data["spec_file"] = str(spec_file) if spec_file else None
        data["cluster_label"] = cluster.label

    def params(self) -> dict[str, Any]:
        """The run's parameters, JSON-ready (what the task reads)."""
        d = self.cleaned_data
        upload = d.get("upload")
        chosen = self.by_value.get(d.get("trace") or "")
        fractional = d["kind"] == FRACTIONAL_KIND
        return {
            "kind": d["kind"],
            "upload": bool(upload),
            "trace_name": upload["name"] if upload else chosen.name,
            "trace_path": None if upload else str(chosen.path),
            "jobs": d["jobs"],
            "cluster_spec": None if fractional else d["cluster_spec"],
            "cluster_label": None if fractional else d.get("cluster_label"),
            "spec_file": None if fractional else d.get("spec_file"),
            "gpu_model": d["gpu_model"],
            "link_rate": d["link_rate"],
            "policies": d["policy_list"],
            "network_model": "on" if d["network_model"] else "off",
            "round_s": d["round_s"],
            "seed": d["seed"],
            "limit": d.get("limit"),
        }


class SuiteForm(forms.Form):
    """The policy suite's cases (`replay --suite --suite-cases`): the shipped ones by default, the generated churn
    variations when ticked. The trace files are looked up in WHATIF_TRACE_DIRS, as the command does by default."""

    cases = PolicyField(
        choices=[(c.key, c.key) for c in (*policy_suite.CASES, *policy_suite.VARIATIONS)],
        required=False,
        initial=list(policy_suite.CASE_KEYS),
    )

    def clean(self):
        data = super().clean()
        keys = data.get("cases") or []
        if not keys:
            self.add_error("cases", "Choose at least one case.")
            return data
        try:  # the suite's own selection and message (unknown keys are named)
            data["case_list"] = [c.key for c in policy_suite.select_cases(",".join(keys))]
        except ValueError as exc:
            self.add_error("cases", str(exc))
        return data

    def case_rows(self) -> list[dict[str, Any]]:
        """Each case as the form shows it: its label, whether its file is in the trace folders, ticked or not."""
        dirs = list(settings.WHATIF_TRACE_DIRS)
        ticked = set(self["cases"].value() or [])
        rows = []
        for variation, cases in ((False, policy_suite.CASES), (True, policy_suite.VARIATIONS)):
            for c in cases:
                found = c.generate is not None or policy_suite.find_in(c.file, dirs) is not None
                rows.append(
                    {
                        "key": c.key,
                        "label": suite_case_label(c.title, c.kind, c.cluster, c.network),
                        "file": c.file or f"drawn: {c.generate[0]} jobs, seed {c.generate[1]}",
                        "found": found,
                        "variation": variation,
                        "checked": c.key in ticked,
                    }
                )
        return rows

    def params(self) -> dict[str, Any]:
        """The run's parameters (what the task reads); the suite's own round, seed and no limit, as the command's
        defaults."""
        cases = self.cleaned_data["case_list"]
        return {
            "kind": SUITE_KIND,
            "upload": False,
            "trace_name": "policy suite",
            "suite_cases": cases,
            "trace_dirs": [str(d) for d in settings.WHATIF_TRACE_DIRS],
            "policies": [],
            "cluster_spec": None,
            "cluster_label": None,
            "round_s": DEFAULT_ROUND_S,
            "seed": 0,
            "limit": None,
        }


def suite_case_label(title: str, kind: str, cluster: str | None, network: bool | str | None) -> str:
    """A case as the command's table names it (scheduler.sim.suite._case_label)."""
    if kind == "alibaba":
        return title
    on = network if isinstance(network, str) else ("on" if network else "off")
    return f"{title} {cluster} {on}"


#
# Runs
#


class Busy(Exception):
    """The user has a run in flight."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


class AtCapacity(Exception):
    """The site has WHATIF_MAX_CONCURRENT runs queued or running."""

    def __init__(self, slots: int) -> None:
        runs = "run is" if slots == 1 else "runs are"
        super().__init__(
            f"{slots} what-if {runs} already queued or running on this site (WHATIF_MAX_CONCURRENT = {slots}): "
            "try again when one has finished."
        )


def start_run(user, form: WhatIfForm) -> str:
    """A new run in the cache, its task enqueued (eager: run by the time this returns); Busy if the user has one in
    flight, AtCapacity (nothing queued, nothing held) if the site has WHATIF_MAX_CONCURRENT."""
    run_id = uuid.uuid4().hex
    key = policy_lab.user_key(user.pk)
    hold = settings.WHATIF_TIMEOUT_S + 180
    if not cache.add(key, run_id, hold):
        other = cache.get(key)
        record = policy_lab.get_run(other) if other else None
        if record is not None and record["status"] not in policy_lab.FINISHED and not policy_lab.is_stale(record):
            raise Busy(other)
        cache.set(key, run_id, hold)
    record = {
        "id": run_id,
        "user": user.pk,
        "username": user.get_username(),
        "created": time.time(),
        "status": "queued",
        "params": form.params(),
        "progress": None,
        "error": "",
        "result": None,
    }
    policy_lab.save_run(record)  # before the claim: a slot's holder always has a record to be judged by
    record["slot"] = policy_lab.claim_slot(run_id, settings.WHATIF_MAX_CONCURRENT, hold)
    if record["slot"] is None:
        cache.delete(policy_lab.run_key(run_id))
        policy_lab.release_user(user.pk, run_id)
        raise AtCapacity(settings.WHATIF_MAX_CONCURRENT)
    policy_lab.save_run(record)
    upload = form.cleaned_data.get("upload")
    if upload:
        cache.set(policy_lab.upload_key(run_id), upload["text"], policy_lab.RUN_TTL_S)
    recent = [run_id, *(r for r in cache.get(policy_lab.recent_key(user.pk), []) if r != run_id)]
    cache.set(policy_lab.recent_key(user.pk), recent[: policy_lab.RECENT_RUNS], policy_lab.RUN_TTL_S)
    try:
        policy_lab.whatif_replay.delay(run_id)
    except Exception as exc:  # the broker is down: say so on the run's page
        record = policy_lab.get_run(run_id) or record
        if record["status"] == "queued":
            policy_lab.release_slot(record)
            record.update(status="failed", error=f"could not queue the run: {exc}")
            policy_lab.save_run(record)
        policy_lab.release_user(user.pk, run_id)
    return run_id


def recent_runs(user) -> list[dict[str, Any]]:
    ids = cache.get(policy_lab.recent_key(user.pk), [])
    found = cache.get_many([policy_lab.run_key(i) for i in ids])
    records = [found[k] for k in (policy_lab.run_key(i) for i in ids) if k in found]
    return [status_of(r) | {"params": r["params"], "created_at": created_at(r)} for r in records]


def status_of(record: dict[str, Any]) -> dict[str, Any]:
    """What the page polls: small, no result."""
    status, error = record["status"], record.get("error") or ""
    if policy_lab.is_stale(record):
        status, error = "failed", "the run stopped without a result (no worker took it, or its worker was lost)"
    return {
        "id": record["id"],
        "status": status,
        "finished": status in policy_lab.FINISHED,
        "progress": record.get("progress"),
        "error": error,
        "created": record["created"],
        "wall_s": record.get("wall_s"),
    }


def created_at(record: dict[str, Any]) -> datetime:
    return datetime.fromtimestamp(record["created"], tz=UTC)


def command_line(params: dict[str, Any]) -> str:
    """The `manage.py replay` that gives the same figures (an upload is named by its file name)."""
    if params["kind"] == SUITE_KIND:
        words = ["python manage.py replay --suite"]
        if list(params["suite_cases"]) != list(policy_suite.CASE_KEYS):
            words += ["--suite-cases", ",".join(params["suite_cases"])]
        return " ".join([*words, "--json"])
    words = [
        "python manage.py replay",
        "--trace",
        params["kind"],
        shlex.quote(params["trace_path"] or params["trace_name"]),
    ]
    if params["kind"] != FRACTIONAL_KIND:
        words += ["--cluster-spec", shlex.quote(params["spec_file"] or params["cluster_spec"])]
        if params["gpu_model"] != "V100":
            words += ["--gpu-model", params["gpu_model"]]
        if params["link_rate"] != "EDR":
            words += ["--link-rate", params["link_rate"]]
        words += ["--network-model", params["network_model"]]
        if params["round_s"] != DEFAULT_ROUND_S:
            words += ["--round-s", f"{params['round_s']:g}"]
        if params["seed"]:
            words += ["--seed", str(params["seed"])]
    words += ["--policy", ",".join(params["policies"])]
    if params["limit"]:
        words += ["--limit", str(params["limit"])]
    return " ".join([*words, "--json"])


#
# Result -> table rows (formatted here, raw numbers in data- attributes)
#


DASH = "\u2013"  # what an empty cell shows


def _num(value: float | None, digits: int) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None, digits: int) -> str:
    return DASH if value is None else f"{100 * value:.{digits}f} %"


def jct_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    ratios = doc.get("avg_jct_ratio_to_default") or {}
    rows = []
    for r in doc["results"]:
        ratio = ratios.get(r["policy"])
        rows.append(
            {
                "raw": r,
                "policy": r["policy"],
                "finished": f"{r['finished']}/{r['jobs']}",
                "unfinished": len(r["unfinished"]),
                "avg": _num(r["avg_jct_s"], 1),
                "median": _num(r["median_jct_s"], 1),
                "p95": _num(r["p95_jct_s"], 1),
                "makespan": _num(r["makespan_s"], 0),
                "queueing": _num(r["avg_queueing_s"], 1),
                "utilisation": _pct(r["gpu_utilisation"], 1),
                "island": _pct(r["multi_gpu_in_one_island"], 0),
                "leaf": _pct(r["multi_gpu_in_one_leaf"], 0),
                "preemptions": r["preemptions"],
                "migrations": r["migrations"],
                "ratio": DASH if ratio is None else f"{ratio:.3f}",
            }
        )
    return rows


def fractional_rows(doc: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    labels = [checkpoint_label(x) for x in doc["checkpoints"]]
    rows = []
    for name, r in doc["policies"].items():
        at = r["at"]
        rows.append(
            {
                "policy": name,
                "cells": [_num(at[c]["unallocated_pct"], 2) if c in at else DASH for c in labels],
                "unallocated_gpus_100": _num(at["100"]["unallocated_gpus"], 1) if "100" in at else DASH,
                "first_failure": "none"
                if r["first_failure_arrived_pct"] is None
                else f"{r['first_failure_arrived_pct']:.1f} %",
                "frag_100": _num(at["100"]["fragmentation_pct"], 2) if "100" in at else DASH,
                "placed": r["placed"],
                "failed_gpu_pods": r["failed_gpu_pods"],
                "wall_s": _num(r["wall_s"], 1),
            }
        )
    return labels, rows


def chart_data(record: dict[str, Any]) -> dict[str, Any] | None:
    doc = record.get("result")
    if not doc or record["params"]["kind"] == SUITE_KIND:
        return None  # the suite is a table
    if record["params"]["kind"] == FRACTIONAL_KIND:
        return {
            "kind": "fractional",
            "policies": [
                {"policy": name, "curve": [list(p) for p in zip(c["arrived_pct"], c["unallocated_pct"], strict=False)]}
                for name, c in ((name, r["curve"]) for name, r in doc["policies"].items())
            ],
        }
    return {"kind": "jct", **(doc.get("charts") or {"policies": []})}


#
# The policy suite's document -> one table per case, as `replay --suite` prints it
#


def _suite_figure(metric: dict[str, Any], name: str) -> str:
    """A figure as the command's table writes it (scheduler.sim.suite._fmt), with thousands grouped."""
    if name in metric["shown"]:
        return metric["shown"][name]  # multi-node jobs in one leaf: "115/115"
    v = metric["values"].get(name)
    if v is None:  # a first failure of None: no pod failed
        return "none" if metric["metric"] == "first_failure" and name in metric["values"] else DASH
    text = f"{v:,{policy_suite.FORMATS[metric['metric']]}}"
    return text + "*" if name in metric["unfinished"] else text


def suite_tables(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per case: its columns (the policies, then the bound of a JCT case) and per metric a row of figures, a row of
    ratios to the peer, the best baseline without an oracle and default's ratio to it. Raw numbers go to data-
    attributes (what the tests and a script read), the text is formatted like the command's table."""
    tables = []
    for c in doc["cases"]:
        label = suite_case_label(c["title"], c["kind"], c.get("cluster"), c.get("network_model"))
        if c.get("skipped"):
            tables.append({"key": c["key"], "label": label, "skipped": c["skipped"]})
            continue
        columns = [*c["policies"], *((policy_suite.BOUND,) if c["kind"] != "alibaba" else ())]
        metrics = []
        for m in c["metrics"]:
            best, vs = m["best_baseline"], m["default_vs_best_baseline"]
            ratios = m["ratios"]
            metrics.append(
                {
                    "metric": m["metric"],
                    "label": m["label"],
                    "better": m["better"],
                    "peer": m["peer"],
                    "peer_label": "lower bound" if m["peer"] == policy_suite.BOUND else m["peer"],
                    "cells": [
                        {
                            "policy": n,
                            "text": _suite_figure(m, n),
                            "value": m["values"].get(n),
                            "ratio": ratios.get(n),
                            "ratio_text": DASH if ratios.get(n) is None else f"{ratios[n]:.2f}",
                            "peer": n == m["peer"],
                            "best": bool(best) and n == best["policy"],
                        }
                        for n in columns
                    ],
                    "best": None if best is None else best | {"text": _suite_figure(m, best["policy"])},
                    "vs_best": vs,
                    "vs_best_text": DASH if vs is None else f"{vs:.3f}",
                    "unfinished": bool(m["unfinished"]),
                }
            )
        size = f"{c['pods']:,} pods" if "pods" in c else f"{c['jobs']:,} jobs"
        tables.append(
            {
                "key": c["key"],
                "label": label,
                "skipped": "",
                "columns": columns,
                "metrics": metrics,
                "size": size,
                "gpus": c["gpus"],
                "source": c.get("file") or "drawn by churn_table",
                "notes": c.get("notes") or [],
                "wall_s": c["wall_s"],
            }
        )
    return tables
