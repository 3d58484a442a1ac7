"""A round's committed placements are taken into the next snapshot as read (scheduler.snapshot_from_db.
placements_committed): the next build does not read back the jobs and allocations the round itself wrote, and what it
keeps is what a read from nothing gives. Transactional tests: the round commits, as in production."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import Node
from scheduler import actions, snapshot_from_db
from scheduler.actions import rounds as round_actions
from scheduler.choices import JobStatus, SharingMode
from scheduler.models import Job
from scheduler.rounds import run_round
from scheduler.snapshot_from_db import build_snapshot, clear_caches

pytestmark = [
    pytest.mark.postgres("the change feed is PostgreSQL's: the next build reads only what was written since"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("committing", "frozen_snapshot_clock"),
]


def _snapshot(cluster_id: int):
    return build_snapshot(cluster_id)[0]


def _fresh(cluster_id: int):
    """The snapshot and the job rows a build from nothing gives."""
    clear_caches()
    snapshot, index = build_snapshot(cluster_id)
    return snapshot, index.jobs


def _allocation_reads(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if '"scheduler_allocation"' in q["sql"]]


def test_a_rounds_placements_are_kept_without_reading_them_back(cluster, submit):
    four, two = submit(4, name="four"), submit(2, name="two")
    _snapshot(cluster.pk)
    assert run_round(cluster.pk, "test").placed == 2
    with CaptureQueriesContext(connection) as queries:
        kept, index = build_snapshot(cluster.pk)
    assert _allocation_reads(queries) == []
    assert [q["sql"] for q in queries.captured_queries if '"scheduler_job"."id" = ANY' in q["sql"]] == []  # rows
    assert {r.request.id: len(r.shares) for r in kept.running} == {four.pk: 4, two.pk: 2}
    assert (kept, index.jobs) == _fresh(cluster.pk)


def test_shares_of_every_kind_are_kept_as_a_read_gives_them(tenant, normal):
    from tests.factories import fat_tree

    cluster = fat_tree("kinds", nodes=5, gpus_per_node=8, leaf_ports=16)
    default = actions.ensure_scheduler(cluster)
    nodes = list(Node.objects.filter(cluster=cluster).order_by("hostname"))
    pools = {}
    for node, mode in zip(nodes[2:], (SharingMode.MPS, SharingMode.MIG, SharingMode.TIMESLICE), strict=True):
        pools[mode] = actions.create_pool(cluster, str(mode), sharing=mode)
        actions.assign_nodes(pools[mode], [node])
    # Across both of the default pool's nodes: its shares are kept by host, then GPU index, as a read orders them.
    actions.submit_job(tenant, default, normal, name="whole", gpus=16, nodes=2, gpus_per_node=8)
    actions.submit_job(tenant, pools[SharingMode.MPS], normal, name="mps", gpus=1, sharing=SharingMode.MPS,
                       mps_compute_pct=25, mps_memory_mib=20480)  # fmt: skip
    actions.submit_job(tenant, pools[SharingMode.MIG], normal, name="mig", gpus=1, sharing=SharingMode.MIG,
                       mig_profile="3g.40gb")  # fmt: skip
    actions.submit_job(tenant, pools[SharingMode.TIMESLICE], normal, name="slice", gpus=1,
                       sharing=SharingMode.TIMESLICE)  # fmt: skip
    _snapshot(cluster.pk)
    assert run_round(cluster.pk, "test").placed == 4
    with CaptureQueriesContext(connection) as queries:
        kept, index = build_snapshot(cluster.pk)
    assert _allocation_reads(queries) == []
    kinds = {r.request.name: {s.kind for s in r.shares} for r in kept.running}
    assert kinds == {"whole": {"whole"}, "mps": {"mps"}, "mig": {"mig"}, "slice": {"timeslice"}}
    assert (kept, index.jobs) == _fresh(cluster.pk)


def test_a_job_read_again_before_its_placement_was_kept_stays_as_read(cluster, submit, monkeypatch):
    job = submit(4, name="placed")
    _snapshot(cluster.pk)
    late = []  # the round's hook, run only after another build has read the job again
    keep = snapshot_from_db.placements_committed
    monkeypatch.setattr(snapshot_from_db, "placements_committed", lambda *args: late.append(args))
    run_round(cluster.pk, "test")
    Job.objects.filter(pk=job.pk).update(name="renamed", version=job.version + 2)
    assert [r.request.name for r in _snapshot(cluster.pk).running] == ["renamed"]
    [args] = late
    keep(*args)
    kept, index = build_snapshot(cluster.pk)
    assert [r.request.name for r in kept.running] == ["renamed"]
    assert (index.jobs[job.pk].name, index.jobs[job.pk].version) == ("renamed", job.version + 2)
    assert (kept, index.jobs) == _fresh(cluster.pk)


def test_a_round_rolled_back_keeps_none_of_its_placements(cluster, submit, monkeypatch):
    job = submit(4)
    _snapshot(cluster.pk)

    def fails(*args, **kwargs):
        raise RuntimeError("the round's record could not be written")

    monkeypatch.setattr(round_actions, "close_round", fails)
    with pytest.raises(RuntimeError):
        run_round(cluster.pk, "test")
    kept = _snapshot(cluster.pk)
    assert (Job.objects.get(pk=job.pk).status, [r.id for r in kept.pending], kept.running) == (
        JobStatus.PENDING,
        [job.pk],
        [],
    )
    assert kept == _fresh(cluster.pk)[0]


def test_a_kept_placement_that_finishes_is_gone_from_the_next_snapshot(cluster, submit):
    done, runs = submit(4, name="done"), submit(2, name="runs")
    _snapshot(cluster.pk)
    run_round(cluster.pk, "test")
    _snapshot(cluster.pk)
    actions.finish_job(Job.objects.get(pk=done.pk), succeeded=True, actor="test")
    kept = _snapshot(cluster.pk)
    assert [r.request.id for r in kept.running] == [runs.pk]
    assert kept == _fresh(cluster.pk)[0]
