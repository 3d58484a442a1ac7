"""Migration: running jobs whose placement went bad move when the modelled gain beats the move's cost."""

from scheduler.core import schedule
from scheduler.core.types import Share
from tests.scheduler.core.builders import SnapBuilder, config

HOURS = 3600.0


def split_job(est: float = 10 * HOURS, **kw) -> SnapBuilder:
    """Job 20 runs 4+4 over n1 and n2 (started 2 h ago); n3 is free in the same leaf."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]}, est_runtime_s=est, started_at=b.now - 2 * HOURS, **kw)
    return b


def test_hot_link_triggers_a_move_that_pays_off():
    b = split_job()
    b.util["n1-L1"] = 0.97
    d = schedule(b.snapshot())
    (m,) = d.migrations
    assert m.job_id == 20 and m.placement.nodes == ("n3",) and m.placement.level == "island"
    assert m.gain_s > m.cost_s
    assert m.reason.startswith("hot link on n1's fabric path; step ")
    assert m.reason.endswith("(leaf -> island)")


def test_move_is_skipped_when_the_gain_does_not_beat_the_cost():
    b = split_job(est=2 * HOURS + 120)  # two minutes left
    b.util["n1-L1"] = 0.97
    assert schedule(b.snapshot()).migrations == []


def test_checkpoint_cost_counts():
    b = split_job(checkpoint_cost_s=100 * HOURS)
    b.util["n1-L1"] = 0.97
    assert schedule(b.snapshot()).migrations == []


def test_hold_down_prevents_moving_twice():
    b = split_job(last_migrated_at=1_000_000.0 - 600)
    b.util["n1-L1"] = 0.97
    assert schedule(b.snapshot()).migrations == []


def test_freshly_started_jobs_are_not_moved():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]}, est_runtime_s=10 * HOURS, started_at=b.now - 60)
    b.util["n1-L1"] = 0.97
    assert schedule(b.snapshot()).migrations == []


def test_erroring_link_triggers_a_move():
    b = split_job()
    b.errors["n2-L1"] = True
    (m,) = schedule(b.snapshot()).migrations
    assert m.reason.startswith("erroring link on n2's fabric path")


def test_better_island_freed_up():
    b = split_job()
    (m,) = schedule(b.snapshot()).migrations
    assert m.reason.startswith("a single node freed up (it spans 2 nodes)")
    assert m.placement.nodes == ("n3",)


def test_a_job_that_owns_its_nodes_does_not_flee_its_own_traffic():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3", "n4"], {"S1": 4})
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8)), "n2": list(range(8))}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)
    b.util["n1-L1"] = b.util["n2-L1"] = 0.97  # its own all-reduce
    assert schedule(b.snapshot()).migrations == []


def test_new_placement_is_disjoint_from_the_old_one():
    b = split_job()
    b.util["n1-L1"] = 0.97
    (m,) = schedule(b.snapshot()).migrations
    old = {b.gpu_id(h, i) for h in ("n1", "n2") for i in range(4)}
    assert not old & {s.gpu_id for s in m.placement.shares}


def test_migrations_per_round_are_bounded():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", [f"n{i}" for i in range(1, 9)], {"S1": 8})
    b.pool(1, "train")
    for j, (x, y) in enumerate((("n1", "n2"), ("n3", "n4"), ("n5", "n6"))):
        b.run(20 + j, {x: [0, 1, 2, 3], y: [0, 1, 2, 3]}, est_runtime_s=10 * HOURS, started_at=b.now - HOURS)
    d = schedule(b.snapshot(config(max_migrations_per_round=2)))
    assert len(d.migrations) == 2


def test_pending_jobs_get_capacity_before_migrations():
    b = split_job()
    b.util["n1-L1"] = 0.97
    b.job(1, gpus=8)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.placements] == [1] and d.placements[0].nodes == ("n3",)
    assert d.migrations == []


def test_overloaded_shared_gpu_triggers_a_move():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=2)
    b.pool(1, "infer", sharing="mps")
    g0 = b.gpu_id("n1", 0)
    b.run(
        20,
        {},
        shares=[Share(g0, "mps", 20, 1000)],
        sharing="mps",
        mps_compute_pct=20,
        mps_memory_mib=1000,
        est_runtime_s=10 * HOURS,
        started_at=b.now - HOURS,
        workload="inference",
    )
    b.run(21, {}, shares=[Share(g0, "mps", 70, 1000)], sharing="mps", started_at=b.now - 60)
    b.set_gpu("n1", 0, utilisation=0.99)
    d = schedule(b.snapshot())
    (m,) = d.migrations
    assert m.job_id == 20 and m.placement.shares[0].gpu_id == b.gpu_id("n1", 1)
    assert m.reason.startswith("GPU 0 on n1 overloaded (99%)")


def test_stopping_jobs_are_not_moved():
    b = split_job(stopping=True)
    b.util["n1-L1"] = 0.97
    assert schedule(b.snapshot()).migrations == []


def test_migration_can_be_switched_off():
    b = split_job()
    b.util["n1-L1"] = 0.97
    assert schedule(b.snapshot(config(max_migrations_per_round=0))).migrations == []
