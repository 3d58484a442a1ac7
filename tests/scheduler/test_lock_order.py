"""The lock order of scheduler.actions, seen from a second connection while an action holds its locks.

A row that a new child row refers to must stay lockable FOR KEY SHARE: PostgreSQL takes that lock on the parent
when it checks the foreign key at COMMIT (a job's pool, tenant and class for a submit; a job for its events,
allocations and launches; a GPU, its node and cluster for an allocation). An action holding FOR UPDATE on such a
row, or locking it through a join, makes every such COMMIT wait, and two of them deadlock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connections, transaction

from fabric import actions as fabric_actions
from scheduler import actions, enqueue
from scheduler.models import Allocation, Job
from scheduler.rounds import run_round
from tests.processes import database_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("row locks as PostgreSQL takes them, seen from a second connection"),
]


@pytest.fixture(autouse=True)
def _setup(transactional_db, monkeypatch):
    actions.ensure_priority_classes()  # a transactional test's flush removed the migration's classes
    # Each commit would run a round inline (eager Celery in the tests); here the test runs the rounds it means.
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: False)


@contextmanager
def held(fn: Callable[[], object]) -> Iterator[None]:
    """Run `fn` in another thread inside a transaction left open, its row locks held, until the block ends."""
    ready, finish, failed = threading.Event(), threading.Event(), []

    def body() -> None:
        try:
            with transaction.atomic():
                fn()
                ready.set()
                finish.wait(30)
        except Exception as exc:
            failed.append(exc)
            ready.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=body)
    thread.start()
    assert ready.wait(30)
    try:
        yield
    finally:
        finish.set()
        thread.join(30)
    assert failed == []


def refused(rows: dict[str, tuple[str, str, int]]) -> list[str]:
    """Which rows a second connection cannot lock FOR KEY SHARE (what a foreign-key check takes) right now."""
    out = []
    with psycopg.connect(database_url()) as conn:
        for name, (table, column, pk) in rows.items():
            try:
                conn.execute(f"SELECT 1 FROM {table} WHERE {column} = %s FOR KEY SHARE NOWAIT", [pk])
            except psycopg.errors.LockNotAvailable:
                out.append(name)
            conn.rollback()
    return out


def parents(job: Job) -> dict[str, tuple[str, str, int]]:
    gpu = Allocation.objects.filter(job=job).select_related("gpu__node").first().gpu
    return {
        "job": ("scheduler_job", "id", job.pk),
        "pool": ("scheduler_pool", "id", job.pool_id),
        "tenant": ("scheduler_tenant", "id", job.tenant_id),
        "priority class": ("scheduler_priorityclass", "id", job.priority_class_id),
        "GPU": ("fabric_gpu", "id", gpu.pk),
        "node": ("fabric_node", "id", gpu.node_id),
        "cluster": ("fabric_cluster", "id", gpu.node.cluster_id),
    }


def test_finishing_a_job_leaves_every_row_it_refers_to_lockable_for_key_share(cluster, submit):
    job = submit(8)
    run_round(cluster.pk, "test")
    job.refresh_from_db()
    assert job.status == "running"
    rows = parents(job)
    with held(lambda: actions.finish_job(job, succeeded=True)):
        assert refused(rows) == []


def test_a_round_that_requeues_and_places_leaves_every_row_its_jobs_refer_to_lockable(cluster, submit):
    running = submit(8)
    run_round(cluster.pk, "test")
    gpu = Allocation.objects.filter(job=running, active=True).first().gpu
    fabric_actions.update_inventory_object(gpu, {"health": "failed"})  # the next round requeues it
    waiting = submit(4)
    rows = {**parents(running), "waiting job": ("scheduler_job", "id", waiting.pk)}
    with held(lambda: run_round(cluster.pk, "test")):
        assert Job.objects.get(pk=waiting.pk).status == "pending"  # not committed yet: the round is open
        assert refused(rows) == []
    running.refresh_from_db()
    waiting.refresh_from_db()
    assert (running.status, waiting.status) == ("pending", "running")  # the round did both


def test_draining_nodes_leaves_them_and_their_cluster_lockable_for_key_share(cluster):
    # A drain locked its nodes FOR UPDATE: a GPU or launch row referring to a node waited for it at COMMIT.
    node = cluster.nodes.order_by("hostname").first()
    rows = {"node": ("fabric_node", "id", node.pk), "cluster": ("fabric_cluster", "id", cluster.pk)}
    with held(lambda: fabric_actions.set_node_state([node], "drain", "maintenance")):
        assert refused(rows) == []


def test_an_import_leaves_its_cluster_lockable_for_key_share(cluster):
    # An import serialises on its cluster row; FOR UPDATE there made every alert, node or pool insert of that
    # cluster wait for the whole import (seconds on a large fabric).
    from pathlib import Path

    from fabric.importers.ibnetdiscover import parse_ibnetdiscover
    from tests.fabric.test_import_fabric import SX6036

    parsed = parse_ibnetdiscover(Path(SX6036).read_text())
    with held(lambda: fabric_actions.import_fabric(cluster.name, parsed, fmt="ibnetdiscover")):
        assert refused({"cluster": ("fabric_cluster", "id", cluster.pk)}) == []
