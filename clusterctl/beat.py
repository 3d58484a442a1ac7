"""Celery beat schedulers that leave a heartbeat, and the reader of that heartbeat.

Production (REDIS_URL set) runs `RedBeatScheduler`: celery-redbeat keeps the schedule in Redis and lets only the
beat that holds a lock in Redis send anything. Any number of beats may run; the others stand by and ask for the lock
every second. Each tick of the holder renews the lock before it sends anything, so a holder that lost the lock
(stalled past CELERY_REDBEAT_LOCK_TIMEOUT, or cut off from Redis that long) finds out before it could send twice;
it then stands by like the others instead of exiting. When Redis is out of reach (restarting, loading its AOF,
silent), a tick sends nothing, logs one line and tries again a second later: the beat rides out the outage and sends
again on the first tick that renewed the lock after it.

A holder's death frees its lock only when the lock lapses, CELERY_REDBEAT_LOCK_TIMEOUT after its last tick, unless
the beat that asks for it can tell for certain that the holder is dead: the lock's value names the holder's kernel
boot, PID namespace, pid and process start time, so a beat in the same PID namespace (systemd restarting it on the
same host, or a second beat beside it) takes the lock of a dead holder at once. A beat that cannot tell (another
host, another container) waits for the lapse.

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
import uuid
from pathlib import Path

from celery import beat as celery_beat
from celery.signals import beat_init
from django.core.cache import cache
from redbeat import schedulers as redbeat
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError, LockNotOwnedError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

HEARTBEAT_KEY = "clusterctl:beat:heartbeat"
# Redis out of reach: refused, reset, silent past the socket timeout, or still loading its AOF (BusyLoadingError is
# a ConnectionError).
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)

# redbeat acquires the lock in a beat_init handler that blocks until it has it, and Celery swallows what a signal
# handler raises: a Redis error there left the scheduler without a lock, and its first tick died on
# `None.extend` (sibson/redbeat#285). RedBeatScheduler.tick below asks for the lock itself, without blocking.
beat_init.disconnect(redbeat.acquire_distributed_beat_lock)

# Deletes the lock only if it still holds the dead holder's value: between our GET and this, the lock may have
# lapsed and been taken by a live beat.
_DELETE_IF_HELD_BY = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


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


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot), None if no live process has this pid here. A zombie (killed,
    not yet reaped) counts as dead: it sends nothing any more."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])  # fields 3 (state) and 22 of proc(5)


def _namespace() -> str | None:
    """This kernel boot and PID namespace, where a pid and a start time name exactly one process; None off Linux."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid').removeprefix('pid:')}"
    except OSError:
        return None


def lock_value() -> str:
    """The value this process writes into the beat lock: namespace, pid, start time, and a random part, so two
    processes never write the same value."""
    pid = os.getpid()
    return f"{_namespace() or '-'} {pid} {_start_time(pid) or '-'} {socket.gethostname()} {uuid.uuid4().hex}"


def holder_is_dead(value: str) -> bool:
    """True only when the lock's value names a process of this kernel boot and PID namespace that no longer runs."""
    try:
        namespace, pid, started, *_ = value.split(" ")
        pid_n, started_n = int(pid), int(started)
    except ValueError:
        return False  # not written by lock_value() here: nothing is known about the holder
    if _namespace() is None or namespace != _namespace():
        return False
    try:
        os.kill(pid_n, 0)
    except ProcessLookupError:
        return True  # no process has this pid here
    except PermissionError:
        pass  # one runs, as another user
    # A process has the pid: the holder, unless it is a zombie or started at another time (the pid was reused).
    try:
        fields = Path(f"/proc/{pid_n}/stat").read_text().rsplit(")", 1)[1].split()
        state, started_now = fields[0], int(fields[19])  # fields 3 and 22 of proc(5)
    except (OSError, IndexError, ValueError):
        return False  # /proc does not show it (mounted hidepid=2, another user's): it may be the holder, sending
    return state in ("Z", "X") or started_now != started_n


class _Heartbeat:
    def tick(self, *args, **kwargs):
        interval = super().tick(*args, **kwargs)
        record_heartbeat()
        return interval


class RedBeatScheduler(redbeat.RedBeatScheduler):
    """Schedule and lock in Redis (celery-redbeat): only the lock holder sends, and no Redis error ends the beat."""

    #: Seconds between tries while Redis is out of reach, and between a standby's asks for the lock.
    retry_s = 1.0
    _redis_down = False  # set by setup_schedule, which Scheduler.__init__ calls before ours goes on

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lock_value = lock_value()
        self._renewed_at = 0.0  # monotonic time of the last renewal: the lock is ours until lock_timeout after it

    def setup_schedule(self) -> None:
        # Writing the static entries into Redis is the first thing a beat does: one started while Redis is out of
        # reach (compose restarting it during the outage) waits here instead of exiting, which under a restart
        # policy's growing back-off could keep it down well after Redis is back.
        while True:
            try:
                super().setup_schedule()
            except REDIS_DOWN as exc:
                if not self._redis_down:
                    log.warning(
                        "beat: Redis is out of reach (%s: %s); setting the schedule up once it answers",
                        type(exc).__name__,
                        exc,
                    )
                self._redis_down = True
                time.sleep(self.retry_s)
            else:
                return

    def tick(self, **kwargs) -> float:
        try:
            held = self._hold_lock()
            if self._redis_down:
                log.warning("beat: Redis answers again")
                self._redis_down = False
            if not held:
                return min(self.retry_s, self.max_interval)
            interval = self._send_due()
        except REDIS_DOWN as exc:
            if not self._redis_down:  # one line per outage: the beat asks every second
                log.warning(
                    "beat: Redis is out of reach (%s: %s); sending nothing until it answers", type(exc).__name__, exc
                )
            self._redis_down = True
            return self.retry_s
        record_heartbeat()
        return interval

    def _hold_lock(self) -> bool:
        """Renew the lock, or take it if it is free or its holder is known dead. False: another beat holds it."""
        if not self.lock_key:
            return True  # redbeat_lock_key = None: the site runs one beat and wants no lock
        if self.lock is not None:
            try:
                self.lock.extend(int(self.lock_timeout))
            except LockNotOwnedError:
                # It lapsed while this beat could not renew it (stalled, or Redis out of reach that long), and
                # another beat may have sent since: stand by until it is free again.
                log.error(
                    "beat: lost the lock %s (not renewed within %s s); standing by", self.lock_key, self.lock_timeout
                )
                self.lock = None
                return False
            self._renewed_at = time.monotonic()
            return True
        client = redbeat.get_redis(self.app)
        lock = client.lock(self.lock_key, timeout=self.lock_timeout)
        # redbeat's extend sets the lock's time to live to lock_timeout (redis-py's adds to what is left).
        lock.lua_extend = client.register_script(redbeat.LUA_EXTEND_TO_SCRIPT)
        if not lock.acquire(blocking=False, token=self.lock_value):
            held_by = client.get(self.lock_key)
            if held_by == self.lock_value:
                # Ours already: an earlier acquire was stored but its answer was lost with the connection.
                lock.local.token = lock.redis.get_encoder().encode(self.lock_value)
            elif held_by is not None and holder_is_dead(held_by):
                log.warning("beat: the lock's holder (%s) is dead; taking the lock now", held_by)
                client.eval(_DELETE_IF_HELD_BY, 1, self.lock_key, held_by)
                if not lock.acquire(blocking=False, token=self.lock_value):
                    return False
            else:
                return False
        log.info("beat: Acquired lock")
        self.lock, self._renewed_at = lock, time.monotonic()
        return True

    def _send_due(self) -> float:
        remaining = []
        try:
            for entry in self.schedule.values():
                if time.monotonic() - self._renewed_at > self.lock_timeout / 2:
                    # Sending took long (a slow broker): renew before sending more, so nothing goes out after the
                    # lock could have lapsed.
                    return 0
                next_time_to_run = self.maybe_due(entry, **self._maybe_due_kwargs)
                if next_time_to_run:
                    remaining.append(next_time_to_run)
        except RuntimeError:
            log.debug("beat: RuntimeError", exc_info=True)  # as redbeat's tick: the schedule changed while read
        return min([*remaining, self.max_interval])

    def maybe_due(self, entry, **kwargs):
        is_due, next_time_to_run = entry.is_due()
        if is_due:
            log.info("Scheduler: Sending due task %s (%s)", entry.name, entry.task)
            try:
                self.apply_async(entry, **kwargs)
            except REDIS_DOWN:
                raise  # the schedule itself is out of reach (advancing the entry failed): the tick retries
            except Exception as exc:
                log.exception("Scheduler: Message Error: %s", exc)
        return next_time_to_run

    def close(self) -> None:
        lock, self.lock = self.lock, None
        if lock is not None:
            try:
                lock.release()
                log.info("beat: Released lock")
            except (LockError, *REDIS_DOWN) as exc:
                log.warning("beat: could not release the lock (%s); it lapses after %s s", exc, self.lock_timeout)
        celery_beat.Scheduler.close(self)  # redbeat's close would release the lock again


class PersistentScheduler(_Heartbeat, celery_beat.PersistentScheduler):
    """Celery's file-backed scheduler, for a beat without Redis: exactly one may run."""


class MemoryScheduler(_Heartbeat, celery_beat.Scheduler):
    """In-memory schedule, for the embedded mode's beat thread (clusterctl/embedded.py)."""
