"""A cluster's fabric report (fabric.topology.analyse over the graph in the database), kept until the fabric changes.

The analysis reads every link and port of the cluster and walks the whole graph: seconds at 10,000 servers. The report
page, the API and `manage.py fabric_report` read it through `cluster_report`, which keeps it

* in the Django cache (Redis in production: every web process, the worker and a management command share it), one
  entry per cluster, and
* in a memo of this process (no cache read, no unpickling on the next visit),

both labelled with the report version the analysis was made at: `fabric.selectors.fabric_version` (imports, links
and their capacity and state, hosts, operator-set tiers, HCAs put on other hosts) and an inventory stamp that every
committed inventory edit renews (a switch renamed, a host's role, a port's supported speed: edits that change the
report but not fabric_version). A report is used only while the version it was made at is the current one, so it
always reflects the current fabric: the version is read before the graph, so a report is never older than its label
(a change in between only makes the next reader analyse again).

After a change of the fabric (every event on the "fabric" topic, once it commits) `fabric.tasks.warm_report` analyses
ahead of the next visit, on the worker; where tasks run eagerly (tests, a management command of the embedded mode)
nothing is sent: the next reader analyses.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery import current_app
from django.core.cache import cache
from django.utils import timezone

from clusterctl import outages
from fabric.graph_from_db import fabric_for_cluster
from fabric.models import Switch
from fabric.selectors import fabric_version
from fabric.topology import analyse
from fabric.topology.oversubscription import LeafOversubscription
from fabric.topology.report import FabricReport

log = logging.getLogger(__name__)

# Part of every key: a deploy that changes what is cached (the report's dataclasses) reads none of the old entries.
FORMAT = 1
# An entry not renewed for this long leaves the cache (a deleted cluster's); the version decides whether it is used.
REPORT_TTL_S = 30 * 24 * 3600
# A warm-up requested while one waits is the same warm-up; the mark lapses after this, should its task be lost.
WARM_MARK_TTL_S = 60
# Changes that commit together or in a burst (an import, then its tiers and jobs) make one analysis.
WARM_COUNTDOWN_S = 2.0
WARM_TASK = "fabric.tasks.warm_report"


@dataclass(frozen=True, slots=True)
class ClusterReport:
    """The report of one cluster and what its page derives from it, at one report version."""

    version: tuple
    report: FabricReport
    switch_ids: dict[str, int]  # GUID -> Switch id of each switch the report names as a single point of failure
    leaves_worst_first: list[LeafOversubscription]  # oversubscription rows, most oversubscribed first, ties by name
    analysed_at: datetime
    seconds: float  # how long reading the graph and analysing it took


def report_key(cluster_id: int) -> str:
    return f"fabric:report:{FORMAT}:{cluster_id}"


def version_key(cluster_id: int) -> str:
    """The version of the cached report alone: the warm-up compares it without reading the report."""
    return f"fabric:report:{FORMAT}:{cluster_id}:version"


def stamp_key(cluster_id: int) -> str:
    return f"fabric:inventory-stamp:{cluster_id}"


def warm_mark_key(cluster_id: int) -> str:
    return f"fabric:report-warm:{cluster_id}"


_MEMO: dict[int, ClusterReport] = {}
_LOCKS: dict[int, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def forget() -> None:
    """Empty this process's memo (tests)."""
    _MEMO.clear()


#
# The version
#


def inventory_stamp(cluster_id: int) -> str | None:
    """A token renewed by every committed inventory edit of the cluster (None: the cache cannot be reached, and no
    cached report is then trusted). A lost stamp (the cache emptied) is a new one: the next reader analyses again."""
    try:
        stamp = cache.get(stamp_key(cluster_id))
        if stamp is None:
            cache.add(stamp_key(cluster_id), uuid.uuid4().hex, timeout=None)
            stamp = cache.get(stamp_key(cluster_id))
        return stamp
    except outages.OUTAGE_ERRORS as exc:
        outages.note(exc, "the fabric report is analysed on each visit until it is back", key="fabric report")
        return None


def renew_stamp(cluster_id: int) -> None:
    try:
        cache.set(stamp_key(cluster_id), uuid.uuid4().hex, timeout=None)
    except outages.OUTAGE_ERRORS as exc:
        outages.note(exc, "the fabric report is analysed on each visit until it is back", key="fabric report")


def report_version(cluster_id: int) -> tuple:
    """What a cached report must have been made at to be used: fabric_version and the inventory stamp."""
    return (fabric_version(cluster_id), inventory_stamp(cluster_id))


#
# Reading and analysing
#


def cluster_report(cluster_id: int, *, memo: bool = True) -> ClusterReport:
    """The cluster's report at its current version: from this process's memo, else the cache, else analysed now (and
    kept in both; `memo=False`: in the cache only). Two readers of one process that miss together analyse once (the
    second waits for the first)."""
    version = report_version(cluster_id)
    trusted = version[1] is not None
    held = _MEMO.get(cluster_id)
    if trusted and held is not None and held.version == version:
        return held
    with _lock(cluster_id):
        held = _MEMO.get(cluster_id)  # analysed by the reader this one waited for
        if trusted and held is not None and held.version == version:
            return held
        shared = _cached(cluster_id) if trusted else None
        if shared is not None and shared.version == version:
            fresh = shared
        else:
            fresh = analyse_cluster(cluster_id, version)
            if trusted:
                _store(fresh, cluster_id)
        if memo:
            _MEMO[cluster_id] = fresh
        return fresh


def analyse_cluster(cluster_id: int, version: tuple) -> ClusterReport:
    """Read the graph, analyse it and derive what the page shows (the report of `version`, read before the graph)."""
    began = time.perf_counter()
    report = analyse(fabric_for_cluster(cluster_id))
    guids = [s.switch for s in report.spof.switches]
    switch_ids = dict(Switch.objects.filter(cluster_id=cluster_id, guid__in=guids).values_list("guid", "pk"))
    # Python's sort is stable, reversed too: leaves of equal severity stay in name order.
    worst_first = sorted(report.oversubscription.leaves, key=_severity, reverse=True)
    return ClusterReport(
        version=version,
        report=report,
        switch_ids=switch_ids,
        leaves_worst_first=worst_first,
        analysed_at=timezone.now(),
        seconds=time.perf_counter() - began,
    )


def _severity(row: LeafOversubscription) -> tuple[bool, float]:
    # As the report picks its worst leaf: no uplinks (with hosts to strand) beats any ratio.
    return (row.no_uplinks and row.host_gbps > 0, row.ratio or 0.0)


def _lock(cluster_id: int) -> threading.Lock:
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(cluster_id, threading.Lock())


def _cached(cluster_id: int) -> ClusterReport | None:
    try:
        value = cache.get(report_key(cluster_id))
    except outages.OUTAGE_ERRORS as exc:
        outages.note(exc, "the fabric report is analysed on each visit until it is back", key="fabric report")
        return None
    except Exception:  # an entry that no longer unpickles (a deploy changed a class without FORMAT): analyse again
        log.warning("fabric report of cluster %s: the cached entry could not be read; analysing again", cluster_id)
        return None
    return value if isinstance(value, ClusterReport) else None


def _store(fresh: ClusterReport, cluster_id: int) -> None:
    try:
        cache.set_many({report_key(cluster_id): fresh, version_key(cluster_id): fresh.version}, REPORT_TTL_S)
    except outages.OUTAGE_ERRORS as exc:
        outages.note(exc, "the fabric report is analysed on each visit until it is back", key="fabric report")


#
# Ahead of the next visit
#


def warm(cluster_id: int) -> bool:
    """Analyse the cluster's report into the cache unless the cached one is current (the task's body). Returns
    whether it analysed. This process keeps no memo of it (the worker serves no page)."""
    try:
        cache.delete(warm_mark_key(cluster_id))  # a change from now on asks for another warm-up
    except outages.OUTAGE_ERRORS:
        pass
    version = report_version(cluster_id)
    if version[1] is None:
        return False
    try:
        if cache.get(version_key(cluster_id)) == version:
            return False
    except outages.OUTAGE_ERRORS:
        return False
    cluster_report(cluster_id, memo=False)
    return True


def request_warm_up(cluster_id: int) -> bool:
    """Send one warm-up of the cluster's report unless one already waits; returns whether one was sent. Nothing
    where tasks run eagerly: it would analyse inside whoever committed (a request, a command), for a cache that the
    next reader fills as well."""
    if current_app.conf.task_always_eager or outages.recent(outages.REDIS, outages.BROKER):
        return False
    try:
        if not cache.add(warm_mark_key(cluster_id), 1, timeout=WARM_MARK_TTL_S):
            return False
        current_app.send_task(WARM_TASK, args=(cluster_id,), countdown=WARM_COUNTDOWN_S)
    except outages.OUTAGE_ERRORS as exc:
        outages.note(exc, "the fabric report is analysed at the next visit instead", key="fabric report warm-up")
        return False
    return True


def fabric_changed(cluster_id: int, payload: dict[str, Any]) -> None:
    """The "fabric" topic's listener (FabricConfig.ready): an inventory edit renews the stamp; then a warm-up."""
    if payload.get("kind") == "inventory_changed":
        renew_stamp(cluster_id)
    request_warm_up(cluster_id)
