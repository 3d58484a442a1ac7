"""The queue topic and the job pages: pending jobs in line with why they wait, running ones with their nodes and links,
recent preemptions and migrations; job shapes and placements in words."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from dashboard.selectors.cluster import _Cluster, iso
from fabric.models import Port
from fabric.topology.graph import natural_key
from scheduler.choices import ACTIVE_STATUSES, JobStatus
from scheduler.models import Allocation, Job, JobEvent
from scheduler.selectors import queue_entries

RECENT_LIMIT = 50  # preemptions and migrations in the queue topic
RECENT_KINDS = {JobStatus.PREEMPTED: "preempted", JobStatus.MIGRATING: "migrated"}
NO_ROUND_YET = "waiting for the next scheduling round"


JOB_FIELDS = ("pk", "name", "tenant__name", "gpus", "nodes", "gpus_per_node", "sharing", "mps_compute_pct",
              "mig_profile", "priority_class__name", "status", "held", "pending_reason", "submitted_at", "started_at",
              "queue_seq", "observed_slurm_id")  # fmt: skip


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def shape_text(gpus: int, nodes: int | None = None, per_node: int | None = None, sharing: str = "exclusive",
               mps_compute_pct: int | None = None, mig_profile: str = "") -> str:  # fmt: skip
    """What a job asks for, in words, the same on every page: "1 GPU", "8 GPUs", "16 GPUs: 2 nodes x 8" (a gang),
    "MPS, 25 % of 1 GPU", "MPS, 50 % of each of 2 GPUs", "MIG 1g.10gb", "2 x MIG 3g.40gb", "time-slice of 1 GPU"."""
    if nodes and per_node:
        return f"{_gpus(gpus)}: {nodes} node{'s' if nodes != 1 else ''} x {per_node}"
    if sharing == "mps":
        if not mps_compute_pct:
            return f"MPS on {_gpus(gpus)}"
        return f"MPS, {mps_compute_pct} % of {'1 GPU' if gpus == 1 else f'each of {gpus} GPUs'}"
    if sharing == "mig":
        profile = f"MIG {mig_profile}" if mig_profile else "MIG"
        return profile if gpus == 1 else f"{gpus} x {profile}"
    if sharing == "timeslice":
        return "time-slice of 1 GPU" if gpus == 1 else f"time-slices of {gpus} GPUs"
    return _gpus(gpus)


def job_shape(job) -> str:
    """shape_text of a Job row."""
    return shape_text(job.gpus, job.nodes, job.gpus_per_node, job.sharing, job.mps_compute_pct, job.mig_profile)


#
# Where a job runs, in words (the job page): its nodes grouped by the leaf switches their host links reach
#

NO_LEAF = "(no leaf)"


def leaves_of(node_ids: Iterable[int]) -> dict[int, tuple[str, ...]]:
    """Node id -> the names of every switch its host links reach (its leaves; a rail-optimised server has one per
    rail, e.g. 8), in natural order, in one query. A node without a cabled host link is absent."""
    rows = (
        Port.objects.filter(hca__node_id__in=list(node_ids), link__isnull=False, link__ports__switch__isnull=False)
        .values_list("hca__node_id", "link__ports__switch__name")
        .distinct()
    )
    found: dict[int, set[str]] = defaultdict(set)
    for node_id, name in rows:
        found[node_id].add(name)
    return {node_id: tuple(sorted(names, key=natural_key)) for node_id, names in found.items()}


def name_span(names: tuple[str, ...] | list[str]) -> str:
    """Switch names, short: "leaf017" / "leaf017, leaf020" / "leaf017-leaf024" (with an en dash) when they are a run of
    consecutive numbers with one prefix and width / else the first three and how many more."""
    names = list(names)
    if len(names) <= 2:
        return ", ".join(names)
    parts = [re.fullmatch(r"(.*?)(\d+)", n) for n in names]
    if all(parts) and len({(m.group(1), len(m.group(2))) for m in parts}) == 1:
        numbers = [int(m.group(2)) for m in parts]
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{names[0]}\N{EN DASH}{names[-1]}"
    if len(names) == 3:
        return ", ".join(names)
    return f"{', '.join(names[:3])} and {len(names) - 3} more"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


@dataclass(frozen=True)
class Placement:
    """A job's nodes grouped by the set of leaves they reach (one leaf, or one rail group of leaves), and the sentence
    that says where it runs: "16 GPUs on 2 nodes, 1 leaf switch (leaf001)", "64 GPUs on 8 nodes, 1 rail group of 8
    leaf switches (leaf017-leaf024)", "128 GPUs on 16 nodes, 2 rail groups of 8 leaf switches (16 leaf switches)"."""

    groups: list[tuple[str, tuple[str, ...], list]]  # (label, leaves, nodes), by the first leaf's name
    leaves: int  # leaf switches its nodes reach, all together
    text: str


def placement(gpus: int, nodes: dict[int, object]) -> Placement:
    """Where a job runs; `nodes`: node id -> what the page shows of that node (grouped, in the order given)."""
    reach = leaves_of(nodes)
    by_set: dict[tuple[str, ...], list] = defaultdict(list)
    for node_id, node in nodes.items():
        by_set[reach.get(node_id, ())].append(node)
    order = sorted(by_set, key=lambda leaves: (not leaves, [natural_key(n) for n in leaves]))
    groups = []
    for leaves in order:
        if not leaves:
            label = NO_LEAF
        elif len(leaves) == 1:
            label = leaves[0]
        else:
            label = f"rail group {name_span(leaves)} ({len(leaves)} leaf switches)"
        groups.append((label, leaves, by_set[leaves]))
    every = sorted({leaf for leaves in by_set for leaf in leaves}, key=natural_key)
    where = [f"{_count(gpus, 'GPU', 'GPUs')} on {_count(len(nodes), 'node', 'nodes')}"]
    placed = [leaves for leaves in order if leaves]
    if placed and all(len(leaves) == 1 for leaves in placed):
        where.append(f"{_count(len(every), 'leaf switch', 'leaf switches')} ({name_span(every)})")
    elif placed:
        sizes = {len(leaves) for leaves in placed}
        text = _count(len(placed), "rail group", "rail groups")
        if len(sizes) == 1:
            text += f" of {len(placed[0])} leaf switches"
        text += f" ({name_span(every)})" if len(placed) == 1 else f" ({len(every)} leaf switches)"
        where.append(text)
    if len(placed) < len(order):
        where.append("some nodes on no leaf switch" if placed else "on no leaf switch")
    return Placement(groups=groups, leaves=len(every), text=", ".join(where))


def queue(c: _Cluster, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    last_round = queue_entries([c.id])  # job -> place in line, why it waits, estimated start
    rows = Job.objects.filter(pool__cluster_id=c.id).filter(Q(status=JobStatus.PENDING) | Q(status__in=ACTIVE_STATUSES))
    pending, running = [], []
    for (pk, name, tenant, n_gpus, nodes, per_node, sharing, mps_pct, mig_profile, priority, status, held,
         held_reason, submitted, started, seq, slurm_id) in rows.values_list(*JOB_FIELDS):  # fmt: skip
        item = {"id": pk, "name": name, "tenant": tenant, "gpus": n_gpus,
                "shape": shape_text(n_gpus, nodes, per_node, sharing, mps_pct, mig_profile),
                "priority": priority}  # fmt: skip
        if status == JobStatus.PENDING:
            entry = last_round.get(pk)
            place, why = (entry.position, entry.reason) if entry else (None, NO_ROUND_YET)
            start, basis = (entry.estimated_start, entry.start_estimate) if entry and not held else (None, "none")
            why = (held_reason or "held") if held else why
            if slurm_id is not None:  # Slurm's own job, waiting in Slurm's queue: Slurm's reason, no place in ours
                place, why, start, basis = None, held_reason or "Slurm: pending", None, "none"
            item |= {"position": place, "reason": why, "submitted_at": iso(submitted),
                     "wait_s": max(0, int((now - submitted).total_seconds())), "start_at": iso(start),
                     "start_estimate": basis, "_seq": seq}  # fmt: skip
            pending.append(item)
        else:
            item |= {"status": status, "started_at": iso(started), "nodes": [], "links": []}
            running.append(item)
    # In queue order: the last round's order first, then jobs it has not seen (new, held) by their place in line.
    pending.sort(key=lambda j: (j["position"] is None, j["position"] or 0, j.pop("_seq")))
    if running:
        hosts: dict[int, set[str]] = defaultdict(set)
        for job_id, host in (
            Allocation.objects.filter(active=True, job__pool__cluster_id=c.id)
            .values_list("job_id", "gpu__node__hostname")
            .distinct()
        ):
            hosts[job_id].add(host)
        topo = c.cabling.topology
        for item in running:
            item["nodes"] = sorted(hosts.get(item["id"], ()), key=natural_key)
            item["links"] = topo.job_links(item["nodes"])
        running.sort(key=lambda j: (j["started_at"] or "", j["id"]))
    recent = [
        {"job": job_id, "name": name, "tenant": tenant, "kind": RECENT_KINDS[to], "reason": why, "at": iso(at)}
        for job_id, name, tenant, to, why, at in JobEvent.objects.filter(
            job__pool__cluster_id=c.id, to_status__in=list(RECENT_KINDS)
        )
        .order_by("-at", "-id")
        .values_list("job_id", "job__name", "job__tenant__name", "to_status", "reason", "at")[:RECENT_LIMIT]
    ]
    return {"pending": pending, "running": running, "recent": recent}


def for_tenant(data: dict, tenant: str) -> dict:
    """The queue topic as one tenant sees it: its own jobs only (positions stay global)."""
    return {
        "pending": [j for j in data["pending"] if j["tenant"] == tenant],
        "running": [j for j in data["running"] if j["tenant"] == tenant],
        "recent": [e for e in data["recent"] if e["tenant"] == tenant],
    }
