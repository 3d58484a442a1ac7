"""Celery beat schedulers that leave a heartbeat, and the reader of that heartbeat.

Production (REDIS_URL set) runs `RedBeatScheduler`: celery-redbeat keeps the schedule in Redis and lets only the
beat that holds a lock in Redis send anything. Any number of beats may run; the others wait for the lock, and
when its holder dies the lock lapses after CELERY_REDBEAT_LOCK_TIMEOUT seconds and one of them takes over. A
holder that was stalled past the timeout finds the lock gone on its next tick (redbeat extends it before sending
anything), stops with an error and, restarted, waits like the others.

Each tick of the beat that sends records its time in the cache (`heartbeat()`), so that a stopped beat is seen by
those that still run: /healthz (clusterctl/health.py) answers 503 and raises a `beat_stalled` alert, /metrics
exposes the age, and the liveness check names the beat when polls come late. The embedded mode's beat (a thread,
in-memory schedule) and a file-backed beat without Redis leave the same heartbeat.
"""

from __future__ import annotations

import logging
import os
import socket
import time

from celery import beat as celery_beat
from django.core.cache import cache
from redbeat import schedulers as redbeat

log = logging.getLogger(__name__)

HEARTBEAT_KEY = "clusterctl:beat:heartbeat"


def record_heartbeat(now: float | None = None) -> None:
    """The beat that sends ticked now. A cache outage is logged, never raised into beat's loop."""
    body = {"at": time.time() if now is None else now, "by": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        cache.set(HEARTBEAT_KEY, body, None)
    except Exception:
        log.warning("beat: could not record the heartbeat", exc_info=True)


def heartbeat() -> dict | None:
    """{"at": epoch seconds of the last tick, "by": "host:pid"} of the beat that sends, or None if none ever ticked."""
    found = cache.get(HEARTBEAT_KEY)
    return found if isinstance(found, dict) and "at" in found else None


def heartbeat_age(now: float | None = None) -> float | None:
    beat = heartbeat()
    if beat is None:
        return None
    return max(0.0, (time.time() if now is None else now) - float(beat["at"]))


class _Heartbeat:
    def tick(self, *args, **kwargs):
        # After the tick: a RedBeat holder that lost its lock raises in tick() and records nothing.
        interval = super().tick(*args, **kwargs)
        record_heartbeat()
        return interval


class RedBeatScheduler(_Heartbeat, redbeat.RedBeatScheduler):
    """Schedule and lock in Redis (celery-redbeat): only the lock holder sends."""


class PersistentScheduler(_Heartbeat, celery_beat.PersistentScheduler):
    """Celery's file-backed scheduler, for a beat without Redis: exactly one may run."""

    lock_key = None  # redbeat's beat_init handler looks for it on every scheduler


class MemoryScheduler(_Heartbeat, celery_beat.Scheduler):
    """In-memory schedule, for the embedded mode's beat thread (clusterctl/embedded.py)."""

    lock_key = None
