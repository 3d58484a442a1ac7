"""A worker process warms up for a cluster before its first round takes the cluster's lock (scheduler.rounds.warm_up):
it reads the cluster and works out the engine's carry without the lock, writes nothing, and the round after it
decides as a round from nothing would."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler import rounds, snapshot_from_db
from scheduler.core import schedule
from scheduler.models import Allocation, Job, SchedulingRound

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_carries(frozen_snapshot_clock):
    rounds._CARRIES.clear()
    yield
    rounds._CARRIES.clear()


def test_the_first_round_takes_the_lock_with_the_carry_warm(cluster, submit, monkeypatch):
    submit(8)
    at_lock: list[bool] = []
    real = rounds.round_actions.lock_cluster

    def lock(cluster_id):
        carry = rounds._CARRIES.get(cluster_id)
        at_lock.append(carry is not None and carry.state is not None and bool(carry.jobs))
        return real(cluster_id)

    monkeypatch.setattr(rounds.round_actions, "lock_cluster", lock)
    rounds.run_round(cluster.pk, "test")
    assert at_lock == [True]


def test_the_warm_up_writes_nothing(cluster, submit):
    jobs = [submit(8), submit(4), submit(2)]
    assert rounds.warm_up(cluster.pk) > 0
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", flat=True)) == {"pending"}
    assert not SchedulingRound.objects.exists()
    assert not Allocation.objects.exists()


def test_a_process_warms_up_once_per_cluster(cluster, submit, monkeypatch):
    submit(1)
    assert rounds.warm_up(cluster.pk) is not None
    built = []
    monkeypatch.setattr(snapshot_from_db, "build_snapshot", lambda cid: built.append(cid))
    assert rounds.warm_up(cluster.pk) is None
    assert built == []


def test_the_round_after_the_warm_up_places_what_a_round_from_nothing_places(cluster, submit):
    # 4 nodes x 8 GPUs: 8 + 16 + 4 + 2 + 1 fit, the second 8 does not.
    jobs = [submit(8), submit(16), submit(4), submit(8, name="late"), submit(2), submit(1)]
    snapshot, _ = snapshot_from_db.build_snapshot(cluster.pk)
    alone = {p.job_id for p in schedule(snapshot).placements}
    assert rounds.warm_up(cluster.pk) is not None
    record = rounds.run_round(cluster.pk, "test")
    placed = set(Job.objects.filter(pk__in=[j.pk for j in jobs], status="running").values_list("pk", flat=True))
    assert placed == alone and record.placed == 5
    assert Job.objects.get(pk=jobs[3].pk).status == "pending"


def test_a_failed_warm_up_leaves_the_round_to_start_from_nothing(cluster, submit, monkeypatch, caplog):
    job = submit(8)
    real = snapshot_from_db.build_snapshot
    calls = []

    def fails_once(cluster_id):
        calls.append(cluster_id)
        if len(calls) == 1:
            raise RuntimeError("connection lost")
        return real(cluster_id)

    monkeypatch.setattr(snapshot_from_db, "build_snapshot", fails_once)
    assert rounds.warm_up(cluster.pk) is None
    assert cluster.pk not in rounds._CARRIES
    assert "the warm-up before its first round failed" in caplog.text
    rounds.run_round(cluster.pk, "test")
    job.refresh_from_db()
    assert job.status == "running"


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_it_reads_one_moment_in_a_read_only_transaction(committing, cluster, submit):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's transaction isolation")
    submit(1)
    with CaptureQueriesContext(connection) as queries:
        rounds.warm_up(cluster.pk)
    sql = [q["sql"] for q in queries.captured_queries if q["sql"] != "BEGIN"]
    assert sql[0] == "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"
    assert not any(s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")) for s in sql)
