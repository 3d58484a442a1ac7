"""ClusterState, the per-round view of the cluster: GPU slots, nodes, partitions, free masks, shared-GPU
buckets, host resources, holds and the journal. Tiny clusters (one leaf, one to three nodes), every
expected figure worked by hand in a comment."""

from __future__ import annotations

import pytest

from scheduler.core.state import HOST_UNTRACKED, ClusterState
from scheduler.core.topology import build_topology
from scheduler.core.types import Share
from tests.scheduler.core.builders import SnapBuilder, two_pods


def one_node(sharing: str = "exclusive", replicas: int = 1, gpus: int = 2, model: str = "H100", **node_kw):
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=gpus, model=model)
    if node_kw:
        b.set_node("n1", **node_kw)
    b.pool(1, "shared", sharing=sharing, replicas=replicas)
    return b


def state_of(b: SnapBuilder) -> ClusterState:
    return ClusterState(b.snapshot(), build_topology(b.fabric))


# ----------------------------------------------------------------------------------------- host resources


def test_an_untracked_node_has_the_sentinel_2_to_the_60_left_and_keeps_it():
    # cpu_milli = memory_mib = 0: not tracked. Its "left" is HOST_UNTRACKED = 1 << 60 = 2**60 (what the placer
    # compares against), and taking 4 CPUs / 1000 MiB leaves it there.
    st = state_of(one_node())
    n1 = st.nodes["n1"]
    assert HOST_UNTRACKED == 2**60 == 1_152_921_504_606_846_976
    assert (n1.cpu_free, n1.mem_free) == (2**60, 2**60)
    st.hold_host("n1", 4000, 1000)
    assert (n1.cpu_free, n1.mem_free) == (2**60, 2**60)


def test_a_node_tracking_2_to_the_59_milli_cpus_is_tracked():
    # 2**59 < 2**60 is a real amount: holding 1000 milli-CPU and 5 MiB leaves 2**59 - 1000 and 2**59 - 5.
    st = state_of(one_node(cpu_milli=2**59, memory_mib=2**59))
    st.hold_host("n1", 1000, 5)
    n1 = st.nodes["n1"]
    assert (n1.cpu_free, n1.mem_free) == (2**59 - 1000, 2**59 - 5)


# ----------------------------------------------------------------------------------------- slots


def test_gpus_of_a_mask_lists_the_gpus_of_its_bits_in_order():
    # 4 GPUs at positions 0..3; mask 0b1010 = positions 1 and 3.
    b = one_node(gpus=4)
    st = state_of(b)
    got = st.nodes["n1"].gpus_of(0b1010)
    assert [g.id for g in got] == [b.gpu_id("n1", 1), b.gpu_id("n1", 3)]
    assert st.nodes["n1"].gpus_of(0) == []


def test_reprs_name_the_gpu_the_node_and_the_partition():
    # Debugging aids. GPU ids count from 1 in the builder; one of 2 GPUs held by job 9: 1 of 2 free.
    b = one_node(gpus=2)
    b.run(9, {"n1": [0]})
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 1)]
    assert repr(g) == "<gpu 2 n1:1>"
    assert repr(st.nodes["n1"]) == "<node n1 free=1/2>"
    assert repr(st.nodes["n1"].part) == "<partition shared H100 free=1>"


def test_a_gpu_reporting_a_mig_instance_outside_a_mig_pool_keeps_its_layout():
    # GpuState says a 1g.10gb instance sits at slice 0 (H100 80 GB: 1 memory slice, mask 0b1), though the pool is
    # exclusive: the GPU is not free (7 of 8 left) and its occupied mask is exactly slice 0.
    b = one_node(gpus=8)
    b.set_gpu("n1", 0, mig_used=(("1g.10gb", 0),))
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert g.mig_mask == 0b1
    assert st.nodes["n1"].n_free == 7
    # Its own profiles are known, so another 1g.10gb at slice 1 (mask 0b10) does not overlap and fits.
    assert st.share_fits(g, Share(g.id, "mig", mig_profile="1g.10gb", mig_start=1)) is True
    assert st.share_fits(g, Share(g.id, "mig", mig_profile="1g.10gb", mig_start=0)) is False


def test_a_gpu_without_mig_instances_outside_a_mig_pool_offers_no_mig_slice():
    # Exclusive pool, nothing held: no MIG profiles are loaded for the GPU, so no MIG share fits it.
    b = one_node(gpus=1)
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert g.profiles == {}
    assert st.share_fits(g, Share(g.id, "mig", mig_profile="1g.10gb", mig_start=0)) is False


# ----------------------------------------------------------------------------------------- share_fits


def test_a_whole_share_does_not_fit_a_gpu_with_a_timeslice_replica_held():
    # Time-sliced pool of 4 replicas, 1 used on GPU 0: not empty, so no whole share; GPU 1 is empty: it fits.
    b = one_node("timeslice", replicas=4)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "timeslice", replica=0)], sharing="timeslice")
    st = state_of(b)
    g0, g1 = st.gpus[b.gpu_id("n1", 0)], st.gpus[b.gpu_id("n1", 1)]
    assert st.share_fits(g0, Share(g0.id, "whole")) is False
    assert st.share_fits(g1, Share(g1.id, "whole")) is True


def test_an_mps_share_fits_beside_another_while_compute_and_memory_last():
    # MPS GPU with 30 % and 20000 MiB used: +50 % / 40000 MiB gives 80 % and 60000 <= 81920: fits;
    # +71 % gives 101 % > 100: does not; +10 % with 61921 MiB gives 81921 > 81920: does not.
    b = one_node("mps", gpus=1)
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 30, 20000)], sharing="mps")
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert st.share_fits(g, Share(g.id, "mps", 50, 40000)) is True
    assert st.share_fits(g, Share(g.id, "mps", 70, 40000)) is True  # exactly 100 %
    assert st.share_fits(g, Share(g.id, "mps", 71, 40000)) is False
    assert st.share_fits(g, Share(g.id, "mps", 10, 61920)) is True  # exactly 81920 MiB
    assert st.share_fits(g, Share(g.id, "mps", 10, 61921)) is False


def test_a_timeslice_share_fits_while_replicas_are_left():
    # 2 replicas; one held on GPU 0: 1 < 2, a second fits; with both held (2 < 2 false) no third.
    b = one_node("timeslice", replicas=2, gpus=1)
    gid = b.gpu_id("n1", 0)
    b.run(9, {}, shares=[Share(gid, "timeslice", replica=0)], sharing="timeslice")
    st = state_of(b)
    g = st.gpus[gid]
    sh = Share(gid, "timeslice", replica=1)
    assert st.share_fits(g, sh) is True
    st.hold(g, sh)
    assert st.share_fits(g, Share(gid, "timeslice")) is False


# ----------------------------------------------------------------------------------------- accounting


def test_share_equiv_of_a_timeslice_replica_is_one_over_the_replicas():
    # 4 replicas: one replica is 1 / 4 = 0.25 GPU.
    b = one_node("timeslice", replicas=4, gpus=1)
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert st.share_equiv(g, Share(g.id, "timeslice", replica=0)) == 0.25


def test_share_equiv_of_a_mig_slice_is_its_compute_fraction():
    # H100 80 GB has 7 compute slices: 1g.10gb is 1 / 7, 3g.40gb is 3 / 7.
    b = one_node("mig", gpus=1)
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert st.share_equiv(g, Share(g.id, "mig", mig_profile="1g.10gb", mig_start=0)) == 1 / 7
    assert st.share_equiv(g, Share(g.id, "mig", mig_profile="3g.40gb", mig_start=4)) == 3 / 7


# ----------------------------------------------------------------------------------------- journal


def test_a_nested_journal_mark_rolls_back_only_its_own_changes():
    # Outer level: hold GPU 0 (log length 1). The inner journal() returns that length, 1; holding GPU 1 and
    # rolling back to it frees GPU 1 only: 1 of 2 free. Rolling back the outer level frees GPU 0 too: 2 free.
    b = one_node(gpus=2)
    st = state_of(b)
    g0, g1 = st.gpus[b.gpu_id("n1", 0)], st.gpus[b.gpu_id("n1", 1)]
    outer = st.journal()
    assert outer == 0
    st.hold(g0, Share(g0.id, "whole"))
    inner = st.journal()
    assert inner == 1
    st.hold(g1, Share(g1.id, "whole"))
    assert st.nodes["n1"].n_free == 0
    st.rollback(inner)
    assert st.nodes["n1"].free_mask == 0b10  # GPU 1 back, GPU 0 still held
    st.rollback(outer)
    assert st.nodes["n1"].free_mask == 0b11
    assert st.journal_log is None


def three_full_nodes():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 1}, gpus=2)
    b.pool(1, "shared")
    st = state_of(b)
    for g in st.gpus.values():
        st.hold(g, Share(g.id, "whole"))
    st.touched = set()
    return b, st


def _bucket_names(st, k):
    (part,) = st.partitions.values()
    return [n.name for n in part.buckets[k]]


@pytest.mark.parametrize("bulk", [True, False], ids=["release_many", "one-at-a-time"])
def test_release_many_leaves_the_buckets_in_the_order_one_release_at_a_time_does(bulk):
    # Releases in order n1:0, n2:0, n2:1, n3:0, n1:1 move nodes between the free-count buckets (n1 changes first but
    # comes to 2 free last): n1 0->1: 1 [n1] / n2 0->1: 1 [n1, n2] / n2 1->2: 1 [n1], 2 [n2] / n3 0->1: 1 [n1, n3] /
    # n1 1->2: 1 [n3], 2 [n2, n1].
    b, st = three_full_nodes()
    order = [("n1", 0), ("n2", 0), ("n2", 1), ("n3", 0), ("n1", 1)]
    pairs = [(st.gpus[b.gpu_id(n, i)], Share(b.gpu_id(n, i), "whole")) for n, i in order]
    mark = st.journal()
    if bulk:
        st.release_many(pairs)
    else:
        for g, sh in pairs:
            st.release(g, sh)
    assert _bucket_names(st, 1) == ["n3"]
    assert _bucket_names(st, 2) == ["n2", "n1"]
    assert [(n.name, n.n_free, n.free_mask) for n in st.nodes.values()] == [("n1", 2, 3), ("n2", 2, 3), ("n3", 1, 1)]
    assert [(was_hold, g.id) for was_hold, g, _ in st.journal_log] == [(False, g.id) for g, _ in pairs]
    # Undone in reverse, n1:1 n3:0 n2:1 n2:0 n1:0: n1 2->1: 1 [n3, n1] / n3 1->0: 1 [n1] / n2 2->1: 1 [n1, n2] /
    # n2 1->0: 1 [n1] / n1 1->0: every node full again.
    st.rollback(mark)
    assert [n.n_free for n in st.nodes.values()] == [0, 0, 0]
    assert _bucket_names(st, 1) == [] and _bucket_names(st, 2) == []


def test_a_rollback_leaves_the_buckets_in_the_order_undoing_one_change_at_a_time_does():
    # All free: 2 [n1, n2, n3]. Holds n1:0, n2:0, n2:1, n3:0, n1:1 leave every node full. Undone in reverse:
    # n1:1 n1 0->1: 1 [n1] / n3:0 n3 1->2: 2 [n3] / n2:1 n2 0->1: 1 [n1, n2] / n2:0 n2 1->2: 1 [n1], 2 [n3, n2] /
    # n1:0 n1 1->2: 2 [n3, n2, n1] (the order of each node's last change, not its first).
    b, st = three_full_nodes()
    for g in st.gpus.values():
        st.release(g, Share(g.id, "whole"))
    assert _bucket_names(st, 2) == ["n1", "n2", "n3"]
    mark = st.journal()
    for n, i in [("n1", 0), ("n2", 0), ("n2", 1), ("n3", 0), ("n1", 1)]:
        st.hold(st.gpus[b.gpu_id(n, i)], Share(b.gpu_id(n, i), "whole"))
    st.rollback(mark)
    assert _bucket_names(st, 2) == ["n3", "n2", "n1"]
    assert _bucket_names(st, 1) == []


def test_a_journal_undone_to_its_start_leaves_its_nodes_to_be_read_again_only_if_changed_outside_it():
    # n1 changed before the journal; n2 only inside it, undone: the next advance reads n1 again, not n2.
    b, st = three_full_nodes()
    g1, g2 = st.gpus[b.gpu_id("n1", 0)], st.gpus[b.gpu_id("n2", 0)]
    st.release(g1, Share(g1.id, "whole"))
    mark = st.journal()
    st.release(g2, Share(g2.id, "whole"))
    st.rollback(mark)
    assert {n.name for n in st.touched} == {"n1"}


def test_a_journal_kept_leaves_its_nodes_to_be_read_again():
    b, st = three_full_nodes()
    g2 = st.gpus[b.gpu_id("n2", 0)]
    mark = st.journal()
    st.release(g2, Share(g2.id, "whole"))
    st.keep(mark)
    assert {n.name for n in st.touched} == {"n2"}


def test_a_journal_undone_after_a_share_with_host_resources_leaves_its_nodes_to_be_read_again():
    # Host CPU given back and taken again is not a whole GPU's count: the node is read again, as before journals.
    b, st = three_full_nodes()
    g2 = st.gpus[b.gpu_id("n2", 0)]
    sh = Share(g2.id, "whole", host_cpu_milli=1000)
    st.hold(g2, sh)  # now held twice
    st.touched = set()
    mark = st.journal()
    st.release(g2, sh)
    st.rollback(mark)
    assert {n.name for n in st.touched} == {"n2"}


def test_no_share_fits_an_unhealthy_gpu_a_held_gpu_or_a_drained_node():
    # Three 1-GPU nodes, pool over all: n1's GPU is unhealthy, n2's held whole by job 9, n3 is drained. Each alone
    # rules the GPU out, whatever the share (a whole one here, which an empty GPU would take).
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 1}, gpus=1)
    b.set_gpu("n1", 0, healthy=False)
    b.set_node("n3", schedulable=False)
    b.pool(1, "train")
    b.run(9, {"n2": [0]})
    st = state_of(b)
    for h in ("n1", "n2", "n3"):
        g = st.gpus[b.gpu_id(h, 0)]
        assert st.share_fits(g, Share(g.id, "whole")) is False, h


def test_an_mps_share_does_not_fit_a_gpu_with_a_timeslice_replica_held():
    # GpuState reports one time-slice replica on the GPU (ts_used 1, no MIG): MPS may not join it.
    b = one_node("mps", gpus=1)
    b.set_gpu("n1", 0, timeslice_used=1)
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert st.share_fits(g, Share(g.id, "mps", 10, 1000)) is False


def test_a_mig_share_does_not_fit_a_gpu_running_mps_work():
    # MIG pool, but GpuState reports 10 % MPS compute (no MPS memory, no time-slice) on the GPU: no MIG slice.
    b = one_node("mig", gpus=1)
    b.set_gpu("n1", 0, mps_compute_pct_used=10)
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert st.share_fits(g, Share(g.id, "mig", mig_profile="1g.10gb", mig_start=0)) is False


def test_a_timeslice_share_does_not_fit_a_gpu_running_mps_work():
    # Time-sliced pool of 4, nothing time-sliced yet, but 10 % MPS compute (no memory, no MIG) reported: no replica.
    b = one_node("timeslice", replicas=4, gpus=1)
    b.set_gpu("n1", 0, mps_compute_pct_used=10)
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert st.share_fits(g, Share(g.id, "timeslice", replica=0)) is False


# ----------------------------------------------------------------------------------------- live network


# two_pods() (builders): pod 0 has 800 Gb/s down (two leaf uplinks) and 400 up; pod 1 400 down, 400 up.


def test_an_idle_fabric_leaves_every_host_its_nominal_rate():
    # 400 Gb/s HCA = 50 GB/s; leaves 400 down / 400 up: 1:1; pod 0 has 800 down over 400 up: 2:1, pod 1 1:1.
    st = state_of(two_pods())
    assert [(st.nodes[h].net_gbs, st.nodes[h].nominal_gbs) for h in ("n1", "n2", "n3")] == [(50.0, 50.0)] * 3
    assert [(n.group, n.pod, n.reachable, n.hot, n.err) for n in st.nodes.values()] == [
        (0, 0, True, False, False),
        (1, 0, True, False, False),
        (2, 1, True, False, False),
    ]
    assert st.group_oeff == {0: 1.0, 1: 1.0, 2: 1.0}
    assert st.pod_oeff == {0: 2.0, 1: 1.0}
    assert st.group_hot == {0: False, 1: False, 2: False} and st.pod_hot == {0: False, 1: False}


def test_host_link_utilisation_and_errors_cut_the_nodes_rate():
    # Available fraction a = max(0.05, 1 - u), x 0.25 when erroring; lost = 400 x (1 - a) Gb/s, / 8 in GB/s.
    # n1: u 0.5 -> a 0.5, 200 lost: 50 - 25 = 25 GB/s, not hot (0.5 < 0.8).
    # n2: u 0.8 -> a 0.2, 320 lost: 50 - 40 = 10 GB/s, hot (0.8 >= 0.8, the threshold).
    # n3: u 0.5 erroring -> a 0.125, 350 lost: 50 - 43.75 = 6.25 GB/s, erroring, not hot.
    b = two_pods()
    b.util.update({"n1-L1": 0.5, "n2-L2": 0.8, "n3-L3": 0.5, "nowhere": 0.9})
    b.errors.update({"n3-L3": True, "nowhere": True})
    st = state_of(b)
    assert [(st.nodes[h].net_gbs, st.nodes[h].hot, st.nodes[h].err) for h in ("n1", "n2", "n3")] == [
        (25.0, False, False),
        (10.0, True, False),
        (6.25, False, True),
    ]
    assert [st.nodes[h].nominal_gbs for h in ("n1", "n2", "n3")] == [50.0, 50.0, 50.0]


def test_an_erroring_idle_host_link_is_counted_once():
    # Errors only (no utilisation, or utilisation 0): a = 0.25, 400 x 0.75 = 300 lost: 50 - 37.5 = 12.5 GB/s.
    # n1's link has an explicit utilisation of 0.0, n2's none: the same, counted once each.
    b = two_pods()
    b.util.update({"n1-L1": 0.0})
    b.errors.update({"n1-L1": True, "n2-L2": True, "n3-L3": False})
    st = state_of(b)
    assert [(st.nodes[h].net_gbs, st.nodes[h].err, st.nodes[h].hot) for h in ("n1", "n2", "n3")] == [
        (12.5, True, False),
        (12.5, True, False),
        (50.0, False, False),
    ]


def test_uplink_utilisation_and_errors_raise_the_groups_oversubscription():
    # Each leaf: 400 Gb/s of hosts over one 400 Gb/s uplink.
    # L1-S1 u 0.5: 200 lost, 400 / 200 = 2.0, not hot. L2-S1 u 0.5 erroring: a 0.125, 350 lost, 400 / 50 = 8.0,
    # hot (errors). L3-S2 errors only: 300 lost, 400 / 100 = 4.0, hot.
    b = two_pods()
    b.util.update({"L1-S1": 0.5, "L2-S1": 0.5})
    b.errors.update({"L2-S1": True, "L3-S2": True})
    st = state_of(b)
    assert st.group_oeff == {0: 2.0, 1: 8.0, 2: 4.0}
    assert st.group_hot == {0: False, 1: True, 2: True}
    assert [st.oeff(g) for g in (0, 1, 2)] == [2.0, 8.0, 4.0]


def test_a_busy_uplink_makes_its_group_hot():
    # L1-S1 at u 0.8 (the threshold): a 0.2, 320 lost, 400 / 80 = 5.0, hot; L2-S1 at 0.79: a 0.21, 316 lost,
    # 400 / 84 = 4.76..., not hot.
    b = two_pods()
    b.util.update({"L1-S1": 0.8, "L2-S1": 0.79})
    st = state_of(b)
    assert st.group_hot == {0: True, 1: False, 2: False}
    assert st.group_oeff[0] == 400 / (400 - 400 * (1 - 0.2))
    assert st.group_oeff[1] == 400 / (400 - 400 * (1 - (1 - 0.79)))


def test_pod_uplink_utilisation_and_errors_raise_the_pods_oversubscription():
    # Pod 0: 800 down; S1-C1 u 0.5 -> 200 of 400 lost: 800 / 200 = 4.0, not hot.
    # Pod 1: 400 down; S2-C1 errors only -> 300 lost: 400 / 100 = 4.0, hot.
    b = two_pods()
    b.util.update({"S1-C1": 0.5})
    b.errors.update({"S2-C1": True})
    st = state_of(b)
    assert st.pod_oeff == {0: 4.0, 1: 4.0}
    assert st.pod_hot == {0: False, 1: True}
    assert st.group_oeff == {0: 1.0, 1: 1.0, 2: 1.0}  # the leaves' own uplinks are idle


def test_a_busy_or_erroring_pod_uplink_makes_its_pod_hot():
    # S1-C1 at u 0.8: a 0.2, 320 lost: 800 / 80 = 10.0, hot. S2-C1 at u 0.5 erroring: a 0.125, 350 lost,
    # 400 / 50 = 8.0, hot.
    b = two_pods()
    b.util.update({"S1-C1": 0.8, "S2-C1": 0.5})
    b.errors.update({"S2-C1": True})
    st = state_of(b)
    assert st.pod_oeff == {0: 800 / (400 - 400 * (1 - 0.2)), 1: 8.0}
    assert st.pod_hot == {0: True, 1: True}


def test_a_pod_without_uplinks_has_oversubscription_one():
    # Spine S1 over leaf L1 (n1), no core: pod 0 has 400 Gb/s down and 0 up: 1.0, not 400 / 0 (infinite).
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "p")
    st = state_of(b)
    assert st.pod_oeff == {0: 1.0}


# ----------------------------------------------------------------------------------------- topology helpers


def test_group_level_of_groups_and_nodes_outside_the_fabric():
    # Two pods: groups 0 and 1 under spine S1 (pod level, 3), 0 and 2 only through the core (fabric, 4); a group
    # with itself is the leaf level (2), also a negative one (a node of its own); any negative one with another
    # group: fabric (4).
    st = state_of(two_pods())
    assert st.group_level(0, 0) == 2
    assert st.group_level(-2, -2) == 2
    assert st.group_level(0, 1) == 3
    assert st.group_level(0, 2) == 4
    assert st.group_level(-1, 0) == 4
    assert st.group_level(1, -3) == 4
    assert st.group_level(-1, 2) == 4 and st.group_level(2, -1) == 4  # -1 is not group 2 (the last)


def test_group_label_names_the_leaf_or_no_leaf():
    st = state_of(two_pods())
    assert [st.group_label(g) for g in (0, 2, -1, -4)] == ["leaf L1", "leaf L3", "no leaf", "no leaf"]


def test_oeff_of_an_unknown_group_is_one():
    # A node outside every leaf group (group -1 - i) has no entry: 1.0.
    b = two_pods()
    b.util.update({"L1-S1": 0.5})  # group 0: 400 / 200 = 2.0
    st = state_of(b)
    assert (st.oeff(0), st.oeff(-1), st.oeff(7)) == (2.0, 1.0, 1.0)


# ----------------------------------------------------------------------------------------- building


def test_a_node_in_two_pools_goes_to_the_lower_pool_id_with_a_warning():
    # Pools are read by id: pool 1 (listed second) claims n1 first; pool 2 names it too: warned, ignored.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=1)
    b.pool(2, "b", hosts=["n1", "n2"])
    b.pool(1, "a", hosts=["n1"])
    st = state_of(b)
    assert st.warnings == ["node n1 is in pools 1 and 2; using 1"]
    assert (st.nodes["n1"].pool, st.nodes["n2"].pool) == (1, 2)
    assert [p.key[0] for p in st.pool_parts[1]] == [1] and [p.key[0] for p in st.pool_parts[2]] == [2]


def test_a_node_absent_from_the_fabric_is_reachable_at_its_hca_rate_in_a_group_of_its_own():
    # x1 (the third node, i = 2) is not in the fabric: group -1 - 2 = -3, pod -1, reachable, on no fabric link,
    # at its HCA's 200 Gb/s = 25 GB/s (nominal too).
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=1)
    b.node("x1", gpus=1, hca_gbps=200.0)
    b.fabric.hosts = [h for h in b.fabric.hosts if h.key != "x1"]
    b.pool(1, "p")
    st = state_of(b)
    x1 = st.nodes["x1"]
    assert (x1.group, x1.pod, x1.reachable, x1.off_fabric) == (-3, -1, True, False)
    assert (x1.net_gbs, x1.nominal_gbs) == (25.0, 25.0)
    assert x1.eligible and x1.n_free == 1
    n1 = st.nodes["n1"]
    assert (n1.group, n1.reachable, n1.off_fabric) == (0, True, False)


def test_a_node_in_the_fabric_without_a_live_link_is_cut_off():
    # x1 is a fabric host with no cable: off the fabric, unreachable, 0 GB/s, a group of its own (i = 1: -2).
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=1)
    b.node("x1", gpus=1, hca_gbps=200.0)
    b.pool(1, "p")
    st = state_of(b)
    x1 = st.nodes["x1"]
    assert (x1.group, x1.pod, x1.reachable, x1.off_fabric) == (-2, -1, False, True)
    assert (x1.net_gbs, x1.nominal_gbs) == (0.0, 0.0)


def test_only_an_up_schedulable_pooled_node_with_gpus_is_eligible():
    # n1 fine; n2 down; n3 drained; n4 in no pool; st1 a storage node (no GPU) in the pool.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3", "n4"], {"S1": 4}, gpus=2)
    b.node("st1", gpus=0)
    b.set_node("n2", up=False)
    b.set_node("n3", schedulable=False)
    b.pool(1, "p", hosts=["n1", "n2", "n3", "st1"])
    st = state_of(b)
    assert [h for h, n in st.nodes.items() if n.eligible] == ["n1"]
    assert [st.nodes[h].part is not None for h in ("n1", "n2", "n3", "n4", "st1")] == [True, True, True, False, False]
    # Capacity counts eligible nodes' healthy GPUs only: n1's 2. Free GPUs likewise.
    part = st.nodes["n1"].part
    assert (part.cap_total, part.free_total, part.gcap, part.gfree) == (2, 2, {0: 2}, {0: 2})
    assert (st.nodes["n2"].n_free, st.nodes["n3"].n_free, st.nodes["n4"].n_free) == (0, 0, 0)
    assert st.stats() == {"partitions": 1, "free_gpus": 2, "capacity_gpus": 2}


def test_nvlink_islands_are_masks_each_gpu_in_one_island():
    # 4 GPUs; islands (0, 1), (1, 2), (5, 9): the first is 0b0011; GPU 1 is taken, so the second is GPU 2 alone
    # (0b0100); the third names no GPU of the node (dropped); GPU 3, in none, is an island of its own (0b1000).
    b = one_node(gpus=4)
    b.set_node("n1", nvlink_islands=[(0, 1), (1, 2), (5, 9)])
    st = state_of(b)
    n1 = st.nodes["n1"]
    assert n1.islands == [0b0011, 0b0100, 0b1000]
    assert (n1.island_count(0b1111), n1.island_count(0b0011), n1.island_count(0b0110)) == (3, 1, 2)
    assert (n1.all_mask, n1.G) == (0b1111, 4)
    assert n1.part.max_island == 2


def test_partitions_split_by_pool_model_and_smallest_memory():
    # Pool 1: n1 (4 x H100, one NVLink island of 4, GPU 3 unhealthy, job 9 on GPU 0) and n2 (2 x H100, no NVLink,
    # 800 Gb/s HCA) on leaves L1 / L2: one partition (1, H100, 81920). n3: 1 x X9 (unknown model: strength 0.5).
    # n4: 2 x H100 with one 40000 MiB GPU: its own partition (1, H100, 40000).
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=4)
    b.leaf("L2", ["n2"], {"S1": 1}, gpus=2, islands="none", host_gbps=800.0)
    b.leaf("L3", ["n3"], {"S1": 1}, gpus=1, model="X9")
    b.leaf("L4", ["n4"], {"S1": 1}, gpus=2)
    b.set_gpu("n1", 3, healthy=False)
    b.set_gpu("n4", 1, memory_mib=40000)
    b.pool(1, "p")
    b.run(9, {"n1": [0]})
    st = state_of(b)
    assert list(st.partitions) == [(1, "H100", 81920), (1, "X9", 81920), (1, "H100", 40000)]
    assert [p.key for p in st.pool_parts[1]] == list(st.partitions)
    big, x9, small = st.partitions.values()
    assert (big.strength, x9.strength, small.strength) == (1.0, 0.5, 1.0)
    # big: most GPUs 4, NVLink 900 (n1's), largest island 4, best nominal rate 800 / 8 = 100 GB/s.
    assert (big.G, big.nvlink_gbps, big.max_island, big.nominal_net) == (4, 900.0, 4, 100.0)
    assert (x9.G, x9.nvlink_gbps, x9.max_island, x9.nominal_net) == (1, 0.0, 1, 50.0)
    # Capacity: n1 3 healthy (group 0), n2 2 (group 1). Free: n1 GPUs 1, 2 (0 held, 3 unhealthy), n2 both.
    assert (big.cap_total, big.gcap) == (5, {0: 3, 1: 2})
    assert (big.free_total, big.gfree) == (4, {0: 2, 1: 2})
    n1, n2 = st.nodes["n1"], st.nodes["n2"]
    assert (n1.free_mask, n1.n_free, n2.free_mask, n2.n_free) == (0b0110, 2, 0b11, 2)
    assert list(big.buckets[2]) == [n1, n2] and all(not big.buckets[k] for k in (0, 1, 3, 4))
    assert list(big.gbuckets[0][2]) == [n1] and list(big.gbuckets[1][2]) == [n2]
    # Nodes of a group with at least k free GPUs; a group the partition has no node in: 0.
    assert [big.nodes_with_at_least(0, k) for k in (1, 2, 3)] == [1, 1, 0]
    assert big.nodes_with_at_least(2, 1) == 0
    assert st.stats() == {"partitions": 3, "free_gpus": 4 + 1 + 2, "capacity_gpus": 5 + 1 + 2}


# ----------------------------------------------------------------------------------------- running jobs


def test_running_jobs_hold_host_resources_once_per_node_and_are_indexed():
    # Job 9 (2 CPUs, 1000 MiB a node) holds GPUs 0, 1 of n1 and GPU 0 of n2; both nodes track 16 CPUs / 64000 MiB:
    # 16000 - 2000 = 14000 and 64000 - 1000 = 63000 left on each (once per node, not per GPU). Its first share on
    # each node carries the host amounts, the others none. Job 8 is stopping and holds n3's GPU 0 (no host ask).
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3}, gpus=2)
    for h in ("n1", "n2", "n3"):
        b.set_node(h, cpu_milli=16000, memory_mib=64000)
    b.pool(1, "p")
    b.run(9, {"n1": [0, 1], "n2": [0]}, host_cpu_milli=2000, host_memory_mib=1000)
    b.run(8, {"n3": [0]}, stopping=True)
    b.run(7, {"n3": [1]}, host_cpu_milli=500)  # CPU only: n3 keeps its memory
    st = state_of(b)
    assert [(st.nodes[h].cpu_free, st.nodes[h].mem_free) for h in ("n1", "n2", "n3")] == [
        (14000, 63000),
        (14000, 63000),
        (15500, 64000),
    ]
    held = st.job_gpus[9]
    assert [(g.id, sh.host_cpu_milli, sh.host_memory_mib) for g, sh in held] == [
        (b.gpu_id("n1", 0), 2000, 1000),
        (b.gpu_id("n1", 1), 0, 0),
        (b.gpu_id("n2", 0), 2000, 1000),
    ]
    assert st.jobs_on_node == {"n1": {9}, "n2": {9}, "n3": {7, 8}}
    assert st.stopping == {8}
    assert set(st.running) == {7, 8, 9}
    # Releasing job 9 gives the host amounts back exactly: 16000 / 64000 on n1 and n2.
    st.release_job(9)
    assert [(st.nodes[h].cpu_free, st.nodes[h].mem_free) for h in ("n1", "n2")] == [(16000, 64000)] * 2
    assert (st.nodes["n1"].n_free, st.nodes["n2"].n_free) == (2, 2)
    st.hold_job(9)
    assert [(st.nodes[h].cpu_free, st.nodes[h].n_free) for h in ("n1", "n2")] == [(14000, 0), (14000, 1)]


def test_a_running_share_on_an_unknown_gpu_is_skipped():
    # Job 9 lists GPU 0 of n1 and a GPU id 999 that no node has: only the first is held.
    b = one_node(gpus=2)
    rj = b.run(9, {"n1": [0]})
    b.running[-1] = type(rj)(rj.request, (*rj.shares, Share(999, "whole")), rj.started_at)
    st = state_of(b)
    assert [g.id for g, _ in st.job_gpus[9]] == [b.gpu_id("n1", 0)]
    assert st.jobs_on_node == {"n1": {9}}


def test_a_running_timeslice_share_records_its_replica():
    # Replicas 0 and 2 of 4 held on the GPU: ts_used 2, ts_reps {0, 2}; the GPU sits in bucket 2 (2 used).
    b = one_node("timeslice", replicas=4, gpus=1)
    gid = b.gpu_id("n1", 0)
    b.run(9, {}, shares=[Share(gid, "timeslice", replica=0)], sharing="timeslice")
    b.run(8, {}, shares=[Share(gid, "timeslice", replica=2)], sharing="timeslice")
    st = state_of(b)
    g = st.gpus[gid]
    assert (g.ts_used, g.ts_reps, g.ts_key) == (2, {0, 2}, 2)
    part = g.node.part
    assert [list(bk) for bk in part.ts_b] == [[], [], [g], []]
    # Releasing replica 2 drops it from ts_reps and moves the GPU to bucket 1.
    st.release(g, Share(gid, "timeslice", replica=2))
    assert (g.ts_used, g.ts_reps, g.ts_key) == (1, {0}, 1)
    assert [list(bk) for bk in part.ts_b] == [[], [g], [], []]
    # Holding 3 more: 2, 3, then 4 used = 4 replicas: no bucket.
    for r in (1, 2, 3):
        st.hold(g, Share(gid, "timeslice", replica=r))
    assert (g.ts_used, g.ts_reps, g.ts_key) == (4, {0, 1, 2, 3}, None)
    assert all(not bk for bk in part.ts_b)


# ----------------------------------------------------------------------------------------- hold and release


def test_mps_holds_and_releases_move_the_gpu_between_compute_buckets():
    # One H100 (81920 MiB) in an MPS pool: empty, it sits in bucket 100 (compute left) and is a free GPU.
    b = one_node("mps", gpus=1)
    gid = b.gpu_id("n1", 0)
    st = state_of(b)
    g, part, n1 = st.gpus[gid], st.nodes["n1"].part, st.nodes["n1"]
    assert (g.mps_key, list(part.mps_b[100]), n1.n_free, part.free_total) == (100, [g], 1, 1)
    # 30 % and 20000 MiB: 70 left, bucket 70; not empty any more, so no free whole GPU.
    st.hold(g, Share(gid, "mps", 30, 20000))
    assert (g.mps_pct, g.mps_mem, g.mps_key, list(part.mps_b[70])) == (30, 20000, 70, [g])
    assert (not part.mps_b[100], n1.free_mask, n1.n_free, part.free_total) == (True, 0, 0, 0)
    # +70 %: 100 % used, 0 left: in no bucket.
    st.hold(g, Share(gid, "mps", 70, 1000))
    assert (g.mps_pct, g.mps_mem, g.mps_key) == (100, 21000, None)
    assert not any(part.mps_b)
    st.release(g, Share(gid, "mps", 70, 1000))
    assert (g.mps_pct, g.mps_mem, g.mps_key, list(part.mps_b[70])) == (30, 20000, 70, [g])
    # Releasing more than is held stops at 0 (30 - 50 and 20000 - 30000): empty again, bucket 100, free.
    st.release(g, Share(gid, "mps", 50, 30000))
    assert (g.mps_pct, g.mps_mem, g.mps_key, list(part.mps_b[100])) == (0, 0, 100, [g])
    assert (n1.free_mask, n1.n_free, part.free_total) == (1, 1, 1)


def test_an_mps_gpu_with_no_memory_left_is_in_no_bucket_and_one_with_1_pct_left_in_bucket_1():
    # 10 % compute but all 81920 MiB: 90 % left, 0 MiB: no bucket. 10 % and 81919 MiB: 1 MiB left: bucket 90.
    b = one_node("mps", gpus=1)
    gid = b.gpu_id("n1", 0)
    st = state_of(b)
    g = st.gpus[gid]
    st.hold(g, Share(gid, "mps", 10, 81920))
    assert g.mps_key is None and not any(g.node.part.mps_b)
    st.release(g, Share(gid, "mps", 0, 1))
    assert g.mps_key == 90 and list(g.node.part.mps_b[90]) == [g]
    # +89 %: 99 % used, 1 % left: bucket 1.
    st.hold(g, Share(gid, "mps", 89, 0))
    assert g.mps_key == 1 and list(g.node.part.mps_b[1]) == [g]


def test_mps_buckets_leave_out_unhealthy_gpus_drained_nodes_and_gpus_in_other_modes():
    # n1: GPU 0 unhealthy, GPU 1 with a time-slice replica, GPU 2 with a MIG slice reported, GPU 3 held whole,
    # GPU 4 fine (bucket 100). n2 drained: none of its GPUs.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=5)
    b.set_gpu("n1", 0, healthy=False)
    b.set_gpu("n1", 1, timeslice_used=1)
    b.set_gpu("n1", 2, mig_used=(("1g.10gb", 0),))
    b.set_gpu("n1", 3, exclusive_job=99)
    b.set_node("n2", schedulable=False)
    b.pool(1, "p", sharing="mps")
    st = state_of(b)
    part = st.nodes["n1"].part
    assert [g.id for g in part.mps_b[100]] == [b.gpu_id("n1", 4)]
    assert sum(len(bk) for bk in part.mps_b) == 1
    # Only GPU 4 is a free whole GPU.
    assert (st.nodes["n1"].free_mask, st.nodes["n2"].free_mask, part.free_total) == (0b10000, 0, 1)


def test_mig_holds_move_the_gpu_between_free_slice_buckets_per_profile():
    # H100 80 GB, 8 memory slices. Empty: every profile has a free start and 8 free slices: bucket 8.
    b = one_node("mig", gpus=1)
    gid = b.gpu_id("n1", 0)
    st = state_of(b)
    g, part = st.gpus[gid], st.nodes["n1"].part
    names = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    assert g.mig_keys == dict.fromkeys(names, 8)
    # 3g.40gb at 4 takes slices 4-7 (0xF0): 4 left; 7g.80gb has no free start any more.
    st.hold(g, Share(gid, "mig", mig_profile="3g.40gb", mig_start=4))
    assert (g.mig_used, g.mig_mask) == ([("3g.40gb", 4)], 0xF0)
    assert g.mig_keys == dict.fromkeys(names[:5], 4)
    assert list(part.mig_b["1g.10gb"][4]) == [g] and not part.mig_b["1g.10gb"][8]
    assert not any(part.mig_b["7g.80gb"])
    # 1g.10gb at slice 0 (0xF1), 3 left; 3g.40gb and 4g.40gb (slices 0-3) no longer start.
    st.hold(g, Share(gid, "mig", mig_profile="1g.10gb", mig_start=0))
    assert (g.mig_used, g.mig_mask) == ([("3g.40gb", 4), ("1g.10gb", 0)], 0xF1)
    assert g.mig_keys == dict.fromkeys(names[:3], 3)
    assert list(part.mig_b["1g.10gb"][3]) == [g] and not part.mig_b["1g.10gb"][4]
    # Releasing the 3g.40gb: slice 0 alone (0x01), 7 left; every profile but 4g/7g (start 0 only) fits again.
    st.release(g, Share(gid, "mig", mig_profile="3g.40gb", mig_start=4))
    assert (g.mig_used, g.mig_mask) == ([("1g.10gb", 0)], 0x01)
    assert g.mig_keys == dict.fromkeys(names[:4], 7)
    # Releasing an instance that is not there changes nothing.
    st.release(g, Share(gid, "mig", mig_profile="2g.20gb", mig_start=2))
    assert (g.mig_used, g.mig_mask) == ([("1g.10gb", 0)], 0x01)


def test_a_mig_share_without_a_start_is_held_at_slice_0():
    # mig_start None counts as 0 in hold: 1g.20gb takes slices 0-1 (0b11); share_fits reads it the same way.
    b = one_node("mig", gpus=1)
    gid = b.gpu_id("n1", 0)
    st = state_of(b)
    g = st.gpus[gid]
    assert st.share_fits(g, Share(gid, "mig", mig_profile="1g.20gb")) is True
    st.hold(g, Share(gid, "mig", mig_profile="1g.20gb"))
    assert g.mig_mask == 0b11
    assert st.share_fits(g, Share(gid, "mig", mig_profile="1g.10gb")) is False  # slice 0 is taken
    assert st.share_fits(g, Share(gid, "mig", mig_profile="1g.10gb", mig_start=2)) is True


@pytest.mark.xfail(
    strict=True,
    raises=TypeError,
    reason="hold() reads a MIG share's mig_start None as slice 0 but records (profile, None) in mig_used; the next "
    "release on that GPU recomputes the mask from mig_used and fails on the None start (TypeError)",
)
def test_a_mig_share_held_without_a_start_survives_a_later_release():
    # 1g.10gb held with no start (slice 0) and 1g.10gb at 3: releasing the second should leave slice 0 (0b1).
    b = one_node("mig", gpus=1)
    gid = b.gpu_id("n1", 0)
    st = state_of(b)
    g = st.gpus[gid]
    st.hold(g, Share(gid, "mig", mig_profile="1g.10gb"))
    st.hold(g, Share(gid, "mig", mig_profile="1g.10gb", mig_start=3))
    st.release(g, Share(gid, "mig", mig_profile="1g.10gb", mig_start=3))
    assert g.mig_mask == 0b1


def test_a_mig_hold_of_an_unknown_profile_takes_the_whole_gpu():
    # A profile the H100 does not have: all 8 slices (0xFF), no profile fits; its release frees them again.
    b = one_node("mig", gpus=1)
    gid = b.gpu_id("n1", 0)
    st = state_of(b)
    g = st.gpus[gid]
    st.hold(g, Share(gid, "mig", mig_profile="9g.99gb", mig_start=0))
    assert (g.mig_mask, g.mig_keys) == (0xFF, {})
    assert not any(any(bk) for bk in g.node.part.mig_b.values())
    st.release(g, Share(gid, "mig", mig_profile="9g.99gb", mig_start=0))
    assert (g.mig_used, g.mig_mask, len(g.mig_keys)) == ([], 0, 6)


def test_a_mig_hold_outside_a_mig_pool_uses_the_gpus_own_profiles():
    # Exclusive pool: the GPU has no profiles loaded, so hold and release look up the H100's: 1g.10gb at 2 is
    # slice 2 (0b100), not the whole GPU; released, the GPU is empty and free again.
    b = one_node(gpus=1)
    gid = b.gpu_id("n1", 0)
    st = state_of(b)
    g = st.gpus[gid]
    st.hold(g, Share(gid, "mig", mig_profile="1g.10gb", mig_start=2))
    assert (g.mig_mask, st.nodes["n1"].n_free) == (0b100, 0)
    st.hold(g, Share(gid, "mig", mig_profile="1g.10gb", mig_start=5))
    st.release(g, Share(gid, "mig", mig_profile="1g.10gb", mig_start=2))
    assert g.mig_mask == 0b100000
    st.release(g, Share(gid, "mig", mig_profile="1g.10gb", mig_start=5))
    assert (g.mig_mask, st.nodes["n1"].n_free) == (0, 1)


def test_releasing_a_whole_gpu_twice_stops_at_zero():
    # excl 1 -> 0 -> still 0 (not -1): the GPU is free, and a new whole hold makes it busy again.
    b = one_node(gpus=1)
    b.run(9, {"n1": [0]})
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    st.release(g, Share(g.id, "whole"))
    assert (g.excl, st.nodes["n1"].n_free) == (0, 1)  # one release frees it
    st.release(g, Share(g.id, "whole"))
    assert (g.excl, st.nodes["n1"].n_free) == (0, 1)
    st.hold(g, Share(g.id, "whole"))
    assert (g.excl, st.nodes["n1"].n_free) == (1, 0)


def test_a_hold_with_only_host_memory_takes_it():
    # A share carrying 0 CPU and 500 MiB: the node (tracking 8000 / 4000) keeps its CPU, loses 500 MiB; the
    # release gives it back. Likewise CPU only.
    b = one_node(gpus=2, cpu_milli=8000, memory_mib=4000)
    st = state_of(b)
    g0, g1 = st.gpus[b.gpu_id("n1", 0)], st.gpus[b.gpu_id("n1", 1)]
    n1 = st.nodes["n1"]
    st.hold(g0, Share(g0.id, "whole", host_memory_mib=500))
    assert (n1.cpu_free, n1.mem_free) == (8000, 3500)
    st.hold(g1, Share(g1.id, "whole", host_cpu_milli=3000))
    assert (n1.cpu_free, n1.mem_free) == (5000, 3500)
    st.release(g0, Share(g0.id, "whole", host_memory_mib=500))
    st.release(g1, Share(g1.id, "whole", host_cpu_milli=3000))
    assert (n1.cpu_free, n1.mem_free) == (8000, 4000)


def test_host_fits_and_host_total_fits_at_the_boundaries():
    # n1 tracks 8000 milli-CPU and 4000 MiB; 3000 / 1000 held: 5000 / 3000 left.
    b = one_node(gpus=1, cpu_milli=8000, memory_mib=4000)
    st = state_of(b)
    n1 = st.nodes["n1"]
    st.hold_host("n1", 3000, 1000)
    assert n1.host_fits(5000, 3000) is True  # exactly what is left
    assert n1.host_fits(5001, 0) is False and n1.host_fits(0, 3001) is False
    assert n1.host_total_fits(8000, 4000) is True  # exactly the capacity
    assert n1.host_total_fits(8001, 0) is False and n1.host_total_fits(0, 4001) is False


# ----------------------------------------------------------------------------------------- placer's cache


def test_a_change_drops_the_nodes_cached_state_and_tells_the_placer_once():
    b = one_node(gpus=2)
    st = state_of(b)
    n1 = st.nodes["n1"]
    g0, g1 = n1.gpus
    st.sig_dirty = []
    n1.frag_sig = ("cached",)
    st.hold(g0, Share(g0.id, "whole"))
    st.hold(g1, Share(g1.id, "whole"))  # already dropped: not listed again
    assert (n1.frag_sig, st.sig_dirty) == (None, [n1])
    n1.frag_sig = ("cached",)
    st.release(g0, Share(g0.id, "whole"))
    assert (n1.frag_sig, st.sig_dirty) == (None, [n1, n1])
    n1.frag_sig = ("cached",)
    st.hold_host("n1", 0, 0)
    assert (n1.frag_sig, st.sig_dirty) == (None, [n1, n1, n1])
    # Without a placer index (sig_dirty None) the cache is still dropped.
    st.sig_dirty = None
    n1.frag_sig = ("cached",)
    st.release(g1, Share(g1.id, "whole"))
    assert (n1.frag_sig, st.sig_dirty) == (None, None)


# ----------------------------------------------------------------------------------------- journal levels


def test_a_kept_inner_level_is_undone_by_the_outer_rollback():
    # 3 GPUs. Outer level: hold GPU 0; inner level: hold GPU 1, kept (2 entries, still recording); then hold GPU 2.
    # Rolling the outer level back frees all three and closes the journal.
    b = one_node(gpus=3)
    st = state_of(b)
    g0, g1, g2 = st.nodes["n1"].gpus
    outer = st.journal()
    st.hold(g0, Share(g0.id, "whole"))
    inner = st.journal()
    st.hold(g1, Share(g1.id, "whole"))
    st.keep(inner)
    assert st.journal_log is not None and len(st.journal_log) == 2
    st.hold(g2, Share(g2.id, "whole"))
    assert st.nodes["n1"].n_free == 0
    st.rollback(outer)
    assert (st.nodes["n1"].free_mask, st.journal_log) == (0b111, None)
    # Closed: a hold now is not recorded, and a new journal starts from an empty log at mark 0.
    st.hold(g0, Share(g0.id, "whole"))
    assert st.journal_log is None
    assert st.journal() == 0


def test_rollback_of_a_release_holds_the_share_again():
    # Job 9 holds GPU 0 of 2; released inside a journal, then rolled back: held again (1 free, not 2).
    b = one_node(gpus=2)
    b.run(9, {"n1": [0]})
    st = state_of(b)
    mark = st.journal()
    st.release_job(9)
    assert st.nodes["n1"].n_free == 2
    st.rollback(mark)
    assert (st.nodes["n1"].free_mask, st.gpus[b.gpu_id("n1", 0)].excl) == (0b10, 1)


def test_releasing_a_timeslice_replica_that_is_not_held_stops_at_zero():
    # ts_used 1 -> 0 -> 0 (not -1): the GPU is empty and free; its bucket is 0 (no replica used).
    b = one_node("timeslice", replicas=2, gpus=1)
    gid = b.gpu_id("n1", 0)
    b.run(9, {}, shares=[Share(gid, "timeslice", replica=1)], sharing="timeslice")
    st = state_of(b)
    g = st.gpus[gid]
    st.release(g, Share(gid, "timeslice", replica=1))
    assert (g.ts_used, g.ts_reps, g.ts_key, st.nodes["n1"].n_free) == (0, set(), 0, 1)
    st.release(g, Share(gid, "timeslice"))
    assert (g.ts_used, g.ts_key, st.nodes["n1"].n_free) == (0, 0, 1)
    st.hold(g, Share(gid, "timeslice"))
    assert (g.ts_used, g.ts_reps, g.ts_key, st.nodes["n1"].n_free) == (1, set(), 1, 0)


def test_a_node_tracking_one_milli_cpu_and_one_mib_is_tracked():
    # 1 milli-CPU and 1 MiB are real (tiny) amounts, not "untracked": a 1 / 1 ask fits, 2 does not; held, 0 left.
    st = state_of(one_node(gpus=1, cpu_milli=1, memory_mib=1))
    n1 = st.nodes["n1"]
    assert (n1.cpu_cap, n1.cpu_free, n1.mem_cap, n1.mem_free) == (1, 1, 1, 1)
    assert n1.host_fits(1, 1) is True and n1.host_fits(2, 0) is False and n1.host_fits(0, 2) is False
    st.hold_host("n1", 1, 1)
    assert (n1.cpu_free, n1.mem_free) == (0, 0)


def test_share_equiv_of_whole_mps_and_odd_shares():
    # Whole: 1.0. MPS 30 %: 0.3. MIG of a profile the GPU lacks: 1.0. MIG 2g.20gb on a GPU of an exclusive pool
    # (no profiles loaded: the H100's own are looked up): 2 / 7.
    b = one_node(gpus=1)
    st = state_of(b)
    g = st.gpus[b.gpu_id("n1", 0)]
    assert st.share_equiv(g, Share(g.id, "whole")) == 1.0
    assert st.share_equiv(g, Share(g.id, "mps", 30, 1000)) == 0.3
    assert st.share_equiv(g, Share(g.id, "mig", mig_profile="9g.99gb", mig_start=0)) == 1.0
    assert st.share_equiv(g, Share(g.id, "mig", mig_profile="2g.20gb", mig_start=0)) == 2 / 7


def test_share_equiv_of_a_timeslice_share_on_a_node_in_no_pool_is_one_gpu():
    # n2 is in no pool (no partition, so no replica count): its time-slice share counts as 1.0.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=1)
    b.pool(1, "p", hosts=["n1"], sharing="timeslice", replicas=4)
    st = state_of(b)
    g1, g2 = st.gpus[b.gpu_id("n1", 0)], st.gpus[b.gpu_id("n2", 0)]
    assert st.share_equiv(g1, Share(g1.id, "timeslice")) == 0.25
    assert st.share_equiv(g2, Share(g2.id, "timeslice")) == 1.0


def test_a_pool_with_no_replicas_counts_one():
    # timeslice_replicas 0 (or 1): 1 replica, one bucket; a replica is a whole GPU (1 / 1).
    for reps in (0, 1):
        b = one_node("timeslice", replicas=reps, gpus=1)
        st = state_of(b)
        g = st.gpus[b.gpu_id("n1", 0)]
        assert (g.node.part.replicas, len(g.node.part.ts_b)) == (1, 1)
        assert st.share_equiv(g, Share(g.id, "timeslice")) == 1.0
        assert st.share_fits(g, Share(g.id, "timeslice")) is True
        st.hold(g, Share(g.id, "timeslice"))
        assert st.share_fits(g, Share(g.id, "timeslice")) is False


def test_a_node_of_mixed_models_goes_to_its_first_gpus_models_partition():
    # n1: GPU 0 an H100, GPU 1 an A100 (both 81920 MiB): partition (1, H100, 81920), strength 1.0 (not A100's 0.4).
    b = one_node(gpus=2)
    b.set_gpu("n1", 1, model="A100")
    st = state_of(b)
    assert list(st.partitions) == [(1, "H100", 81920)]
    assert st.nodes["n1"].part.strength == 1.0


def test_only_a_timeslice_share_records_a_replica():
    # A whole share that happens to carry replica 3 (job 9) records nothing; job 8's time-slice replica 1 does.
    b = one_node("timeslice", replicas=4, gpus=2)
    g0, g1 = b.gpu_id("n1", 0), b.gpu_id("n1", 1)
    b.run(9, {}, shares=[Share(g0, "whole", replica=3)])
    b.run(8, {}, shares=[Share(g1, "timeslice", replica=1)], sharing="timeslice")
    st = state_of(b)
    assert (st.gpus[g0].ts_reps, st.gpus[g1].ts_reps) == (set(), {1})


def test_a_running_mig_instance_in_a_mig_pool_takes_its_slices():
    # 3g.40gb at 4 running: slices 4-7 (0xF0); 4 free slices for the profiles that still start (not 7g.80gb).
    b = one_node("mig", gpus=2)
    gid = b.gpu_id("n1", 0)
    b.run(9, {}, shares=[Share(gid, "mig", mig_profile="3g.40gb", mig_start=4)], sharing="mig")
    st = state_of(b)
    g, other = st.gpus[gid], st.gpus[b.gpu_id("n1", 1)]
    assert (g.mig_mask, sorted(g.mig_keys.values())) == (0xF0, [4] * 5)
    assert (other.mig_mask, sorted(other.mig_keys.values())) == (0, [8] * 6)
    assert st.nodes["n1"].free_mask == 0b10  # only the untouched GPU is free as a whole


def test_a_pod_with_a_1_gbps_core_uplink_is_400_to_1():
    # Leaf L1 (n1, 400 Gb/s) under spine S1, whose only core cable is 1 Gb/s: pod 0 is 400 down over 1 up: 400.0.
    b = SnapBuilder()
    b.core("C1")
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.uplink("S1", "C1", gbps=1.0)
    b.pool(1, "p")
    st = state_of(b)
    assert st.pod_oeff == {0: 400.0}


def test_an_idle_oversubscribed_leaf_keeps_its_ratio():
    # Leaf L1: n1 and n2 (2 x 400 Gb/s) over one 400 Gb/s uplink, nothing busy: 800 / 400 = 2.0.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.pool(1, "p")
    st = state_of(b)
    assert st.group_oeff == {0: 2.0}


def shared_pool_with_odd_gpus(sharing: str) -> SnapBuilder:
    """n1 (5 GPUs): 0 unhealthy, 1 held whole (job 99), 2 with a time-slice replica, 3 with 10 % MPS, 4 untouched;
    n2 (5 untouched GPUs) drained; both in one `sharing` pool (4 replicas when time-sliced)."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=5)
    b.set_gpu("n1", 0, healthy=False)
    b.set_gpu("n1", 1, exclusive_job=99)
    b.set_gpu("n1", 2, timeslice_used=1)
    b.set_gpu("n1", 3, mps_compute_pct_used=10)
    b.set_node("n2", schedulable=False)
    b.pool(1, "p", sharing=sharing, replicas=4)
    return b


def test_mig_buckets_leave_out_unhealthy_gpus_drained_nodes_and_gpus_in_other_modes():
    # Only n1's GPU 4 offers MIG slices (every profile, 8 free); GPU 2 and 3 run other modes, 1 is held whole.
    b = shared_pool_with_odd_gpus("mig")
    st = state_of(b)
    keyed = {g.id: len(g.mig_keys) for g in st.gpus.values() if g.mig_keys}
    assert keyed == {b.gpu_id("n1", 4): 6}
    part = st.nodes["n1"].part
    assert sum(len(bk) for bks in part.mig_b.values() for bk in bks) == 6


def test_timeslice_buckets_leave_out_unhealthy_gpus_drained_nodes_and_gpus_in_other_modes():
    # Only n1's GPU 2 (1 replica used: bucket 1) and GPU 4 (bucket 0) take time-sliced work; GPU 3 runs MPS, 1 is
    # held whole, 0 is unhealthy, n2 is drained.
    b = shared_pool_with_odd_gpus("timeslice")
    st = state_of(b)
    part = st.nodes["n1"].part
    assert [[g.id for g in bk] for bk in part.ts_b] == [[b.gpu_id("n1", 4)], [b.gpu_id("n1", 2)], [], []]


def test_a_job_on_a_node_in_no_pool_is_released_without_a_partition():
    # n2 is in no pool: job 9's GPU there has no partition and no bucket; releasing and holding it again only
    # moves its own count (excl 1 -> 0 -> 1), nothing is free in any partition (n2 is not eligible).
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=1)
    b.pool(1, "p", hosts=["n1"])
    b.run(9, {"n2": [0]})
    st = state_of(b)
    g = st.gpus[b.gpu_id("n2", 0)]
    st.release_job(9)
    assert (g.excl, g.node.part, g.node.free_mask) == (0, None, 0)
    st.hold_job(9)
    assert g.excl == 1
    assert st.stats() == {"partitions": 1, "free_gpus": 1, "capacity_gpus": 1}
