"""Events after commit: actions call `send_on_commit`; the cluster's WebSocket group gets them.

Sent once per transaction, never one message per client: Channels fans the group out.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)


def group_name(cluster_id: int) -> str:
    return f"fabric.{cluster_id}"


def send_now(cluster_id: int, payload: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    # Round-trip through JSON so a payload that would not serialise fails here, in tests, not in a socket.
    message = {"type": "fabric.event", "payload": json.loads(json.dumps(payload))}
    try:
        async_to_sync(layer.group_send)(group_name(cluster_id), message)
    except Exception:  # a dead channel layer must not undo a committed change
        log.exception("could not push fabric event for cluster %s", cluster_id)


def send_on_commit(cluster_id: int, payload: dict[str, Any]) -> None:
    transaction.on_commit(lambda: send_now(cluster_id, payload))
