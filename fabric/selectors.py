"""Read-only queries shared by views, the API and sockets (bounded query counts)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone

from fabric import change_feed
from fabric.choices import GpuHealth, LinkState, NodeState
from fabric.collectors.samples import FABRIC_SOURCE
from fabric.latest import latest_utilisation
from fabric.models import GPU, Cluster, ImportRecord, Link, Node, Port, Switch
from fabric.models.telemetry import (
    GpuMetric,
    GpuMetricRollup,
    PortMetric,
    PortMetricRollup,
    Resolution,
    bucket_start,
    retention,
)
from fabric.telemetry.imbalance import hottest
from fabric.topology.link_speeds import LinkRate

# What fabric_version read, per cluster: (the change feed's mark before it read, the version). PostgreSQL only.
_VERSIONS: dict[int, tuple[int, tuple]] = {}
_VERSION_TABLES = ("fabric_cluster", "fabric_importrecord", "fabric_link", "fabric_node", "fabric_switch")


def fabric_version(cluster_id: int) -> tuple:
    """Changes whenever the graph or the port -> link map can have changed: an import, a link or switch edit, an
    HCA put on another host or a host renamed (those actions touch Cluster.updated).
    Caches of the fabric (the scheduler's topology index, ingest's port map) compare it to rebuild. On PostgreSQL
    it is counted again only after a write to a table it reads (fabric.change_feed): a round and a poll ask every
    few seconds, and counting reads every link of the cluster."""
    if not change_feed.supported(connection):
        return _fabric_version(cluster_id)
    kept = _VERSIONS.get(cluster_id)
    mark, written, wrote = change_feed.written_since(connection, _VERSION_TABLES, kept[0] if kept else None)
    if kept is not None and not written:
        version = kept[1]
    else:
        version = _fabric_version(cluster_id)
    if wrote:  # counted from this transaction's own writes, which may yet roll back: not kept
        _VERSIONS.pop(cluster_id, None)
    else:
        _VERSIONS[cluster_id] = (mark, version)
    return version


def _fabric_version(cluster_id: int) -> tuple:
    links = Link.objects.filter(cluster_id=cluster_id).aggregate(
        n=Count("pk"), down=Count("pk", filter=Q(state=LinkState.DOWN)), cap=Sum("capacity_gbps")
    )
    last_import = ImportRecord.objects.filter(cluster_id=cluster_id).aggregate(m=Max("pk"))["m"]
    roles = tuple(Switch.objects.filter(cluster_id=cluster_id, role_source="set").values_list("pk", "role"))
    hosts = Node.objects.filter(cluster_id=cluster_id).aggregate(n=Count("pk"), m=Max("pk"))
    stamps = Cluster.objects.filter(pk=cluster_id).values_list("created", "updated").first()
    return (stamps, last_import, links["n"], links["down"], links["cap"], roles, hosts["n"], hosts["m"])


def cluster_summary(cluster_id: int) -> dict | None:
    cluster = Cluster.objects.filter(pk=cluster_id).values("id", "name", "description").first()
    if cluster is None:
        return None
    switches = Switch.objects.filter(cluster_id=cluster_id).values("role").annotate(n=Count("id"))
    nodes = Node.objects.filter(cluster_id=cluster_id).aggregate(
        total=Count("id"),
        up=Count("id", filter=Q(state=NodeState.UP)),
        drain=Count("id", filter=Q(state=NodeState.DRAIN)),
        down=Count("id", filter=Q(state=NodeState.DOWN)),
    )
    links = Link.objects.filter(cluster_id=cluster_id).aggregate(
        total=Count("id"),
        up=Count("id", filter=Q(state=LinkState.UP)),
        degraded=Count("id", filter=Q(state=LinkState.DEGRADED)),
        down=Count("id", filter=Q(state=LinkState.DOWN)),
        capacity_gbps=Sum("capacity_gbps"),
    )
    gpus = GPU.objects.filter(node__cluster_id=cluster_id).aggregate(
        total=Count("id"),
        healthy=Count("id", filter=Q(health=GpuHealth.HEALTHY)),
        unhealthy=Count("id", filter=Q(health__in=[GpuHealth.DEGRADED, GpuHealth.FAILED])),
    )
    return {
        **cluster,
        "switches": {(row["role"] or "unknown"): row["n"] for row in switches},
        "nodes": nodes,
        "links": {**links, "capacity_gbps": links["capacity_gbps"] or 0.0},
        "gpus": gpus,
    }


#
# Time series for charts: the finest stored tier that covers the span, merged down to a point budget
#

# A tier is used while it gives at most this many times max_points rows; its rows are then merged into slots.
SERIES_FETCH_FACTOR = 4

Point = tuple[datetime, dict[str, float | None]]


def _tiers() -> list[tuple[int, float]]:
    """(tier, seconds between rows): raw samples (0) every poll, then the rollups."""
    return [(0, float(settings.TELEMETRY_INTERVAL_S) or 10.0), (Resolution.MINUTE, 60.0), (Resolution.HOUR, 3600.0)]


def pick_resolution(since: datetime, until: datetime, max_points: int = 500, *, now: datetime | None = None) -> int:
    """Tier for a chart of [since, until): 0 (raw samples), 60 or 3600 seconds. The finest tier that still holds
    `since` (TELEMETRY_RETENTION_*) and has at most SERIES_FETCH_FACTOR * max_points rows in the span; else hours."""
    now = now or timezone.now()
    span = max((until - since).total_seconds(), 0.0)
    for tier, step in _tiers():
        if since >= now - retention(tier) and span / step <= SERIES_FETCH_FACTOR * max_points:
            return tier
    return Resolution.HOUR


def _combine(group: list[Point]) -> Point:
    """Several neighbouring points as one: averages weighted by samples, maxima of maxima, error sums."""
    out: dict[str, float | None] = {"samples": sum(values["samples"] or 0 for _, values in group)}
    for key in group[0][1]:
        if key == "samples":
            continue
        present = [(values[key], values["samples"] or 0) for _, values in group if values[key] is not None]
        if not present:
            out[key] = None
        elif key.endswith("_max"):
            out[key] = max(value for value, _ in present)
        elif key == "errors_total":
            out[key] = sum(value for value, _ in present)
        else:
            weight = sum(n for _, n in present)
            out[key] = sum(value * n for value, n in present) / weight if weight else None
    return group[0][0], out


def _merge(points: list[Point], since: datetime, until: datetime, max_points: int) -> list[Point]:
    """At most max_points points: rows fall into max_points equal time slots of [since, until)."""
    if len(points) <= max_points:
        return points
    width = (until - since) / max_points
    slots: dict[int, list[Point]] = {}
    for point in points:
        slot = min(max(int((point[0] - since) / width), 0), max_points - 1)
        slots.setdefault(slot, []).append(point)
    return [_combine(group) for _, group in sorted(slots.items())]


def metric_series(
    kind: str,
    object_id: int,
    since: datetime,
    until: datetime | None = None,
    *,
    max_points: int = 500,
    now: datetime | None = None,
) -> list[Point]:
    """History of one GPU (kind "gpu") or port ("port") over [since, until), oldest first, at most max_points points.

    Each point is (time, {field: average, field_max: maximum, "samples": raw readings}), plus "errors_total" for a
    port; fields are GpuMetric.SERIES_FIELDS or PortMetric.SERIES_FIELDS, and a raw sample is its own average and
    maximum. The tier comes from pick_resolution (raw for short spans, then 1-minute, then 1-hour rollups); one
    query reads at most SERIES_FETCH_FACTOR * max_points rows, and more than max_points are merged into slots.
    """
    if kind not in ("gpu", "port"):
        raise ValueError(f"kind must be 'gpu' or 'port', not {kind!r}")
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    now = now or timezone.now()
    until = until or now
    if until <= since:
        return []
    raw, rollup = (GpuMetric, GpuMetricRollup) if kind == "gpu" else (PortMetric, PortMetricRollup)
    fields = raw.SERIES_FIELDS
    tier = pick_resolution(since, until, max_points, now=now)
    limit = SERIES_FETCH_FACTOR * max_points
    points: list[Point] = []
    if tier == 0:
        columns = ["at", *fields, *(["errors"] if kind == "port" else [])]
        rows = raw.objects.filter(**{f"{kind}_id": object_id}, at__gte=since, at__lt=until)
        for row in reversed(rows.order_by("-at").values_list(*columns)[:limit]):
            values: dict[str, float | None] = {"samples": 1}
            for name, value in zip(fields, row[1:], strict=False):
                values[name] = values[f"{name}_max"] = value
            if kind == "port":
                values["errors_total"] = sum((row[-1] or {}).values())
            points.append((row[0], values))
    else:
        stats = [f"{name}_{stat}" for name in fields for stat in ("avg", "max")]
        columns = ["at", "samples", *stats, *(["errors_total"] if kind == "port" else [])]
        rows = rollup.objects.filter(
            **{f"{kind}_id": object_id}, resolution_s=tier, at__gte=bucket_start(since, tier), at__lt=until
        )
        for row in reversed(rows.order_by("-at").values_list(*columns)[:limit]):
            values = {"samples": row[1]}
            for column, value in zip(columns[2:], row[2:], strict=True):
                values[column.removesuffix("_avg")] = value
            points.append((row[0], values))
    return _merge(points, since, until, max_points)


def link_labels(link_ids: list[int]) -> dict[int, str]:
    """Link id -> "leaf01[3] <-> gpu0001 mlx5_0[1]", for any number of links in one query."""
    ends: dict[int, dict[str, str]] = {}
    rows = Port.objects.filter(link_id__in=link_ids).values_list(
        "link_id", "link_end", "number", "switch__name", "switch__guid", "hca__node__hostname", "hca__device"
    )
    for link_id, end, number, sw_name, sw_guid, host, device in rows:
        owner = (sw_name or sw_guid) if sw_guid else f"{host} {device}"
        ends.setdefault(link_id, {})[end] = f"{owner}[{number}]"
    return {i: f"{e.get('a', '?')} <-> {e.get('b', '?')}" for i, e in ends.items()}


def hottest_links(cluster_id: int, n: int = 10) -> list[dict]:
    """The cluster's busiest links right now (raw utilisation from telemetry's latest state), with labels."""
    hosts = list(Node.objects.filter(cluster_id=cluster_id).values_list("hostname", flat=True))
    raw, _ = latest_utilisation(cluster_id, hosts, smoothed=False)
    top = hottest({int(k): v for k, v in raw.items()}, n)
    labels = link_labels([k for k, _ in top])
    return [{"link": k, "utilisation": round(v, 4), "label": labels.get(k, "")} for k, v in top]


def link_state(rate: LinkRate, supported_gbps: float, ports_up: bool) -> tuple[str, str]:
    """The state a link is in, and why, from its rate and its ends."""
    if not ports_up:
        return LinkState.DOWN, "a port is down"
    if supported_gbps and rate.data_gbps < supported_gbps:
        return (
            LinkState.DEGRADED,
            f"runs at {rate.label} ({rate.data_gbps:g} Gb/s), both ends support {supported_gbps:g}",
        )
    if not rate.known:
        return LinkState.UP, "speed unknown (fabric reported ???)"
    return LinkState.UP, ""


def supported_gbps(a: Port, b: Port) -> float:
    """The best rate both ends support, when an operator or a collector recorded it for both."""
    rates = [LinkRate(p.supported_width or p.width, p.supported_speed).data_gbps for p in (a, b) if p.supported_speed]
    return min(rates) if len(rates) == 2 else 0.0


def gpu_for_alert_key(cluster_id: int, object_key: str) -> GPU | None:
    node, _, ident = object_key.partition("/")
    gpus = GPU.objects.filter(node__cluster_id=cluster_id, node__hostname=node)
    if ident.startswith("gpu") and ident[3:].isdigit():
        return gpus.filter(index=int(ident[3:])).first()
    return gpus.filter(uuid=ident).first()


def link_for_alert_key(cluster_id: int, object_key: str) -> Link | None:
    node, device, port = [*object_key.split("/"), "", "", ""][:3]
    if not port.isdigit():
        return None
    ports = Port.objects.filter(cluster_id=cluster_id, number=int(port), link__isnull=False).select_related("link")
    if node == FABRIC_SOURCE:  # a switch port read by the fabric agent: the device is the switch GUID
        found = ports.filter(switch__guid=device.lower().removeprefix("0x")).first()
    else:
        found = ports.filter(hca__node__hostname=node, hca__device=device).first()
    return found.link if found else None
