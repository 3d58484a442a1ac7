"""Helpers for tests that start real server processes (a Celery worker, an ASGI server) on the test database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

from django.conf import settings
from django.db import connection


def database_url() -> str:
    """The test database as a URL, for a child process's DATABASE_URL."""
    db = connection.settings_dict
    if not db["HOST"]:
        return f"postgres://{db['USER']}@/{db['NAME']}?host={db['OPTIONS'].get('host', '/tmp')}"
    return f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def child_env(**extra: str) -> dict[str, str]:
    """Environment of a child process that shares this run's database and cache keys."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "clusterctl.test_settings",
        "DATABASE_URL": database_url(),
        "TEST_CACHE_PREFIX": settings.CACHES["default"]["KEY_PREFIX"],
        **extra,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc, *, kill: bool = False, timeout: float = 20.0) -> None:
    """SIGTERM (or SIGKILL) a child this test started, wait for it, and SIGKILL it if it does not go in `timeout`."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(predicate, timeout: float = 60.0, every: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False
