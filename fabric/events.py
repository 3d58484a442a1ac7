"""Events after commit: actions call `send_on_commit`; listeners of the topic get them once the change commits.

Topics: "fabric" (inventory, node state, health; the scheduler listens and requests a round), "queue" (job
changes) and "live" (`{"topics": [...]}`: what the live views show changed, e.g. new load after an ingest, so the
domain never imports the dashboard). The live views' broadcaster (dashboard.broadcast.on_fabric_event,
on_job_event, on_live_event) listens to all three and pushes what changed to the cluster's WebSocket groups: one
message per group, never one per client, at most one per second.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

log = logging.getLogger(__name__)


Listener = Callable[[int, dict[str, Any]], None]
_listeners: dict[str, list[Listener]] = {"fabric": [], "queue": [], "live": []}


def subscribe(listener: Listener, topic: str = "fabric") -> None:
    """Call `listener(cluster_id, payload)` after each committed change of `topic` ("fabric": capacity may have
    changed; "queue": a job changed). Registered once, from an AppConfig.ready()."""
    if listener not in _listeners[topic]:
        _listeners[topic].append(listener)


def live_changed(cluster_id: int, topics: tuple[str, ...] | str, *, load_only: bool = False) -> None:
    """Say, after commit, that the live views' `topics` of the cluster changed (dashboard.broadcast listens).
    `load_only`: nothing changed but telemetry's latest load (an ingest that raised or cleared nothing)."""
    payload: dict = {"topics": topics}
    if load_only:
        payload["load_only"] = True
    send_on_commit(cluster_id, payload, "live")


def send_on_commit(cluster_id: int, payload: dict[str, Any], topic: str = "fabric") -> None:
    transaction.on_commit(lambda: _notify(cluster_id, payload, topic))


def _notify(cluster_id: int, payload: dict[str, Any], topic: str = "fabric") -> None:
    for listener in _listeners.get(topic, []):
        try:
            listener(cluster_id, payload)
        except Exception:  # one failing listener must not stop the others or undo the change
            log.exception("%s event listener %r failed", topic, listener)
