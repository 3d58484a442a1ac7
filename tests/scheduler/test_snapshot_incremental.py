"""A round's snapshot is built from what earlier rounds read plus what changed since (scheduler.snapshot_from_db's
_Seen): every path that changes a job, a GPU or a node shows in the next snapshot, and the kept snapshot is the one
a build from empty state gives."""

from __future__ import annotations

import pytest
from django.db.models import F

from fabric import actions as fabric_actions
from fabric.choices import GpuHealth, NodeState
from fabric.models import GPU, Node, NodeTopology
from scheduler import actions, snapshot_from_db
from scheduler.models import Job
from scheduler.rounds import run_round
from scheduler.snapshot_from_db import _Line, build_snapshot, clear_caches

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_snapshot_clock")]


def _snapshot(cluster_id: int):
    return build_snapshot(cluster_id)[0]


def _fresh(cluster_id: int):
    clear_caches()
    return build_snapshot(cluster_id)[0]


def _gpu(snapshot, gpu_id: int):
    return next(g for n in snapshot.nodes for g in n.gpus if g.id == gpu_id)


def _node(snapshot, hostname: str):
    return next(n for n in snapshot.nodes if n.hostname == hostname)


def test_the_kept_snapshot_equals_a_fresh_one_after_a_round(cluster, submit):
    submit(8)
    submit(4)
    submit(2, name="small")
    run_round(cluster.pk, "test")
    _snapshot(cluster.pk)
    submit(64, name="waits")
    kept = _snapshot(cluster.pk)
    assert [r.request.gpus for r in kept.running] == [8, 4, 2]
    assert [r.gpus for r in kept.pending] == [64]
    assert kept == _fresh(cluster.pk)


def test_a_failed_gpu_is_unhealthy_in_the_next_snapshot(cluster, gpus):
    assert _gpu(_snapshot(cluster.pk), gpus[3].pk).healthy
    GPU.objects.filter(pk=gpus[3].pk).update(health=GpuHealth.FAILED)  # as fabric.actions.alerts does
    kept = _snapshot(cluster.pk)
    assert not _gpu(kept, gpus[3].pk).healthy
    assert kept == _fresh(cluster.pk)


def test_a_drained_node_is_not_schedulable_in_the_next_snapshot(cluster):
    node = Node.objects.filter(cluster=cluster).order_by("hostname").first()
    assert _node(_snapshot(cluster.pk), node.hostname).schedulable
    fabric_actions.set_node_state([node], NodeState.DRAIN, "maintenance")
    kept = _snapshot(cluster.pk)
    assert (_node(kept, node.hostname).schedulable, _node(kept, node.hostname).up) == (False, True)
    assert kept == _fresh(cluster.pk)


def test_a_placed_job_leaves_the_line_and_holds_its_gpus(cluster, submit):
    job = submit(4)
    assert [r.id for r in _snapshot(cluster.pk).pending] == [job.pk]
    run_round(cluster.pk, "test")
    kept = _snapshot(cluster.pk)
    assert kept.pending == []
    [running] = kept.running
    assert running.request.id == job.pk and len(running.shares) == 4
    assert [_gpu(kept, s.gpu_id).exclusive_job for s in running.shares] == [job.pk] * 4
    assert kept == _fresh(cluster.pk)


def test_a_finished_job_frees_its_gpus_in_the_next_snapshot(cluster, submit):
    job = submit(4)
    run_round(cluster.pk, "test")
    shares = _snapshot(cluster.pk).running[0].shares
    actions.finish_job(Job.objects.get(pk=job.pk), succeeded=True, actor="test")
    kept = _snapshot(cluster.pk)
    assert kept.running == []
    assert [_gpu(kept, s.gpu_id).exclusive_job for s in shares] == [None] * 4
    assert kept == _fresh(cluster.pk)


def test_a_requeued_job_waits_again_in_its_place_in_line(cluster, submit):
    big = submit(32, name="big")  # the whole cluster: 4 nodes x 8
    later = [submit(1, name=f"later-{i}") for i in range(2)]
    run_round(cluster.pk, "test")
    assert [r.id for r in _snapshot(cluster.pk).pending] == [j.pk for j in later]
    actions.requeue_job(Job.objects.get(pk=big.pk), reason="test", actor="test")
    kept = _snapshot(cluster.pk)
    assert [r.id for r in kept.pending] == [big.pk, *(j.pk for j in later)]
    assert kept.running == []
    assert kept == _fresh(cluster.pk)


def test_a_new_job_joins_the_end_of_the_line(cluster, submit):
    first = submit(64, name="first")  # more than the cluster: stays pending
    _snapshot(cluster.pk)
    second = submit(64, name="second")
    kept = _snapshot(cluster.pk)
    assert [r.id for r in kept.pending] == [first.pk, second.pk]
    assert kept == _fresh(cluster.pk)


def test_a_held_job_leaves_the_line_and_comes_back_released(cluster, submit):
    first, second = submit(64, name="first"), submit(64, name="second")
    _snapshot(cluster.pk)
    actions.hold_job(Job.objects.get(pk=first.pk), actor="test")
    assert [r.id for r in _snapshot(cluster.pk).pending] == [second.pk]
    actions.release_job(Job.objects.get(pk=first.pk), actor="test")
    kept = _snapshot(cluster.pk)
    assert [r.id for r in kept.pending] == [first.pk, second.pk]
    assert kept == _fresh(cluster.pk)


def test_a_deleted_job_is_gone_from_the_next_snapshot(cluster, submit):
    first, second = submit(64, name="first"), submit(64, name="second")
    _snapshot(cluster.pk)
    Job.objects.filter(pk=first.pk).delete()
    kept = _snapshot(cluster.pk)
    assert [r.id for r in kept.pending] == [second.pk]
    assert kept == _fresh(cluster.pk)


def test_jobs_with_the_same_queue_seq_wait_newer_first(cluster, submit):
    """The default order (-id) sorted stably by queue_seq, as the full read gave it."""
    first, second = submit(64, name="first"), submit(64, name="second")
    _snapshot(cluster.pk)
    Job.objects.filter(pk=second.pk).update(queue_seq=first.pk, version=F("version") + 1)
    kept = _snapshot(cluster.pk)
    assert [r.id for r in kept.pending] == [second.pk, first.pk]
    assert kept == _fresh(cluster.pk)


def test_a_changed_nvlink_matrix_shows_in_the_next_snapshot(cluster):
    node = Node.objects.filter(cluster=cluster).order_by("hostname").first()
    pairs = {f"{a}-{b}": "NV18" for a in range(8) for b in range(a + 1, 8)}
    NodeTopology.objects.update_or_create(node=node, defaults={"gpu_links": pairs})
    assert _node(_snapshot(cluster.pk), node.hostname).nvlink_islands == (tuple(range(8)),)
    halves = {k: v for k, v in pairs.items() if (int(k[0]) < 4) == (int(k[2]) < 4)}
    NodeTopology.objects.filter(node=node).update(gpu_links=halves)  # no `updated` bump: read by content
    kept = _snapshot(cluster.pk)
    assert _node(kept, node.hostname).nvlink_islands == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert kept == _fresh(cluster.pk)


def test_gpu_load_from_telemetry_shows_in_the_next_snapshot(cluster, gpus, monkeypatch):
    _snapshot(cluster.pk)
    monkeypatch.setattr(snapshot_from_db, "latest_utilisation", lambda *_: ({}, {gpus[0].pk: 0.75}))
    kept = _snapshot(cluster.pk)
    assert (_gpu(kept, gpus[0].pk).utilisation, _gpu(kept, gpus[1].pk).utilisation) == (0.75, 0.0)
    assert kept == _fresh(cluster.pk)


def test_a_renamed_dataset_host_shows_in_the_waiting_request(cluster, submit):
    node = Node.objects.filter(cluster=cluster).order_by("hostname").first()
    job = submit(64, dataset_node=node)
    assert _snapshot(cluster.pk).pending[0].dataset_node == node.hostname
    Node.objects.filter(pk=node.pk).update(hostname="renamed-host")
    kept = _snapshot(cluster.pk)
    assert [(r.id, r.dataset_node) for r in kept.pending] == [(job.pk, "renamed-host")]
    assert kept == _fresh(cluster.pk)


def test_nodes_nothing_changed_on_are_the_same_objects(cluster, submit, gpus):
    first = _snapshot(cluster.pk)
    GPU.objects.filter(pk=gpus[0].pk).update(health=GpuHealth.FAILED)
    second = _snapshot(cluster.pk)
    changed = next(i for i, n in enumerate(second.nodes) if any(g.id == gpus[0].pk for g in n.gpus))
    assert second.nodes[changed] is not first.nodes[changed]
    assert all(second.nodes[i] is first.nodes[i] for i in range(len(first.nodes)) if i != changed)


def test_a_line_moved_by_bisect_equals_one_resorted():
    few, many = _Line(), _Line()
    many.RESORT = -1  # every update resorts
    start = {(5, -1): "a", (3, -2): "b", (5, -3): "c"}
    for line in (few, many):
        line.update([], dict(start))
        line.update([(3, -2), (9, -9)], {(5, -4): "d", (5, -1): "a2", (1, -5): "e"})
    assert few.keys == many.keys == [(1, -5), (5, -4), (5, -3), (5, -1)]
    assert few.values == many.values == ["e", "d", "c", "a2"]


def test_a_cluster_without_nodes_has_an_empty_snapshot():
    empty = fabric_actions.create_cluster("empty")
    snapshot = _snapshot(empty.pk)
    assert (snapshot.nodes, snapshot.pending, snapshot.running) == ([], [], [])
