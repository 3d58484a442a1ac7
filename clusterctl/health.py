"""/healthz: is the database reachable, is the broker reachable, does a beat tick.

200 "ok" when all three hold; 503 "unavailable" when the database or the broker is not reachable, 503 "degraded"
when they are but no beat ticked for BEAT_STALE_S (nothing polls the nodes or runs the periodic rounds then).
The beat's heartbeat is written by the beat itself (clusterctl/beat.py), so a dead beat cannot hide: this check,
which the web container runs every 30 s, also raises a `beat_stalled` alert on every cluster while it lasts and
clears it once the beat is back.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from clusterctl.beat import heartbeat
from clusterctl.celery import app
from fabric import actions
from fabric.models import Cluster
from fabric.telemetry import liveness

log = logging.getLogger(__name__)

ALERT_CHECK_KEY = "clusterctl:beat:alert-checked"
ALERT_CHECK_S = 10.0  # however often /healthz is asked, the beat alert is looked at once per this many seconds
# A web process that just started gives beat (started beside it) BEAT_STALE_S for its first tick.
PROCESS_STARTED = time.time()


def _check_database() -> str | None:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()
    except Exception as exc:  # any driver error means "not reachable"
        return f"{type(exc).__name__}: {exc}"
    return None


def _check_broker() -> str | None:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _beat(now: float) -> tuple[float | None, str | None]:
    """(seconds since the sending beat's last tick or None, the problem or None)."""
    try:
        beat = heartbeat()
    except Exception as exc:  # the cache is Redis: its outage shows in the broker check too
        return None, f"heartbeat unreadable: {type(exc).__name__}: {exc}"
    limit = settings.BEAT_STALE_S
    if beat is None:
        if now - PROCESS_STARTED <= limit:
            return None, None
        return None, f"no beat has ticked (limit {limit:.0f} s): start `celery -A clusterctl beat`"
    age = max(0.0, now - float(beat["at"]))
    if age > limit:
        return age, f"stale: last tick {age:.0f} s ago by {beat.get('by', '?')} (limit {limit:.0f} s)"
    return age, None


def _alert_beat(now: float, age: float | None) -> None:
    """Raise or clear every cluster's beat_stalled alert (at most once per ALERT_CHECK_S, whoever asks)."""
    if not cache.add(ALERT_CHECK_KEY, 1, timeout=ALERT_CHECK_S):
        return
    findings = liveness.beat_findings(age, limit_s=settings.BEAT_STALE_S)
    at = datetime.fromtimestamp(now, tz=UTC)
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        try:
            actions.record_cluster_findings(
                cluster_id, findings, rules=(liveness.BEAT_STALLED,), now=at, hold_down_s=0.0
            )
        except IntegrityError:  # another web process raised it in the same instant
            log.info("healthz: beat alert of cluster %s raised concurrently", cluster_id)


@never_cache
@require_GET
def healthz(request):
    started = time.monotonic()
    now = time.time()
    checks = {"database": _check_database(), "broker": _check_broker()}
    reachable = all(v is None for v in checks.values())
    age, beat_problem = _beat(now)
    checks["beat"] = beat_problem
    if checks["database"] is None and (beat_problem is not None or age is not None):
        try:
            _alert_beat(now, age)
        except Exception:  # an alert that cannot be written must not turn the health answer into a 500
            log.exception("healthz: the beat alert could not be recorded")
    status = "ok" if reachable and beat_problem is None else ("degraded" if reachable else "unavailable")
    body = {
        "status": status,
        "mode": "embedded" if settings.EMBEDDED else "production",
        "checks": {k: ("ok" if v is None else v) for k, v in checks.items()},
        "beat_age_s": None if age is None else round(age, 1),
        "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
    }
    return JsonResponse(body, status=200 if status == "ok" else 503)
