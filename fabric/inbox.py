"""The ingest inbox: node results wait here a moment so a whole poll is ingested as one batch.

Each node's poll result is pushed as it arrives (one Redis RPUSH); the first push of a window schedules one
drain task, which takes everything waiting and ingests it together. Production uses a Redis list per cluster
(shared by every worker); the embedded demo, with no Redis, a list in the process (its worker is a thread of the
same process).
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from functools import cache

import redis
from django.conf import settings

INBOX_TTL_S = 3600  # results nobody drained for an hour are stale anyway


def _key(cluster_id: int) -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX', '') or ''}telemetry:inbox:{cluster_id}"


@cache
def _redis():
    return redis.Redis.from_url(settings.REDIS_URL)


_local: dict[int, deque[str]] = defaultdict(deque)
_local_lock = threading.Lock()


def push(cluster_id: int, sample: dict) -> None:
    data = json.dumps(sample, separators=(",", ":"))
    if settings.REDIS_URL:
        r = _redis()
        with r.pipeline() as pipe:
            pipe.rpush(_key(cluster_id), data)
            pipe.expire(_key(cluster_id), INBOX_TTL_S)
            pipe.execute()
        return
    with _local_lock:
        _local[cluster_id].append(data)


def push_many(cluster_id: int, samples: list[dict]) -> None:
    """Several results at once, in order (a central read of many nodes: one RPUSH, not one a node)."""
    if not samples:
        return
    data = [json.dumps(s, separators=(",", ":")) for s in samples]
    if settings.REDIS_URL:
        with _redis().pipeline() as pipe:
            pipe.rpush(_key(cluster_id), *data)
            pipe.expire(_key(cluster_id), INBOX_TTL_S)
            pipe.execute()
        return
    with _local_lock:
        _local[cluster_id].extend(data)


def push_front(cluster_id: int, samples: list[dict]) -> None:
    """Put back what a failed drain took, ahead of newer results."""
    if not samples:
        return
    data = [json.dumps(s, separators=(",", ":")) for s in samples]
    if settings.REDIS_URL:
        _redis().lpush(_key(cluster_id), *reversed(data))
        return
    with _local_lock:
        _local[cluster_id].extendleft(reversed(data))


def drain(cluster_id: int, limit: int = 100_000) -> list[dict]:
    """Take up to `limit` waiting results, oldest first."""
    if settings.REDIS_URL:
        with _redis().pipeline() as pipe:  # MULTI: a push between the two commands is not lost
            pipe.lrange(_key(cluster_id), 0, limit - 1)
            pipe.ltrim(_key(cluster_id), limit, -1)
            raw, _ = pipe.execute()
    else:
        with _local_lock:
            q = _local[cluster_id]
            raw = [q.popleft() for _ in range(min(limit, len(q)))]
    return [json.loads(r) for r in raw]


def waiting(cluster_id: int) -> int:
    if settings.REDIS_URL:
        return int(_redis().llen(_key(cluster_id)))
    with _local_lock:
        return len(_local[cluster_id])
