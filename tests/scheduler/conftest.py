"""A small generated cluster with the scheduler set up, and helpers to submit jobs through the actions.

The imports are inside the fixtures: this conftest also sits above tests/scheduler/core and tests/scheduler/sim,
which scripts/test-floor.sh collects without Django (`pytest -p no:django`)."""

from __future__ import annotations

import pytest


@pytest.fixture
def cluster(db):
    from tests.factories import fat_tree

    return fat_tree("sched", nodes=4, gpus_per_node=8, leaf_ports=16)


@pytest.fixture
def pool(cluster):
    from scheduler import actions

    return actions.ensure_scheduler(cluster)


@pytest.fixture
def tenant(db):
    from scheduler import actions

    return actions.create_tenant("acme", max_priority="high")


@pytest.fixture
def normal(db):
    from scheduler.models import PriorityClass

    return PriorityClass.objects.get(name="normal")


@pytest.fixture
def submit(tenant, pool, normal):
    from scheduler import actions

    def make(gpus: int = 1, **request):
        request.setdefault("name", f"job-{gpus}")
        return actions.submit_job(tenant, pool, normal, gpus=gpus, **request)

    return make


@pytest.fixture
def gpus(cluster):
    from fabric.models import GPU

    return list(GPU.objects.filter(node__cluster=cluster).order_by("node__hostname", "index"))


@pytest.fixture
def frozen_snapshot_clock(monkeypatch):
    """One clock for every snapshot build of a test (a kept snapshot or index and a fresh one then differ in nothing
    else), and nothing kept from an earlier test's builds."""
    from types import SimpleNamespace

    from scheduler import snapshot_from_db

    monkeypatch.setattr(snapshot_from_db, "time", SimpleNamespace(time=lambda: 1_900_000_000.0))
    snapshot_from_db.clear_caches()


@pytest.fixture
def committing(transactional_db, monkeypatch):
    """For transactional tests, whose writes commit as in production: the migration's priority classes back (the
    flush removed them), and no round run inline by a commit (eager Celery in the tests): the test runs the rounds
    and builds the snapshots it means."""
    from scheduler import actions, enqueue

    actions.ensure_priority_classes()
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: False)
