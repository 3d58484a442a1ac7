"""The running jobs the rebalance pass asks whether to move (scheduler.core.migration: _may_trigger, MoveWatch): those
a trigger can fire for, kept from round to round."""

from __future__ import annotations

from scheduler.core.carry import RoundCarry
from scheduler.core.engine import schedule
from scheduler.core.migration import MoveWatch
from scheduler.core.state import ClusterState
from scheduler.core.synthetic import next_round, synthetic_snapshot
from scheduler.core.topology import build_topology
from scheduler.core.types import Share
from tests.scheduler.core.builders import SnapBuilder


def _state() -> ClusterState:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})  # one NVLink island of 8 GPUs a node
    b.leaf("L2", ["n3"], {"S1": 1}, islands=[(0, 1, 2, 3), (4, 5, 6, 7)])  # two islands of 4
    b.pool(1, "train")
    b.run(10, {"n1": [0, 1, 2, 3]})  # one node, one island: never moved by a trigger
    b.run(11, {"n1": [4, 5], "n2": [0, 1]})  # two nodes
    b.run(12, {"n3": [2, 3, 4, 5]})  # two islands where one would hold it
    b.run(13, {"n3": [0, 1]})  # one island of n3
    b.run(14, {"n2": [2]}, dataset_node="n1", workload="data-intensive")  # read from its dataset's node
    snap = b.snapshot()
    return ClusterState(snap, build_topology(snap.fabric))


def test_the_jobs_a_trigger_may_fire_for_are_watched():
    assert MoveWatch.of(_state()) == {11, 12, 14}


def test_a_job_sharing_its_gpu_by_mps_is_watched():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "infer", sharing="mps")
    gid = b.gpu_id("n1", 0)
    b.run(20, {}, sharing="mps", gpus=1, shares=[Share(gid, "mps", 30, 1000)])
    snap = b.snapshot()
    assert MoveWatch.of(ClusterState(snap, build_topology(snap.fabric))) == {20}


def test_the_watch_kept_over_churn_rounds_is_the_one_built_afresh():
    snap = synthetic_snapshot(512, 2000, 0.7, seed=3)
    carry = RoundCarry()
    dec = schedule(snap, carry=carry)
    snap = next_round(snap, dec, 0.02, seed=99)
    dec = schedule(snap, carry=carry)  # the round after the fill, whose many starts build the watch again
    kept = carry.state.move_watch
    for r in range(5):
        snap = next_round(snap, dec, 0.02, seed=r)
        dec = schedule(snap, carry=carry)
        st = carry.state
        assert st.move_watch is kept, "brought up to date, not built again"
        assert st.running_changes(), "the round changed running jobs"
        assert MoveWatch.of(st) == MoveWatch(st).jobs
