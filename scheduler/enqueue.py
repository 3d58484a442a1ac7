"""The scheduler's tasks, sent by name. The actions send tasks through here and never import `scheduler.tasks`,
which imports the actions (the cycle of issue 15). `SchedulerConfig.ready` imports the tasks module, so every
name is registered with the Celery app before a request or a task runs; a task sent through here runs eagerly
where the app does (embedded mode, tests), as its own `.delay` would."""

from __future__ import annotations

from celery import current_app
from django.conf import settings
from django.core.cache import cache

DEBOUNCE_S = 1.0


def task(name: str):
    """The registered task `scheduler.tasks.<name>` (KeyError naming it when the module was not loaded)."""
    return current_app.tasks[f"scheduler.tasks.{name}"]


def round_requested_key(cluster_id: int) -> str:
    return f"scheduler:round-requested:{cluster_id}"


def request_round(cluster_id: int, trigger: str, countdown: float = DEBOUNCE_S) -> bool:
    """Enqueue one round for the cluster unless one is already waiting (bursts of submits make one round). It starts
    `countdown` seconds from now: a burst's requests come within it; a round that left jobs at its limit asks 0.

    The mark that one is waiting lasts one round interval at most: should its round be lost (the worker holding
    it killed before it started), new requests are held back no longer than that, and periodic rounds not at all.
    Returns whether a round was enqueued.
    """
    if not cache.add(round_requested_key(cluster_id), trigger, timeout=max(1, int(settings.ROUND_INTERVAL_S))):
        return False
    task("run_round").apply_async((cluster_id, trigger), countdown=countdown)
    return True
