"""Dependencies out of reach, for real: the cache and the broker pointed at a Redis address where nothing listens (a
restart: connections refused) or where nothing answers (a hung Redis: the connection is accepted, no reply comes),
and a tenant with a token to submit and list jobs on a small cluster."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from clusterctl import outages, throttles
from scheduler import actions
from scheduler.models import Job
from tests.factories import fat_tree
from tests.scheduler.api.helpers import JOBS, token_client


@pytest.fixture(autouse=True)
def _no_outage_in_progress() -> Iterator[None]:
    """Each test starts with no outage noted and the throttles asking the cache (module state of this process)."""
    outages.forget()
    throttles.cache_state.down_until, throttles.cache_state.down = 0.0, False
    yield
    outages.forget()
    throttles.cache_state.down_until, throttles.cache_state.down = 0.0, False


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (bound, then released): a connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local port that accepts connections (the kernel's backlog) and never answers: a hung Redis."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


def redis_cache(port: int) -> dict:
    return {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                        "LOCATION": f"redis://127.0.0.1:{port}/0"}}  # fmt: skip


@pytest.fixture
def cache_down(settings, closed_port) -> None:
    """The default cache (throttle counts, round requests, live-view marks) is a Redis that refuses: restarting."""
    settings.CACHES = redis_cache(closed_port)


@pytest.fixture
def broker_at(monkeypatch):
    """`with broker_at(url):` the Celery app publishes for real (not eagerly) to that broker, with new connection
    pools; after the block, as before (eager in the test run)."""
    from clusterctl.celery import app

    @contextmanager
    def point(url: str) -> Iterator[None]:
        with monkeypatch.context() as patch:
            patch.setitem(app.conf, "task_always_eager", False)
            patch.setitem(app.conf, "broker_url", url)
            patch.setattr(app, "_pool", None)
            patch.setattr(app.amqp, "_producer_pool", None)
            yield

    return point


class Hung(BaseException):
    """Raised by the alarm: a BaseException, so that no retry loop of redis-py or kombu swallows it."""


@pytest.fixture
def deadline():
    """`with deadline(s):` fails the test if the block takes longer than s seconds (it would hang forever)."""

    @contextmanager
    def within(seconds: float):
        def ring(signum, frame):
            raise Hung(f"still waiting after {seconds} s")

        previous = signal.signal(signal.SIGALRM, ring)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    return within


@pytest.fixture
def site(db, django_user_model) -> SimpleNamespace:
    """One cluster (2 nodes x 8 H100), its default pool, a tenant with a quota, and the tenant's token client."""
    cluster = fat_tree("resilience", nodes=2, gpus_per_node=8, leaf_ports=8)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme")
    actions.set_quota(tenant, pool, guaranteed_gpus=16, borrow_limit=0)
    user = django_user_model.objects.create_user("alice", "alice@example.org", "pw-alice")
    actions.add_member(tenant, user)
    return SimpleNamespace(cluster=cluster, pool=pool, tenant=tenant, user=user, api=token_client(user))


def submit(site, name: str = "train", gpus: int = 2):
    return site.api.post(JOBS, {"name": name, "gpus": gpus, "command": "python train.py"}, format="json")


def stored(name: str) -> Job | None:
    return Job.objects.filter(name=name).first()
