"""FGD's fragmentation measure (Weng et al., ATC '23, section 3) on examples computed by hand.

F_n(m): the unallocated GPU of node n that task m cannot use: all of it when m cannot run on n (too little
CPU, a GPU model it does not accept, fewer than num_gpu GPUs with gpu_milli free) or m asks for no GPU;
otherwise the unallocated GPU of the GPUs with less than m's per-GPU request free. F_n(M) = sum p_m F_n(m).
"""

from __future__ import annotations

import pytest

from scheduler.sim.fractional import FragMeter, TypicalPod, node_frag_milli, task_frag_milli, typical_pods
from scheduler.sim.traces.alibaba import AlibabaPod

# Task types: (cpu, gpu_milli per GPU, num_gpu, accepted models, count)
A = TypicalPod(2000, 600, 1, (), 5)  # 0.6 of a GPU
B = TypicalPod(1000, 1000, 1, (), 3)  # a whole GPU
C = TypicalPod(1000, 0, 0, (), 2)  # CPU only
WORKLOAD = [A, B, C]  # p = 0.5, 0.3, 0.2


def test_task_fragmentation_cases():
    lefts = [1000, 500, 200, 0]  # milli-GPU free per GPU
    # A runs (GPU 0 has 600 free): the GPUs with less than 600 free are fragments: 500 + 200 + 0.
    assert task_frag_milli("T4", 8000, lefts, A) == 700
    # B runs on GPU 0: the others (700) are fragments.
    assert task_frag_milli("T4", 8000, lefts, B) == 700
    # C asks for no GPU: every unallocated GPU (1700) is a fragment for it.
    assert task_frag_milli("T4", 8000, lefts, C) == 1700
    # Too little CPU for A: all 1700.
    assert task_frag_milli("T4", 1500, lefts, A) == 1700
    # A only accepts V100: all 1700 on a T4 node, 700 on a V100 node.
    a_v100 = TypicalPod(2000, 600, 1, ("V100M16", "V100M32"), 1)
    assert task_frag_milli("T4", 8000, lefts, a_v100) == 1700
    assert task_frag_milli("V100M16", 8000, lefts, a_v100) == 700
    # Two whole GPUs: only one GPU is free, so nothing here is usable for it; with two free, 300 is left over.
    d = TypicalPod(4000, 1000, 2, (), 1)
    assert task_frag_milli("T4", 8000, lefts, d) == 1700
    assert task_frag_milli("T4", 8000, [1000, 1000, 300, 0], d) == 300
    # A node with nothing left has no fragment.
    assert task_frag_milli("T4", 8000, [0, 0], A) == 0


def test_node_fragmentation_is_the_expectation_over_the_workload():
    # 0.5 * 700 + 0.3 * 700 + 0.2 * 1700 = 900
    assert node_frag_milli("T4", 8000, [1000, 500, 200, 0], WORKLOAD) == pytest.approx(900)
    # Too little CPU for A: 0.5 * 1700 + 0.3 * 700 + 0.2 * 1700 = 1400
    assert node_frag_milli("T4", 1500, [1000, 500, 200, 0], WORKLOAD) == pytest.approx(1400)
    # An empty 2-GPU node: A and B fit with nothing stranded; C sees 2000: 0.2 * 2000 = 400
    assert node_frag_milli("T4", 8000, [1000, 1000], WORKLOAD) == pytest.approx(400)


def test_gradient_of_a_placement():
    # A 0.5-GPU task on [1000, 500, 200, 0]: on GPU 1 the node's F goes 900 -> 400 (A: 200, B: 200, C: 1200);
    # on GPU 0 it goes to 1200 (nothing left fits A or B). FGD takes GPU 1 (largest decrease).
    before = node_frag_milli("T4", 8000, [1000, 500, 200, 0], WORKLOAD)
    on_gpu1 = node_frag_milli("T4", 7000, [1000, 0, 200, 0], WORKLOAD)
    on_gpu0 = node_frag_milli("T4", 7000, [500, 500, 200, 0], WORKLOAD)
    assert (before, on_gpu1, on_gpu0) == (pytest.approx(900), pytest.approx(400), pytest.approx(1200))


def test_meter_memoises_by_state_and_keeps_integers():
    m = FragMeter(WORKLOAD)
    key = ("T4", 8000, (1000, 500, 200, 0))
    assert m.num(key) == 9000 and m.denominator == 10  # 900 milli-GPU * 10 pods
    assert m.num(key) == 9000 and len(m.memo) == 1


def pod(name, cpu, milli, num=1, spec=()):
    return AlibabaPod(name, cpu, 1024, num, milli, spec)


def test_typical_pods_cover_the_threshold_most_frequent_first():
    pods = [pod(f"a{i}", 1000, 500) for i in range(6)]
    pods += [pod(f"b{i}", 2000, 1000) for i in range(3)]
    pods += [pod("c0", 1000, 0, 0)]
    t = typical_pods(pods, 0.95)
    assert [(x.cpu_milli, x.gpu_milli, x.num_gpu, x.count) for x in t] == [
        (1000, 500, 1, 6),
        (2000, 1000, 1, 3),
        (1000, 0, 0, 1),
    ]
    # 60 % is covered by the first type alone (the type that crosses the threshold is kept).
    assert [x.count for x in typical_pods(pods, 0.6)] == [6]
    assert [x.count for x in typical_pods(pods, 0.7)] == [6, 3]
    # Equal counts: the larger request first (the simulator's reverse order).
    tie = typical_pods([pod("x", 1000, 300), pod("y", 4000, 300)], 1.0)
    assert [x.cpu_milli for x in tie] == [4000, 1000]
