"""What the live views show, topic by topic (docs/dashboard.md): plain JSON-ready dicts, bounded queries. One module
per page's topic (overview_topic, fabric_topic, gpus_topic, alerts_topic, queue_topic) over `cluster` (what one build
reads once); this package is their one door.

`build(cluster_id, topics)` returns the current state of each topic; the broadcaster diffs it against what it
sent last, the sockets send it as a snapshot. One build shares its reads between topics (`_Cluster`), and each
topic reads a fixed number of rows sets whatever the cluster size (tests/dashboard/test_selectors.py). Queries per
topic alone, the cluster row included:

| topic    | queries | + once per cabling | cache reads |
|----------|---------|--------------------|-------------|
| overview | 7       | -                  | latest load of every node (one get_many), the trend ring |
| fabric   | 9       | 4                  | latest load of every node |
| gpus     | 9       | 4                  | latest load of every node |
| alerts   | 2       | -                  | - |
| queue    | 10      | 4                  | - |

The cabling (switches, link ends, tiers, paths between leaves: fabric.topology, pure) is kept per process while
fabric.selectors.fabric_version is unchanged (five of the queries above). Measured on PostgreSQL: all five topics
of the demo cluster (128 x 8 H100, 1,024 GPUs) in about 40 ms; 1,250 x 8 (10,000 GPUs) in about 0.25-0.6 s.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dashboard.selectors.alerts_topic import (
    ALERT_FIELDS,
    ALERT_TIMES,
    ALERTS_CLEARED_WITHIN,
    ALERTS_LIMIT,
    GROUP_SAMPLES,
    alert_cause,
    alert_groups,
    alerts,
    group_key,
    group_members,
    listed_alerts,
    rule_counts,
)
from dashboard.selectors.cluster import _CABLING, _Cabling, _Cluster, _Topology, cabling, iso
from dashboard.selectors.fabric_topic import AGGREGATE_ABOVE, fabric, fabric_and_load, fabric_with_load
from dashboard.selectors.gpus_topic import GPU_METRICS_UNITS, gpus, gpus_and_load, gpus_with_load
from dashboard.selectors.overview_topic import overview, overview_with_load, spread_cv, trend_point
from dashboard.selectors.queue_topic import (
    JOB_FIELDS,
    NO_LEAF,
    NO_ROUND_YET,
    RECENT_KINDS,
    RECENT_LIMIT,
    Placement,
    for_tenant,
    job_shape,
    leaves_of,
    name_span,
    placement,
    queue,
    shape_text,
)
from dashboard.topics import TOPICS
from fabric.models import Cluster

BUILDERS = {"fabric": fabric, "gpus": gpus, "alerts": alerts, "queue": queue}
# The topics whose state telemetry's latest load changes, and only in values (`with_load`).
LOAD_TOPICS: tuple[str, ...] = ("overview", "fabric", "gpus")


@dataclass(frozen=True)
class LoadMap:
    """Where the latest load goes in the states of one build (`build_mapped`), for `with_load`."""

    hostnames: tuple[str, ...]  # whose latest state the build read
    where: dict[str, Any] = field(default_factory=dict)  # topic of LOAD_TOPICS -> its builder's map


def build(cluster_id: int, topics: Iterable[str], *, trend: list[dict] | None = None) -> dict[str, dict] | None:
    """The current state of each topic, or None when the cluster does not exist."""
    c = _Cluster(cluster_id)
    if c.row is None:
        return None
    return _build(c, topics, trend)[0]


def build_mapped(
    cluster_id: int, topics: Iterable[str], *, trend: list[dict] | None = None
) -> tuple[dict[str, dict], LoadMap] | None:
    """`build`, with where the load goes in the states of LOAD_TOPICS (for `with_load`)."""
    c = _Cluster(cluster_id)
    if c.row is None:
        return None
    out, where = _build(c, topics, trend)
    return out, LoadMap(tuple(c.hostnames), where)


def _build(c: _Cluster, topics: Iterable[str], trend: list[dict] | None) -> tuple[dict, dict[str, Any]]:
    """The states, and where the load goes in those of LOAD_TOPICS (the builders work it out anyway)."""
    out: dict[str, dict] = {}
    where: dict[str, Any] = {}
    for topic in topics:
        if topic == "overview":
            out[topic], where[topic] = overview(c, trend), None
        elif topic == "fabric":
            out[topic], where[topic] = fabric_and_load(c)
        elif topic == "gpus":
            out[topic], where[topic] = gpus_and_load(c)
        elif topic in BUILDERS:
            out[topic] = BUILDERS[topic](c)
        else:
            raise ValueError(f"unknown topic {topic!r}; known: {', '.join(TOPICS)}")
    return out, where


def with_load(cluster_id: int, states: dict[str, dict], load_map: LoadMap) -> Iterator[tuple[str, dict]]:
    """(topic, state) for each of `states` (of LOAD_TOPICS, built with `load_map`) with telemetry's latest load, one
    topic at a time (a caller may send each before the next is computed): one cache read, no query. The same as a
    new `build` as long as nothing but the load changed since (what an ingest alone changes); the broadcaster knows
    when that holds (dashboard.broadcast). New states: `states` are not changed."""
    c = _Cluster(cluster_id)
    c.hostnames = list(load_map.hostnames)  # what the build read: no query for them
    for topic, state in states.items():
        if topic == "overview":
            yield topic, overview_with_load(state, c)
        elif topic == "fabric":
            yield topic, fabric_with_load(state, load_map.where[topic], c)
        elif topic == "gpus":
            yield topic, gpus_with_load(state, load_map.where[topic], c)
        else:
            raise ValueError(f"{topic!r} is not changed by load alone; those are: {', '.join(LOAD_TOPICS)}")


def cluster_exists(cluster_id: int) -> bool:
    return Cluster.objects.filter(pk=cluster_id).exists()


__all__ = [
    "AGGREGATE_ABOVE",
    "ALERTS_CLEARED_WITHIN",
    "ALERTS_LIMIT",
    "ALERT_FIELDS",
    "ALERT_TIMES",
    "BUILDERS",
    "GPU_METRICS_UNITS",
    "GROUP_SAMPLES",
    "JOB_FIELDS",
    "LOAD_TOPICS",
    "NO_LEAF",
    "NO_ROUND_YET",
    "RECENT_KINDS",
    "RECENT_LIMIT",
    "_CABLING",
    "LoadMap",
    "Placement",
    "_Cabling",
    "_Cluster",
    "_Topology",
    "alert_cause",
    "alert_groups",
    "alerts",
    "build",
    "build_mapped",
    "cabling",
    "cluster_exists",
    "fabric",
    "for_tenant",
    "gpus",
    "group_key",
    "group_members",
    "iso",
    "job_shape",
    "leaves_of",
    "listed_alerts",
    "name_span",
    "overview",
    "placement",
    "queue",
    "rule_counts",
    "shape_text",
    "spread_cv",
    "trend_point",
    "with_load",
]
