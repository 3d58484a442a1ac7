"""Token-checked locks for tasks: a run releases only the lock it still holds.

A lock taken with `cache.add` and dropped with `cache.delete` lets a slow run whose lock timed out delete the
lock that another run took since, and then a third run starts beside the second. Here every acquisition holds a
random token, and release (and `owned`) compare it first:

- with Redis (REDIS_URL set): redis-py's `Lock`, whose release is a Lua compare-and-delete on the server;
- without (the embedded mode, one process): the Django cache (local memory) with the same compare done under a
  process-wide threading lock, which is atomic there because every thread of that process goes through it.

    lock = TaskLock("fabric:rollup", timeout=900)
    if lock.acquire():
        try:
            ...
        finally:
            lock.release()
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings
from django.core.cache import cache
from redis.exceptions import LockError

_local_lock = threading.Lock()


@functools.cache
def _redis(url: str):
    return redis.Redis.from_url(url)


def _prefix() -> str:
    return settings.CACHES["default"].get("KEY_PREFIX", "") or ""


class TaskLock:
    """A non-blocking lock with a timeout (seconds) after which it lapses by itself (a killed holder cannot keep it).

    With `keepalive`, a thread of the holder renews the lock every third of its timeout until release: the timeout is
    then how long a killed holder blocks the next run (seconds), not a bound on how long a run may take. Without it,
    the timeout must outlast the slowest run, and a worker killed mid-run blocks the task for all of it (a killed
    ingest batch held telemetry back 28.5 s in the chaos run)."""

    def __init__(self, name: str, timeout: float, *, keepalive: bool = False) -> None:
        if timeout <= 0:
            raise ValueError(f"lock {name!r}: timeout must be positive, not {timeout!r}")
        self.name = name
        self.timeout = float(timeout)
        self.keepalive = keepalive
        self._key = f"{_prefix()}lock:{name}"
        self._token: str | None = None
        self._renewer: threading.Thread | None = None
        self._released = threading.Event()
        self._redis_lock = None
        if settings.REDIS_URL:
            # thread_local=False: the token belongs to this object, whichever thread releases it.
            self._redis_lock = _redis(settings.REDIS_URL).lock(self._key, timeout=self.timeout, thread_local=False)

    def acquire(self) -> bool:
        """Take the lock if nobody holds it; never waits."""
        if not self._take():
            return False
        if self.keepalive:
            self._released.clear()
            self._renewer = threading.Thread(target=self._renew, name=f"lock-renew:{self.name}", daemon=True)
            self._renewer.start()
        return True

    def _take(self) -> bool:
        if self._redis_lock is not None:
            return bool(self._redis_lock.acquire(blocking=False))
        token = uuid.uuid4().hex
        with _local_lock:
            if cache.add(self._key, token, timeout=self.timeout):
                self._token = token
                return True
        return False

    def _renew(self) -> None:
        # Stops at release, or once the lock is lost (lapsed during an outage, taken since): it is never taken back.
        while not self._released.wait(self.timeout / 3):
            try:
                if not self._extend():
                    return
            except Exception:  # Redis out of reach: the lock lapses by itself, owned() then says so
                return

    def _extend(self) -> bool:
        if self._redis_lock is not None:
            try:
                self._redis_lock.reacquire()
            except LockError:
                return False
            return True
        with _local_lock:
            if self._token is None or cache.get(self._key) != self._token:
                return False
            cache.set(self._key, self._token, timeout=self.timeout)
            return True

    def release(self) -> bool:
        """Drop the lock if this run still holds it. False when it had lapsed (another run may hold it now)."""
        self._released.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join()
            self._renewer = None
        if self._redis_lock is not None:
            try:
                self._redis_lock.release()
            except LockError:  # not ours any more: the Lua script left the other run's token alone
                return False
            return True
        with _local_lock:
            token, self._token = self._token, None
            if token is None or cache.get(self._key) != token:
                return False
            cache.delete(self._key)
            return True

    def owned(self) -> bool:
        """Whether this run still holds the lock (it has not lapsed)."""
        if self._redis_lock is not None:
            return bool(self._redis_lock.owned())
        with _local_lock:
            return self._token is not None and cache.get(self._key) == self._token

    def locked(self) -> bool:
        """Whether anyone holds it."""
        if self._redis_lock is not None:
            return bool(self._redis_lock.locked())
        return cache.get(self._key) is not None


@contextmanager
def hold(name: str, timeout: float, *, keepalive: bool = False) -> Iterator[bool]:
    """`with hold(name, timeout) as got:` runs the body either way; `got` says whether this run holds the lock."""
    lock = TaskLock(name, timeout, keepalive=keepalive)
    got = lock.acquire()
    try:
        yield got
    finally:
        if got:
            lock.release()
