"""Placement: topology, load, locality and fragmentation decide, on small fabrics with known best answers."""

import pytest

from scheduler.core import schedule
from tests.scheduler.core.builders import SnapBuilder, dataset_beside_n2, two_leaves


def gpus_of(b: SnapBuilder, placement) -> dict[str, list[int]]:
    by_id = {g["id"]: (h, i) for (h, i), g in b.gpus.items()}
    out: dict[str, list[int]] = {}
    for sh in placement.shares:
        h, i = by_id[sh.gpu_id]
        out.setdefault(h, []).append(i)
    return {h: sorted(v) for h, v in out.items()}


def place_one(b: SnapBuilder, **job):
    b.job(1, **job)
    d = schedule(b.snapshot())
    assert len(d.placements) == 1, d.pending_reasons
    return d.placements[0]


def test_single_node_job_stays_in_one_nvlink_island():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.pool(1, "train")
    b.run(9, {"n1": [0]})
    p = place_one(b, gpus=4)
    assert gpus_of(b, p) == {"n1": [4, 5, 6, 7]}
    assert p.level == "island"


def test_best_fit_keeps_the_free_island_whole():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.pool(1, "train")
    b.run(9, {"n1": [0, 1]})
    p = place_one(b, gpus=2)
    assert gpus_of(b, p) == {"n1": [2, 3]}


def test_job_spans_islands_only_when_no_island_fits():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.pool(1, "train")
    b.run(9, {"n1": [0, 1, 4, 5]})
    p = place_one(b, gpus=4)
    assert gpus_of(b, p) == {"n1": [2, 3, 6, 7]}
    assert p.level == "node"
    assert p.cost["bandwidth_gbs"] == 20.0  # PCIe between the islands


def test_one_node_beats_two():
    b = two_leaves()
    b.pool(1, "train")
    b.run(9, {"n1": [0, 1, 2, 3], "n3": [0, 1, 2, 3]})
    p = place_one(b, gpus=8)
    assert p.nodes in (("n2",), ("n4",))
    assert p.level == "island"


def test_best_fit_node_keeps_whole_nodes_free():
    b = two_leaves()
    b.pool(1, "train")
    b.run(9, {"n3": [0, 1, 2, 3, 4, 5]})
    p = place_one(b, gpus=2)
    assert gpus_of(b, p) == {"n3": [6, 7]}


def test_whole_free_leaf_is_kept_for_large_jobs():
    b = two_leaves()
    b.pool(1, "train")
    b.run(9, {"n3": list(range(8))})  # L2 is partly used, L1 wholly free
    p = place_one(b, gpus=8)
    assert p.nodes == ("n4",)


def test_gang_prefers_one_leaf_over_crossing_the_spine():
    b = two_leaves()
    b.pool(1, "train")
    b.run(9, {"n2": list(range(8))})
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert sorted(p.nodes) == ["n3", "n4"]
    assert p.level == "leaf"


def test_gang_crosses_the_spine_when_no_leaf_holds_it():
    b = two_leaves()
    b.pool(1, "train")
    b.run(9, {"n2": list(range(8)), "n4": list(range(8))})
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert sorted(p.nodes) == ["n1", "n3"]
    assert p.level == "pod"
    assert "through the spine" in p.explanation


def test_leaf_placement_is_cheaper_than_cross_spine_in_the_model():
    b = two_leaves()
    b.pool(1, "train")
    b.run(9, {"n2": list(range(8))})
    leaf = place_one(b, gpus=16, gpus_per_node=8)
    b2 = two_leaves()
    b2.pool(1, "train")
    b2.run(9, {"n2": list(range(8)), "n4": list(range(8))})
    spine = place_one(b2, gpus=16, gpus_per_node=8)
    assert leaf.cost["comm_s"] < spine.cost["comm_s"]


def test_hot_host_link_is_avoided():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    b.util["n1-L1"] = 0.95
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert sorted(p.nodes) == ["n2", "n3"]


def test_hot_leaf_is_avoided_for_a_gang():
    b = two_leaves()
    b.pool(1, "train")
    for h in ("n1", "n2"):
        b.util[f"{h}-L1"] = 0.9
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert sorted(p.nodes) == ["n3", "n4"]


def test_erroring_link_is_avoided():
    b = two_leaves()
    b.pool(1, "train")
    b.errors["n1-L1"] = True
    b.run(9, {"n3": list(range(8)), "n4": list(range(8))})
    b.job(1, gpus=8, gpus_per_node=4)  # 4+4 on n1+n2 or ... n1 erroring: must still use L1 (only free)
    d = schedule(b.snapshot())
    assert sorted(d.placements[0].nodes) == ["n1", "n2"]
    assert "erroring" in d.placements[0].explanation or "hot" in d.placements[0].explanation


def test_cross_spine_gang_avoids_hot_uplinks():
    b = SnapBuilder()
    b.spine("S1")
    for leaf, host in (("L1", "n1"), ("L2", "n2"), ("L3", "n3")):
        b.leaf(leaf, [host], {"S1": 1})
    b.pool(1, "train")
    b.util["L1-S1"] = 0.95
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert sorted(p.nodes) == ["n2", "n3"]


def test_two_to_one_leaf_prefers_staying_inside_the_leaf():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})  # 2 hosts, 1 uplink: 2:1
    b.leaf("L2", ["n3", "n4"], {"S1": 1})
    b.pool(1, "train")
    b.run(9, {"n2": list(range(8))})
    p = place_one(b, gpus=16, gpus_per_node=8)
    assert sorted(p.nodes) == ["n3", "n4"]


def test_data_intensive_job_goes_next_to_its_dataset():
    b = dataset_beside_n2()
    p = place_one(b, gpus=8, workload="data-intensive", dataset_node="stor1")
    assert p.nodes == ("n2",)
    assert "dataset on stor1" in p.explanation


def test_data_intensive_job_avoids_leaves_with_hot_uplinks():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.leaf("L2", ["n2"], {"S1": 1})
    b.leaf("LS", ["stor1"], {"S1": 1}, storage=True)
    b.pool(1, "train", hosts=["n1", "n2"])
    b.util["L1-S1"] = 0.9
    p = place_one(b, gpus=4, workload="data-intensive", dataset_node="stor1")
    assert p.nodes == ("n2",)


def test_training_job_ignores_dataset_locality():
    b = dataset_beside_n2()
    p = place_one(b, gpus=8, dataset_node="stor1")
    assert p.cost["io_s"] == 0.0


def test_free_shape_gang_is_split_evenly_on_rail_optimised_nodes():
    # 8 HCAs of 50 Gb/s a node (400 Gb/s = 50 GB/s in all), one per GPU: 6+6 reaches 6 rails on each node
    # (50 x 6/8 x 0.96 = 36 GB/s), 8+4 only 4 on one of them (24): the balanced split's ring is faster, by
    # more than the one more node it leaves partly used.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, rails=8)
    b.pool(1, "train")
    p = place_one(b, gpus=12)
    assert sorted(len(v) for v in gpus_of(b, p).values()) == [6, 6]
    assert p.cost["bandwidth_gbs"] == pytest.approx(36.0)


def test_free_shape_gang_packs_on_single_hca_nodes():
    # One 400 Gb/s HCA a node: any k GPUs of it drive all of it (50 x 0.96 = 48 GB/s) either way, so 8+4
    # wins on fragmentation (it leaves one node partly used instead of two). Before, the engine gave k GPUs
    # k/8 of the HCA, which the replay's network model does not do.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.pool(1, "train")
    p = place_one(b, gpus=12)
    assert sorted(len(v) for v in gpus_of(b, p).values()) == [4, 8]
    assert p.cost["bandwidth_gbs"] == pytest.approx(48.0)


def test_fixed_shape_is_respected():
    b = two_leaves()
    b.pool(1, "train")
    p = place_one(b, gpus=8, nodes=2, gpus_per_node=4)
    assert sorted(len(v) for v in gpus_of(b, p).values()) == [4, 4]
    assert len(p.nodes) == 2


def test_gang_is_all_or_nothing():
    b = two_leaves()
    b.pool(1, "train")
    b.run(9, {"n1": list(range(8)), "n2": list(range(8))})
    b.job(1, gpus=24)
    d = schedule(b.snapshot())
    assert d.placements == []
    assert d.pending_reasons[1] == (
        "needs 24 GPUs; 16 free in pool 'train'; reserved to start in about 3 h 50 min as running jobs end"
    )


def test_compute_job_prefers_the_stronger_gpu():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["a1"], {"S1": 1}, model="A100")
    b.leaf("L2", ["h1"], {"S1": 1}, model="H100")
    b.pool(1, "train")
    p = place_one(b, gpus=8)
    assert p.nodes == ("h1",)


def test_lightly_loaded_gpus_are_preferred():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    for i in range(8):
        b.set_gpu("n1", i, utilisation=0.5)  # something outside the scheduler runs there
    p = place_one(b, gpus=8)
    assert p.nodes == ("n2",)


def test_gpu_model_constraint():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["a1"], {"S1": 1}, model="A100")
    b.leaf("L2", ["h1"], {"S1": 1}, model="H100")
    b.pool(1, "train")
    p = place_one(b, gpus=2, gpu_model="A100")
    assert p.nodes == ("a1",)


def test_gpu_memory_constraint():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["h1"], {"S1": 1}, model="H100")
    b.leaf("L2", ["h2"], {"S1": 1}, model="H200")
    b.pool(1, "train")
    p = place_one(b, gpus=1, gpu_memory_mib=100_000)
    assert p.nodes == ("h2",)


def test_unhealthy_gpu_is_never_used():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.set_gpu("n1", 3, healthy=False)
    b.run(9, {"n2": list(range(8))})
    b.job(1, gpus=8)
    b.job(2, gpus=7)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.placements] == [2]
    assert b.gpu_id("n1", 3) not in {s.gpu_id for s in d.placements[0].shares}


def test_drained_node_takes_no_new_work():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.set_node("n1", schedulable=False)
    p = place_one(b, gpus=4)
    assert p.nodes == ("n2",)


def test_placement_explains_itself_and_prices_the_step():
    b = two_leaves()
    b.pool(1, "train")
    p = place_one(b, gpus=8)
    assert p.explanation == "8 GPUs in one NVLink island on n1 (all-reduce 477 GB/s); step 1.00x ideal"
    assert set(p.cost) >= {"comm_s", "compute_s", "io_s", "step_s", "ideal_step_s", "slowdown", "fragmentation"}
    assert p.cost["slowdown"] == 1.0


def test_no_double_allocation_within_a_round():
    b = two_leaves()
    b.pool(1, "train")
    for j in range(1, 12):
        b.job(j, gpus=3)
    d = schedule(b.snapshot())
    ids = [s.gpu_id for p in d.placements for s in p.shares]
    assert len(ids) == len(set(ids)) == 30
    assert len(d.placements) == 10


def two_to_one_leaves() -> SnapBuilder:
    """Leaves L1 (n1-n3) and L2 (n4-n6) at 2:1: 3 x 400 Gb/s of hosts, 3 x 200 Gb/s (75 GB/s) of uplinks.
    n3 and n6 are busy with single-node jobs, so a 2 x 8 gang must take one node of each leaf."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3}, uplink_gbps=200.0)
    b.leaf("L2", ["n4", "n5", "n6"], {"S1": 3}, uplink_gbps=200.0)
    b.pool(1, "train")
    b.run(30, {"n3": list(range(8))})
    b.run(31, {"n6": list(range(8))})
    return b


def test_a_gang_crossing_a_spine_alone_keeps_its_hca_rate():
    b = two_to_one_leaves()
    b.run(22, {"n2": list(range(8))})  # single-node jobs: they load no uplink
    b.run(23, {"n5": list(range(8))})
    p = place_one(b, gpus=16, nodes=2, gpus_per_node=8)
    assert p.level == "pod" and sorted(p.nodes) == ["n1", "n4"]
    # min(HCA 50, uplinks 75) x 0.96 = 48 GB/s, as inside one leaf: the step is the ideal one but for the
    # extra switch hops' latency.
    assert p.cost["bandwidth_gbs"] == pytest.approx(48.0)
    assert p.cost["slowdown"] == pytest.approx(1.0, abs=1e-3)


def test_a_gang_shares_the_uplinks_with_another_crossing_ring():
    b = two_to_one_leaves()
    b.run(22, {"n2": list(range(8)), "n5": list(range(8))})  # a ring through both leaves' uplinks
    p = place_one(b, gpus=16, nodes=2, gpus_per_node=8)
    assert sorted(p.nodes) == ["n1", "n4"]
    # Beside job 22 on each leaf's uplinks: 75 / 2 x 0.9 (ECMP, two flows) x 0.96 = 32.4 GB/s < 48.
    assert p.cost["bandwidth_gbs"] == pytest.approx(75.0 / 2 * 0.9 * 0.96)


def test_rings_placed_earlier_in_the_round_count():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})  # one 400 Gb/s HCA a node
    b.pool(1, "train")
    b.job(2, gpus=8, nodes=2, gpus_per_node=4)  # 4 + 4 on n1 and n2: the whole HCA each, 50 x 0.96 = 48 GB/s
    b.job(3, gpus=8, nodes=2, gpus_per_node=4)  # the other 4 + 4: shares both HCAs with job 2's ring
    d = schedule(b.snapshot())
    first, second = (d.placement_for(j) for j in (2, 3))
    assert first.cost["bandwidth_gbs"] == pytest.approx(48.0)
    assert second.cost["bandwidth_gbs"] == pytest.approx(50.0 / 2 * 0.96)
