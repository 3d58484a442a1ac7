"""The change feed on PostgreSQL (fabric.change_feed) as a round's snapshot reads it (scheduler.snapshot_from_db): after
its first read a round reads only the jobs, GPUs and NVLink matrices written since, and still misses nothing: a write
that commits late, a deletion, a row moved to another cluster, a write the triggers did not see. Transactional tests:
each write commits, as in production."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.choices import GpuHealth
from fabric.models import GPU, Node, NodeTopology
from scheduler import actions, snapshot_from_db
from scheduler.models import Job
from scheduler.snapshot_from_db import build_snapshot, clear_caches

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("transaction ids and triggers are PostgreSQL's"),
    pytest.mark.usefixtures("frozen_snapshot_clock", "committing"),
]


def _snapshot(cluster_id: int):
    return build_snapshot(cluster_id)[0]


def _fresh(cluster_id: int):
    clear_caches()
    return build_snapshot(cluster_id)[0]


def _other_connection() -> psycopg.Connection:
    """A second session on the test database (its own transactions), as another worker or the API has."""
    db = connection.settings_dict
    params = {"dbname": db["NAME"], "user": db["USER"], "host": db["HOST"] or db["OPTIONS"].get("host", "/tmp")}
    if db["PORT"]:
        params["port"] = db["PORT"]
    if db["PASSWORD"]:
        params["password"] = db["PASSWORD"]
    return psycopg.connect(**params)


def test_every_insert_and_update_is_stamped_with_its_transaction(cluster, submit):
    job = submit(2)
    with connection.cursor() as cursor:
        cursor.execute("SELECT txid_current()")
        (now,) = cursor.fetchone()
    stamped = Job.objects.get(pk=job.pk).change_xid
    assert stamped is not None and stamped < now  # the submit's transaction, committed before this one
    Job.objects.filter(pk=job.pk).update(name="renamed")  # a bulk update, not through the actions
    assert Job.objects.get(pk=job.pk).change_xid > stamped


def test_a_later_round_reads_only_the_jobs_written_since(cluster, submit):
    for n in range(5):
        submit(64, name=f"waits-{n}")
    _snapshot(cluster.pk)
    changed = submit(64, name="new")
    with CaptureQueriesContext(connection) as queries:
        kept = _snapshot(cluster.pk)
    # The jobs' versions are read only where written since (the feed), full rows only of the job that changed.
    reads = [q["sql"] for q in queries.captured_queries if '"scheduler_job"."version"' in q["sql"]]
    assert len(reads) == 2
    assert '"scheduler_job"."change_xid" >=' in reads[0]
    assert f'"scheduler_job"."id" = ANY(\'{{{changed.pk}}}\'' in reads[1]
    assert [r.id for r in kept.pending][-1] == changed.pk
    assert kept == _fresh(cluster.pk)


def test_a_write_that_commits_after_a_newer_one_is_read_in_the_next_round(cluster, submit):
    slow = submit(64, name="slow")
    _snapshot(cluster.pk)
    with _other_connection() as other:
        # An older transaction writes first and commits last: a feed that read from the newest write it had seen
        # would skip it for good.
        other.execute("UPDATE scheduler_job SET name = 'renamed late', version = version + 1 WHERE id = %s", [slow.pk])
        _snapshot(cluster.pk)  # reads while that write is still open
        submit(64, name="newer")  # a newer transaction, committed first
        assert [r.name for r in _snapshot(cluster.pk).pending] == ["slow", "newer"]
        other.commit()
    kept = _snapshot(cluster.pk)
    assert [r.name for r in kept.pending] == ["renamed late", "newer"]
    assert kept == _fresh(cluster.pk)


def test_a_job_deleted_by_any_statement_is_gone_from_the_next_snapshot(cluster, submit):
    first, second = submit(64, name="first"), submit(64, name="second")
    _snapshot(cluster.pk)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM scheduler_jobevent WHERE job_id = %s", [first.pk])
        cursor.execute("DELETE FROM scheduler_job WHERE id = %s", [first.pk])
    kept = _snapshot(cluster.pk)
    assert [r.id for r in kept.pending] == [second.pk]
    assert kept == _fresh(cluster.pk)


def test_a_write_the_triggers_did_not_see_shows_by_the_next_full_read(cluster, submit, monkeypatch):
    job = submit(64, name="seen")
    _snapshot(cluster.pk)
    with connection.cursor() as cursor:  # triggers off for this session, as a restore or a replica would write
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("UPDATE scheduler_job SET name = 'unseen', version = version + 1 WHERE id = %s", [job.pk])
        cursor.execute("SET session_replication_role = DEFAULT")
    assert [r.name for r in _snapshot(cluster.pk).pending] == ["seen"]  # the feed cannot know
    monkeypatch.setattr(snapshot_from_db, "FULL_READ_EVERY_S", 0.0)
    assert [r.name for r in _snapshot(cluster.pk).pending] == ["unseen"]


def test_a_job_moved_to_another_clusters_pool_leaves_this_clusters_snapshot(cluster, submit):
    from tests.factories import fat_tree

    other_pool = actions.ensure_scheduler(fat_tree("other", nodes=2, gpus_per_node=8, leaf_ports=16))
    moved, stays = submit(64, name="moved"), submit(64, name="stays")
    _snapshot(cluster.pk)
    Job.objects.filter(pk=moved.pk).update(pool=other_pool)
    kept = _snapshot(cluster.pk)
    assert [r.id for r in kept.pending] == [stays.pk]
    assert kept == _fresh(cluster.pk)


def _gpu(snapshot, gpu_id: int):
    return next((g for n in snapshot.nodes for g in n.gpus if g.id == gpu_id), None)


def test_a_later_round_reads_only_the_gpus_and_matrices_written_since(cluster):
    gpu = GPU.objects.filter(node__cluster=cluster).order_by("pk").first()
    _snapshot(cluster.pk)
    GPU.objects.filter(pk=gpu.pk).update(health=GpuHealth.FAILED)
    with CaptureQueriesContext(connection) as queries:
        kept = _snapshot(cluster.pk)
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "fabric_gpu"' in q["sql"]]
    assert len(reads) == 1 and '"fabric_gpu"."change_xid" >=' in reads[0]
    matrices = [q["sql"] for q in queries.captured_queries if 'FROM "fabric_nodetopology"' in q["sql"]]
    assert len(matrices) == 1 and '"fabric_nodetopology"."change_xid" >=' in matrices[0]
    assert not _gpu(kept, gpu.pk).healthy
    assert kept == _fresh(cluster.pk)


def test_a_gpu_deleted_or_moved_to_another_clusters_node_leaves_the_snapshot(cluster):
    from tests.factories import fat_tree

    other_node = Node.objects.filter(cluster=fat_tree("other", nodes=2, gpus_per_node=8, leaf_ports=16)).first()
    deleted, moved = GPU.objects.filter(node__cluster=cluster).order_by("-pk")[:2]
    _snapshot(cluster.pk)
    GPU.objects.filter(pk=moved.pk).update(node=other_node, index=99)
    assert _gpu(_snapshot(cluster.pk), moved.pk) is None
    GPU.objects.filter(pk=deleted.pk).delete()
    kept = _snapshot(cluster.pk)
    assert _gpu(kept, deleted.pk) is None
    assert kept == _fresh(cluster.pk)


def test_an_nvlink_matrix_moved_to_another_clusters_node_leaves_the_first(cluster):
    from fabric.models import Cluster

    first = Node.objects.filter(cluster=cluster, topology__isnull=False).order_by("hostname").first()
    bare = Node.objects.create(cluster=Cluster.objects.create(name="other"), hostname="bare")
    # Two NVLink pairs, not one island of all the GPUs:
    NodeTopology.objects.filter(node=first).update(gpu_links={"0-1": "NV18", "2-3": "NV18"})
    before = {n.hostname: n.nvlink_islands for n in _snapshot(cluster.pk).nodes}[first.hostname]
    NodeTopology.objects.filter(node=first).update(node=bare)
    kept = _snapshot(cluster.pk)
    assert kept == _fresh(cluster.pk)
    assert {n.hostname: n.nvlink_islands for n in kept.nodes}[first.hostname] != before
