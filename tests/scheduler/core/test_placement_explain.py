"""What a placement says about itself: Placer.commit's Placement (shares, nodes, borrowed, host resources), its
cost terms (cost_dict) and its one-line explanation, each string and number worked out by hand from CostParams'
defaults (a training step: 0.1 s of compute on an H100, 1 GiB all-reduced; NVLink 900 x 0.53 = 477 GB/s)."""

from scheduler.core.placement import Placer, RingLoad
from scheduler.core.state import ClusterState
from scheduler.core.topology import build_topology
from scheduler.core.types import Share
from tests.scheduler.core.builders import SnapBuilder, config, two_pods

NO_MIX = config(fragmentation_max_classes=0)


def one_node(sharing: str = "exclusive", replicas: int = 1, gpus: int = 2, **node_kw) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=gpus, **node_kw)
    b.pool(1, "p", sharing=sharing, replicas=replicas)
    return b


def commit(b: SnapBuilder, job, cfg=NO_MIX, **kw):
    """(placer, ctx, candidate, Placement) for `job` (already added to b), committed to a fresh state."""
    placer = Placer(ClusterState(b.snapshot(cfg), build_topology(b.fabric)))
    ctx, error = placer.context(job)
    assert error is None, error
    cand = placer.find(ctx)
    assert cand is not None, placer.fail_reason(ctx)
    return placer, ctx, cand, placer.commit(job, ctx, cand, **kw)


# ---------------------------------------------------------------- commit


def test_commit_is_not_borrowed_unless_told():
    b = one_node()
    job = b.job(1, gpus=1)
    *_, p = commit(b, job)
    assert p.borrowed is False


def test_commit_passes_borrowed_on():
    b = one_node()
    job = b.job(1, gpus=1)
    *_, p = commit(b, job, borrowed=True)
    assert p.borrowed is True


def test_commit_holds_a_shared_job_on_its_node():
    # Two time-sliced GPUs of n1: one node named once, both shares held (1 replica used on each).
    b = one_node("timeslice", replicas=2)
    job = b.job(1, gpus=2, sharing="timeslice")
    placer, _, _, p = commit(b, job)
    assert p.nodes == ("n1",)
    ids = [b.gpu_id("n1", 0), b.gpu_id("n1", 1)]
    assert sorted(sh.gpu_id for sh in p.shares) == ids
    assert [placer.state.gpus[i].ts_used for i in ids] == [1, 1]


def test_commit_holds_whole_gpus_at_full_compute():
    b = one_node()
    job = b.job(1, gpus=2)
    placer, _, _, p = commit(b, job)
    assert p.shares == (
        Share(b.gpu_id("n1", 0), "whole", 100, 81920),
        Share(b.gpu_id("n1", 1), "whole", 100, 81920),
    )
    assert placer.state.nodes["n1"].n_free == 0


def test_commit_charges_host_resources_once_per_node():
    # 2 time-sliced GPUs on n1, the job asks 1000 millicores and 2048 MiB per node: the first share carries
    # them, the second none; n1 keeps 8000 - 1000 = 7000 millicores and 65536 - 2048 = 63488 MiB.
    b = one_node("timeslice", replicas=2)
    b.set_node("n1", cpu_milli=8000, memory_mib=65536)
    job = b.job(1, gpus=2, sharing="timeslice", host_cpu_milli=1000, host_memory_mib=2048)
    placer, _, _, p = commit(b, job)
    assert [(sh.host_cpu_milli, sh.host_memory_mib) for sh in p.shares] == [(1000, 2048), (0, 0)]
    n1 = placer.state.nodes["n1"]
    assert (n1.cpu_free, n1.mem_free) == (7000, 63488)


def test_commit_charges_host_resources_of_whole_gpus_once_per_node():
    b = one_node(gpus=4)
    b.set_node("n1", cpu_milli=8000)
    job = b.job(1, gpus=3, host_cpu_milli=500)
    placer, _, _, p = commit(b, job)
    assert [sh.host_cpu_milli for sh in p.shares] == [500, 0, 0]
    assert placer.state.nodes["n1"].cpu_free == 7500


# ---------------------------------------------------------------- cost terms and explanation of shared GPUs


def test_cost_of_a_single_shared_gpu():
    # Idle GPU, one replica of two used by nobody: compute 0.1 s = ideal, no all-reduce, no storage,
    # fragmentation 0.01 x 0 / 2 = 0.
    b = one_node("timeslice", replicas=2)
    job = b.job(1, sharing="timeslice")
    *_, p = commit(b, job)
    assert p.cost == {
        "comm_s": 0.0,
        "compute_s": 0.1,
        "io_s": 0.0,
        "step_s": 0.1,
        "ideal_step_s": 0.1,
        "slowdown": 1.0,
        "fragmentation": 0.0,
        "bandwidth_gbs": None,
        "level": "island",
    }


def test_explain_an_mps_share():
    b = one_node("mps")
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "mps", 60, 20000)], sharing="mps")
    job = b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=10000)
    *_, p = commit(b, job)
    assert p.explanation == "MPS 30% / 10000 MiB on GPU 1 on n1; step 1.00x ideal"


def test_explain_a_mig_share():
    # An empty H100: 2g.20gb may start at 0, 2 or 4; at 4 it leaves slices 0-3 for a 4g.40gb (the largest
    # profile still placeable), so slice 4.
    b = one_node("mig", gpus=1)
    job = b.job(1, sharing="mig", mig_profile="2g.20gb")
    *_, p = commit(b, job)
    assert p.explanation == "MIG 2g.20gb at slice 4 on GPU 0 on n1; step 1.00x ideal"


def test_explain_a_timeslice_share():
    b = one_node("timeslice", replicas=3, gpus=1)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "timeslice", 33, 0, None, None, 0)], sharing="timeslice")
    job = b.job(1, sharing="timeslice")
    *_, p = commit(b, job)
    assert p.explanation == "time-slice replica 1 on GPU 0 on n1; step 1.00x ideal"


def test_explain_a_shared_job_on_several_gpus():
    b = one_node("timeslice", replicas=2)
    job = b.job(1, gpus=2, sharing="timeslice")
    *_, p = commit(b, job)
    assert p.explanation == "time-slice replica 0 on 2 GPUs on n1; step 1.00x ideal"


# ---------------------------------------------------------------- explanation of whole GPUs on one node


def test_explain_one_gpu_in_an_island():
    b = one_node()
    job = b.job(1, gpus=1)
    *_, p = commit(b, job)
    assert p.explanation == "1 GPU in one NVLink island on n1; step 1.00x ideal"


def test_explain_gpus_in_one_island_with_their_all_reduce_bandwidth():
    b = one_node()
    job = b.job(1, gpus=2)
    *_, p = commit(b, job)
    assert p.explanation == "2 GPUs in one NVLink island on n1 (all-reduce 477 GB/s); step 1.00x ideal"


# ---------------------------------------------------------------- rings: only multi-node jobs load the HCAs


def two_nodes() -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.pool(1, "p")
    return b


def test_commit_of_a_one_node_job_adds_no_ring():
    b = two_nodes()
    job = b.job(1, gpus=8)
    placer, *_ = commit(b, job)
    load = placer.ring_load()
    assert load.nodes == {} and load.of_job == {}


def test_commit_of_a_two_node_job_adds_its_ring_on_both_nodes():
    # 16 GPUs = n1 + n2 under one leaf: one ring on each node's HCAs, none on uplinks (one leaf).
    b = two_nodes()
    job = b.job(1, gpus=16)
    placer, *_ = commit(b, job)
    load = placer.ring_load()
    assert load.nodes == {"n1": 1, "n2": 1}
    assert load.of_job == {1: (("n1", "n2"), (), ())}


# ---------------------------------------------------------------- the dataset part of an explanation


def with_dataset() -> SnapBuilder:
    """n1 (8 GPUs) and storage node stor1 under one leaf, both with 400 Gb/s = 50 GB/s HCAs."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "stor1"], {"S1": 1})
    b.set_node("stor1", storage=True)
    b.pool(1, "p", hosts=["n1"])
    return b


def test_explain_names_the_dataset_and_its_read_time():
    # 48e9 bytes a step from stor1 at min(50, 50) x 0.96 = 48 GB/s: 1.0 s = 1000 ms; the ideal reads as fast,
    # so the step is 1.00x ideal.
    b = with_dataset()
    job = b.job(1, gpus=8, workload="data-intensive", dataset_node="stor1", io_bytes_per_step=48e9)
    *_, p = commit(b, job)
    assert p.explanation == (
        "8 GPUs in one NVLink island on n1 (all-reduce 477 GB/s); step 1.00x ideal; dataset on stor1 (io 1000 ms/step)"
    )


def test_explain_leaves_out_a_dataset_read_nothing_from():
    # A data-intensive job that reads 0 bytes a step: its dataset costs nothing and is not mentioned.
    b = with_dataset()
    job = b.job(1, gpus=8, workload="data-intensive", dataset_node="stor1", io_bytes_per_step=0)
    *_, p = commit(b, job)
    assert p.explanation == "8 GPUs in one NVLink island on n1 (all-reduce 477 GB/s); step 1.00x ideal"


# ---------------------------------------------------------------- why nothing fitted


def reason(b: SnapBuilder, job, cfg=NO_MIX) -> str:
    placer = Placer(ClusterState(b.snapshot(cfg), build_topology(b.fabric)))
    ctx, error = placer.context(job)
    assert error is None, error
    assert placer.find(ctx) is None
    return placer.fail_reason(ctx)


def test_fail_reason_of_a_multi_gpu_mig_job():
    # GPU 1 holds a 7g.80gb (the whole GPU): only GPU 0 has a 1g.10gb slot, the job needs 2 on one node.
    b = one_node("mig")
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "mig", 100, 81920, "7g.80gb", 0)], sharing="mig")
    job = b.job(1, gpus=2, sharing="mig", mig_profile="1g.10gb")
    assert reason(b, job) == "needs 2 GPUs with room for a MIG share on one node; none in pool 'p'"


def test_fail_reason_of_a_multi_gpu_timeslice_job():
    b = one_node("timeslice", replicas=1)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "timeslice", 100, 0, None, None, 0)], sharing="timeslice")
    job = b.job(1, gpus=2, sharing="timeslice")
    assert reason(b, job) == "needs 2 GPUs with room for a time-slice share on one node; none in pool 'p'"


def test_fail_reason_of_a_pod_job():
    # One pod (L1 and L2 under S1): n1, n2, n4 free, n3 busy: 24 free GPUs in pod 1, the job needs 32 there.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.leaf("L2", ["n3", "n4"], {"S1": 2})
    b.pool(1, "p")
    b.run(9, {"n3": list(range(8))})
    job = b.job(1, gpus=32, require="pod")
    assert reason(b, job) == "needs 32 GPUs in one pod; largest free block is 24 in pod 1"


def test_fail_reason_when_the_free_gpus_are_off_the_fabric():
    # n2 is in the fabric without a cable: 8 + 8 = 16 GPUs free, exactly the 16 asked, but a ring cannot
    # reach n2.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.node("n2")
    b.pool(1, "p")
    job = b.job(1, gpus=16)
    assert reason(b, job) == "needs 16 GPUs on several nodes; too few nodes in pool 'p' are on the fabric"


# ---------------------------------------------------------------- RingLoad: rings per node, leaf and pod


def ring_load(b: SnapBuilder) -> RingLoad:
    return RingLoad(ClusterState(b.snapshot(), build_topology(b.fabric)))


def test_a_ring_through_the_spine_loads_its_leaves_uplinks_not_the_pods():
    b = two_pods()
    b.run(9, {"n1": list(range(8)), "n2": list(range(8))})
    load = ring_load(b)
    assert load.of_job == {9: (("n1", "n2"), (0, 1), ())}
    assert (load.nodes, load.groups, load.pods) == ({"n1": 1, "n2": 1}, {0: 1, 1: 1}, {})


def test_a_ring_through_the_core_loads_its_leaves_and_pods():
    b = two_pods()
    b.run(9, {"n1": list(range(8)), "n3": list(range(8))})
    load = ring_load(b)
    assert load.of_job == {9: (("n1", "n3"), (0, 2), (0, 1))}
    assert (load.nodes, load.groups, load.pods) == ({"n1": 1, "n3": 1}, {0: 1, 2: 1}, {0: 1, 1: 1})


def test_a_ring_inside_one_leaf_loads_only_its_nodes():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.pool(1, "p")
    b.run(9, {"n1": [0], "n2": [0]})
    load = ring_load(b)
    assert load.of_job == {9: (("n1", "n2"), (), ())}


def test_ring_counts_leave_out_the_asking_jobs_own_ring():
    # Jobs 9 (n1 + n3) and 10 (n1 + n2): two rings on n1 and on leaf 0, one on pod 0 and pod 1 (job 9 only).
    b = two_pods()
    b.run(9, {"n1": [0, 1], "n3": [0, 1]})
    b.run(10, {"n1": [2, 3], "n2": [0, 1]})
    load = ring_load(b)
    assert [load.on_node("n1"), load.on_node("n1", own=9), load.on_node("n1", own=11)] == [2, 1, 2]
    assert [load.on_node("n3", own=10), load.on_node("n2", own=10)] == [1, 0]
    assert [load.on_group(0), load.on_group(0, own=10), load.on_group(2, own=10), load.on_group(2, own=9)] == [
        2,
        1,
        1,
        0,
    ]
    assert [load.on_pod(0), load.on_pod(0, own=9), load.on_pod(0, own=10), load.on_pod(1, own=11)] == [1, 0, 1, 1]


def test_a_stopping_job_has_no_ring():
    b = two_pods()
    b.run(9, {"n1": [0], "n3": [0]}, stopping=True)
    load = ring_load(b)
    assert (load.nodes, load.of_job) == ({}, {})


def test_a_ring_to_a_node_in_no_leaf_loads_only_the_known_leaf_and_pod():
    # n0 comes first in the snapshot and has no cable: its group is -1 - 0 = -1 and its pod -1, markers of
    # "no leaf", never uplinks to load. The ring n0 + n1 crosses the fabric: leaf 0 and pod 0 only.
    b = SnapBuilder()
    b.node("n0")
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "p")
    b.run(9, {"n0": [0], "n1": [0]})
    st = ClusterState(b.snapshot(), build_topology(b.fabric))
    assert (st.nodes["n0"].group, st.nodes["n0"].pod) == (-1, -1)
    load = RingLoad(st)
    assert load.of_job == {9: (("n0", "n1"), (0,), (0,))}
    assert (load.groups, load.pods) == ({0: 1}, {0: 1})


def test_fail_reason_of_a_multi_gpu_mps_job():
    b = one_node("mps")
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "mps", 80, 1000)], sharing="mps")
    job = b.job(1, gpus=2, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    assert reason(b, job) == "needs 2 GPUs with room for a MPS share on one node; none in pool 'p'"


def test_fail_reason_of_a_host_job_with_no_gpu_free_is_about_gpus():
    # Both GPUs busy: no node has room for the GPU, so the host CPU is not what blocks it.
    b = one_node()
    b.set_node("n1", cpu_milli=8000)
    b.run(9, {"n1": [0, 1]})
    job = b.job(1, gpus=1, host_cpu_milli=1000)
    assert reason(b, job) == "needs 1 GPU; 0 free in pool 'p'"


def leaf_of_nodes(*hosts: str, **leaf_kw) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", list(hosts), {"S1": len(hosts)}, **leaf_kw)
    b.pool(1, "p")
    return b


def test_fail_reason_of_an_island_job_with_every_gpu_busy():
    b = leaf_of_nodes("n1", islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.run(9, {"n1": list(range(8))})
    job = b.job(1, gpus=4, require="island")
    assert reason(b, job) == "needs 4 GPUs in one NVLink island; no node has a free GPU"


def test_fail_reason_of_an_island_job_counts_a_single_free_gpu():
    b = leaf_of_nodes("n1", islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.run(9, {"n1": [1, 2, 3, 4, 5, 6, 7]})
    job = b.job(1, gpus=4, require="island")
    assert reason(b, job) == "needs 4 GPUs in one NVLink island; largest free block is 1 on n1"


def test_fail_reason_of_an_island_job_names_the_first_of_equal_blocks():
    # n1 and n2 each have GPUs 1, 2, 3 of island {0..3} free (3 in their bucket, an odd count): n1 first.
    b = leaf_of_nodes("n1", "n2", islands=[(0, 1, 2, 3), (4, 5, 6, 7)])
    b.run(9, {"n1": [0, 4, 5, 6, 7]})
    b.run(10, {"n2": [0, 4, 5, 6, 7]})
    job = b.job(1, gpus=4, require="island")
    assert reason(b, job) == "needs 4 GPUs in one NVLink island; largest free block is 3 on n1"


def test_fail_reason_of_a_node_job_with_every_gpu_busy():
    b = leaf_of_nodes("n1")
    b.run(9, {"n1": list(range(8))})
    job = b.job(1, gpus=8, nodes=1)
    assert reason(b, job) == "needs 8 GPUs on one node; no node has a free GPU"


def test_fail_reason_of_a_node_job_counts_a_single_free_gpu():
    b = leaf_of_nodes("n1")
    b.run(9, {"n1": list(range(1, 8))})
    job = b.job(1, gpus=8, nodes=1)
    assert reason(b, job) == "needs 8 GPUs on one node; largest free block is 1 on n1"


def test_fail_reason_of_a_node_job_without_a_shape():
    # require="node" without nodes=: the per-node need is the whole job, 8; n1 has 6 free.
    b = leaf_of_nodes("n1")
    b.run(9, {"n1": [0, 1]})
    job = b.job(1, gpus=8, require="node")
    assert reason(b, job) == "needs 8 GPUs on one node; largest free block is 6 on n1"


def test_fail_reason_of_a_node_job_names_the_first_partition_of_equal_blocks():
    # Pool over an H100 node (n1) and an A100 node (n2), 4 free on each; the job names no model: the H100
    # partition comes first (node order), so n1.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.leaf("L2", ["n2"], {"S1": 1}, model="A100")
    b.pool(1, "p")
    b.run(9, {"n1": [0, 1, 2, 3]})
    b.run(10, {"n2": [0, 1, 2, 3]})
    job = b.job(1, gpus=8, nodes=1)
    assert reason(b, job) == "needs 8 GPUs on one node; largest free block is 4 on n1"


def two_leaves_of_two() -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2})
    b.leaf("L2", ["n3", "n4"], {"S1": 2})
    b.pool(1, "p")
    return b


def test_fail_reason_of_a_leaf_job_counts_every_free_gpu_of_the_leaf():
    # L1: n1 8 + n2 6 = 14 free; L2: n3 2 + n4 0 = 2. A free-shape job may use all 14.
    b = two_leaves_of_two()
    b.run(9, {"n2": [0, 1], "n3": list(range(6)), "n4": list(range(8))})
    job = b.job(1, gpus=16, require="leaf")
    assert reason(b, job) == "needs 16 GPUs in one leaf; largest free block is 14 in leaf L1"


def test_fail_reason_of_a_shaped_leaf_job_counts_whole_nodes_and_names_the_first_leaf():
    # 2 nodes x 8 GPUs: L1 has one node with 8 free (n1; n2 has 6) = 8, L2 one too (n3; n4 busy) = 8:
    # equal, the first leaf is named.
    b = two_leaves_of_two()
    b.run(9, {"n2": [0, 1], "n4": list(range(8))})
    job = b.job(1, gpus=16, gpus_per_node=8, require="leaf")
    assert reason(b, job) == "needs 16 GPUs in one leaf; largest free block is 8 in leaf L1"


def test_fail_reason_of_a_leaf_job_leaves_out_a_node_in_no_leaf():
    # n0 (first in the snapshot, no cable) has 8 free but is in no leaf (group -1); L1's n1 has 4.
    b = SnapBuilder()
    b.node("n0")
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "p")
    b.run(9, {"n1": [0, 1, 2, 3]})
    job = b.job(1, gpus=16, require="leaf")
    assert reason(b, job) == "needs 16 GPUs in one leaf; largest free block is 4 in leaf L1"


# ---------------------------------------------------------------- host CPU: the nodes with room for the GPUs


def test_host_block_counts_the_nodes_with_a_free_gpu_for_a_multi_node_job():
    # 16 GPUs on several nodes, 1000 millicores each; every node's 8000 are held. n1 has 7 GPUs free, n2 1,
    # n3 none: 2 nodes could take a part of the job.
    b = leaf_of_nodes("n1", "n2", "n3")
    for h in ("n1", "n2", "n3"):
        b.set_node(h, cpu_milli=8000)
    b.run(9, {"n1": [0]}, host_cpu_milli=8000)
    b.run(10, {"n2": list(range(7))}, host_cpu_milli=8000)
    b.run(11, {"n3": list(range(8))}, host_cpu_milli=8000)
    job = b.job(1, gpus=16, host_cpu_milli=1000)
    assert reason(b, job) == (
        "needs 1 CPU on each node; the 2 nodes of pool 'p' with room for its GPUs have too little of it left"
    )


def test_host_block_counts_the_nodes_with_the_whole_single_node_job():
    # 4 GPUs on one node: n1 has 2 free (no room), n2 exactly 4: 1 node, whose CPU is held.
    b = leaf_of_nodes("n1", "n2")
    for h in ("n1", "n2"):
        b.set_node(h, cpu_milli=8000)
    b.run(9, {"n1": list(range(6))}, host_cpu_milli=8000)
    b.run(10, {"n2": list(range(4))}, host_cpu_milli=8000)
    job = b.job(1, gpus=4, host_cpu_milli=1000)
    assert reason(b, job) == (
        "needs 1 CPU on each node; the 1 node of pool 'p' with room for its GPUs has too little of it left"
    )


def test_host_block_of_a_shared_job_counts_gpus_that_take_the_share():
    # Time-slicing, 1 replica a GPU: n1's GPU 0 is taken, GPU 1 free; n2 has both taken. A 1-GPU job with
    # host CPU: 1 node (n1) has room for its GPU, and its CPU is held.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=2)
    b.pool(1, "p", sharing="timeslice", replicas=1)
    for h in ("n1", "n2"):
        b.set_node(h, cpu_milli=8000)
    ts = [Share(b.gpu_id("n1", 0), "timeslice", 100, 0, None, None, 0)]
    b.run(9, {}, shares=ts, sharing="timeslice", host_cpu_milli=8000)
    ts2 = [Share(b.gpu_id("n2", i), "timeslice", 100, 0, None, None, 0) for i in (0, 1)]
    b.run(10, {}, shares=ts2, sharing="timeslice", host_cpu_milli=8000)
    job = b.job(1, sharing="timeslice", host_cpu_milli=1000)
    assert reason(b, job) == (
        "needs 1 CPU on each node; the 1 node of pool 'p' with room for its GPUs has too little of it left"
    )


# ---------------------------------------------------------------- explanation of several nodes and of a dataset


def test_explain_a_ring_inside_one_leaf():
    # n1 + n2 under L1: HCAs 400 Gb/s x 0.96 = 48 GB/s, the ideal's rate too: 1.00x.
    b = two_nodes()
    job = b.job(1, gpus=16)
    *_, p = commit(b, job)
    assert p.explanation == "16 GPUs on 2 nodes in leaf L1 (8+8, bottleneck 48 GB/s); step 1.00x ideal"


def test_explain_a_ring_through_a_spine_names_its_pod():
    # n1 (L1) + n2 (L2), both under S1: pod 1 (pods count from 1 in words). Each leaf's one 400 Gb/s uplink
    # carries the ring alone: 48 GB/s like the HCAs; only the latency is a spine's (30 steps x 6 us instead
    # of 5 us: (0.1 + c + 180e-6) / (0.1 + c + 150e-6) = 1.0003 -> 1.00x).
    b = two_pods()
    job = b.job(1, gpus=16)
    *_, p = commit(b, job)
    assert p.explanation == (
        "16 GPUs on 2 nodes across 2 leaves of pod 1 (through the spine) (8+8, bottleneck 48 GB/s); step 1.00x ideal"
    )


def test_explain_a_ring_through_a_spine_in_the_second_pod():
    # Leaves L2 (n2) and L3 (n3) under S2, L1 (n1) alone under S1: the ring n2 + n3 is in pod 2.
    b = SnapBuilder()
    b.core("C1")
    b.spine("S1")
    b.spine("S2")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.leaf("L2", ["n2"], {"S2": 1})
    b.leaf("L3", ["n3"], {"S2": 1})
    b.uplink("S1", "C1")
    b.uplink("S2", "C1")
    b.pool(1, "p")
    b.run(9, {"n1": [0]})
    job = b.job(1, gpus=16)
    *_, p = commit(b, job)
    assert p.nodes == ("n2", "n3")
    assert "across 2 leaves of pod 2 (through the spine)" in p.explanation


def test_explain_a_shared_job_names_its_first_gpus_replica():
    # GPU 0 has replica 0 taken, GPU 1 none: the job gets replica 1 on GPU 0 and replica 0 on GPU 1; the
    # explanation names the first share's.
    b = one_node("timeslice", replicas=2)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "timeslice", 50, 0, None, None, 0)], sharing="timeslice")
    job = b.job(1, gpus=2, sharing="timeslice")
    *_, p = commit(b, job)
    assert [sh.replica for sh in p.shares] == [1, 0]
    assert p.explanation == "time-slice replica 1 on 2 GPUs on n1; step 1.00x ideal"


def test_explain_names_a_dataset_read_one_byte_a_step():
    # 1 byte at 48 GB/s: 2e-11 s, "0 ms", but a dataset all the same.
    b = with_dataset()
    job = b.job(1, gpus=8, workload="data-intensive", dataset_node="stor1", io_bytes_per_step=1)
    *_, p = commit(b, job)
    assert p.explanation.endswith("; dataset on stor1 (io 0 ms/step)")


def test_ring_counts_of_a_node_leaf_and_pod_without_rings_are_zero():
    # One ring, n1 + n2 through S1 (leaves 0 and 1, no pod); n3, leaf 2 and both pods carry none.
    b = two_pods()
    b.run(9, {"n1": [0], "n2": [0]})
    load = ring_load(b)
    assert [load.on_node("n3"), load.on_group(2), load.on_pod(0), load.on_pod(1)] == [0, 0, 0, 0]
    assert [load.on_node("n3", own=9), load.on_group(2, own=9), load.on_pod(0, own=9)] == [0, 0, 0]


def test_fail_reason_of_a_leaf_job_with_every_gpu_busy():
    b = two_leaves_of_two()
    b.run(9, {h: list(range(8)) for h in ("n1", "n2", "n3", "n4")})
    job = b.job(1, gpus=16, require="leaf")
    assert reason(b, job) == "needs 16 GPUs in one leaf; no leaf has a free GPU"


def test_fail_reason_of_a_leaf_job_counts_a_single_free_gpu():
    # Only n1's GPU 7 is free: L1 has 1.
    b = two_leaves_of_two()
    b.run(9, {"n1": list(range(7)), "n2": list(range(8)), "n3": list(range(8)), "n4": list(range(8))})
    job = b.job(1, gpus=16, require="leaf")
    assert reason(b, job) == "needs 16 GPUs in one leaf; largest free block is 1 in leaf L1"


def test_a_ring_is_counted_where_the_state_gave_the_job_other_gpus():
    # Each job's ring is kept with the state (ClusterState.rings) while its GPUs are the same list: a kept index
    # gives a job that moved a new one, and the next count has it where it is now. Job 9 spans n1 and n2 (two leaves
    # of a pod), then n1 and n3 (two pods); job 10 stays on n2 alone, no ring.
    b = two_pods()
    b.run(9, {"n1": [0], "n2": [0]})
    b.run(10, {"n2": [1, 2]})
    st = ClusterState(b.snapshot(), build_topology(b.fabric))
    assert RingLoad(st).of_job == {9: (("n1", "n2"), (0, 1), ())}
    n1, n3 = st.nodes["n1"], st.nodes["n3"]
    st.job_gpus[9] = [(n1.gpus[0], st.job_gpus[9][0][1]), (n3.gpus[0], st.job_gpus[9][1][1])]
    load = RingLoad(st)
    assert load.of_job == {9: (("n1", "n3"), (0, 2), (0, 1))}
    assert (load.nodes, load.groups, load.pods) == ({"n1": 1, "n3": 1}, {0: 1, 2: 1}, {0: 1, 1: 1})
