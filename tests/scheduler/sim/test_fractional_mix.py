"""The request mix `default` (the engine) sees in the fractional replay: the GPU pods arrived so far, never one
still to come. Small hand-made traces only."""

from __future__ import annotations

import random

from scheduler.sim.fractional import Cluster, EnginePolicy, FragMeter
from scheduler.sim.traces.alibaba import AlibabaNode, AlibabaPod


def node(name, gpus=2, cpu=64000, mem=262144, model="T4"):
    return AlibabaNode(name, cpu, mem, gpus, model)


def pod(name, milli, num=1, cpu=1000, mem=1024):
    return AlibabaPod(name, cpu, mem, num, milli)


def play(nodes, pods):
    cluster = Cluster(nodes, FragMeter([]))
    pol = EnginePolicy(cluster, nodes)
    out = []
    for p in pods:
        choice = pol.place(p)
        if choice is not None:
            cluster.assign(choice[0], p, choice[1])
        out.append(choice)
    return pol, out


def test_the_mix_is_the_gpu_pods_arrived_so_far():
    nodes = [node("n0"), node("n1", gpus=4, model="G2")]
    pods = [pod("a", 500), pod("b", 500), pod("w", 1000, num=2), pod("cpu", 0, num=0), pod("c", 250)]
    pol, _ = play(nodes, pods[:2])
    # T4 memory 16384 MiB: 50 % -> 8192 MiB (class: GPUs, %, MiB, model, host CPU, host MiB).
    assert pol.mix == {(1, 50, 8192, None, 1000, 1024): 2}
    pol, _ = play(nodes, pods)
    # The CPU-only pod is no engine request; 25 % -> 4096 MiB, whole GPUs -> all 16384.
    assert pol.mix == {
        (1, 50, 8192, None, 1000, 1024): 2,
        (2, 100, 16384, None, 1000, 1024): 1,
        (1, 25, 4096, None, 1000, 1024): 1,
    }


def test_no_choice_depends_on_a_pod_still_to_come():
    rng = random.Random(3)
    nodes = [node(f"n{i}", gpus=rng.choice((1, 2, 4, 8))) for i in range(8)]
    sizes = (100, 250, 300, 470, 810, 1000)
    pods = [pod(f"p{k}", rng.choice(sizes), num=1 if rng.random() < 0.9 else 2) for k in range(60)]
    _, full = play(nodes, pods)
    for k in (10, 25, 40):
        _, prefix = play(nodes, pods[:k])
        assert prefix == full[:k], k
