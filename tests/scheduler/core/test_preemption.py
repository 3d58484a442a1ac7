"""Preemption: lower-priority or borrowing preemptible jobs make room, with the fewest victims, freeing a
placement that fits the topology, and never for a job that still would not fit."""

from scheduler.core import schedule
from tests.scheduler.core.builders import SnapBuilder, config, two_leaves


def victims(d):
    return sorted(p.job_id for p in d.preemptions)


def test_fewest_victims_win():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    for j, g in enumerate(range(4)):
        b.run(20 + j, {"n1": [g]}, priority=10)
    b.run(30, {"n2": list(range(8))}, priority=10)
    b.job(1, gpus=8, priority=100)
    d = schedule(b.snapshot())
    assert victims(d) == [30]
    assert d.preemptions[0].reason == "preempted for job 1 (priority 100 over 10)"


def test_lower_priority_victims_first_on_a_tie():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))}, priority=40)
    b.run(30, {"n2": list(range(8))}, priority=10)
    b.job(1, gpus=8, priority=100)
    assert victims(schedule(b.snapshot())) == [30]


def test_a_whole_leaf_is_freed_for_a_gang_rather_than_scattered_gpus():
    b = two_leaves()
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))}, priority=10)  # L1: one victim clears it (n2 is free)
    for j in range(4):  # L2: four small jobs on each node
        b.run(30 + j, {"n3": [2 * j, 2 * j + 1]}, priority=10)
        b.run(40 + j, {"n4": [2 * j, 2 * j + 1]}, priority=10)
    b.job(1, gpus=16, gpus_per_node=8, priority=100)
    d = schedule(b.snapshot())
    assert victims(d) == [20]
    assert d.pending_reasons[1] == "preempting job 20 to free 16 GPUs on 2 nodes; starts when they stop"


def test_only_victims_the_placement_needs_are_preempted():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2, 3]}, priority=10)
    b.run(21, {"n1": [4, 5]}, priority=10)
    b.job(1, gpus=4, priority=100)  # two GPUs are free: freeing job 21 is enough
    d = schedule(b.snapshot())
    assert victims(d) == [21]


def test_no_preemption_for_a_job_that_still_would_not_fit():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))}, priority=10)
    b.run(21, {"n2": list(range(8))}, priority=10)
    b.job(1, gpus=16, require="leaf", priority=100)  # each leaf has only 8 GPUs
    d = schedule(b.snapshot())
    assert d.preemptions == []
    assert d.pending_reasons[1].startswith("needs 16 GPUs in one leaf; ")


def test_equal_priority_does_not_preempt():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8)), "n2": list(range(8))}, priority=50)
    b.job(1, gpus=8, priority=50)
    assert schedule(b.snapshot()).preemptions == []


def test_non_preemptible_jobs_are_never_victims():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))}, priority=10, preemptible=False)
    b.run(21, {"n2": list(range(8))}, priority=40)
    b.job(1, gpus=8, priority=100)
    assert victims(schedule(b.snapshot())) == [21]


def test_freed_gpus_are_held_for_the_preemptor():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2, 3]}, priority=10)
    b.job(1, gpus=8, priority=100)
    b.job(2, gpus=4, priority=50, est_runtime_s=60.0)
    d = schedule(b.snapshot())
    assert victims(d) == [20]
    assert d.placements == []  # the 4 free GPUs belong to job 1's planned placement
    held = {r.job_id: r for r in d.reservations}
    assert len(held[1].gpu_ids) == 8 and held[1].start_at == b.now + 120.0  # after the grace period


def test_a_job_waits_for_jobs_already_stopping_instead_of_preempting_more():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))}, priority=10, stopping=True)  # preempted last round
    b.run(21, {"n2": list(range(8))}, priority=10)
    b.job(1, gpus=8, priority=100)
    d = schedule(b.snapshot())
    assert d.preemptions == []
    assert d.pending_reasons[1] == "needs 8 GPUs; 0 free in pool 'train'; waiting for preempted jobs to stop"


def test_preemption_attempts_are_bounded_per_round():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))}, priority=10)
    b.run(21, {"n2": list(range(8))}, priority=10)
    b.job(1, gpus=8, priority=100)
    b.job(2, gpus=8, priority=100, gpu_memory_mib=1)  # another equivalence class
    d = schedule(b.snapshot(config(max_preemption_attempts=1)))
    assert victims(d) == [20] or victims(d) == [21]
    assert len(d.preemptions) == 1


def test_victims_of_a_round_are_not_preempted_twice():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))}, priority=10)
    b.run(21, {"n2": list(range(8))}, priority=10)
    b.job(1, gpus=8, priority=100)
    b.job(2, gpus=8, priority=90)
    d = schedule(b.snapshot())
    assert victims(d) == [20, 21]
    assert {p.for_job for p in d.preemptions} == {1, 2}
