"""The round's snapshot reads the allocations of the jobs that changed since the last round, not the cluster's."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler import actions
from scheduler.models import Job
from scheduler.rounds import run_round
from scheduler.snapshot_from_db import build_snapshot

pytestmark = pytest.mark.django_db


def _allocation_reads(cluster_id: int) -> int:
    with CaptureQueriesContext(connection) as queries:
        build_snapshot(cluster_id)
    return sum(1 for q in queries.captured_queries if 'FROM "scheduler_allocation"' in q["sql"])


def _held(cluster_id: int) -> dict[int, int]:
    snapshot, _ = build_snapshot(cluster_id)
    return {g.id: g.exclusive_job for n in snapshot.nodes for g in n.gpus if g.exclusive_job is not None}


def test_a_second_snapshot_with_nothing_changed_reads_no_allocation(cluster, submit):
    submit(8)
    submit(4)
    run_round(cluster.pk, "test")
    assert _allocation_reads(cluster.pk) == 1  # the placed jobs changed: their allocations are read once
    assert _allocation_reads(cluster.pk) == 0


def test_a_job_that_finished_holds_nothing_in_the_next_snapshot(cluster, submit):
    big, small = submit(8), submit(4)
    run_round(cluster.pk, "test")
    assert sorted(set(_held(cluster.pk).values())) == [big.pk, small.pk]
    actions.finish_job(Job.objects.get(pk=small.pk), succeeded=True, actor="test")
    held = _held(cluster.pk)
    assert sorted(set(held.values())) == [big.pk]
    assert len(held) == 8


def test_a_requeued_job_placed_again_holds_what_its_allocations_say(cluster, submit):
    from scheduler.models import Allocation

    job = submit(4)
    run_round(cluster.pk, "test")
    actions.requeue_job(Job.objects.get(pk=job.pk), reason="test", actor="test")
    assert _held(cluster.pk) == {}
    run_round(cluster.pk, "test")
    stored = set(Allocation.objects.filter(job_id=job.pk, active=True).values_list("gpu_id", flat=True))
    assert len(stored) == 4
    assert _held(cluster.pk) == dict.fromkeys(stored, job.pk)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner")
def test_the_live_jobs_versions_are_read_from_their_own_index(cluster, submit):
    from scheduler.snapshot_from_db import _live_jobs

    submit(8)
    qs = _live_jobs(cluster.pk).order_by().values_list("pk", "version")
    sql, params = qs.query.get_compiler(using=qs.db).as_sql()
    with connection.cursor() as cursor:
        # Off, the planner takes the index wherever it may: it may only where the query's filter is the index's.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Only Scan using job_live_by_pool" in plan
