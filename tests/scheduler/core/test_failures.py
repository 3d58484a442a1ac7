"""Failures: capacity that becomes unhealthy or goes down leaves; its jobs are requeued keeping their
place in line, or failed when they opted out."""

from dataclasses import replace

from scheduler.core import schedule
from tests.scheduler.core.builders import SnapBuilder, two_leaves


def cluster() -> SnapBuilder:
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    return b


def test_job_on_an_unhealthy_gpu_is_requeued():
    b = cluster()
    b.run(20, {"n1": [0, 1, 2, 3]})
    b.set_gpu("n1", 2, healthy=False)
    d = schedule(b.snapshot())
    assert d.requeues == [(20, "requeued: GPU 2 on n1 is unhealthy")]


def test_requeued_job_keeps_its_place_in_line_and_is_placed_again():
    b = cluster()
    b.run(20, {"n1": [0, 1, 2, 3]}, queue_seq=1)
    b.set_gpu("n1", 2, healthy=False)
    b.job(5, gpus=8, queue_seq=10)
    d = schedule(b.snapshot())
    assert d.queue_order == [20, 5]
    placed = {p.job_id: p for p in d.placements}
    assert set(placed) == {20, 5}
    assert b.gpu_id("n1", 2) not in {s.gpu_id for p in d.placements for s in p.shares}


def test_opted_out_job_fails_instead():
    b = cluster()
    b.run(20, {"n1": [0, 1]}, requeue_opt_out=True)
    b.set_gpu("n1", 0, healthy=False)
    d = schedule(b.snapshot())
    assert d.requeues == []
    assert d.failures == [(20, "failed: GPU 0 on n1 is unhealthy (the job opted out of requeueing)")]
    assert 20 not in d.queue_order


def test_jobs_on_a_down_node_are_requeued():
    b = cluster()
    b.run(20, {"n1": [0, 1]})
    b.run(21, {"n2": [0]})
    b.set_node("n1", up=False)
    d = schedule(b.snapshot())
    assert d.requeues == [(20, "requeued: node n1 is down")]


def test_drained_node_keeps_its_jobs():
    b = cluster()
    b.run(20, {"n1": [0, 1]})
    b.set_node("n1", schedulable=False)
    d = schedule(b.snapshot())
    assert d.requeues == [] and d.failures == []


def test_failed_capacity_leaves_the_pool():
    b = cluster()
    b.set_node("n2", up=False)
    b.set_gpu("n1", 0, healthy=False)
    b.job(1, gpus=8)
    d = schedule(b.snapshot())
    assert d.placements == []
    assert d.pending_reasons[1] == "needs 8 GPUs; pool 'train' has only 7 healthy GPUs on schedulable nodes"


def test_freed_gpus_of_a_requeued_job_are_reusable_this_round():
    b = cluster()
    b.run(20, {"n1": list(range(8))}, queue_seq=50)
    b.run(21, {"n2": list(range(8))})
    b.set_gpu("n1", 7, healthy=False)
    b.job(1, gpus=7, queue_seq=1)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.placements] == [1]  # job 1 is ahead of the requeued job 20
    assert d.pending_reasons[20].startswith("needs 8 GPUs")


def test_multi_node_job_on_a_node_that_lost_its_fabric_links_is_requeued():
    b = cluster()
    b.run(20, {"n1": [0, 1], "n2": [0, 1]})
    b.run(21, {"n1": [2]})
    b.fabric.links[:] = [replace(link, up=False) if link.key == "n1-L1" else link for link in b.fabric.links]
    d = schedule(b.snapshot())
    assert d.requeues == [(20, "requeued: node n1 lost its fabric links")]  # job 21 needs no network


def _kept_rounds(first: SnapBuilder, second: SnapBuilder):
    """The second snapshot's decisions with the index the first round kept (ClusterState.advance)."""
    from scheduler.core.carry import RoundCarry
    from scheduler.core.topology import build_topology

    carry = RoundCarry()
    s1 = first.snapshot()
    s1 = replace(s1, topology=build_topology(s1.fabric))
    schedule(s1, carry=carry)
    s2 = replace(second.snapshot(), topology=s1.topology)  # the same fabric index, as the adapter caches it
    kept = carry.state
    decisions = schedule(s2, carry=carry)
    assert carry.state is kept  # brought to the second snapshot, not built again
    return decisions


def test_a_job_a_kept_index_finds_on_an_unhealthy_gpu_is_requeued_whatever_it_held_before():
    # The same job, on a healthy GPU in the first round and on the unhealthy one (unhealthy in both) in the second:
    # what the first round found of it does not stand for its new shares.
    first, second = cluster(), cluster()
    for b, gpu in ((first, 0), (second, 3)):
        b.set_gpu("n1", 3, healthy=False)
        b.run(20, {"n1": [gpu]}, queue_seq=1)
    assert _kept_rounds(first, second).requeues == [(20, "requeued: GPU 3 on n1 is unhealthy")]


def test_a_requeue_that_did_not_apply_is_decided_again_by_a_kept_index():
    # The database refused the first round's requeue (a stale decision): the job still holds the broken GPU.
    first, second = cluster(), cluster()
    for b in (first, second):
        b.set_gpu("n1", 3, healthy=False)
        b.run(20, {"n1": [2, 3]}, queue_seq=1)
    assert _kept_rounds(first, second).requeues == [(20, "requeued: GPU 3 on n1 is unhealthy")]
