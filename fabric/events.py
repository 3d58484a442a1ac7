"""Events after commit: actions call `send_on_commit`; the cluster's WebSocket group gets them.

Sent once per transaction, never one message per client: Channels fans the group out.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)


Listener = Callable[[int, dict[str, Any]], None]
_listeners: list[Listener] = []


def subscribe(listener: Listener) -> None:
    """Call `listener(cluster_id, payload)` after each committed fabric change (the scheduler requests a round:
    capacity may have changed). Registered once, from an AppConfig.ready()."""
    if listener not in _listeners:
        _listeners.append(listener)


def group_name(cluster_id: int, topic: str = "fabric") -> str:
    """Channels group of one cluster's live view: "fabric.<id>" or "queue.<id>"."""
    return f"{topic}.{cluster_id}"


def send_now(cluster_id: int, payload: dict[str, Any], topic: str = "fabric") -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    # Round-trip through JSON so a payload that would not serialise fails here, in tests, not in a socket.
    message = {"type": f"{topic}.event", "payload": json.loads(json.dumps(payload))}
    try:
        async_to_sync(layer.group_send)(group_name(cluster_id, topic), message)
    except Exception:  # a dead channel layer must not undo a committed change
        log.exception("could not push %s event for cluster %s", topic, cluster_id)


def send_on_commit(cluster_id: int, payload: dict[str, Any], topic: str = "fabric") -> None:
    transaction.on_commit(lambda: send_now(cluster_id, payload, topic))
    if topic == "fabric":
        transaction.on_commit(lambda: _notify(cluster_id, payload))


def _notify(cluster_id: int, payload: dict[str, Any]) -> None:
    for listener in _listeners:
        try:
            listener(cluster_id, payload)
        except Exception:  # one failing listener must not stop the others or undo the change
            log.exception("fabric event listener %r failed", listener)
