"""Preemption: lower-priority or borrowing preemptible jobs make room, with the fewest victims, freeing a
placement that fits the topology, and never for a job that still would not fit."""

from scheduler.core import schedule
from scheduler.core.placement import Placer
from scheduler.core.preemption import VictimClasses, block_gpus, plan_preemption, unblock_gpus, victim_index
from scheduler.core.state import ClusterState
from scheduler.core.topology import build_topology
from scheduler.core.types import Share
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


# ---------------------------------------------------------------- the planner called directly


def state_of(b):
    return ClusterState(b.snapshot(), build_topology(b.fabric))


def plan(b, job, eligible=lambda jid: True, avoid=frozenset()):
    """The victims plan_preemption picks for `job` (None: no plan), the index built by the call itself."""
    placer = Placer(state_of(b))
    ctx, error = placer.context(job)
    assert error is None
    found = plan_preemption(placer, ctx, eligible, avoid=avoid)
    return None if found is None else found[0]


def one_leaf(hosts, gpus=8, **leaf_kw):
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", hosts, {"S1": 1}, gpus=gpus, **leaf_kw)
    b.pool(1, "train")
    return b


def test_the_victim_index_counts_each_jobs_gpus_per_node():
    b = one_leaf(["n1", "n2"])
    b.run(20, {"n1": [0, 1, 2], "n2": [5, 6]})
    st = state_of(b)
    index = victim_index(st)
    (part,) = st.pool_parts[1]
    assert index == {id(part): {st.nodes["n1"]: {20: 3}, st.nodes["n2"]: {20: 2}}}


def test_the_victim_index_leaves_out_jobs_on_a_down_node_and_outside_every_pool():
    b = one_leaf(["n1", "n2"])
    b.node("n9")  # in no pool
    b.set_node("n2", up=False)
    b.run(20, {"n1": [0]})
    b.run(21, {"n2": [0]})
    b.run(22, {"n9": [0]})
    st = state_of(b)
    (part,) = st.pool_parts[1]
    assert victim_index(st) == {id(part): {st.nodes["n1"]: {20: 1}}}


def victim_classes(st, now=1000.0, min_run_s=300.0):
    """Classes over every running job, each as (priority 10, not borrowing, tenant "t", pool 1, started at 0)
    unless its id says otherwise: 21 started at 800 (young: 100 s left of 300), 22 and 23 belong to tenant "u"."""
    info = {jid: (10, False, "u" if jid in (22, 23) else "t", 1, 800.0 if jid == 21 else 0.0) for jid in st.running}
    return VictimClasses(st, info, now, min_run_s)


def test_victim_classes_group_jobs_by_pool_priority_borrowing_tenant_and_youth():
    b = one_leaf(["n1", "n2"])
    b.run(20, {"n1": [0, 1], "n2": [0]})
    b.run(21, {"n1": [2]})
    b.run(22, {"n2": [1]})
    st = state_of(b)
    (part,) = st.pool_parts[1]
    n1, n2 = st.nodes["n1"], st.nodes["n2"]
    vc = victim_classes(st)
    assert vc.classes == {
        (1, 10, False, "t", False): {id(part): {n1: {20: 2}, n2: {20: 1}}},
        (1, 10, False, "t", True): {id(part): {n1: {21: 1}}},
        (1, 10, False, "u", False): {id(part): {n2: {22: 1}}},
    }
    assert vc.left == {21: 100.0}  # 300 - (1000 - 800)


def test_victim_classes_select_by_class_then_by_job_where_the_class_cannot_say():
    b = one_leaf(["n1", "n2"])
    b.run(20, {"n1": [0, 1]})
    b.run(22, {"n2": [1]})
    b.run(23, {"n2": [2]})
    st = state_of(b)
    ctx, _ = Placer(st).context(b.job(1, gpus=1))
    n1, n2 = st.nodes["n1"], st.nodes["n2"]
    vc = victim_classes(st)
    # Tenant "t"'s class may not give way; "u"'s depends on each job: 22 may, 23 may not.
    now, young_nodes, young = vc.select(
        st,
        ctx,
        lambda pool, prio, borrowed, tenant: None if tenant == "u" else False,
        lambda jid: jid == 22,
        lambda prio: True,
    )
    assert (now, young_nodes, young) == ({n2: {22: 1}}, {}, {})
    # Everyone may: 20 and 23 as well.
    now, _, _ = vc.select(st, ctx, lambda *a: True, lambda jid: False, lambda prio: True)
    assert now == {n1: {20: 2}, n2: {22: 1, 23: 1}}


def test_victim_classes_keep_the_young_apart_while_protected_and_never_offer_a_stopping_job():
    b = one_leaf(["n1", "n2"])
    b.run(20, {"n1": [0]}, stopping=True)
    b.run(21, {"n1": [1]})
    b.run(22, {"n2": [0]})
    st = state_of(b)
    ctx, _ = Placer(st).context(b.job(1, gpus=1))
    n1, n2 = st.nodes["n1"], st.nodes["n2"]
    vc = victim_classes(st)
    everyone = lambda *a: True  # noqa: E731
    now, young_nodes, young = vc.select(st, ctx, everyone, everyone, lambda prio: True)
    assert (now, young_nodes, young) == ({n2: {22: 1}}, {n1: {21: 1}}, {21: 100.0})
    assert VictimClasses.with_young(now, young_nodes) == {n1: {21: 1}, n2: {22: 1}}
    # Not protected (a strictly higher priority, say): the young job may give way now.
    now, young_nodes, young = vc.select(st, ctx, everyone, everyone, lambda prio: False)
    assert (now, young_nodes, young) == ({n1: {21: 1}, n2: {22: 1}}, {}, {})


def test_victim_classes_count_only_the_gpus_a_job_may_take_where_some_are_avoided():
    b = one_leaf(["n1"])
    b.run(20, {"n1": [0, 1, 2]})
    st = state_of(b)
    ctx, _ = Placer(st).context(b.job(1, gpus=1))
    everyone = lambda *a: True  # noqa: E731
    now, _, _ = victim_classes(st).select(st, ctx, everyone, everyone, everyone, avoid={b.gpu_id("n1", 1)})
    assert now == {st.nodes["n1"]: {20: 2}}
    # Every GPU it holds avoided: it frees nothing the job may take.
    avoid = {b.gpu_id("n1", i) for i in range(3)}
    now, _, _ = victim_classes(st).select(st, ctx, everyone, everyone, everyone, avoid=avoid)
    assert now == {}


def test_block_gpus_holds_each_known_gpu_whole_and_unblock_gives_it_back():
    b = one_leaf(["n1"], gpus=2)
    st = state_of(b)
    gid = b.gpu_id("n1", 0)
    blocks = block_gpus(st, [gid, 999])  # 999 is no GPU of the cluster
    assert blocks == [(st.gpus[gid], Share(gid, "whole", 100, 0))]
    assert st.nodes["n1"].n_free == 1
    unblock_gpus(st, blocks)
    assert st.nodes["n1"].n_free == 2


def test_a_plan_without_a_prebuilt_index_builds_its_own():
    b = one_leaf(["n1"])
    b.run(20, {"n1": list(range(8))})
    assert plan(b, b.job(1, gpus=8)) == [20]


# ---------------------------------------------------------------- shared (MPS) GPUs


def mps_nodes(hosts, gpus=1):
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", hosts, {"S1": len(hosts)}, gpus=gpus)
    b.pool(1, "shared", sharing="mps")
    return b


def mps_run(b, jid, host, index, pct, priority=10):
    b.run(jid, {}, shares=[Share(b.gpu_id(host, index), "mps", pct, 1000)], sharing="mps", priority=priority)


def mps_job(b, pct):
    return b.job(1, sharing="mps", mps_compute_pct=pct, mps_memory_mib=1000, priority=100)


def test_the_largest_share_on_a_gpu_goes_first():
    b = mps_nodes(["n1"])
    mps_run(b, 20, "n1", 0, 30)
    mps_run(b, 21, "n1", 0, 60)
    # 10 % free; without job 21's 60 % there is 70 %, enough for 50 %; without job 20's 30 % only 40 %
    assert plan(b, mps_job(b, 50)) == [21]


def test_of_two_equal_shares_the_lower_priority_one_goes():
    b = mps_nodes(["n1"])
    mps_run(b, 20, "n1", 0, 40, priority=50)
    mps_run(b, 21, "n1", 0, 40, priority=10)
    assert plan(b, mps_job(b, 30)) == [21]  # 20 % free, either share gives 60 %


def test_shares_are_removed_until_the_job_fits():
    b = mps_nodes(["n1"])
    for jid in (20, 21, 22):
        mps_run(b, jid, "n1", 0, 30)
    # 10 % free: one share gives 40 %, two give 70 %, enough for 60 %
    assert len(plan(b, mps_job(b, 60))) == 2


def test_a_gpu_needing_fewer_victims_wins_over_a_lower_gpu_id():
    b = mps_nodes(["n1", "n2"])
    mps_run(b, 20, "n1", 0, 45)
    mps_run(b, 21, "n1", 0, 45)
    mps_run(b, 22, "n2", 0, 90)
    # n1's GPU (the lower id) needs both its 45 % shares gone for 60 %, n2's only the one 90 %
    assert plan(b, mps_job(b, 60)) == [22]


def test_equal_plans_on_two_gpus_go_to_the_lower_gpu_id():
    b = mps_nodes(["n1", "n2"])
    mps_run(b, 20, "n2", 0, 80)  # first in the snapshot, on the higher GPU id
    mps_run(b, 21, "n1", 0, 80)
    assert plan(b, mps_job(b, 50)) == [21]


def test_only_eligible_jobs_shares_are_removed():
    b = mps_nodes(["n1"])
    mps_run(b, 20, "n1", 0, 50, priority=200)
    mps_run(b, 21, "n1", 0, 30)
    # 20 % free; without job 21 there is 50 %, enough for 40 %
    assert plan(b, mps_job(b, 40), eligible=lambda jid: jid == 21) == [21]


def test_no_plan_when_removing_every_victim_share_is_not_enough():
    b = mps_nodes(["n1"])
    mps_run(b, 20, "n1", 0, 60, priority=200)
    mps_run(b, 21, "n1", 0, 30)
    # without job 21 only 40 % is free, the job asks 50 %
    assert plan(b, mps_job(b, 50), eligible=lambda jid: jid == 21) is None


def test_hopeless_gpus_take_no_place_among_the_plans_tried():
    b = mps_nodes(["n1"], gpus=5)
    for i in range(4):  # GPUs 0-3: a 60 % share that stays, so 40 % at most for a 50 % job
        mps_run(b, 30 + i, "n1", i, 60, priority=200)
        mps_run(b, 20 + i, "n1", i, 30)
    mps_run(b, 24, "n1", 4, 40)
    mps_run(b, 25, "n1", 4, 40)
    got = plan(b, mps_job(b, 50), eligible=lambda jid: jid < 30)
    assert got is not None and len(got) == 1 and got[0] in (24, 25)


def test_a_shared_gpu_to_avoid_is_not_freed():
    b = mps_nodes(["n1"], gpus=2)
    mps_run(b, 20, "n1", 0, 80)  # GPU 0: one victim would do, but it is to be avoided
    mps_run(b, 21, "n1", 1, 45)
    mps_run(b, 22, "n1", 1, 45)
    got = plan(b, mps_job(b, 60), avoid={b.gpu_id("n1", 0)})
    assert got == [21, 22]


# ---------------------------------------------------------------- exclusive GPUs, directly

HALVES = [(0, 1, 2, 3), (4, 5, 6, 7)]  # two NVLink islands of four GPUs


def split_nodes_then_a_good_one(bad: int):
    """`bad` nodes n1... whose one victim (20...) frees no island, then a node whose victim 30 frees one;
    every plan costs one victim of 4 GPUs at the default priority, so the plans go by hostname. The jobs
    40... keep the other GPUs (the tests make only jobs below 40 eligible)."""
    hosts = [f"n{i + 1}" for i in range(bad + 1)]
    b = one_leaf(hosts, islands=HALVES)
    for i in range(bad):
        b.run(20 + i, {hosts[i]: [2, 3, 4, 5]})
        b.run(40 + i, {hosts[i]: [0, 1, 6, 7]})
    b.run(30, {hosts[bad]: [0, 1, 2, 3]})
    b.run(49, {hosts[bad]: [4, 5, 6, 7]})
    return b


def island_job(b):
    return b.job(1, gpus=4, require="island", priority=100)


def test_the_fourth_cheapest_plan_is_still_tried():
    b = split_nodes_then_a_good_one(bad=3)
    assert plan(b, island_job(b), eligible=lambda jid: jid < 40) == [30]


def test_no_more_than_four_plans_are_tried():
    b = split_nodes_then_a_good_one(bad=4)
    assert plan(b, island_job(b), eligible=lambda jid: jid < 40) is None


def test_a_single_node_job_skips_a_node_free_enough_by_count_for_one_that_frees_an_island():
    b = one_leaf(["n1", "n2"], islands=HALVES)
    b.run(40, {"n1": [0, 1, 6, 7]})  # n1: GPUs 2-5 free, four but no island of four
    b.run(30, {"n2": [0, 1, 2, 3]})
    b.run(41, {"n2": [4, 5, 6, 7]})
    assert plan(b, island_job(b), eligible=lambda jid: jid < 40) == [30]


def test_several_victims_clear_a_node_largest_first():
    b = one_leaf(["n1"])
    b.run(20, {"n1": [0, 1, 2, 3, 4]})
    b.run(21, {"n1": [5]})
    b.run(22, {"n1": [6, 7]})
    # no single job frees 7 GPUs; 5 + 2 does, with two jobs (the smallest first would take all three)
    assert plan(b, b.job(1, gpus=7)) == [20, 22]


def test_victims_that_exactly_free_the_gpus_needed_are_enough():
    b = one_leaf(["n1"])
    b.run(20, {"n1": [0, 1, 2, 3]})
    b.run(21, {"n1": [4, 5, 6, 7]})
    assert plan(b, b.job(1, gpus=8)) == [20, 21]


def test_a_gang_is_cleared_with_its_own_shape():
    b = one_leaf(["n1", "n2", "n3", "n4"])
    for i, h in enumerate(["n1", "n2", "n3", "n4"]):
        b.run(20 + i, {h: [0, 1, 2, 3]})
        b.run(30 + i, {h: [4]})  # GPUs 5-7 free
    # 4 nodes x 4 GPUs: one more GPU per node, the 1-GPU jobs; as 2 nodes x 8 it would be other victims
    assert plan(b, b.job(1, gpus=16, gpus_per_node=4)) == [30, 31, 32, 33]


def full_leaves(prio):
    """Two leaves of two nodes; each node held whole by one job (20 + i on n(i+1)) of the given priority."""
    b = two_leaves()
    b.pool(1, "train")
    for i, p in enumerate(prio):
        b.run(20 + i, {f"n{i + 1}": list(range(8))}, priority=p)
    return b


def test_a_gang_keeps_to_one_leaf_even_when_two_leaves_have_cheaper_nodes():
    b = full_leaves([10, 40, 20, 30])
    # L1 costs priorities 10 and 40, L2 20 and 30: L2 wins (max 30 < 40); n1 + n3 (10, 20) would cross
    assert plan(b, b.job(1, gpus=16)) == [22, 23]


def test_a_gang_of_two_nodes_within_one_node_size_frees_two_nodes():
    b = one_leaf(["n1", "n2"])
    b.run(20, {"n1": list(range(8))}, priority=10)
    b.run(21, {"n2": list(range(8))}, priority=20)
    assert plan(b, b.job(1, gpus=8, nodes=2)) == [20, 21]  # 2 x 4 GPUs: one free node is not enough


def test_a_gang_leaves_out_a_free_node_cut_off_from_the_fabric():
    b = two_leaves(hosts_per_leaf=1)
    b.node("n9")  # in the fabric, no link: unreachable
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))})
    b.run(21, {"n2": list(range(8))})
    assert plan(b, b.job(1, gpus=16)) == [20, 21]


def test_a_victims_gpus_to_avoid_count_for_nothing():
    b = one_leaf(["n1"])
    b.run(20, {"n1": [0, 1, 2, 3]})  # all on GPUs to avoid: freeing it frees nothing usable
    b.run(21, {"n1": [4, 5]})
    b.run(22, {"n1": [6, 7]})
    avoid = {b.gpu_id("n1", i) for i in range(4)}
    assert plan(b, b.job(1, gpus=4), avoid=avoid) == [21, 22]


def test_the_placement_checked_keeps_off_the_gpus_to_avoid():
    b = one_leaf(["n1"])
    b.run(20, {"n1": list(range(8))})
    avoid = {b.gpu_id("n1", i) for i in range(4)}
    placer = Placer(state_of(b))
    ctx, _ = placer.context(b.job(1, gpus=4))
    victims, cand = plan_preemption(placer, ctx, lambda jid: True, avoid=avoid)
    ((node, mask),) = cand.picks
    assert victims == [20]
    assert {g.id for g in node.gpus if g.bit & mask} == {b.gpu_id("n1", i) for i in range(4, 8)}


def test_a_single_node_job_tries_the_next_node_when_the_cheapest_cannot_take_it():
    b = one_leaf(["n1", "n2"])
    b.set_node("n1", cpu_milli=1000)  # too few CPUs for the job, whatever is freed
    b.run(20, {"n1": list(range(8))}, priority=10)
    b.run(21, {"n2": list(range(8))}, priority=20)
    assert plan(b, b.job(1, gpus=8, host_cpu_milli=4000)) == [21]


def test_equal_plans_on_two_nodes_go_to_the_hostname_that_sorts_first():
    b = one_leaf(["n2", "n1"])
    b.run(20, {"n2": list(range(8))})  # first in the snapshot, and the lower job id
    b.run(21, {"n1": list(range(8))})
    assert plan(b, b.job(1, gpus=8)) == [21]


def test_a_gang_takes_the_cheapest_nodes_of_its_leaf():
    b = one_leaf(["n1", "n2", "n3"])
    for i, p in enumerate([30, 10, 20]):
        b.run(20 + i, {f"n{i + 1}": list(range(8))}, priority=p)
    assert plan(b, b.job(1, gpus=16)) == [21, 22]  # priorities 10 and 20


def test_equal_nodes_of_a_leaf_go_to_the_hostnames_that_sort_first():
    b = one_leaf(["n3", "n1", "n2"])
    for jid, h in [(20, "n3"), (21, "n2"), (22, "n1")]:
        b.run(jid, {h: list(range(8))})
    assert plan(b, b.job(1, gpus=16)) == [21, 22]  # n1 and n2


def test_victim_classes_count_a_job_again_where_the_state_gave_it_other_gpus():
    # The per-node counts are kept with the state (ClusterState.held_nodes) while a job's GPUs are the same list: a
    # kept index gives a job that moved a new one, and the next classes count it where it is now.
    b = one_leaf(["n1", "n2"])
    b.run(20, {"n1": [0, 1]})
    b.run(21, {"n1": [2]})
    st = state_of(b)
    (part,) = st.pool_parts[1]
    n1, n2 = st.nodes["n1"], st.nodes["n2"]
    assert victim_classes(st).classes[(1, 10, False, "t", False)] == {id(part): {n1: {20: 2}}}
    # Job 20 now on n2 (as ClusterState.advance hands a job whose shares changed: another list).
    st.job_gpus[20] = [(g, sh) for (_, sh), g in zip(st.job_gpus[20], n2.gpus[:2], strict=True)]
    assert victim_classes(st).classes[(1, 10, False, "t", False)] == {id(part): {n2: {20: 2}}}


def test_a_gang_counts_a_node_free_already_beside_a_node_to_clear():
    # A node free already has no victims and costs nothing: it is one of the gang's nodes, and its leaf wins.
    b = full_leaves([10, 10, 10, 10])
    b.running = [rj for rj in b.running if rj.request.id != 20]  # n1 (leaf L1) free
    for g in range(8):
        b.set_gpu("n1", g, exclusive_job=None)
    assert plan(b, b.job(1, gpus=16)) == [21]  # n1 + n2, not n3 + n4 (two victims)
