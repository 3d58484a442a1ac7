"""The dashboard's pages (docs/dashboard.md "Pages"): server-rendered shells that the page scripts keep live.

Operators (staff) see every page; a tenant member sees /my/ (its own jobs, positions, expected starts, reasons and
quotas) and /my/jobs/<id>/ for each of its own jobs, and is refused the operator pages. Every page renders in a
bounded number of queries whatever the cluster's size: the big tables (GPUs, the queue) arrive over the sockets, and
what is rendered here reads in bulk.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import timedelta
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import cache_control
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_POST

from clusterctl.legend import legends
from dashboard import selectors, whatif
from fabric import actions as fabric_actions
from fabric.choices import OKABE_ITO, AlertSeverity
from fabric.models import GPU, Alert, Cluster, Link, Port
from fabric.models.telemetry import GpuMetric
from fabric.reports import cluster_report
from fabric.selectors import cluster_summary, link_labels, metric_series
from fabric.subnet_manager import sm_status
from scheduler.api.access import tenant_of
from scheduler.choices import ACTIVE_STATUSES, FINAL_STATUSES, JobStatus, StartEstimate
from scheduler.models import Allocation, Job, JobEvent, Quota
from scheduler.policy_lab import get_run
from scheduler.selectors import QueueEntry, queue_entries, tenant_usage

if TYPE_CHECKING:  # the what-if module loads the replay: imported by its views only
    from dashboard.whatif import CappedUploadHandler

# Units of the GPU metrics, as the `gpus` topic names them (docs/dashboard.md).
GPU_METRICS = selectors.GPU_METRICS_UNITS
# GpuMetric column -> the page's metric key.
SERIES_KEYS = dict(zip(GpuMetric.SERIES_FIELDS, ("util", "mem_used", "temp", "power"), strict=True))
# The job page draws the history of at most this many of its GPUs (one query each).
SERIES_MAX_GPUS = 16
SERIES_MAX_HOURS = 24 * 7
# Line colours of the charts, in order: Okabe-Ito (fabric.choices) less black, which reads as an axis.
SERIES_PALETTE = ("blue", "orange", "green", "vermillion", "sky", "purple", "yellow", "grey")
# Finished jobs of a tenant listed on /my/.
MY_RECENT = 20
# Rows of each long table of the report page (the worst first where there is a worst); `?all=1` shows all.
REPORT_ROWS = 200


def ws_paths(cluster_id: int) -> dict[str, str]:
    return {"fabric": f"/ws/clusters/{cluster_id}/fabric/", "queue": f"/ws/clusters/{cluster_id}/queue/"}


def _common() -> dict:
    """What every page's scripts may read: the states' legends (as /api/v1/choices/) and the series palette."""
    return {"legends": legends(), "palette": [OKABE_ITO[name] for name in SERIES_PALETTE]}


def css_token(value: str) -> str:
    """A state value as a CSS class part (dom.js setBadge does the same)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", value) or "none"


@cache_control(max_age=300, public=True)
@require_GET
def legend_css(request: HttpRequest) -> HttpResponse:
    """Each state's colour as a class (`.st-<legend>-<value>` sets --c), from the one legend (clusterctl/legend.py):
    the pages colour badges and swatches with classes, since the Content-Security-Policy forbids inline styles."""
    states = legends()
    rules = [
        f".st-{name}-{css_token(item['value'])} {{ --c: {item['colour']}; }}"
        for name, items in states.items()
        for item in items
    ]
    colours = sorted({*OKABE_ITO.values(), *(i["colour"] for items in states.values() for i in items)})
    rules += [f".dot-{c.lstrip('#')} {{ --c: {c}; }}" for c in colours]
    return HttpResponse("\n".join(rules) + "\n", content_type="text/css; charset=utf-8")


# The site's icon where browsers (and the admin, the API's JSON pages) look for it without a <link rel=icon>: the same
# picture as static/dashboard/favicon.svg, as a 16/32/48 px ICO.
FAVICON = Path(__file__).resolve().parent / "static" / "dashboard" / "favicon.ico"


@cache_control(max_age=86400, public=True)
@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    return HttpResponse(FAVICON.read_bytes(), content_type="image/vnd.microsoft.icon")


#
# Access
#


def operator_required(view):
    """Staff only: anonymous users go to the login page, everyone else gets a 403 page that points to /my/."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not request.user.is_staff:
            return forbidden(request, "This page is for operators.")
        return view(request, *args, **kwargs)

    return wrapped


def own_job_to_tenant_page(view):
    """The operators' job page opened by a tenant member for one of its own jobs (a link shared, the README's URL):
    its tenant page instead. Anything else goes on to `view` (operator_required: 403 for a tenant, whether the job
    is another tenant's or does not exist, so the answer tells nothing of others' jobs)."""

    @wraps(view)
    def wrapped(request: HttpRequest, cluster_id: int, job_id: int, *args, **kwargs):
        if request.user.is_authenticated and not request.user.is_staff:
            tenant = tenant_of(request.user)
            own = Job.objects.filter(pk=job_id, pool__cluster_id=cluster_id, tenant=tenant) if tenant else None
            if own is not None and own.exists():
                return redirect("my-job", job_id=job_id)
        return view(request, cluster_id, job_id, *args, **kwargs)

    return wrapped


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    tenant = tenant_of(request.user) if request.user.is_authenticated else None
    return render(request, "dashboard/forbidden.html", {"message": message, "tenant": tenant}, status=403)


class LoginView(auth_views.LoginView):
    """Sign-in for operators and tenants alike; without a ?next=, operators land on the overview, tenants on /my/."""

    template_name = "dashboard/login.html"
    redirect_authenticated_user = True
    extra_context = {"page": "login"}

    def get_default_redirect_url(self) -> str:
        return reverse("overview") if self.request.user.is_staff else reverse("my")


#
# Operator pages
#


def _cluster_context(cluster: Cluster, page: str, **extra) -> dict:
    return {"cluster": cluster, "page": page, "ws": ws_paths(cluster.pk), **_common(), **extra}


def overview(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not request.user.is_staff:
        # A tenant's home is its own page.
        return redirect("my") if tenant_of(request.user) else forbidden(request, "This page is for operators.")
    clusters = []
    for cluster_id in Cluster.objects.order_by("name").values_list("pk", flat=True):
        summary = cluster_summary(cluster_id)
        live = selectors.build(cluster_id, ["overview"])  # the cards' first paint: what the socket would send
        if summary is not None and live is not None:
            clusters.append({**summary, "live": live["overview"], "ws": ws_paths(cluster_id)})
    return render(request, "dashboard/overview.html", {"clusters": clusters, "page": "overview", **_common()})


@operator_required
def fabric_page(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    return render(request, "dashboard/fabric.html", _cluster_context(cluster, "fabric", sm=sm_status(cluster.pk)))


# The fabric page's link panel: bounded span and point count whatever the query asks.
LINK_HISTORY_MAX_MINUTES = 90 * 24 * 60  # the hourly rollups' default retention
LINK_HISTORY_MAX_POINTS = 300


@operator_required
@require_GET
def link_history(request: HttpRequest, cluster_id: int, link_id: int) -> JsonResponse:
    """Utilisation (% of link capacity) and error counts of both ports of one link, oldest first, for the fabric
    page's link panel: ?minutes=N (default 60, at most 90 days), at most LINK_HISTORY_MAX_POINTS points a port."""
    link = get_object_or_404(Link, pk=link_id, cluster_id=cluster_id)
    try:
        minutes = min(max(int(request.GET.get("minutes", 60)), 1), LINK_HISTORY_MAX_MINUTES)
    except ValueError:
        return JsonResponse({"detail": "minutes must be a whole number."}, status=400)
    until = timezone.now()
    since = until - timedelta(minutes=minutes)
    ports = []
    for port_id, end in Port.objects.filter(link=link).order_by("link_end").values_list("pk", "link_end"):
        points = metric_series("port", port_id, since, until, max_points=LINK_HISTORY_MAX_POINTS, now=until)
        ports.append({"id": port_id, "end": end, "points": [_link_point(at, values) for at, values in points]})
    return JsonResponse(
        {
            "link": {
                "id": link.pk,
                "label": link_labels([link.pk]).get(link.pk, ""),
                "capacity_gbps": link.capacity_gbps,
                "state": link.state,
            },
            "minutes": minutes,
            "since": since.isoformat(),
            "until": until.isoformat(),
            "max_points": LINK_HISTORY_MAX_POINTS,
            "fields": ["at", "util", "util_max", "errors", "xmit_wait"],
            "units": {"util": "% of link capacity", "errors": "error counter increments", "xmit_wait": "per s"},
            "ports": ports,
        }
    )


def _link_point(at, values: dict) -> list:
    """[time, utilisation %, its maximum %, error increments, xmit_wait per s] (fields of link_history)."""
    util, util_max = values.get("utilisation"), values.get("utilisation_max")
    return [
        at.isoformat(),
        None if util is None else round(util * 100, 2),
        None if util_max is None else round(util_max * 100, 2),
        values.get("errors_total") or 0,
        values.get("xmit_wait_per_s"),
    ]


@operator_required
def gpus_page(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    counts = GPU.objects.filter(node__cluster=cluster).aggregate(n=Count("pk"), nodes=Count("node", distinct=True))
    return render(request, "dashboard/gpus.html", _cluster_context(cluster, "gpus", counts=counts, metrics=GPU_METRICS))


@operator_required
def queue_page(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    return render(request, "dashboard/queue.html", _cluster_context(cluster, "queue"))


@operator_required
def alerts_page(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    # What the `alerts` topic lists (dashboard.selectors.alerts): open ones and those cleared lately, and their groups.
    now = timezone.now()
    alerts = list(selectors.listed_alerts(cluster.pk, now).order_by("-last_seen", "-pk")[: selectors.ALERTS_LIMIT])
    for a in alerts:
        a.group = selectors.group_key(a.rule, a.severity, selectors.alert_cause(a.message))
    groups = selectors.alert_groups(cluster.pk, now, times_as_text=False)
    samples: dict[str, list[str]] = defaultdict(list)
    for a in alerts:
        if len(samples[a.group]) < selectors.GROUP_SAMPLES:
            samples[a.group].append(f"{a.object_kind} {a.object_key}")
    for g in groups:
        g["objects"] = samples.get(g["key"], [])
        g["more"] = g["count"] - len(g["objects"])
        g["severity_label"] = AlertSeverity(g["severity"]).label if g["severity"] in AlertSeverity.values else ""
    context = _cluster_context(
        cluster, "alerts", alerts=alerts, groups=groups, rules=selectors.rule_counts(groups), listed=len(alerts)
    )
    return render(request, "dashboard/alerts.html", context)


@operator_required
@require_POST
def acknowledge_alert(request: HttpRequest, cluster_id: int, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(Alert, pk=alert_id, cluster_id=cluster_id)
    alert = fabric_actions.acknowledge_alert(alert, actor=request.user.get_username())
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse(
            {"id": alert.pk, "acknowledged_by": alert.acknowledged_by, "acknowledged_at": alert.acknowledged_at}
        )
    messages.success(request, f"Alert acknowledged: {alert.message}")
    return redirect("alerts", cluster_id=cluster_id)


@operator_required
@require_POST
def acknowledge_alert_group(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Acknowledge one group of the Alerts page at once (rule, severity and cause, as dashboard.selectors.alert_groups
    groups them): every listed alert of the group up to `until`, the newest alert id the page had seen, so an alert
    raised after the operator looked is not acknowledged unseen."""
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    rule, severity, cause = (request.POST.get(k, "") for k in ("rule", "severity", "cause"))
    until = request.POST.get("until", "")
    wants_json = request.headers.get("Accept", "").startswith("application/json")
    if not (rule and severity and cause and until.isdigit()):
        detail = "rule, severity, cause and until (the newest alert id seen, a whole number) are required."
        if wants_json:
            return JsonResponse({"detail": detail}, status=400)
        messages.error(request, f"Could not acknowledge the group: {detail}")
        return redirect("alerts", cluster_id=cluster.pk)
    ids = selectors.group_members(cluster.pk, rule, severity, cause, int(until))
    actor = request.user.get_username()
    n = fabric_actions.acknowledge_alerts(cluster.pk, ids, actor=actor)
    if wants_json:
        key = selectors.group_key(rule, severity, cause)
        return JsonResponse({"group": key, "acknowledged": n, "members": len(ids), "acknowledged_by": actor})
    messages.success(request, f"{n} alert{'' if n == 1 else 's'} acknowledged: {rule}, {cause}")
    return redirect("alerts", cluster_id=cluster.pk)


@own_job_to_tenant_page
@operator_required
def job_page(request: HttpRequest, cluster_id: int, job_id: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    job = get_object_or_404(
        Job.objects.select_related("tenant", "pool", "priority_class", "dataset_node"), pk=job_id, pool__cluster=cluster
    )
    events = list(JobEvent.objects.filter(job=job).order_by("at", "pk"))
    allocations = list(
        Allocation.objects.filter(job=job, active=True)
        .select_related("gpu__node")
        .order_by("gpu__node__hostname", "gpu__index")
    )
    nodes: dict[int, dict] = {}
    for a in allocations:
        node = nodes.setdefault(a.gpu.node_id, {"hostname": a.gpu.node.hostname, "state": a.gpu.node.state, "gpus": []})
        node["gpus"].append(a)
    # Grouped by the leaves each node reaches: one leaf, or a rail group (a server with 8 HCAs on 8 leaves).
    where = selectors.placement(len(allocations), nodes) if nodes else None
    entry = queue_entries([cluster.pk]).get(job.pk) if job.status == JobStatus.PENDING and not job.held else None
    context = _cluster_context(
        cluster,
        "queue",
        job=job,
        shape=selectors.job_shape(job),
        events=events,
        allocations=allocations,
        placement=[(label, group) for label, _, group in where.groups] if where else [],
        placement_text=where.text if where else "",
        position=entry.position if entry else None,
        reason=job.pending_reason if job.held or job.observed_slurm_id else (entry.reason if entry else ""),
        start=start_text(entry),
        start_basis=StartEstimate(entry.start_estimate).label if entry and entry.estimated_start else "",
        host=host_text(job),
        metrics=GPU_METRICS,
        series_gpus=min(len(allocations), SERIES_MAX_GPUS),
    )
    return render(request, "dashboard/job.html", context)


@operator_required
@require_GET
def job_series(request: HttpRequest, cluster_id: int, job_id: int) -> JsonResponse:
    """History of the job's GPUs (at most SERIES_MAX_GPUS of them) for the job page's chart."""
    job = get_object_or_404(Job, pk=job_id, pool__cluster_id=cluster_id)
    try:
        hours = min(max(float(request.GET.get("hours", 1)), 0.05), SERIES_MAX_HOURS)
    except ValueError:
        hours = 1.0
    now = timezone.now()
    since = now - timedelta(hours=hours)
    allocations = (
        Allocation.objects.filter(job=job)
        .filter(Q(active=True) | Q(released_at__gte=since))
        .order_by("gpu__node__hostname", "gpu__index")
        .values_list("gpu_id", "gpu__node__hostname", "gpu__index")
        .distinct()
    )
    gpus = []
    for gpu_id, host, index in list(allocations)[:SERIES_MAX_GPUS]:
        points = metric_series("gpu", gpu_id, since, now, max_points=240, now=now)
        gpus.append(
            {
                "id": gpu_id,
                "label": f"{host}/{index}",
                "points": [[at.isoformat(), *(v.get(f) for f in GpuMetric.SERIES_FIELDS)] for at, v in points],
            }
        )
    return JsonResponse(
        {
            "since": since.isoformat(),
            "until": now.isoformat(),
            "fields": list(SERIES_KEYS.values()),
            "units": GPU_METRICS,
            "gpus": gpus,
            "truncated": job.allocations.filter(active=True).count() > SERIES_MAX_GPUS,
        }
    )


@operator_required
def report_page(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """The fabric report (fabric.reports: analysed once per fabric version, kept in the cache). Long tables show their
    first REPORT_ROWS rows and how many more; `?all=1` shows every row (the JSON API and the command give them too)."""
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    held = cluster_report(cluster.pk)
    report = held.report
    every = request.GET.get("all") == "1"
    # SPOF switches are keyed by GUID in the report; the fabric page selects them by id.
    spof_switches = [{"row": s, "id": held.switch_ids.get(s.switch)} for s in report.spof.switches]
    spof_links = [x for x in report.spof.links if x.scope != "host-link"]
    tables = {
        "spof_switches": _first_rows(spof_switches, every),
        "spof_links": _first_rows(spof_links, every),
        "single_uplink": _first_rows(report.spof.single_uplink_leaves, every),
        "leaves": _first_rows(held.leaves_worst_first, every),
        "degraded": _first_rows(report.degraded_links, every),
        "tiers": _first_rows(report.tiers.switches, every),
    }
    return render(
        request,
        "dashboard/report.html",
        _cluster_context(
            cluster,
            "report",
            report=report,
            analysed=held,
            tables=tables,
            # "unknown" only when some switch is of no known tier
            switch_tiers=[(t, n) for t, n in report.counts.switches_by_tier.items() if n or t != "unknown"],
            every=every,
            spof_switches=spof_switches,
            spof_links=spof_links,
            host_link_spofs=report.spof.by_scope.get("host-link", 0),
            sm=sm_status(cluster.pk),
        ),
    )


def _first_rows(rows: list, every: bool) -> dict:
    """A table's rows as the report page shows them: the first REPORT_ROWS (all with `every`), the total, the rest."""
    shown = rows if every else rows[:REPORT_ROWS]
    return {"rows": shown, "total": len(rows), "more": len(rows) - len(shown)}


#
# The tenant's page
#


def my_page(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    tenant = tenant_of(request.user)
    if tenant is None:
        if request.user.is_staff:
            return redirect("overview")
        return forbidden(request, "This account belongs to no tenant: ask an operator to add it to one.")
    jobs = Job.objects.filter(tenant=tenant).select_related("pool__cluster", "priority_class")
    live = list(jobs.exclude(status__in=FINAL_STATUSES).order_by("queue_seq", "pk"))
    recent = list(jobs.filter(status__in=FINAL_STATUSES).order_by("-finished_at", "-pk")[:MY_RECENT])
    quotas = list(
        Quota.objects.filter(tenant=tenant)
        .select_related("pool__cluster")
        .order_by("pool__cluster__name", "pool__name")
    )
    clusters = {q.pool.cluster_id: q.pool.cluster for q in quotas}
    clusters.update({j.pool.cluster_id: j.pool.cluster for j in live})
    queue = queue_entries(sorted(clusters)) if any(j.status == JobStatus.PENDING for j in live) else {}
    nodes: dict[int, list[str]] = defaultdict(list)
    running_ids = [j.pk for j in live if j.status in ACTIVE_STATUSES]
    for job_id, host in (
        Allocation.objects.filter(active=True, job_id__in=running_ids)
        .values_list("job_id", "gpu__node__hostname")
        .distinct()
        .order_by("gpu__node__hostname")
    ):
        nodes[job_id].append(host)
    pending, running = [], []
    for job in live:
        row = {"job": job, "shape": selectors.job_shape(job), "cluster": job.pool.cluster,
               "url": reverse("my-job", args=[job.pk])}  # fmt: skip
        if job.status == JobStatus.PENDING:
            entry = None if job.held else queue.get(job.pk)
            row["position"] = entry.position if entry else None
            row["reason"] = job.pending_reason if job.held else (entry.reason if entry else "")
            row["start"] = start_text(entry)
            pending.append(row)
        else:
            row["nodes"] = nodes.get(job.pk, [])
            running.append(row)
    pending.sort(key=lambda r: (r["position"] is None, r["position"] or 0, r["job"].queue_seq))
    usage = tenant_usage(tenant.pk)
    quota_rows = []
    for q in quotas:
        used = usage.get(q.pool_id, 0)
        limit = q.guaranteed_gpus + q.borrow_limit
        quota_rows.append(
            {
                "quota": q,
                "used": used,
                "borrowed": max(0, used - q.guaranteed_gpus),
                "limit": limit,
                "pct": round(100 * used / limit) if limit else 0,
            }
        )
    context = {
        "page": "my",
        "tenant": tenant,
        "pending": pending,
        "running": running,
        "recent": [{"job": job, "url": reverse("my-job", args=[job.pk])} for job in recent],
        "quotas": quota_rows,
        "clusters": [
            {
                "cluster": c,
                "ws": ws_paths(c.pk),
                "pending": [r for r in pending if r["cluster"].pk == c.pk],
                "running": [r for r in running if r["cluster"].pk == c.pk],
            }
            for c in sorted(clusters.values(), key=lambda c: c.name)
        ],
        **_common(),
    }
    return render(request, "dashboard/my.html", context)


# How a pending job's expected start reads in the queue tables (queue-tables.js startText says the same).
NO_ESTIMATE = "\u2013"  # the en dash the pages show for "none"
START_WORDS = {
    StartEstimate.PREEMPTING: "after preemption",
    StartEstimate.STOPPING: "as jobs stop",
    StartEstimate.BACKFILL: "reserved",
    StartEstimate.LEAF: "waiting for one leaf",
}


def until_text(seconds: float) -> str:
    """As dom.js fmtDuration: "42 s", "55 min 03 s", "3 h 05 min", "2 d 4 h"."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def start_text(entry: QueueEntry | None, now=None) -> str:
    """ "in 55 min 03 s (reserved)", "any moment (after preemption)" once the time has come, NO_ESTIMATE without
    one."""
    if entry is None or entry.estimated_start is None:
        return NO_ESTIMATE
    left = (entry.estimated_start - (now or timezone.now())).total_seconds()
    when = f"in {until_text(left)}" if left >= 1 else "any moment"
    return f"{when} ({START_WORDS.get(entry.start_estimate, entry.start_estimate)})"


def host_text(job: Job) -> str:
    """The host CPU and memory a job asks on each node: "8 CPUs, 64 GiB per node", "" when it asks none."""
    parts = []
    if job.host_cpu_milli:
        cpus = job.host_cpu_milli / 1000
        parts.append(f"{cpus:g} CPU{'' if cpus == 1 else 's'}")
    if job.host_memory_mib:
        mib = job.host_memory_mib
        parts.append(f"{mib // 1024} GiB" if mib % 1024 == 0 else f"{mib} MiB")
    return f"{', '.join(parts)} per node" if parts else ""


def my_job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    """A tenant's own job: its state, place in the queue, expected start and reason (live), where it runs, its log
    and its events. Another tenant's job, or one that does not exist, is a 404: the query holds the tenant's only."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    tenant = tenant_of(request.user)
    if tenant is None:
        if request.user.is_staff:
            job = get_object_or_404(Job.objects.select_related("pool"), pk=job_id)
            return redirect("job", cluster_id=job.pool.cluster_id, job_id=job.pk)
        return forbidden(request, "This account belongs to no tenant: ask an operator to add it to one.")
    job = get_object_or_404(
        Job.objects.filter(tenant=tenant).select_related("pool__cluster", "priority_class", "dataset_node"), pk=job_id
    )
    cluster = job.pool.cluster
    events = list(JobEvent.objects.filter(job=job).order_by("at", "pk"))
    allocations = list(
        Allocation.objects.filter(job=job, active=True)
        .select_related("gpu__node")
        .order_by("gpu__node__hostname", "gpu__index")
    )
    nodes: dict[str, list] = defaultdict(list)
    for a in allocations:
        nodes[a.gpu.node.hostname].append(a)
    entry = queue_entries([cluster.pk]).get(job.pk) if job.status == JobStatus.PENDING and not job.held else None
    context = {
        "page": "my",
        "tenant": tenant,
        "job": job,
        "cluster": cluster,
        "ws": ws_paths(cluster.pk),
        "shape": selectors.job_shape(job),
        "events": events,
        "allocations": allocations,
        "nodes": sorted(nodes.items()),
        "position": entry.position if entry else None,
        "reason": job.pending_reason if job.held or job.observed_slurm_id else (entry.reason if entry else ""),
        "start": start_text(entry),
        "start_basis": StartEstimate(entry.start_estimate).label if entry and entry.estimated_start else "",
        "host": host_text(job),
        **_common(),
    }
    return render(request, "dashboard/my_job.html", context)


#
# What-if: a trace replayed under several policies (docs/policy-lab.md "From the dashboard"; dashboard/whatif.py)
#


@csrf_exempt  # only until the upload handler is in place: _whatif_form checks the token (Django's upload docs)
@operator_required
def whatif_page(request: HttpRequest) -> HttpResponse:
    """The form; a valid one starts a run (one at a time per user, WHATIF_MAX_CONCURRENT on the site) and goes to its
    page. The upload is capped as it streams (whatif.CappedUploadHandler): the handler must be set before anything
    reads the body, CSRF's check included."""

    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD, POST"})
    handler = None
    if request.method == "POST":
        handler = whatif.CappedUploadHandler(request, settings.WHATIF_UPLOAD_MAX_BYTES)
        request.upload_handlers = [handler]
    return _whatif_form(request, handler)


@csrf_protect
def _whatif_form(request: HttpRequest, handler: CappedUploadHandler | None) -> HttpResponse:
    refused = ""
    if handler is not None:
        request.POST  # noqa: B018  (the body is parsed here, through the handler, which says if it refused)
        refused = handler.refused
    data = request.POST if request.POST or refused else None
    form = whatif.WhatIfForm(data, request.FILES or None, upload_refused=refused)
    busy, status = None, 200
    if request.method == "POST" and form.is_valid():
        run_id, busy, status = _start_run(request, form, status)
        if run_id:
            return redirect("whatif-run", run_id=run_id)
    if status == 200 and form.is_bound and form.errors:
        status = 413 if refused else 400
    return _whatif_render(request, form, whatif.SuiteForm(), busy=busy, status=status)


def _start_run(request: HttpRequest, form, status: int) -> tuple[str | None, str | None, int]:
    """(run id, None, status) once queued; else (None, the user's run in progress or None, status) with the
    reason on the form: one run per user, and 429 when the site's what-if slots are all taken."""

    try:
        return whatif.start_run(request.user, form), None, status
    except whatif.Busy as exc:
        form.add_error(None, "You already have a what-if run in progress: wait until it has finished.")
        return None, exc.run_id, status
    except whatif.AtCapacity as exc:
        form.add_error(None, str(exc))
        return None, None, 429


def _whatif_render(request: HttpRequest, form, suite, *, busy=None, suite_busy=None, status: int = 200) -> HttpResponse:
    """The what-if page: the replay's form and the policy suite's, either of them with its errors."""
    context = {
        "page": "whatif",
        "form": form,
        "suite": suite,
        "busy": busy,
        "suite_busy": suite_busy,
        "recent": whatif.recent_runs(request.user),
        "limits": whatif.limits(),
        "spec_examples": whatif.SPEC_EXAMPLES,
        "cluster_names": list(Cluster.objects.order_by("name").values_list("name", flat=True)),
        "policy_help": whatif.POLICY_HELP,
        "fractional_help": whatif.FRACTIONAL_HELP,
        **_common(),
    }
    return render(request, "dashboard/whatif.html", context, status=status)


@operator_required
@require_POST
def whatif_suite(request: HttpRequest) -> HttpResponse:
    """The policy suite (`manage.py replay --suite`) as a run: the same task, queue, site-wide cap and one run at a
    time per user as a replay, then the run's page (its progress, then the suite's table)."""

    suite = whatif.SuiteForm(request.POST)
    busy, status = None, 400
    if suite.is_valid():
        run_id, busy, status = _start_run(request, suite, status)
        if run_id:
            return redirect("whatif-run", run_id=run_id)
    return _whatif_render(request, whatif.WhatIfForm(), suite, suite_busy=busy, status=status)


def _whatif_record(run_id: str) -> dict:
    record = get_run(run_id)
    if record is None:
        raise Http404("No such what-if run (runs are kept for a day).")
    return record


@operator_required
@require_GET
def whatif_run(request: HttpRequest, run_id: str) -> HttpResponse:
    """A run: its progress while it runs (whatif.js polls whatif_status), then its results and charts."""
    record = _whatif_record(run_id)
    status = whatif.status_of(record)
    doc = record.get("result") if status["status"] == "done" else None
    fractional = record["params"]["kind"] == "alibaba"
    suite = record["params"]["kind"] == whatif.SUITE_KIND
    context = {
        "page": "whatif",
        "run": record,
        "params": record["params"],
        "status": status,
        "created_at": whatif.created_at(record),
        "command": whatif.command_line(record["params"]),
        "doc": doc,
        "fractional": fractional,
        "suite": suite,
        "suite_tables": whatif.suite_tables(doc) if doc and suite else [],
        "rows": whatif.jct_rows(doc) if doc and not fractional and not suite else [],
        "charts": whatif.chart_data(record) if doc else None,
        **_common(),
    }
    if doc and fractional:
        context["checkpoints"], context["fractional_rows"] = whatif.fractional_rows(doc)
    return render(request, "dashboard/whatif_run.html", context)


@operator_required
@require_GET
def whatif_status(request: HttpRequest, run_id: str) -> JsonResponse:
    """Small, polled every second: status, progress, error (no result)."""
    return JsonResponse(whatif.status_of(_whatif_record(run_id)))


@operator_required
@require_GET
def whatif_result(request: HttpRequest, run_id: str) -> JsonResponse:
    """The finished run's document: what `manage.py replay --json` prints (plus `charts` for a JCT trace; for the policy
    suite what `replay --suite --json` prints)."""
    record = _whatif_record(run_id)
    if record["status"] != "done":
        return JsonResponse({"detail": f"the run is {record['status']}", "error": record.get("error", "")}, status=409)
    return JsonResponse(record["result"])
