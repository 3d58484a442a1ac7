"""/metrics: the product's own Prometheus metrics, for existing Prometheus and Grafana setups.

Two kinds of series come out of one registry (prometheus_client's default):

- HTTP request metrics of this process, from django-prometheus's middlewares;
- cluster state, computed at scrape time by `ClusterCollector` from the database and the telemetry cache:
  GPUs by health and allocation, nodes by state, link utilisation, open alerts, poll lag, stale nodes, jobs, and
  the control plane's own progress (beat's heartbeat, ingest lag, inbox, last poll). Five aggregate queries and a
  few cache reads per cluster, whatever the cluster's size; every web process answers the same (nothing is kept
  in the process).

Access: a request is served if it carries `Authorization: Bearer <METRICS_TOKEN>` (when that is set), or comes
straight from an address in METRICS_ALLOWED_IPS (addresses or networks; default loopback). A request that came
through a proxy (X-Forwarded-For or Forwarded present) is judged by the token alone, since its peer address is
the proxy's. Everything else gets 401 (a token is configured) or 403.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import logging
import time
from collections import Counter, defaultdict

from django.conf import settings
from django.core import checks
from django.db.models import Count, Exists, OuterRef, Q
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString

from clusterctl import outages
from clusterctl.beat import heartbeat_age
from fabric import ingest, latest
from fabric.choices import GpuHealth, NodeState
from fabric.models import GPU, Alert, Cluster, Node
from scheduler.choices import FINAL_STATUSES, JobStatus
from scheduler.models import Allocation, Job

log = logging.getLogger(__name__)

# Label values of clusterctl_gpus{allocation}: a GPU is allocated while any job holds an active share of it.
ALLOCATED, FREE = "allocated", "free"
ALLOCATIONS = (ALLOCATED, FREE)
# Upper bounds of the link utilisation histogram (fraction of the link's capacity, busiest direction).
UTILISATION_BUCKETS = tuple(i / 10 for i in range(1, 11))
# Jobs counted by clusterctl_jobs: the queue and what runs; finished jobs are history, not state.
LIVE_JOB_STATUSES = tuple(s for s in JobStatus.values if s not in FINAL_STATUSES)
# Nodes that are not polled (telemetry skips them), so neither stale nor lagging.
UNPOLLED_STATES = (NodeState.DOWN,)
PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED")


#
# Access
#


@functools.lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries if e.strip())


def _client_allowed(request) -> bool:
    if any(h in request.META for h in PROXY_HEADERS):
        return False
    try:
        ip = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return any(ip in net for net in _networks(tuple(settings.METRICS_ALLOWED_IPS)))


def _token_matches(request) -> bool | None:
    """True/False for a presented bearer token checked against METRICS_TOKEN; None when none was presented."""
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return None
    token = settings.METRICS_TOKEN
    return bool(token) and hmac.compare_digest(presented.strip().encode(), token.encode())


@never_cache
@require_GET
def metrics_view(request):
    token_ok = _token_matches(request)
    if not token_ok and not _client_allowed(request):
        if settings.METRICS_TOKEN:
            response = HttpResponse("a valid bearer token is required\n", status=401, content_type="text/plain")
            challenge = 'Bearer realm="metrics"' + (', error="invalid_token"' if token_ok is False else "")
            response["WWW-Authenticate"] = challenge
            return response
        return HttpResponse("metrics are not served to this address\n", status=403, content_type="text/plain")
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return HttpResponse(encoder(REGISTRY), content_type=content_type)


@checks.register(checks.Tags.security)
def check_metrics_settings(app_configs, **kwargs):
    try:
        _networks(tuple(settings.METRICS_ALLOWED_IPS))
    except ValueError as exc:
        return [checks.Error(f"METRICS_ALLOWED_IPS: {exc}", hint="addresses or networks, comma-separated",
                             id="clusterctl.E001")]  # fmt: skip
    return []


#
# Cluster state
#


def _families() -> dict[str, GaugeMetricFamily | HistogramMetricFamily]:
    return {
        "gpus": GaugeMetricFamily(
            "clusterctl_gpus",
            "GPUs by health and by whether a job holds them.",
            labels=["cluster", "health", "allocation"],
        ),
        "nodes": GaugeMetricFamily("clusterctl_nodes", "Servers by state.", labels=["cluster", "state"]),
        "links": HistogramMetricFamily(
            "clusterctl_link_utilisation",
            "Latest utilisation of the links that report it (0..1 of capacity, busiest direction).",
            labels=["cluster"],
        ),
        "alerts": GaugeMetricFamily(
            "clusterctl_alerts_open", "Health alerts not yet cleared.", labels=["cluster", "severity", "rule"]
        ),
        "lag": GaugeMetricFamily(
            "clusterctl_poll_lag_seconds",
            "Age of the oldest newest-sample among the polled servers that have reported (worst poll lag).",
            labels=["cluster"],
        ),
        "stale": GaugeMetricFamily(
            "clusterctl_nodes_stale",
            "Polled servers (not down) with no sample for TELEMETRY_UNREACHABLE_POLLS polls, or never.",
            labels=["cluster"],
        ),
        "jobs": GaugeMetricFamily(
            "clusterctl_jobs", "Jobs not finished, by status (pending = the queue).", labels=["cluster", "status"]
        ),
        "beat": GaugeMetricFamily(
            "clusterctl_beat_heartbeat_age_seconds",
            "Seconds since the sending Celery beat's last tick (absent: no beat ever ticked). Written by the beat.",
        ),
        "ingest_lag": GaugeMetricFamily(
            "clusterctl_telemetry_ingest_lag_seconds",
            "How far ingest is behind the results that reached the control plane (0: caught up).",
            labels=["cluster"],
        ),
        "inbox": GaugeMetricFamily(
            "clusterctl_telemetry_inbox_results", "Poll results waiting in the ingest inbox.", labels=["cluster"]
        ),
        "poll_age": GaugeMetricFamily(
            "clusterctl_telemetry_last_poll_age_seconds",
            "Seconds since the last round of polls was sent to the cluster's nodes.",
            labels=["cluster"],
        ),
    }


def stale_after_s() -> float:
    return getattr(settings, "TELEMETRY_UNREACHABLE_POLLS", 3) * getattr(settings, "TELEMETRY_INTERVAL_S", 10.0)


def _histogram(values) -> tuple[list[tuple[str, float]], float]:
    counts = [0] * len(UTILISATION_BUCKETS)
    total = 0.0
    n = 0
    for v in values:
        n += 1
        total += v
        for i, bound in enumerate(UTILISATION_BUCKETS):
            if v <= bound:
                counts[i] += 1
    buckets = [(floatToGoString(b), float(c)) for b, c in zip(UTILISATION_BUCKETS, counts, strict=True)]
    return [*buckets, ("+Inf", float(n))], total


def cluster_families(now: float | None = None) -> list:
    """Every clusterctl_* family with its samples: five queries, then the cache."""
    now = time.time() if now is None else now
    families = _families()
    clusters = dict(Cluster.objects.values_list("pk", "name"))
    held = Allocation.objects.filter(gpu=OuterRef("pk"), active=True)
    gpu_rows = GPU.objects.values("node__cluster_id", "health").annotate(
        total=Count("pk"), allocated=Count("pk", filter=Q(Exists(held)))
    )
    hosts: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for cluster_id, hostname, state in Node.objects.values_list("cluster_id", "hostname", "state"):
        hosts[cluster_id].append((hostname, state))
    alert_rows = (
        Alert.objects.filter(cleared_at__isnull=True)
        .values_list("cluster_id", "severity", "rule")
        .annotate(n=Count("pk"))
        .order_by()
    )
    job_rows = (
        Job.objects.filter(status__in=LIVE_JOB_STATUSES)
        .values_list("pool__cluster_id", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )

    gpus: dict[tuple[int, str, str], int] = Counter()
    for row in gpu_rows:
        key = (row["node__cluster_id"], row["health"])
        gpus[(*key, ALLOCATED)] += row["allocated"]
        gpus[(*key, FREE)] += row["total"] - row["allocated"]
    jobs = Counter({(c, s): n for c, s, n in job_rows})
    for cluster_id, name in sorted(clusters.items(), key=lambda kv: kv[1]):
        for health in GpuHealth.values:
            for allocation in ALLOCATIONS:
                families["gpus"].add_metric([name, health, allocation], gpus[(cluster_id, health, allocation)])
        states = Counter(state for _, state in hosts[cluster_id])
        for state in NodeState.values:
            families["nodes"].add_metric([name, state], states[state])
        for status in LIVE_JOB_STATUSES:
            families["jobs"].add_metric([name, status], jobs[(cluster_id, status)])

        links, _ = latest.latest_utilisation(cluster_id, [h for h, _ in hosts[cluster_id]], smoothed=False)
        buckets, total = _histogram(links.values())
        families["links"].add_metric([name], buckets, total)

        seen = latest.last_seen(cluster_id)
        polled = [h for h, state in hosts[cluster_id] if state not in UNPOLLED_STATES]
        ages = [now - seen[h] for h in polled if h in seen]
        if ages:
            families["lag"].add_metric([name], max(0.0, max(ages)))
        limit = stale_after_s()
        families["stale"].add_metric([name], sum(1 for h in polled if h not in seen or now - seen[h] > limit))
        pipeline = ingest.pipeline_status(cluster_id, now)
        families["inbox"].add_metric([name], pipeline["inbox"])
        if pipeline["ingest_lag_s"] is not None:
            families["ingest_lag"].add_metric([name], pipeline["ingest_lag_s"])
        if pipeline["last_poll_age_s"] is not None:
            families["poll_age"].add_metric([name], pipeline["last_poll_age_s"])
    beat_age = heartbeat_age(now)
    if beat_age is not None:
        families["beat"].add_metric([], beat_age)
    for cluster_id, severity, rule, n in alert_rows:
        if cluster_id in clusters:
            families["alerts"].add_metric([clusters[cluster_id], severity, rule], n)
    return list(families.values())


class ClusterCollector:
    """prometheus_client custom collector: cluster state at scrape time. Registered once, in the app's ready()."""

    def describe(self):
        # Names only: without describe(), registering would run collect() (queries at start-up).
        return [*_families().values(), GaugeMetricFamily("clusterctl_metrics_up", "")]

    def collect(self):
        up = GaugeMetricFamily("clusterctl_metrics_up", "1 when the cluster state below could be read, else 0.")
        try:
            families = cluster_families()
        except outages.OUTAGE_ERRORS as exc:  # Redis or PostgreSQL restarting: one warning per outage, not per scrape
            if outages.dependency(exc) is None:
                log.exception("metrics: reading the cluster state failed")
            else:
                outages.note(exc, "/metrics reports clusterctl_metrics_up 0 until it is back", key="metrics")
            up.add_metric([], 0)
            return [up]
        except Exception:  # a scrape must still return the process's own metrics and say what failed
            log.exception("metrics: reading the cluster state failed")
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [*families, up]


_collector: ClusterCollector | None = None


def register() -> ClusterCollector:
    global _collector
    if _collector is None:
        _collector = ClusterCollector()
        REGISTRY.register(_collector)
    return _collector
