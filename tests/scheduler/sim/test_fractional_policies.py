"""The fractional replay: best-fit packs, FGD avoids stranding GPU slices, ours runs through the production
placement code; arrivals, inflation and the reported figures. Small hand-made traces only."""

from __future__ import annotations

import json

import pytest

from scheduler.sim.fractional import (
    DEFAULT_CHECKPOINTS,
    POLICIES,
    Cluster,
    EnginePolicy,
    FragMeter,
    arrivals,
    format_fractional,
    make_policy,
    run_fractional,
    typical_pods,
)
from scheduler.sim.traces.alibaba import AlibabaNode, AlibabaPod, parse_nodes, parse_pods


def node(name, gpus=2, cpu=32000, mem=131072, model="T4"):
    return AlibabaNode(name, cpu, mem, gpus, model)


def pod(name, milli, num=1, cpu=1000, mem=1024, t=0, spec=()):
    return AlibabaPod(name, cpu, mem, num, milli, spec, creation_time=t)


def replay(policy, nodes, pods, workload=None):
    cluster = Cluster(nodes, FragMeter(typical_pods(workload or pods)))
    pol = make_policy(policy, cluster, nodes)
    out = []
    for p in pods:
        choice = pol.place(p)
        if choice is not None:
            cluster.assign(choice[0], p, choice[1])
        out.append(choice)
    return cluster, out


# ------------------------------------------------------------------------------------------- best-fit


def test_best_fit_packs_gpus_and_nodes():
    nodes = [node("n0"), node("n1")]
    pods = [pod("a", 500), pod("b", 500), pod("c", 1000), pod("d", 300)]
    cluster, out = replay("best-fit", nodes, pods)
    assert out[0] == (0, [(0, 500)])
    assert out[1] == (0, [(0, 500)])  # the same GPU: the one with the least room that fits
    assert out[2] == (0, [(1, 1000)])  # the fuller node
    assert out[3] == (1, [(0, 300)])
    assert cluster.gpu == [[0, 0], [700, 1000]]


def test_best_fit_takes_the_node_with_least_cpu_and_gpu_left():
    nodes = [node("big", cpu=64000), node("small", cpu=8000)]
    _, out = replay("best-fit", nodes, [pod("a", 1000, cpu=4000)])
    assert out[0][0] == 1


def test_policies_respect_cpu_memory_and_model():
    nodes = [node("n0", cpu=2000, mem=4096), node("n1", model="V100M16")]
    for name in POLICIES:
        _, out = replay(name, nodes, [pod("cpu", 500, cpu=4000), pod("mem", 500, mem=8192)])
        assert [o[0] for o in out] == [1, 1], name
        _, out = replay(name, nodes, [pod("spec", 500, spec=("T4",)), pod("nofit", 500, spec=("A100",))])
        assert out[0][0] == 0 and out[1] is None, name


# ------------------------------------------------------------------------------------------- FGD


def test_fgd_keeps_the_slice_the_workload_needs_where_best_fit_strands_it():
    # One node, two GPUs. After a 0.7 task, a 0.1 task arrives, then four 0.3 tasks (the common size).
    # Best-fit puts the 0.1 beside the 0.7 (the tightest GPU), leaving 0.2 there that no 0.3 task can use:
    # the fourth 0.3 task fails. FGD puts the 0.1 on the empty GPU (F(M) does not grow), then a 0.3 fills
    # the 0.3 slice exactly: everything fits.
    nodes = [node("n0")]
    pods = [pod("a", 700, t=0), pod("b", 100, t=1)] + [pod(f"c{i}", 300, t=2 + i) for i in range(4)]
    bf, out_bf = replay("best-fit", nodes, pods)
    fg, out_fg = replay("fgd", nodes, pods)
    assert out_bf[1] == (0, [(0, 100)]) and out_bf[-1] is None
    assert out_fg[1] == (0, [(1, 100)]) and out_fg[2] == (0, [(0, 300)]) and out_fg[-1] is not None
    assert bf.allocated_milli == 1700 and fg.allocated_milli == 2000
    # ... and the replay reports it: 15 % of the GPUs unallocated for best-fit, none for FGD.
    r = run_fractional(pods, nodes, ["best-fit", "fgd"], inflate_to=1.0, checkpoints=(100,))
    assert r["policies"]["best-fit"]["at"]["100"]["unallocated_pct"] == pytest.approx(15.0)
    assert r["policies"]["fgd"]["at"]["100"]["unallocated_pct"] == pytest.approx(0.0)
    assert r["summary"]["fgd"]["fewer_unallocated_than_best_fit_pct"]["100"] == pytest.approx(100.0)


def test_fgd_whole_gpus_and_cpu_only_pods():
    nodes = [node("n0", gpus=4), node("n1", gpus=4)]
    pods = [pod("w", 1000, num=2), pod("cpu", 0, num=0, cpu=2000)]
    cluster, out = replay("fgd", nodes, pods)
    assert out[0] == (0, [(0, 1000), (1, 1000)])  # free GPUs, lowest first (the simulator's Sub)
    assert out[1] == (0, [])  # CPU only: no node's F(M) changes, the first node takes it
    assert cluster.cpu == [32000 - 1000 - 2000, 32000]


# ------------------------------------------------------------------------------------------- ours


def test_default_places_with_the_engine_and_mirrors_its_shares():
    nodes = [node("n0"), node("n1", gpus=4, model="G2")]
    pods = [pod("a", 500), pod("b", 300), pod("w", 1000, num=2), pod("c", 200)]
    cluster = Cluster(nodes, FragMeter(typical_pods(pods)))
    pol = EnginePolicy(cluster, nodes)
    for p in pods:
        choice = pol.place(p)
        assert choice is not None
        cluster.assign(choice[0], p, choice[1])
    # The engine's state and the mirror agree GPU by GPU.
    st = pol.state
    for gid, (i, j) in pol.gpu_at.items():
        g = st.gpus[gid]
        assert 1000 - 10 * g.mps_pct == cluster.gpu[i][j]
    assert cluster.allocated_milli == 500 + 300 + 2000 + 200
    # MPS packs: the 0.3 and the 0.2 go onto the GPU that already holds the 0.5 (the fragmentation term's mix
    # is these few pods and 4 pseudo-requests of a whole GPU: every empty GPU kept whole is worth most);
    # the two whole GPUs need a node with two free GPUs.
    assert cluster.gpu == [[0, 1000], [0, 0, 1000, 1000]]


def test_default_engine_refuses_a_node_without_the_pods_cpu():
    nodes = [node("n0-lean", cpu=2000), node("n1-fat", cpu=64000)]  # equal GPUs: n0 sorts first
    cluster = Cluster(nodes, FragMeter([]))
    pol = EnginePolicy(cluster, nodes)
    heavy = pod("heavy", 500, cpu=8000)
    i, _ = pol.place(heavy)
    cluster.assign(i, heavy, [(0, 500)])
    # The engine itself knows the node's 2 CPUs: no mask was needed.
    assert i == 1 and pol.masked == set() and pol.masks == 0
    light = pod("light", 1000, num=2, cpu=1000)
    i, shares = pol.place(light)
    assert i == 0 and len(shares) == 2


def test_default_engine_holds_the_pods_cpu_on_its_node():
    nodes = [node("n0", cpu=10000), node("n1", cpu=10000)]
    cluster = Cluster(nodes, FragMeter([]))
    pol = EnginePolicy(cluster, nodes)
    first = pod("first", 300, cpu=6000)
    i, shares = pol.place(first)
    cluster.assign(i, first, shares)
    # 10 - 6 = 4 CPUs left there: a second 6-CPU pod must go to the other node, though its GPU has room.
    second = pod("second", 300, cpu=6000)
    j, _ = pol.place(second)
    assert j != i
    assert pol.state.nodes[nodes[i].name].cpu_free == 4000


def test_default_masks_nodes_of_a_model_the_pod_does_not_list_and_lifts_the_mask_later():
    nodes = [node("n0", model="T4"), node("n1", model="A10")]  # n0 sorts first
    cluster = Cluster(nodes, FragMeter([]))
    pol = EnginePolicy(cluster, nodes)
    picky = pod("picky", 500, spec=("A10", "V100M16"))  # two models: the job cannot name them
    i, shares = pol.place(picky)
    cluster.assign(i, picky, shares)
    assert i == 1 and pol.masked == {0}
    light = pod("light", 1000, num=2)
    i, shares = pol.place(light)
    assert i == 0 and len(shares) == 2 and pol.masked == set()


def test_default_cpu_only_pods_go_where_fewest_gpus_are_free():
    nodes = [node("n0"), node("n1")]
    _, out = replay("default", nodes, [pod("w", 1000, num=2, t=0), pod("cpu", 0, num=0, cpu=4000, t=1)])
    assert out[0][0] == 0 and out[1] == (0, [])  # n0 has no GPU left to strand


def test_default_rejects_what_no_node_can_hold():
    nodes = [node("n0")]
    _, out = replay("default", nodes, [pod("eight", 1000, num=8), pod("ok", 1000)])
    assert out[0] is None and out[1] is not None


# ------------------------------------------------------------------------------------------- replay

POD_CSV = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p00,6000,12288,1,460,,LS,Running,0,100,0
p01,12000,16384,1,1000,,LS,Running,5,100,5
p02,4000,8192,1,230,,BE,Running,6,100,6
p03,2000,4096,0,0,,BE,Running,7,100,7
p04,24000,65536,2,1000,,LS,Running,9,100,9
p05,6000,12288,1,460,,LS,Running,11,100,11
p06,8000,12288,1,810,,BE,Failed,12,100,12
p07,3000,6144,1,320,,LS,Running,15,100,15
p08,12000,16384,1,1000,,LS,Running,20,100,20
p09,6000,12288,1,470,,LS,Pending,21,,
p10,48000,131072,4,1000,,LS,Running,30,100,30
p11,2000,4096,1,160,V100M16|V100M32,LS,Running,31,100,31
"""
NODE_CSV = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,2,P100
n1,96000,393216,8,G2
n2,32000,131072,4,V100M16
n3,104000,524288,2,T4
"""


@pytest.fixture
def trace():
    return parse_pods(POD_CSV.splitlines(True), "pods.csv"), parse_nodes(NODE_CSV.splitlines(True), "nodes.csv")


def test_arrivals_inflate_to_the_target_and_are_seeded(trace):
    pods, nodes = trace
    cap = 1000 * sum(n.gpus for n in nodes)  # 16 GPUs
    seq = arrivals(pods, cap, inflate_to=1.3, seed=1)
    assert seq[: len(pods)] == pods  # the trace first, in trace order
    total = sum(p.total_milli for p in seq)
    assert total >= 1.3 * cap > total - seq[-1].total_milli  # stops at the pod that crosses the target
    assert arrivals(pods, cap, 1.3, seed=1) == seq
    shuffled = arrivals(pods, cap, 1.3, seed=1, order="shuffled")
    assert sorted(p.name for p in shuffled[: len(pods)]) == sorted(p.name for p in pods)
    # A target below the trace's own demand cuts it.
    short = arrivals(pods, cap, inflate_to=0.2, seed=1)
    assert sum(p.total_milli for p in short) >= 0.2 * cap and len(short) < len(pods)
    with pytest.raises(ValueError, match="order"):
        arrivals(pods, cap, order="random")


def test_all_three_policies_run_and_report(trace):
    pods, nodes = trace
    calls = []
    r = run_fractional(pods, nodes, "best-fit,fgd,default", lambda *a: calls.append(a), seed=3)
    json.dumps(r)  # serialisable for --json
    assert set(r["policies"]) == {"best-fit", "fgd", "default"}
    assert r["cluster"]["gpus"] == 16 and r["workload"]["pods"] == 12
    assert r["workload"]["cpu_only_pods"] == 1 and r["workload"]["sharing_pods"] == 7
    n = r["workload"]["arrivals"]
    for name, p in r["policies"].items():
        assert p["placed"] + p["failed"] == n, name
        assert set(p["at"]) == {str(c) for c in DEFAULT_CHECKPOINTS}
        for v in p["at"].values():
            assert 0 <= v["unallocated_pct"] <= 100 and 0 <= v["fragmentation_pct"] <= v["unallocated_pct"] + 1e-9
        curve = p["curve"]
        assert curve["arrived_pct"] == sorted(curve["arrived_pct"])
        # no departures: allocation never shrinks
        assert all(a >= b - 1e-9 for a, b in zip(curve["unallocated_pct"], curve["unallocated_pct"][1:], strict=False))
        assert p["final"]["unallocated_gpus"] == pytest.approx(16 - p["final"]["allocated_gpus"])
        assert p["first_failure_arrived_pct"] is None or p["first_failure_arrived_pct"] <= p["final"]["arrived_pct"]
    assert r["policies"]["default"]["mapping"]
    assert calls and calls[-1][1] == calls[-1][2]  # progress reaches the end
    text = format_fractional(r)
    assert "best-fit" in text and "fgd" in text and "default" in text and "@100" in text


def test_unknown_policy_and_empty_inputs(trace):
    pods, nodes = trace
    with pytest.raises(ValueError, match="unknown policy 'tetris'"):
        run_fractional(pods, nodes, ["tetris"])
    with pytest.raises(ValueError, match="no pods"):
        run_fractional([], nodes, ["fgd"])
    with pytest.raises(ValueError, match="no GPU nodes"):
        run_fractional(pods, [], ["fgd"])
