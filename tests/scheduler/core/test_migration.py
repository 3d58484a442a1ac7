"""Migration: running jobs whose placement went bad move when the modelled gain beats the move's cost."""

from dataclasses import replace

import pytest

from scheduler.core import schedule
from scheduler.core.migration import current_candidate
from scheduler.core.placement import Candidate, Placer
from scheduler.core.state import ClusterState
from scheduler.core.topology import build_topology
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


# ---------------------------------------------------------------- trigger priority and the scan limit


def six_nodes() -> SnapBuilder:
    """Jobs 20 (n1 + n2) and 21 (n3 + n4) run 4 + 4 each; n5 and n6 are free in the same leaf. Job 21 comes
    first in the snapshot: any order by id is the scheduler's own."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", [f"n{i}" for i in range(1, 7)], {"S1": 6})
    b.pool(1, "train")
    for jid, (x, y) in ((21, ("n3", "n4")), (20, ("n1", "n2"))):
        b.run(jid, {x: [0, 1, 2, 3], y: [0, 1, 2, 3]}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)
    return b


def train_and_mps() -> SnapBuilder:
    """Pool 1 'train' on n1..n3 (one leaf), pool 2 'infer' (MPS) on m1, a 2-GPU node of its own leaf."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.leaf("L2", ["m1"], {"S1": 1}, gpus=2)
    b.pool(1, "train", hosts=["n1", "n2", "n3"])
    b.pool(2, "infer", hosts=["m1"], sharing="mps")
    return b


def run_overloaded_mps(b: SnapBuilder, jid: int) -> None:
    """A 20 % MPS job on m1's GPU 0, which runs at 99 %; m1's GPU 1 is idle."""
    b.run(
        jid,
        {},
        shares=[Share(b.gpu_id("m1", 0), "mps", 20, 1000)],
        sharing="mps",
        mps_compute_pct=20,
        mps_memory_mib=1000,
        pool=2,
        est_runtime_s=10 * HOURS,
        started_at=b.now - HOURS,
        workload="inference",
    )
    b.set_gpu("m1", 0, utilisation=0.99)


def run_split(b: SnapBuilder, jid: int) -> None:
    b.run(jid, {"n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)


def test_an_erroring_link_is_scanned_before_a_hot_one():
    b = six_nodes()
    b.util["n1-L1"] = 0.97  # job 20: hot
    b.errors["n3-L1"] = True  # job 21: erroring, scanned first despite its larger id
    d = schedule(b.snapshot(config(migration_scan_limit=1)))
    assert [m.job_id for m in d.migrations] == [21]


def test_a_hot_link_is_scanned_before_an_overloaded_gpu():
    b = train_and_mps()
    run_overloaded_mps(b, 20)
    run_split(b, 21)
    b.util["n1-L1"] = 0.97
    d = schedule(b.snapshot(config(migration_scan_limit=1)))
    assert [m.job_id for m in d.migrations] == [21]


def test_an_overloaded_gpu_is_scanned_before_a_better_domain():
    b = train_and_mps()
    run_overloaded_mps(b, 21)
    run_split(b, 20)  # spans two nodes while n3 is free: a better domain, the weakest trigger
    d = schedule(b.snapshot(config(migration_scan_limit=1)))
    assert [m.job_id for m in d.migrations] == [21]


def test_equal_triggers_are_scanned_by_job_id():
    b = six_nodes()
    b.errors["n1-L1"] = b.errors["n3-L1"] = True
    d = schedule(b.snapshot(config(migration_scan_limit=1)))
    assert [m.job_id for m in d.migrations] == [20]


def test_the_counters_report_triggered_and_scanned_jobs():
    b = six_nodes()
    b.errors["n1-L1"] = b.errors["n3-L1"] = True
    stats = schedule(b.snapshot(config(migration_scan_limit=1))).stats
    assert (stats["migration_triggers"], stats["migration_scanned"]) == (2, 1)


def test_switched_off_migration_looks_at_no_job():
    b = six_nodes()
    b.errors["n1-L1"] = True
    stats = schedule(b.snapshot(config(max_migrations_per_round=0))).stats
    assert (stats["migration_triggers"], stats["migration_scanned"]) == (0, 0)


def test_the_largest_net_gain_moves_first():
    b = six_nodes()
    b.errors["n1-L1"] = b.errors["n3-L1"] = True
    b.running[0] = replace(b.running[0], request=replace(b.running[0].request, est_runtime_s=20 * HOURS))
    d = schedule(b.snapshot(config(max_migrations_per_round=1)))
    assert [m.job_id for m in d.migrations] == [21]  # 18 h left against 8 h


def test_equal_net_gains_move_in_job_id_order_whatever_their_triggers():
    b = six_nodes()
    # Both rings are bound by a 79 % HCA (n2, n4), not hot; n3's erroring link is faster than that, so
    # 21 (erroring link) and 20 (a better domain) are priced alike to the last bit.
    b.util["n2-L1"] = b.util["n4-L1"] = 0.79
    b.errors["n3-L1"] = True
    d = schedule(b.snapshot(config(max_migrations_per_round=1)))
    assert [m.job_id for m in d.migrations] == [20]


def test_each_move_is_planned_on_the_gpus_the_earlier_ones_left():
    b = six_nodes()
    b.run(30, {"n6": list(range(8))}, started_at=b.now - 60)
    b.errors["n1-L1"] = b.errors["n3-L1"] = True
    # n5 is the only room for either: the second plan finds none
    (m,) = schedule(b.snapshot()).migrations
    assert m.placement.nodes == ("n5",)


def test_one_migration_per_round_moves_exactly_one_job():
    b = six_nodes()
    b.errors["n1-L1"] = b.errors["n3-L1"] = True
    assert len(schedule(b.snapshot(config(max_migrations_per_round=1))).migrations) == 1


# ---------------------------------------------------------------- which jobs a link or a GPU triggers


def data_job(workload: str = "data-intensive", dataset_node: str | None = "st1") -> SnapBuilder:
    """Job 20 runs on 4 GPUs of n1 (one NVLink island), its dataset on storage node st1 behind another leaf."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.leaf("L2", ["st1"], {"S1": 1}, storage=True)
    b.pool(1, "train")
    b.run(
        20,
        {"n1": [0, 1, 2, 3]},
        est_runtime_s=10 * HOURS,
        started_at=b.now - 2 * HOURS,
        workload=workload,
        dataset_node=dataset_node,
    )
    return b


def triggers(b: SnapBuilder, **cfg) -> int:
    return schedule(b.snapshot(config(**cfg))).stats["migration_triggers"]


def test_an_erroring_link_moves_a_single_node_job_that_reads_a_remote_dataset():
    b = data_job()
    b.errors["n1-L1"] = True
    (m,) = schedule(b.snapshot()).migrations
    assert m.placement.nodes == ("n2",) and m.reason.startswith("erroring link on n1's fabric path")


def test_hot_uplinks_trigger_a_single_leaf_job_that_reads_a_remote_dataset():
    b = data_job()
    b.util["L1-S1"] = 0.97
    assert triggers(b) == 1


@pytest.mark.parametrize(
    ("workload", "dataset_node"),
    [("training", "st1"), ("data-intensive", None)],
    ids=["dataset-but-not-data-intensive", "data-intensive-without-dataset"],
)
def test_a_single_node_job_that_reads_no_remote_dataset_ignores_its_erroring_link(workload, dataset_node):
    # One node, one island: it uses no fabric link and no better domain can exist.
    b = data_job(workload, dataset_node)
    b.errors["n1-L1"] = True
    assert triggers(b) == 0


def test_a_job_inside_one_leaf_ignores_its_leafs_hot_uplinks():
    b = data_job(workload="training", dataset_node=None)
    b.util["L1-S1"] = 0.97
    assert triggers(b) == 0


def test_a_job_that_owns_whole_nodes_is_not_triggered_by_their_hot_links():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3", "n4"], {"S1": 4})
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8)), "n2": list(range(8))}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)
    b.util["n1-L1"] = 0.97
    # 16 GPUs > 8 per node and one leaf: no better domain either.
    assert triggers(b) == 0


def cross_leaf_job(up_util: dict[str, float] | None = None) -> SnapBuilder:
    """Job 20 runs 8 + 8 on n1 (leaf L1) and n4 (leaf L2), one 400 G uplink each to spine S1; n2, n3 (L1) and
    n5, n6 (L2) are free."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 1})
    b.leaf("L2", ["n4", "n5", "n6"], {"S1": 1})
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8)), "n4": list(range(8))}, est_runtime_s=100 * HOURS, started_at=b.now - 2 * HOURS)
    b.util.update(up_util or {})
    return b


@pytest.mark.parametrize(("uplink", "leaf"), [("L1-S1", "leaf L1"), ("L2-S1", "leaf L2")])
def test_a_hot_uplink_moves_a_job_that_crosses_the_spine_into_one_leaf(uplink, leaf):
    b = cross_leaf_job({uplink: 0.97})
    (m,) = schedule(b.snapshot()).migrations
    assert m.placement.nodes == ("n2", "n3")
    assert m.reason.startswith(f"hot or erroring uplinks on {leaf}; step ")
    assert m.reason.endswith("(pod -> leaf)")


def test_room_in_one_leaf_moves_a_job_that_crosses_the_spine():
    b = cross_leaf_job({"L1-S1": 0.5})  # busy, not hot: the only trigger is the room freed in L1
    (m,) = schedule(b.snapshot()).migrations
    assert m.placement.nodes == ("n2", "n3")
    assert m.reason.startswith("room freed up in one leaf (it spans 2 leaves); step ")


# ---------------------------------------------------------------- the gain, exactly


def timesliced(est: float | None = 4 * HOURS, **kw) -> SnapBuilder:
    """Job 20 shares GPU 0 of m1 (2 time slices) with job 21, started 2 h ago; GPU 0 runs at 100 %, GPU 1 idles.

    Compute-only steps (one GPU: no all-reduce, no dataset): step = C / free, free = 1 - util x 1 (time slicing
    interferes fully). Job 20's own half of GPU 0 is discounted, so where it is free = 1 - 1.0 / 2 = 0.5; on the
    idle GPU 1 free = 1: step_new / step_now = 0.5 exactly, gain = remaining / 2."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["m1"], {"S1": 1}, gpus=2)
    b.pool(1, "ts", sharing="timeslice", replicas=2)
    g0 = b.gpu_id("m1", 0)
    on_g0 = [Share(g0, "timeslice", 100, 0)]
    b.run(20, {}, shares=on_g0, sharing="timeslice", est_runtime_s=est, started_at=b.now - 2 * HOURS, **kw)
    b.run(21, {}, shares=on_g0, sharing="timeslice", started_at=b.now - 60)
    b.set_gpu("m1", 0, utilisation=1.0)
    return b


FREE_MOVE = {"restart_overhead_s": 0.0, "migration_min_net_gain_s": 0.0}


def test_the_gain_is_the_remaining_run_times_the_step_saved():
    (m,) = schedule(timesliced().snapshot()).migrations
    # 4 h estimate - 2 h run = 7200 s left, half of it saved; 60 s checkpoint + 30 s restart.
    assert (m.job_id, m.gain_s, m.cost_s) == (20, 3600.0, 90.0)
    assert m.placement.shares[0].gpu_id == 2  # m1's GPU 1


def test_gain_and_cost_are_reported_to_a_tenth_of_a_second():
    b = timesliced(est=4 * HOURS + 0.26, checkpoint_cost_s=12.34)
    (m,) = schedule(b.snapshot()).migrations
    # gain 7200.26 / 2 = 3600.13, cost 12.34 + 30 = 42.34
    assert (m.gain_s, m.cost_s) == (3600.1, 42.3)


def test_a_job_without_an_estimate_is_expected_to_run_the_default_runtime():
    b = timesliced(est=None)
    (m,) = schedule(b.snapshot(config(default_runtime_s=6 * HOURS))).migrations
    assert m.gain_s == 7200.0  # (6 h - 2 h) / 2


def test_a_net_gain_exactly_at_the_minimum_moves():
    # 3600 s gain - 90 s cost = 3510 s net
    assert len(schedule(timesliced().snapshot(config(migration_min_net_gain_s=3510.0))).migrations) == 1


def test_a_job_at_its_estimated_end_is_not_moved_even_for_free():
    b = timesliced(est=2 * HOURS, checkpoint_cost_s=0.0)
    assert schedule(b.snapshot(config(**FREE_MOVE))).migrations == []


def test_a_job_with_one_second_left_moves_when_moving_is_free():
    b = timesliced(est=2 * HOURS + 1, checkpoint_cost_s=0.0)
    (m,) = schedule(b.snapshot(config(**FREE_MOVE))).migrations
    assert m.gain_s == 0.5


def test_a_move_to_an_equally_fast_place_is_not_made_even_for_free():
    b = timesliced(checkpoint_cost_s=0.0)
    b.set_gpu("m1", 1, utilisation=0.5)  # free = 0.5 there too: the same step
    assert schedule(b.snapshot(config(**FREE_MOVE))).migrations == []


def test_a_job_exactly_at_the_hold_down_may_move():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    # hold-down = max(1800 s migration hold-down, 300 s minimum run)
    b.run(20, {"n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]}, est_runtime_s=10 * HOURS, started_at=b.now - 1800)
    b.util["n1-L1"] = 0.97
    assert [m.job_id for m in schedule(b.snapshot()).migrations] == [20]


def test_a_job_another_scheduler_runs_is_not_moved():
    b = split_job(movable=False)
    b.util["n1-L1"] = 0.97
    assert schedule(b.snapshot()).migrations == []


# ---------------------------------------------------------------- a better domain freed up


def test_a_job_split_over_two_islands_moves_into_one_that_freed_up():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.pool(1, "train")
    b.run(20, {"n1": [2, 3, 4, 5]}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)
    (m,) = schedule(b.snapshot()).migrations
    # 4 GPUs: exactly one island's worth
    assert m.reason.startswith("a whole NVLink island freed up (it spans 2 islands); step ")
    assert m.placement.nodes == ("n2",) and m.placement.level == "island"


def test_a_node_freed_up_with_exactly_the_gpus_the_job_needs_is_a_better_domain():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    run_split(b, 20)
    b.run(30, {"n1": [4, 5, 6, 7], "n2": [4, 5, 6, 7]}, started_at=b.now - 60)  # fresh: held down
    # free: n3's 8 GPUs only, the 8 job 20 needs
    (m,) = schedule(b.snapshot()).migrations
    assert m.job_id == 20 and m.placement.nodes == ("n3",)
    assert m.reason.startswith("a single node freed up (it spans 2 nodes)")


def test_a_job_on_small_nodes_moves_onto_a_larger_node_of_its_partition():
    b = SnapBuilder()
    b.spine("S1")
    b.node("n3", gpus=8)
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3}, gpus=4)
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2], "n2": [0, 1, 2]}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)
    # 6 GPUs do not fit a 4-GPU node, but do fit n3, the partition's 8-GPU node
    (m,) = schedule(b.snapshot()).migrations
    assert m.placement.nodes == ("n3",) and m.reason.startswith("a single node freed up (it spans 2 nodes)")


def test_a_job_partly_outside_its_pool_is_triggered_but_not_moved():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n0", "n1", "n2"], {"S1": 3})
    b.pool(1, "train", hosts=["n1", "n2"])
    b.run(20, {"n0": [0, 1, 2, 3], "n1": [0, 1, 2, 3]}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)
    # n2 has room for all 8 GPUs, but the placement on n0 (no partition) cannot be priced
    d = schedule(b.snapshot())
    assert (d.stats["migration_triggers"], d.migrations) == (1, [])


# ---------------------------------------------------------------- the present placement, own traffic discounted


def priced_in_place(b: SnapBuilder, jid: int = 20) -> Candidate | None:
    snap = b.snapshot()
    st = ClusterState(snap, build_topology(snap.fabric))
    placer = Placer(st)
    ctx, _ = placer.context(st.running[jid].request)
    return current_candidate(placer, ctx, jid)


def test_an_exclusive_jobs_own_gpu_load_does_not_slow_it():
    b = split_job(step_compute_s=0.1)
    for i in range(4):
        b.set_gpu("n1", i, utilisation=0.9)
    assert priced_in_place(b).comp == pytest.approx(0.1)  # H100 strength 1, all of the GPU free


def one_mps_gpu(util: float, pct: int) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["m1"], {"S1": 1}, gpus=2)
    b.pool(1, "infer", sharing="mps")
    share = Share(b.gpu_id("m1", 0), "mps", pct, 1000)
    b.run(20, {}, shares=[share], sharing="mps", mps_compute_pct=pct, mps_memory_mib=1000, step_compute_s=0.33)
    b.set_gpu("m1", 0, utilisation=util)
    return b


@pytest.mark.parametrize(
    ("util", "pct", "comp"),
    [
        (0.9, 20, 0.4),  # others' load 0.9 - 0.2 = 0.7: 0.33 / (1 - 0.7 x 0.25 MPS interference) = 0.33 / 0.825
        (0.1, 50, 0.33),  # its own 50 % exceeds the whole load: nobody else's, never less than none
    ],
)
def test_an_mps_jobs_own_percentage_is_taken_off_its_gpus_load(util, pct, comp):
    assert priced_in_place(one_mps_gpu(util, pct)).comp == pytest.approx(comp)


def one_timesliced_gpu(slices_used: int) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["m1"], {"S1": 1}, gpus=2)
    b.pool(1, "ts", sharing="timeslice", replicas=2)
    b.run(20, {}, shares=[Share(b.gpu_id("m1", 0), "timeslice", 100, 0)], sharing="timeslice", step_compute_s=0.1)
    b.set_gpu("m1", 0, utilisation=0.5, timeslice_used=slices_used)
    return b


@pytest.mark.parametrize(
    ("slices_used", "comp"),
    [
        (1, 0.1),  # the only context on the GPU: all of its load is the job's own
        (0, 0.2),  # a GPU that reports no slice in use: nothing to discount, 0.1 / (1 - 0.5)
    ],
)
def test_a_timesliced_jobs_own_slice_is_taken_off_its_gpus_load(slices_used, comp):
    assert priced_in_place(one_timesliced_gpu(slices_used)).comp == pytest.approx(comp)


@pytest.mark.parametrize("gpus", [[0, 1, 2, 3], [4, 5, 6, 7]])
def test_a_jobs_own_share_of_a_hot_hca_is_credited_back(gpus):
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    b.run(20, {"n1": gpus, "n2": gpus})
    b.util["n1-L1"] = 0.97
    # n1's 50 GB/s HCA keeps max(0.05, 0.03) of it: 2.5 GB/s; the job owns 4 of 8 GPUs there, so half the
    # nominal is its own: 2.5 + 25 = 27.5 GB/s, x 0.96 net efficiency
    assert priced_in_place(b).bw == pytest.approx(26.4)


def leaf_pair(hosts: int, uplink_gbps: float = 400.0, host_gbps: float = 400.0) -> SnapBuilder:
    """Job 20 runs 8 + 8 on n1 (leaf L1) and the first host of leaf L2, `hosts` hosts per leaf, one uplink each;
    L1's uplink runs at 50 %."""
    b = SnapBuilder()
    b.spine("S1")
    kw = {"uplink_gbps": uplink_gbps, "host_gbps": host_gbps}
    b.leaf("L1", [f"n{i}" for i in range(1, hosts + 1)], {"S1": 1}, **kw)
    b.leaf("L2", [f"n{i}" for i in range(hosts + 1, 2 * hosts + 1)], {"S1": 1}, **kw)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8)), f"n{hosts + 1}": list(range(8))}, est_runtime_s=100 * HOURS)
    b.util["L1-S1"] = 0.5
    return b


@pytest.mark.parametrize(
    ("hosts", "uplink_gbps", "host_gbps", "bw"),
    [
        # 1200 G of hosts over 200 G of uplink left: oversubscription 6. The job's 8 of the leaf's 24 GPUs
        # take a third of the uplink back: 200 + 133.3 = 333.3 G, 3.6; the ring gets 1200 / 3.6 / 8 = 41.67
        # GB/s of the 50 GB/s uplink, x 0.96
        (3, 400.0, 400.0, 40.0),
        # 400 G over 200 G left: 2. The job owns the leaf: the whole uplink is its own, oversubscription 1,
        # 50 GB/s as its HCA: x 0.96
        (1, 400.0, 400.0, 48.0),
        # a 1 G uplink with 0.5 G left under 1200 G: 2400; a third back, 0.83 G: 1440; 1200 / 1440 / 8 GB/s
        (3, 1.0, 400.0, 0.1),
        # 1 G of host link over 0.5 G left: 2; the job's own, back to 1: the 0.125 GB/s uplink, x 0.96
        (1, 1.0, 1.0, 0.12),
    ],
    ids=["a-third-of-the-leaf", "the-whole-leaf", "tiny-uplink", "tiny-hosts"],
)
def test_a_jobs_own_share_of_its_leafs_uplinks_is_credited_back(hosts, uplink_gbps, host_gbps, bw):
    assert priced_in_place(leaf_pair(hosts, uplink_gbps, host_gbps)).bw == pytest.approx(bw)


# ---------------------------------------------------------------- odd corners


def test_a_job_is_not_moved_back_onto_the_gpus_freed_for_the_job_it_was_preempted_for():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    freed = tuple(b.gpu_id("n3", i) for i in range(8))
    b.run(
        20,
        {"n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]},
        est_runtime_s=10 * HOURS,
        started_at=b.now - 2 * HOURS,
        preempted_for=1,
        preempted_gpus=freed,
    )
    b.job(1, gpus=64)  # still waiting: more than the pool has
    b.util["n1-L1"] = 0.97
    # n3, the only room for it, was freed for job 1
    d = schedule(b.snapshot())
    assert (d.stats["migration_triggers"], d.migrations) == (1, [])


def test_two_leaf_groups_that_share_a_leaf_do_not_cross_the_spine():
    b = SnapBuilder()
    b.spine("S1")
    # n2 is cabled to L1 and L2: its group owns both uplinks and shares L1 with n1's group
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.leaf("L2", ["n2", "n3"], {"S1": 1})
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8)), "n2": list(range(8))}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)
    b.util["L1-S1"] = 0.97
    # and n3 has 8 of the 16 GPUs free: no better domain
    assert triggers(b) == 0


def test_a_shared_gpu_exactly_at_the_overload_threshold_is_overloaded():
    b = train_and_mps()
    run_overloaded_mps(b, 20)
    b.set_gpu("m1", 0, utilisation=0.95)
    assert triggers(b) == 1


def test_a_move_out_of_a_core_crossing_names_the_fabric_level():
    b = SnapBuilder()
    b.core("C1")
    b.spine("S1")
    b.spine("S2")
    b.uplink("S1", "C1")
    b.uplink("S2", "C1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.leaf("L2", ["n3"], {"S2": 1})
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2, 3], "n3": [0, 1, 2, 3]}, est_runtime_s=10 * HOURS, started_at=b.now - 2 * HOURS)
    (m,) = schedule(b.snapshot()).migrations
    assert m.placement.nodes == ("n2",) and m.reason.endswith("(fabric -> island)")


def test_a_leaf_with_no_schedulable_gpus_credits_a_one_gpu_job_its_whole_uplink():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.leaf("L2", ["n2", "n3"], {"S1": 1}, model="A100")
    b.pool(1, "train")
    b.set_node("n1", schedulable=False)  # cordoned: L1 counts no GPU in either partition
    b.run(20, {"n1": [0], "n2": list(range(8))})
    b.util["L1-S1"] = 0.75
    # L1: 400 G of host over the 100 G left, 4. Counted as one GPU, the job's one GPU there is all of it:
    # 100 + 400 G, capped at the 400 G uplink: 1. 50 GB/s, as the HCAs: x 0.96
    assert priced_in_place(b).bw == pytest.approx(48.0)


def test_a_job_on_nodes_the_fabric_does_not_know_still_moves():
    b = SnapBuilder()
    for h in ("n1", "n2", "n3"):
        b.node(h)
    b.fabric.hosts.clear()  # location unknown: each node a group of its own, reachable at its HCA rate
    b.pool(1, "train")
    run_split(b, 20)
    (m,) = schedule(b.snapshot()).migrations
    assert m.placement.nodes == ("n3",)


def test_crediting_a_jobs_uplinks_back_never_makes_them_faster_than_their_hosts():
    b = SnapBuilder()
    b.spine("S1")
    b.node("st1", gpus=0, storage=True)
    b.leaf("L1", ["n1"], {"S1": 2})
    b.leaf("L2", ["n2", "st1"], {"S1": 2}, uplink_gbps=800.0)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8)), "n2": list(range(8))}, workload="data-intensive", dataset_node="st1")
    for key in ("L1-S1", "L1-S1.2", "L2-S1", "L2-S1.2"):
        b.util[key] = 0.75
    # Each leaf: its hosts (400 G; 800 G) over a quarter of its uplinks left (200 G; 400 G), 2. The job owns
    # all its GPUs there: the whole uplinks (800 G; 1600 G) come back, more than the hosts: 1, not 1/2.
    # n1 reads its half of 1 GiB from st1 across the spine at min(50, 50) GB/s x 0.96 / 1 x 0.9 = 43.2 GB/s.
    assert priced_in_place(b).io == pytest.approx(2**29 / 43.2e9)


def test_a_shared_job_is_priced_in_the_partition_of_its_first_gpu():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["x1", "m1"], {"S1": 2}, gpus=2)
    b.pool(1, "infer", hosts=["m1"], sharing="mps")
    shares = [Share(b.gpu_id(h, 0), "mps", 20, 1000) for h in ("x1", "m1")]
    b.run(20, {}, shares=shares, sharing="mps", mps_compute_pct=20, mps_memory_mib=1000)
    # x1 is in no pool: there is no partition to price it in
    assert priced_in_place(b) is None


def test_a_job_given_other_gpus_by_a_kept_index_is_looked_at_where_it_is_now():
    # What the trigger reads of a job's GPUs is kept with the state (ClusterState.layouts) while they are the same
    # list. Job 20 spans n1 and n2, where n2's link errs; then the state gives it 4 GPUs of n3 and 4 of n1 (as
    # ClusterState.advance hands a job whose shares changed: another list): n3's link errs now, not n2's.
    from scheduler.core.migration import _trigger

    b = split_job()
    b.errors["n2-L1"] = True
    b.errors["n3-L1"] = True
    st = ClusterState(b.snapshot(), build_topology(b.fabric))
    rj = st.running[20]
    assert _trigger(st, rj) == (0, "erroring link on n2's fabric path")
    n1, n3 = st.nodes["n1"], st.nodes["n3"]
    st.job_gpus[20] = [(g, sh) for (_, sh), g in zip(st.job_gpus[20], n3.gpus[:4] + n1.gpus[:4], strict=True)]
    assert _trigger(st, rj) == (0, "erroring link on n3's fabric path")
