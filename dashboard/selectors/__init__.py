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

from collections.abc import Iterable

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
from dashboard.selectors.fabric_topic import AGGREGATE_ABOVE, fabric
from dashboard.selectors.gpus_topic import GPU_METRICS_UNITS, gpus
from dashboard.selectors.overview_topic import overview, spread_cv, trend_point
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


def build(cluster_id: int, topics: Iterable[str], *, trend: list[dict] | None = None) -> dict[str, dict] | None:
    """The current state of each topic, or None when the cluster does not exist."""
    c = _Cluster(cluster_id)
    if c.row is None:
        return None
    out: dict[str, dict] = {}
    for topic in topics:
        if topic == "overview":
            out[topic] = overview(c, trend)
        elif topic in BUILDERS:
            out[topic] = BUILDERS[topic](c)
        else:
            raise ValueError(f"unknown topic {topic!r}; known: {', '.join(TOPICS)}")
    return out


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
    "NO_LEAF",
    "NO_ROUND_YET",
    "RECENT_KINDS",
    "RECENT_LIMIT",
    "_CABLING",
    "Placement",
    "_Cabling",
    "_Cluster",
    "_Topology",
    "alert_cause",
    "alert_groups",
    "alerts",
    "build",
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
]
