"""Host CPU and memory as engine resources: a job's per-node request (`host_cpu_milli`, `host_memory_mib`)
against what each node tracks (`NodeState.cpu_milli`, `memory_mib`) less what its running jobs hold.
Untracked (0) never constrains. Small fabrics, every figure worked by hand."""

from __future__ import annotations

import random

from scheduler.core import schedule
from scheduler.core.fragmentation import MixClass, MpsFragmentation
from scheduler.core.state import HOST_UNTRACKED, ClusterState
from scheduler.core.topology import build_topology
from scheduler.core.types import RequestClass, Share
from tests.scheduler.core.builders import SnapBuilder, config, two_leaves


def three_nodes(cpu: dict[str, int], mem: dict[str, int] | None = None, gpus: int = 8) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3}, gpus=gpus)
    for h, c in cpu.items():
        b.set_node(h, cpu_milli=c, memory_mib=(mem or {}).get(h, 0))
    b.pool(1, "train")
    return b


def nodes_of(d) -> list[str]:
    return list(d.placements[0].nodes)


def test_a_job_goes_to_the_node_with_its_cpu_left():
    # n1 and n2 track 16 CPUs; a running 1-GPU job holds 12 of n1's (4 left). An 8-CPU job must take n2,
    # although n1 (7 free GPUs, the tighter fit) would be the GPU-only best fit.
    b = three_nodes({"n1": 16000, "n2": 16000, "n3": 16000})
    b.run(9, {"n1": [0]}, host_cpu_milli=12000)
    b.run(8, {"n3": [0, 1, 2, 3, 4, 5, 6, 7]})
    b.job(1, gpus=1, host_cpu_milli=8000)
    d = schedule(b.snapshot())
    assert nodes_of(d) == ["n2"]


def test_an_untracked_node_never_runs_out():
    b = three_nodes({"n1": 16000, "n2": 16000})  # n3 tracks nothing
    b.run(9, {"n1": [0]}, host_cpu_milli=16000)
    b.run(8, {"n2": [0]}, host_cpu_milli=16000)
    b.job(1, gpus=1, host_cpu_milli=500_000)  # more than any tracked node has
    d = schedule(b.snapshot())
    assert nodes_of(d) == ["n3"]


def test_host_memory_is_checked_like_cpu():
    b = three_nodes({"n1": 64000, "n2": 64000, "n3": 64000}, {"n1": 65536, "n2": 262144, "n3": 65536})
    b.job(1, gpus=1, host_memory_mib=131072)
    d = schedule(b.snapshot())
    assert nodes_of(d) == ["n2"]


def test_a_gang_needs_the_cpu_on_each_of_its_nodes():
    # Two leaves of two 8-GPU nodes; n2 has 8 CPUs left of 32, the others 32. A 2 x 8 gang asking 16 CPUs a
    # node cannot stay in L1 (n2 lacks them): one node of each leaf would cross, n3 + n4 stay in L2.
    b = two_leaves()
    for h in ("n1", "n2", "n3", "n4"):
        b.set_node(h, cpu_milli=32000)
    b.set_node("n2", cpu_milli=8000)
    b.pool(1, "train")
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, host_cpu_milli=16000)
    d = schedule(b.snapshot())
    assert sorted(nodes_of(d)) == ["n3", "n4"]


def test_no_node_with_the_cpu_left_says_so():
    b = three_nodes({"n1": 16000, "n2": 16000, "n3": 16000})
    for jid, h in ((7, "n1"), (8, "n2"), (9, "n3")):
        b.run(jid, {h: [0]}, host_cpu_milli=12000)
    b.job(1, gpus=1, host_cpu_milli=8000)
    d = schedule(b.snapshot())
    assert not d.placements
    # 3 nodes have 7 free GPUs each, each has 16 - 12 = 4 CPUs left.
    assert d.pending_reasons[1].startswith("needs 8 CPUs on each node; the 3 nodes of pool 'train' with room")


def test_more_cpu_than_any_node_has_is_refused_as_never_fitting():
    b = three_nodes({"n1": 16000, "n2": 32000, "n3": 16000})
    b.job(1, gpus=1, host_cpu_milli=48000, host_memory_mib=1024)
    d = schedule(b.snapshot())
    assert d.pending_reasons[1] == (
        "needs 48 CPUs and 1024 MiB of host memory on each node; no node in pool 'train' has that much in all"
    )


def test_the_round_holds_what_it_placed():
    # Two 8-CPU jobs on nodes of 12 CPUs: after the first takes one node, the second cannot join it.
    b = three_nodes({"n1": 12000, "n2": 12000, "n3": 12000})
    b.job(1, gpus=1, host_cpu_milli=8000)
    b.job(2, gpus=1, host_cpu_milli=8000)
    d = schedule(b.snapshot())
    where = {p.job_id: p.nodes for p in d.placements}
    assert len(where) == 2 and where[1] != where[2]


def test_rollback_gives_the_cpu_back_exactly():
    b = three_nodes({"n1": 16000})
    b.run(9, {"n1": [0, 1]}, host_cpu_milli=6000, host_memory_mib=100)
    st = ClusterState(b.snapshot(), build_topology(b.fabric))
    n1 = st.nodes["n1"]
    assert n1.cpu_free == 16000 - 6000 and n1.mem_free == HOST_UNTRACKED  # memory_mib 0: not tracked
    mark = st.journal()
    st.release_job(9)
    assert n1.cpu_free == 16000
    g = st.gpus[b.gpu_id("n1", 5)]
    st.hold(g, Share(g.id, "whole", 100, 0, host_cpu_milli=3000))
    assert n1.cpu_free == 13000
    st.rollback(mark)
    assert n1.cpu_free == 10000


# ----------------------------------------------------------------------------------------- the measure


def test_a_class_the_nodes_cpu_cannot_admit_sees_all_the_free_compute():
    quarter_4cpu = MixClass(1, 25, 0, None, 1, cpu=4000)
    f = MpsFragmentation([quarter_4cpu])
    # 60 % free on one GPU. With 8 CPUs left the quarter runs (nothing stranded); with 2 it cannot: all 60.
    assert f.node_num("T4", [(60, 8000)], cpu=8000) == 0
    assert f.node_num("T4", [(60, 8000)], cpu=2000) == 60
    assert f.node_num("T4", [(60, 8000)], cpu=None) == 0  # untracked


def test_a_share_that_takes_the_last_cpus_a_class_needed_costs_the_node_its_room():
    quarter_4cpu = MixClass(1, 25, 0, None, 1, cpu=4000)
    f = MpsFragmentation([quarter_4cpu])
    gpus = [(100, 16000), (100, 16000)]
    # 10 % with 2 CPUs on a node with 5 CPUs left: 3 are left, the quarter no longer runs there; F goes from
    # 0 to 190 (all the free compute). On a node with 8 CPUs left (6 after) it still runs: F stays 0.
    assert f.delta_node("T4", gpus, (5000, None), (3000, None), 10, 100, [0]) == [190]
    assert f.delta_node("T4", gpus, (8000, None), (6000, None), 10, 100, [0]) == [0]


def test_delta_node_is_the_change_of_node_num():
    rng = random.Random(7)
    classes = [
        MixClass(
            rng.choice((1, 2)),
            rng.choice((10, 25, 50, 100)),
            rng.choice((0, 2000)),
            None,
            rng.randint(1, 9),
            cpu=rng.choice((0, 2000, 6000)),
            hmem=rng.choice((0, 4096)),
        )
        for _ in range(6)
    ]
    f = MpsFragmentation(classes)
    for _ in range(300):
        gpus = [(rng.choice((0, 20, 50, 75, 100)), rng.choice((0, 4000, 16000))) for _ in range(rng.randint(1, 4))]
        pct, mem = rng.choice((10, 25, 50)), rng.choice((0, 1000))
        idxs = [i for i, (L, M) in enumerate(gpus) if L >= pct and M >= mem]
        cpu, hm = rng.choice((None, 1000, 5000, 9000)), rng.choice((None, 2000, 8000))
        hc, hh = rng.choice((0, 3000)), rng.choice((0, 4000))
        after_host = (None if cpu is None else cpu - hc, None if hm is None else hm - hh)
        got = f.delta_node("T4", gpus, (cpu, hm), after_host, pct, mem, idxs)
        for i, d in zip(idxs, got, strict=True):
            after = list(gpus)
            after[i] = (gpus[i][0] - pct, gpus[i][1] - mem)
            assert d == f.node_num("T4", after, *after_host) - f.node_num("T4", gpus, cpu, hm)


def test_mps_shares_keep_the_cpu_rich_node_for_the_cpu_heavy_class():
    # Two 1-GPU T4 nodes: n1 has 4 CPUs, n2 16. The mix: 1-CPU quarters and 12-CPU whole GPUs. A 1-CPU quarter
    # on n2 would leave 15 CPUs (the whole class still runs there, but its GPU is no longer whole: F rises by
    # 75 for it); on n1 the whole class could never run (4 < 12 CPUs: all 100 were a fragment to it already,
    # now 75). The share goes to n1.
    b = SnapBuilder()
    b.spine("S1")
    for h, cpu in (("n1", 4000), ("n2", 16000)):
        b.leaf(f"L-{h}", [h], {"S1": 1}, gpus=1, model="T4")
        b.set_node(h, cpu_milli=cpu)
    b.pool(1, "infer", sharing="mps")
    b.job(1, gpus=1, sharing="mps", mps_compute_pct=25, mps_memory_mib=1000, host_cpu_milli=1000)
    mix = [
        RequestClass(1, "mps", 1, 25, 1000, weight=5, host_cpu_milli=1000),
        RequestClass(1, "mps", 1, 100, 0, weight=5, host_cpu_milli=12000),
    ]
    d = schedule(b.snapshot(config(fragmentation_prior_whole=0.0), request_mix=mix))
    assert nodes_of(d) == ["n1"]


def test_cpu_counts_are_written_exactly():
    from scheduler.core import reasons

    assert reasons.host_never_fits(1000, 0, "p").startswith("needs 1 CPU on each node")
    assert reasons.host_never_fits(1234567, 0, "p").startswith("needs 1234.567 CPUs on each node")
    assert reasons.host_never_fits(500, 0, "p").startswith("needs 0.5 CPUs on each node")
