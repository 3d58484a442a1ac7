"""Two beats on real Redis (RedBeat's lock): only the holder sends, a standby takes over at once when the holder
dies and after the lock timeout when it stalls, a holder that lost its lock stands by, and the sending beat's
heartbeat says who ticks (the embedded beat's too). A beat riding out a Redis restart: tests/resilience/.

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

from clusterctl.beat import HEARTBEAT_KEY, heartbeat, holder_is_dead, lock_value

needs_redis = pytest.mark.skipif(not settings.REDIS_URL, reason="RedBeat keeps its lock in Redis: needs REDIS_URL")
# Whether a lock's holder is dead is read from /proc (clusterctl/beat.py holder_is_dead).
linux = pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="needs Linux's /proc")

ROOT = Path(__file__).resolve().parents[2]
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
        "PYTHONPATH": str(ROOT),
    }
    procs: list[subprocess.Popen] = []
    logs = []

    def start(lock_timeout_s: int = LOCK_TIMEOUT_S) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "celery", "-A", "tests.clusterctl.beat_app", "beat", "-l", "INFO"]
        logs.append(open(tmp_path / f"beat-{len(procs)}.log", "wb"))  # closed at the end of the test
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, env={**env, "BEAT_TEST_LOCK_TIMEOUT": str(lock_timeout_s)}, stdout=logs[-1],
            stderr=subprocess.STDOUT,
        )  # fmt: skip
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
def test_only_the_lock_holder_sends_and_a_standby_takes_over_at_once_when_it_dies(beats):
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
    # The lock names its holder's process, dead here (a zombie until the test reaps it): the standby, asking every
    # 0.5 s, takes it without waiting for it to lapse (LOCK_TIMEOUT_S after the holder's last renewal).
    assert took_over <= 1.5, took_over
    assert set(senders()[sent_before:]) == {second.pid}
    assert wait_for(lambda: heartbeat()["by"].endswith(f":{second.pid}"), 2) is not None
    print(f"\nstandby sent its first task {took_over:.2f} s after the holder was killed (lock {LOCK_TIMEOUT_S} s)")


@needs_redis
def test_a_beat_restarted_after_kill_9_takes_the_dead_holders_lock_at_once(beats, tmp_path):
    start, senders = beats
    first = start(lock_timeout_s=30)
    assert wait_for(lambda: first.pid in senders(), 60) is not None
    first.kill()
    first.wait(10)  # reaped, as a supervisor does before it starts the next one
    restarted = start(lock_timeout_s=30)
    # Its boot takes a few seconds on a loaded machine; the dead holder's lock would stand 30 s.
    took = wait_for(lambda: restarted.pid in senders(), 20)
    assert took is not None, (tmp_path / "beat-1.log").read_text()[-3000:]
    print(f"\nthe restarted beat sent {took:.2f} s after it was started (lock 30 s)")


@needs_redis
def test_a_holder_stalled_past_its_lock_is_waited_for_and_stands_by_when_it_wakes(beats):
    start, senders = beats
    first = start()
    assert wait_for(lambda: first.pid in senders(), 60) is not None
    second = start()
    time.sleep(8)
    first.send_signal(signal.SIGSTOP)  # frozen, lock held, not renewed
    try:
        took_over = wait_for(lambda: second.pid in senders(), LOCK_TIMEOUT_S + 10)
        assert took_over is not None
        taken = len(senders())
    finally:
        first.send_signal(signal.SIGCONT)
    # A stopped process is alive: the standby waited for the lock to lapse, LOCK_TIMEOUT_S after the holder's last
    # renewal (at most one 0.5 s tick before the stop).
    assert took_over >= LOCK_TIMEOUT_S - 0.6, took_over
    # Its next tick renews the lock before sending anything: the lock is not its own any more, so it stands by.
    time.sleep(3)
    assert first.poll() is None, "the holder that lost its lock exited"
    late = [pid for pid in senders()[taken:] if pid == first.pid]
    # A tick frozen between the renewal and the send finishes that send on waking (at most one message).
    assert len(late) <= 1, late
    assert second.poll() is None


def stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat from the third on (state, ppid, ...): proc(5)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def state(pid: int) -> str:
    return stat(pid)[0]


def holder(pid: int) -> str:
    """The lock value a beat with this pid would write here."""
    value = lock_value().split(" ")
    value[1:3] = [str(pid), stat(pid)[19]]  # field 22: the start time
    return " ".join(value)


@linux
def test_the_lock_names_a_live_holder_as_alive():
    assert not holder_is_dead(lock_value())


@linux
def test_a_holder_whose_process_ended_is_dead():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        value = holder(proc.pid)
        assert not holder_is_dead(value)
    finally:
        proc.kill()
        proc.wait()
    assert holder_is_dead(value)


@linux
def test_a_killed_holder_not_yet_reaped_is_dead():
    proc = subprocess.Popen(["sleep", "30"])
    value = holder(proc.pid)
    proc.kill()
    try:
        assert wait_for(lambda: state(proc.pid) == "Z", 5) is not None
        assert holder_is_dead(value)
    finally:
        proc.wait()


@linux
def test_a_live_holder_that_proc_hides_is_not_known_dead(monkeypatch):
    # /proc mounted with hidepid=2 shows no /proc/<pid> of another user's process: reading it fails as for a pid
    # nobody has, yet that process runs (a beat of another uid beside this one) and may be sending.
    proc = subprocess.Popen(["sleep", "30"])
    try:
        value = holder(proc.pid)
        hidden = Path(f"/proc/{proc.pid}/stat")
        read_text = Path.read_text

        def hidepid(path, *args, **kwargs):
            if path == hidden:
                raise FileNotFoundError(2, "No such file or directory", str(path))
            return read_text(path, *args, **kwargs)

        monkeypatch.setattr(Path, "read_text", hidepid)
        assert not holder_is_dead(value)
    finally:
        proc.kill()
        proc.wait()


@linux
def test_a_holder_whose_pid_now_names_another_process_is_dead():
    namespace, pid, started, *rest = lock_value().split(" ")
    assert holder_is_dead(" ".join([namespace, pid, str(int(started) - 1), *rest]))


@linux
def test_a_holder_in_another_pid_namespace_is_not_known_dead():
    namespace, _pid, *rest = lock_value().split(" ")
    # Another host or container: its pid means nothing here, even one that no process here has.
    assert not holder_is_dead(" ".join([namespace + "0", "4194304", *rest]))


def test_a_lock_value_not_written_by_clusterctl_is_not_known_dead():
    assert not holder_is_dead("8c1b0e7e8f2a11ef9d3b0242ac120002")  # redis-py's own token (a uuid1)


@pytest.mark.django_db(transaction=True)
def test_the_embedded_beat_leaves_the_same_heartbeat():
    from django.core.cache import cache

    from clusterctl.embedded import EmbeddedCelery

    cache.delete(HEARTBEAT_KEY)
    with EmbeddedCelery(kick=False, poll_interval_s=1.0):
        ticked = wait_for(lambda: (heartbeat() or {}).get("by", "").endswith(f":{os.getpid()}"), 10)
    cache.delete(HEARTBEAT_KEY)
    assert ticked is not None
