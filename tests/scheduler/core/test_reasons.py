"""Every pending job gets a reason a person understands; the texts are exact."""

import pytest

from scheduler.core import reasons, schedule
from tests.scheduler.core.builders import SnapBuilder, two_leaves


def leaves_l1_to_l3() -> SnapBuilder:
    """L1, L2, L3 under S1; two 8-GPU nodes each; 4 GPUs busy on one node of each leaf (12 free per leaf)."""
    b = SnapBuilder()
    b.spine("S1")
    for i in range(1, 4):
        b.leaf(f"L{i}", [f"n{i}a", f"n{i}b"], {"S1": 2})
    b.pool(1, "train")
    b.run(20, {"n1a": [0, 1, 2, 3]}, est_runtime_s=3600.0)
    b.run(21, {"n2a": [0, 1, 2, 3, 4, 5]}, est_runtime_s=3600.0)
    b.run(22, {"n3a": [0, 1, 2, 3]}, est_runtime_s=3600.0)
    return b


def reason_of(b: SnapBuilder, jid: int = 1, **job) -> str:
    b.job(jid, **job)
    return schedule(b.snapshot()).pending_reasons[jid]


def test_leaf_reason_from_the_issue():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=16, require="leaf").startswith(
        "needs 16 GPUs in one leaf; largest free block is 12 in leaf L1"
    )


def test_leaf_reason_names_the_leaf_with_the_most_room():
    b = SnapBuilder()
    b.spine("S1")
    for i in range(1, 4):
        b.leaf(f"L{i}", [f"n{i}a", f"n{i}b"], {"S1": 2})
    b.pool(1, "train")
    b.run(20, {"n1a": list(range(8))})
    b.run(21, {"n2a": list(range(8))})
    b.run(22, {"n3a": [0, 1, 2, 3]})
    assert reason_of(b, gpus=16, require="leaf").startswith(
        "needs 16 GPUs in one leaf; largest free block is 12 in leaf L3"
    )


def test_node_reason():
    b = leaves_l1_to_l3()
    b.run(23, {"n1b": [0, 1]})
    b.run(24, {"n2b": [0, 1]})
    b.run(25, {"n3b": [0, 1]})
    assert reason_of(b, gpus=8, nodes=1).startswith("needs 8 GPUs on one node; largest free block is 6 on n1b")


def test_island_reason():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.pool(1, "train")
    b.run(20, {"n1": [0, 4]})
    assert reason_of(b, gpus=4, require="island").startswith(
        "needs 4 GPUs in one NVLink island; largest free block is 3 on n1"
    )


def test_shape_reason():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=32, gpus_per_node=8).startswith(
        "needs 4 nodes with 8 GPUs free each; 3 nodes have that many free in pool 'train'"
    )


def test_total_reason():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=40).startswith("needs 40 GPUs; 34 free in pool 'train'")


def test_unknown_pool():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=1, pool=7) == "pool 7 does not exist"


def test_shape_that_does_not_add_up():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=10, nodes=2, gpus_per_node=4) == "shape 2 nodes x 4 GPUs does not make 10 GPUs"


def test_uneven_split():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=10, nodes=3) == "10 GPUs do not split evenly over 3 nodes"


def test_no_matching_model():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=1, gpu_model="B200") == "no B200 GPUs in pool 'train'"


def test_no_gpu_with_enough_memory():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=1, gpu_memory_mib=200_000) == "no GPUs with at least 200000 MiB in pool 'train'"


def test_node_too_small_for_the_shape():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=16, nodes=1) == "needs 16 GPUs on one node; nodes in pool 'train' have 8"


def test_never_fits():
    b = leaves_l1_to_l3()
    assert reason_of(b, gpus=64) == "needs 64 GPUs; pool 'train' has only 48 healthy GPUs on schedulable nodes"


def test_every_pending_job_gets_a_reason_or_a_placement():
    b = two_leaves()
    b.pool(1, "train")
    b.tenant("capped", {1: (2, 0)})
    for j in range(1, 40):
        b.job(j, gpus=(j % 5) + 1, tenant="capped" if j % 7 == 0 else "t", priority=(j * 37) % 101)
    d = schedule(b.snapshot())
    placed = {p.job_id for p in d.placements}
    assert placed | set(d.pending_reasons) == set(range(1, 40))
    assert not placed & set(d.pending_reasons)
    assert all(r and r[0].islower() for r in d.pending_reasons.values())


def test_duration_wording():
    assert reasons.duration(30) == "30 s"
    assert reasons.duration(3000) == "50 min"
    assert reasons.duration(4 * 3600 + 600) == "4 h 10 min"
    assert reasons.duration(3 * 86400) == "3 days"


def test_number_wording():
    assert reasons.num(32.0) == "32" and reasons.num(0.3) == "0.3" and reasons.num(1 / 3) == "0.33"
    assert reasons.gpus(1) == "1 GPU" and reasons.gpus(2) == "2 GPUs"


def test_job_lists_are_short():
    assert reasons.job_list([3, 1]) == "jobs 1, 3"
    assert reasons.job_list(list(range(10))) == "jobs 0, 1, 2, 3, 4, 5, 6, 7 and 2 more"


# ---------------------------------------------------------------- the sentences themselves, called directly


def test_duration_of_a_wait_already_past_reads_zero_seconds():
    assert reasons.duration(0) == "0 s"
    assert reasons.duration(-5) == "0 s"


def test_duration_is_in_seconds_below_ninety_seconds():
    assert reasons.duration(89) == "89 s"
    # 90 s = 1.5 min, rounded half to even: 2 min
    assert reasons.duration(90) == "2 min"


def test_duration_is_in_minutes_below_ninety_minutes():
    assert reasons.duration(89 * 60) == "89 min"
    # 90 min = 1 h 30 min
    assert reasons.duration(90 * 60) == "1 h 30 min"


def test_duration_is_in_hours_below_two_days():
    assert reasons.duration(47 * 3600) == "47 h"
    assert reasons.duration(48 * 3600) == "2 days"


def test_duration_of_a_month_counts_days():
    assert reasons.duration(30 * 86400) == "30 days"


def test_job_list_of_eight_names_them_all():
    assert reasons.job_list(list(range(1, 9))) == "jobs 1, 2, 3, 4, 5, 6, 7, 8"


def test_job_list_of_nine_names_eight_and_counts_the_rest():
    assert reasons.job_list(list(range(1, 10))) == "jobs 1, 2, 3, 4, 5, 6, 7, 8 and 1 more"


def test_no_gpus_asked():
    assert reasons.no_gpus_asked() == "the job asks for no GPUs"


def test_uneven_split_per_node():
    assert reasons.bad_shape(10, None, 4) == "10 GPUs do not split evenly into 4 per node"


def test_island_too_small():
    assert reasons.island_too_small(6, "train", 4) == (
        "needs 6 GPUs in one NVLink island; the largest island in pool 'train' has 4"
    )


def test_mig_job_without_a_profile():
    assert reasons.mig_missing_profile() == "a MIG job needs a MIG profile"


@pytest.mark.parametrize(
    ("sentence", "need", "where", "text"),
    [
        (reasons.node_block, 4, "n1", "needs 4 GPUs on one node; no node has a free GPU"),
        (reasons.island_block, 4, "n1", "needs 4 GPUs in one NVLink island; no node has a free GPU"),
        (reasons.leaf_block, 16, "leaf L1", "needs 16 GPUs in one leaf; no leaf has a free GPU"),
        (reasons.pod_block, 64, "pod P1", "needs 64 GPUs in one pod; no pod has a free GPU"),
    ],
    ids=["node", "island", "leaf", "pod"],
)
def test_a_block_with_no_free_gpu_anywhere_says_so(sentence, need, where, text):
    assert sentence(need, 0, where) == text


@pytest.mark.parametrize(
    ("sentence", "need", "where", "text"),
    [
        (reasons.node_block, 4, "n1", "needs 4 GPUs on one node; largest free block is 1 on n1"),
        (reasons.island_block, 4, "n1", "needs 4 GPUs in one NVLink island; largest free block is 1 on n1"),
        (reasons.leaf_block, 16, "leaf L1", "needs 16 GPUs in one leaf; largest free block is 1 in leaf L1"),
        (reasons.pod_block, 64, "pod P1", "needs 64 GPUs in one pod; largest free block is 1 in pod P1"),
    ],
    ids=["node", "island", "leaf", "pod"],
)
def test_a_block_with_a_single_free_gpu_names_where_it_is(sentence, need, where, text):
    assert sentence(need, 1, where) == text


def test_shape_block_with_one_node_of_room_is_singular():
    assert reasons.shape_block(4, 8, 1, "train") == (
        "needs 4 nodes with 8 GPUs free each; 1 node has that many free in pool 'train'"
    )


def test_unreachable_nodes():
    assert reasons.unreachable_nodes(16, "train") == (
        "needs 16 GPUs on several nodes; too few nodes in pool 'train' are on the fabric"
    )


def test_host_block_with_one_node_of_gpu_room_is_singular():
    assert reasons.host_block(2000, 0, "train", 1) == (
        "needs 2 CPUs on each node; the 1 node of pool 'train' with room for its GPUs has too little of it left"
    )


def test_shared_node_full():
    assert reasons.shared_node_full(2, "MPS", "infer") == (
        "needs 2 GPUs with room for a MPS share on one node; none in pool 'infer'"
    )


def test_gpu_gone():
    assert reasons.gpu_gone(17) == "GPU 17 is no longer in the inventory"
