"""Waiting for one leaf (docs/scheduler.md): a multi-node job whose best placement now spans leaves waits
for one leaf when the wait (by the running jobs' estimates) is shorter than what crossing would cost it and
the rings it would share the uplinks with.

The fabric: leaves L1 (n1, n2) and L2 (n3, n4) at 2:1, each 2 x 400 Gb/s of hosts and one 400 Gb/s uplink
(50 GB/s); one 400 Gb/s HCA a node (50 x 0.96 = 48 GB/s). n2 is busy for 100 s more (job 20: a one-hour
estimate, started 3500 s ago), n4 for hours (job 21). A 2 x 8 gang fits now only as n1 + n3, across leaves.

Default training job on H100: 0.1 s of compute, 1 GiB all-reduced a step, 16 ranks. Ideal step (one leaf,
48 GB/s): 0.1 + 2 x 15/16 x 2^30 / 48e9 + 30 x 5e-6 = 0.1 + 0.041943 + 0.00015 = 0.142093 s.
"""

from __future__ import annotations

import pytest

from scheduler.core import schedule
from tests.scheduler.core.builders import SnapBuilder, config

GIB = float(1 << 30)
IDEAL = 0.1 + 2 * 15 / 16 * GIB / 48e9 + 30 * 5e-6


def fabric(n2_left_s: float = 100.0) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.leaf("L2", ["n3", "n4"], {"S1": 1})
    b.pool(1, "train")
    b.run(20, {"n2": list(range(8))}, started_at=b.now - 3500, est_runtime_s=3500.0 + n2_left_s)
    b.run(21, {"n4": list(range(8))}, started_at=b.now - 100, est_runtime_s=36000.0)
    return b


def test_a_gang_alone_starts_across_leaves():
    # Nobody else crosses or waits to: across leaves it gets 48 GB/s as in one leaf, and pays only the
    # spine hops' latency, 30 x (6 - 5) us a step: 3e-5 / 0.142093 x 3600 s = 0.76 s < the 100 s wait.
    b = fabric()
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    (p,) = d.placements
    assert p.job_id == 1 and p.level == "pod" and sorted(p.nodes) == ["n1", "n3"]
    assert d.stats["leaf_waits"] == 0


def test_a_gang_waits_for_one_leaf_when_other_gangs_would_cross_too():
    # Job 2 waits as well, so the leaves' uplinks would be shared: at the oversubscribed share, 50 GB/s / 2
    # hosts x 0.9 (ECMP) x 0.96 = 21.6 GB/s, a step takes 0.1 + 2 x 15/16 x 2^30 / 21.6e9 + 30 x 6e-6 =
    # 0.193386 s, 1.36098 x ideal; for job 1 and the one ring beside it: 0.36098 x 3600 x 2 = 2599 s > 100 s.
    b = fabric()
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(2, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    assert d.placement_for(1) is None
    slow = (0.1 + 2 * 15 / 16 * GIB / 21.6e9 + 30 * 6e-6) / IDEAL
    assert slow == pytest.approx(1.36098, abs=1e-4)
    assert d.pending_reasons[1] == (
        "waiting about 2 min for leaf L1 as running jobs end: across leaves now it would cost about 43 min "
        "(its ring slowed on shared uplinks, and theirs)"
    )
    (r,) = [r for r in d.reservations if r.job_id == 1]
    assert r.start_at == b.now + 100 and r.nodes == ("n1", "n2")
    # Job 2 cannot start across leaves either: n1 is held for job 1.
    assert d.pending_reasons[2] == "waiting for reserved start of job 1 (backfill window too short)"
    assert d.placements == [] and d.stats["leaf_waits"] == 1


def _three_leaves_two_node_jobs(n: int):
    """Three leaves: L1 (n1, n2), L2 (n3, n4), L3 (n5, n6), n2, n4 and n6 busy; jobs 1..n of one shape (2 x 8 GPUs)."""
    b = fabric()
    b.leaf("L3", ["n5", "n6"], {"S1": 1})
    b.pool(1, "train")
    b.pools = b.pools[-1:]
    b.run(22, {"n6": list(range(8))}, started_at=b.now - 100, est_runtime_s=36000.0)
    for j in range(1, n + 1):
        b.job(j, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    return schedule(b.snapshot())


def test_jobs_of_one_shape_decide_alike_in_a_round():
    # Job 1 waits for L1 (as above); job 2, same shape, could still cross (n3 + n5) but waits too, with no plan of
    # its own.
    d = _three_leaves_two_node_jobs(2)
    assert d.placements == []
    assert d.pending_reasons[2] == "waiting for one leaf, as job 1 of the same shape does"
    assert d.stats["leaf_waits"] == 2


def test_the_jobs_behind_the_first_of_a_shape_wait_without_searching_again():
    # As above, with five more jobs of that shape: job 2 searches and waits behind job 1; jobs 3-7 are alike to job 2
    # in all its turn read, and its turn changed nothing, so they get its reason without a search of their own. At
    # 50,000 GPUs thousands of such jobs each searched again, and each made its pool's other turns be taken again.
    d = _three_leaves_two_node_jobs(7)
    assert d.placements == []
    assert {d.pending_reasons[j] for j in range(2, 8)} == {"waiting for one leaf, as job 1 of the same shape does"}
    assert d.stats["leaf_waits"] == 7
    assert d.stats["searches"] == 2  # job 1's and job 2's


def test_a_long_wait_is_not_worth_it():
    # The same, but n2 is busy for 3 h more: 10800 s > 2599 s, so job 1 starts across leaves now.
    b = fabric(n2_left_s=10800.0)
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(2, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    assert d.placement_for(1) is not None and d.placement_for(1).level == "pod"


def test_off_switch():
    b = fabric()
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(2, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot(config(leaf_wait=False)))
    assert d.placement_for(1) is not None and d.stats["leaf_waits"] == 0


def test_a_leaf_wait_does_not_take_the_pools_reservation():
    # As above, plus job 3 needing 3 whole nodes: EASY still reserves for it (the top blocked job) though job 1
    # holds n1 for its leaf wait: n2, n3 and n4 are free once job 21 (n4) ends, by its estimate, in 35900 s.
    b = fabric()
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(2, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(3, gpus=24, nodes=3, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    assert "waiting about 2 min for leaf L1" in d.pending_reasons[1]
    (r3,) = [r for r in d.reservations if r.job_id == 3]
    assert r3.start_at == b.now + 35900 and d.stats["reservations"] == 1
