"""Two beats on real Redis (RedBeat's lock): only the holder sends, a standby takes over when the holder dies or
stalls past the lock timeout, and the sending beat's heartbeat says who ticks (the embedded beat's too).

Each beat is a real `celery beat` process; what it sends is counted on a queue of this test's own, by the `origin`
header Celery stamps on every message (gen<pid>@host: which process sent it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from clusterctl.beat import HEARTBEAT_KEY, heartbeat

needs_redis = pytest.mark.skipif(not settings.REDIS_URL, reason="RedBeat keeps its lock in Redis: needs REDIS_URL")

ROOT = Path(__file__).resolve().parents[1]
LOCK_TIMEOUT_S = 3  # the beats here tick every 0.5 s


@pytest.fixture
def beats(tmp_path):
    import redis

    r = redis.Redis.from_url(settings.REDIS_URL)
    run = uuid.uuid4().hex[:8]
    queue, prefix = f"beat-test-{run}", f"beat-test-{run}:"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "clusterctl.test_settings",
        "TEST_CACHE_PREFIX": settings.CACHES["default"]["KEY_PREFIX"],  # their heartbeat in this run's cache keys
        "BEAT_TEST_QUEUE": queue,
        "BEAT_TEST_PREFIX": prefix,
        "BEAT_TEST_LOCK_TIMEOUT": str(LOCK_TIMEOUT_S),
        "PYTHONPATH": str(ROOT),
    }
    procs: list[subprocess.Popen] = []
    logs = []

    def start() -> subprocess.Popen:
        cmd = [sys.executable, "-m", "celery", "-A", "tests.beat_app", "beat", "-l", "INFO"]
        logs.append(open(tmp_path / f"beat-{len(procs)}.log", "wb"))  # closed at the end of the test
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=logs[-1], stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    def senders() -> list[int]:
        """Pid of the sender of every message on the queue, oldest first."""
        out = []
        for raw in reversed(r.lrange(queue, 0, -1)):  # kombu LPUSHes: the newest is first
            origin = json.loads(raw)["headers"]["origin"]
            out.append(int(origin.removeprefix("gen").split("@", 1)[0]))
        return out

    yield start, senders
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    for log in logs:
        log.close()
    r.delete(queue, *r.keys(f"{prefix}*"))
    from django.core.cache import cache

    cache.delete(HEARTBEAT_KEY)


def wait_for(predicate, timeout: float) -> float | None:
    """Seconds until predicate() held, or None."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.1)
    return None


@needs_redis
def test_only_the_lock_holder_sends_and_a_standby_takes_over_when_it_dies(beats):
    start, senders = beats
    first = start()
    assert wait_for(lambda: first.pid in senders(), 60) is not None, "the first beat never sent"
    second = start()
    time.sleep(8)  # the second beat starts (a few seconds) and then waits for the lock
    assert second.poll() is None, "the standby beat exited"
    assert set(senders()) == {first.pid}
    assert heartbeat()["by"].endswith(f":{first.pid}")

    sent_before = len(senders())
    first.send_signal(signal.SIGKILL)
    took_over = wait_for(lambda: second.pid in senders(), LOCK_TIMEOUT_S + 10)
    assert took_over is not None, "the standby never took over"
    # The lock lapses LOCK_TIMEOUT_S after the holder's last renewal, and the standby asks every 0.5 s.
    assert took_over <= LOCK_TIMEOUT_S + 1.5, took_over
    assert set(senders()[sent_before:]) == {second.pid}
    assert wait_for(lambda: heartbeat()["by"].endswith(f":{second.pid}"), 2) is not None
    print(f"\nstandby sent its first task {took_over:.2f} s after the holder was killed (lock {LOCK_TIMEOUT_S} s)")


@needs_redis
def test_a_holder_stalled_past_its_lock_sends_nothing_when_it_wakes(beats):
    start, senders = beats
    first = start()
    assert wait_for(lambda: first.pid in senders(), 60) is not None
    second = start()
    time.sleep(8)
    first.send_signal(signal.SIGSTOP)  # frozen, lock held, not renewed
    try:
        assert wait_for(lambda: second.pid in senders(), LOCK_TIMEOUT_S + 10) is not None
        taken = len(senders())
    finally:
        first.send_signal(signal.SIGCONT)
    # Its next tick renews the lock before sending anything: the lock is not its own any more, so it stops.
    assert first.wait(10) != 0
    late = [pid for pid in senders()[taken:] if pid == first.pid]
    # A tick frozen between the renewal and the send finishes that send on waking (at most one message).
    assert len(late) <= 1, late
    assert second.poll() is None


@pytest.mark.django_db(transaction=True)
def test_the_embedded_beat_leaves_the_same_heartbeat():
    from django.core.cache import cache

    from clusterctl.embedded import EmbeddedCelery

    cache.delete(HEARTBEAT_KEY)
    with EmbeddedCelery(kick=False, poll_interval_s=1.0):
        ticked = wait_for(lambda: (heartbeat() or {}).get("by", "").endswith(f":{os.getpid()}"), 10)
    cache.delete(HEARTBEAT_KEY)
    assert ticked is not None
