"""Where the placer puts MPS shares against the pool's request mix (`Placer._find_mps_frag` and its single-GPU,
host-aware and several-GPU searches), on nodes small enough that the fragmentation term is worked by hand.

F_n(m): the free compute (%) of node n a request of class m could not use: all of it when m cannot run on n
(too few GPUs with its % and MiB free, or the node's host CPU / memory left below what m asks), else that of
the GPUs with less than m's % (or MiB) free. The term is w_fragmentation (0.1) x sum_m w_m dF_n(m) / (sum_m w_m
x 100), in GPUs; the rest of the score is the slowdown (1.0 on an idle GPU).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.core import schedule
from scheduler.core.placement import Placer
from scheduler.core.state import ClusterState
from scheduler.core.topology import build_topology
from scheduler.core.types import CostParams, RequestClass, Share
from tests.scheduler.core.builders import SnapBuilder, config

MEM = 1000  # MiB of every share below (far from any limit)


def mps_nodes(gpus_of: dict[str, int], cpu: dict[str, int] | None = None, model: str = "H100") -> SnapBuilder:
    """One leaf per node (listed in this order), `gpus_of[h]` GPUs each, an MPS pool over all of them."""
    b = SnapBuilder()
    b.spine("S1")
    for name, g in gpus_of.items():
        b.leaf(f"L-{name}", [name], {"S1": 1}, gpus=g, model=model)
        if cpu and name in cpu:
            b.set_node(name, cpu_milli=cpu[name])
    b.pool(1, "infer", sharing="mps")
    return b


def cls(gpus: int, pct: int, weight: float = 1.0, mem: int = MEM, cpu: int = 0, hmem: int = 0) -> RequestClass:
    return RequestClass(1, "mps", gpus, pct, mem, weight=weight, host_cpu_milli=cpu, host_memory_mib=hmem)


def use(b: SnapBuilder, jid: int, host: str, index: int, pct: int) -> None:
    """A running MPS job holding `pct` % (and MEM MiB) of one GPU."""
    b.run(jid, {}, shares=[Share(b.gpu_id(host, index), "mps", pct, MEM)], sharing="mps", mps_compute_pct=pct)


def decide(b: SnapBuilder, mix: list[RequestClass], **cfg):
    return schedule(b.snapshot(config(fragmentation_prior_whole=0.0, **cfg), request_mix=mix))


# ----------------------------------------------------------------------------------------- host-aware mixes


def test_a_cpu_heavy_class_keeps_the_cpu_rich_node_even_when_its_hostname_sorts_first():
    # n1 (16 CPUs) and n2 (4 CPUs), one empty GPU each. Mix: quarters, and whole GPUs that need 12 CPUs (w 5
    # each). A quarter (no CPU) on n1 leaves 75 % the whole class can no longer use: dF = 5 x (75 - 0) = +375.
    # On n2 the whole class never ran (4 < 12 CPUs: all 100 % was its fragment), now 75: 5 x (75 - 100) = -125.
    # n2 wins, although n1 sorts first and the GPUs alone look the same.
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 16000, "n2": 4000})
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25, 5.0), cls(1, 100, 5.0, mem=0, cpu=12000)])
    assert d.placement_for(1).nodes == ("n2",)
    # 0.1 x -125 / (10 x 100) = -0.0125 (no host best fit: the job asks for no CPU, both nodes keep all
    # of theirs: w_host_leftover x 1 on either, 0.02).
    assert d.placement_for(1).cost["fragmentation"] == pytest.approx(-0.0125 + 0.02)


def test_a_mix_without_host_sizes_leaves_host_best_fit_out_of_the_share_score():
    # The same two nodes (16 and 4 CPUs), a mix of quarters only (no CPU), a quarter asking 1 CPU. Either
    # empty GPU changes F alike (0 -> 0: the 75 % left still takes quarters), so the hostname decides: n1.
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 16000, "n2": 4000})
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM, host_cpu_milli=1000)
    d = decide(b, [cls(1, 25)])
    assert d.placement_for(1).nodes == ("n1",)
    assert d.placement_for(1).cost["fragmentation"] == 0.0


def test_several_whole_shares_go_to_the_node_whose_cpu_a_class_could_not_use():
    # n1 (16 CPUs) and n2 (4 CPUs), two empty GPUs each (both in the same bucket of 2 empty, n1 its oldest).
    # Mix: whole GPUs with 12 CPUs. A 2 x 100 % job: on n1, F goes 0 -> 0 (nothing left); on n2 the class never
    # ran: F 200 -> 0, dF = -200 x 5. n2 wins, although it is not the bucket's first node.
    b = mps_nodes({"n1": 2, "n2": 2}, cpu={"n1": 16000, "n2": 4000})
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 100, 5.0, mem=0, cpu=12000)])
    assert d.placement_for(1).nodes == ("n2",)
    # 0.1 x (-1000) / (5 x 100) = -0.2
    assert d.placement_for(1).cost["fragmentation"] == pytest.approx(-0.2)


def test_several_whole_shares_go_to_the_node_whose_host_memory_a_class_could_not_use():
    # The same with host memory: n1 64000 MiB, n2 4000 MiB; whole GPUs that need 12000 MiB. n2: F 200 -> 0.
    b = mps_nodes({"n1": 2, "n2": 2})
    b.set_node("n1", memory_mib=64000)
    b.set_node("n2", memory_mib=4000)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 100, 5.0, mem=0, hmem=12000)])
    assert d.placement_for(1).nodes == ("n2",)
    assert d.placement_for(1).cost["fragmentation"] == pytest.approx(-0.2)


# ----------------------------------------------------------------------------------------- classes of several GPUs


def test_a_class_of_two_partial_gpus_counts_the_other_gpus_of_the_node():
    # Mix: two 40 % shares on two GPUs. n1: two GPUs with 45 % left (the class fits: F = 0); n2: one GPU with
    # 50 % left beside a full one (the class cannot run: F = all 50). A 10 % share on n1 leaves 35 + 45: the
    # class no longer fits, F = 80 (+80); on n2, 40 left: F = 40 (-10). n2, although n1 sorts first.
    b = mps_nodes({"n1": 2, "n2": 2})
    use(b, 91, "n1", 0, 55)
    use(b, 92, "n1", 1, 55)
    use(b, 93, "n2", 0, 50)
    use(b, 94, "n2", 1, 100)
    b.job(1, sharing="mps", mps_compute_pct=10, mps_memory_mib=MEM)
    d = decide(b, [cls(2, 40)])
    assert d.placement_for(1).shares == (Share(b.gpu_id("n2", 0), "mps", 10, MEM),)
    # 0.1 x -10 / (1 x 100) = -0.01
    assert d.placement_for(1).cost["fragmentation"] == pytest.approx(-0.01)


def test_a_node_tied_by_its_count_of_empty_gpus_is_priced_on_its_own_gpus_for_a_partial_class():
    # Mix: two 40 % shares on two GPUs. n2 (listed first: the oldest of the bucket of one empty GPU) has an
    # empty GPU beside a full one; n1 an empty GPU beside one with 45 % left. A 40 % share:
    # n2's empty GPU: (100, 0) -> (60, 0), the class fits neither way: F 100 -> 60, -40 (the best);
    # n1's empty GPU: (100, 45) -> (60, 45), the class still fits: F 0 -> 0; n1's 45 % GPU: -> 5, F 0 -> 105.
    # n1 sorts first and has as many empty GPUs as n2, so it is looked at for the tie, and it does not tie.
    b = mps_nodes({"n2": 2, "n1": 2})
    use(b, 91, "n2", 1, 100)
    use(b, 92, "n1", 1, 55)
    b.job(1, sharing="mps", mps_compute_pct=40, mps_memory_mib=MEM)
    d = decide(b, [cls(2, 40)])
    assert d.placement_for(1).shares == (Share(b.gpu_id("n2", 0), "mps", 40, MEM),)
    # 0.1 x -40 / (1 x 100) = -0.04
    assert d.placement_for(1).cost["fragmentation"] == pytest.approx(-0.04)


# ----------------------------------------------------------------------------------------- ties and evaluations


def test_equal_scores_in_one_bucket_go_to_the_hostname_that_sorts_first():
    # n2 is listed first (the oldest of the bucket of one empty GPU), n1 second; a whole-GPU share changes F by
    # 0 on either (nothing left) and runs as fast: n1, by its hostname.
    b = mps_nodes({"n2": 1, "n1": 1})
    b.job(1, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 100, mem=0)])
    assert d.placement_for(1).nodes == ("n1",)


def test_equal_scores_of_several_whole_shares_go_to_the_hostname_that_sorts_first():
    # The same for a 2 x 100 % job on two nodes with two empty GPUs each: n2 is the bucket's oldest, n1 ties it.
    b = mps_nodes({"n2": 2, "n1": 2})
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 100, mem=0)])
    assert d.placement_for(1).nodes == ("n1",)


def placer_for(b: SnapBuilder, mix: list[RequestClass], **cfg):
    snap = b.snapshot(config(fragmentation_prior_whole=0.0, **cfg), request_mix=mix)
    return Placer(ClusterState(snap, build_topology(snap.fabric)))


def found(b: SnapBuilder, mix: list[RequestClass], job, **cfg):
    placer = placer_for(b, mix, **cfg)
    ctx, error = placer.context(job)
    assert error is None, error
    return placer, placer.find(ctx)


def test_the_host_aware_search_counts_each_gpu_it_prices_once():
    # Two nodes in different states (16 and 4 CPUs), one empty GPU each: two GPUs priced, then the winner's share
    # priced once more as a candidate: 3 evaluations.
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 16000, "n2": 4000})
    job = b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    placer, cand = found(b, [cls(1, 25, 5.0), cls(1, 100, 5.0, mem=0, cpu=12000)], job)
    assert cand.shares[0][0].node.name == "n2"
    assert placer.evaluations == 3


def test_the_single_gpu_search_counts_each_gpu_it_prices_once():
    # n1: GPU 0 half used, GPU 1 empty. A quarter: GPU 0 (bucket of 50 % left) and GPU 1 (the node of the bucket of
    # one empty GPU) are priced; both change F by 0 (a quarter still fits 25 and 75), so they tie and GPU 0 (the
    # lower position) wins; no other node to look at for the tie. Then the winner's share once more: 3.
    b = mps_nodes({"n1": 2})
    use(b, 91, "n1", 0, 50)
    job = b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    placer, cand = found(b, [cls(1, 25)], job)
    assert cand.shares[0][0].pos == 0
    assert placer.evaluations == 3


def test_partial_shares_on_several_gpus_look_at_max_candidates_nodes():
    # Three empty 2-GPU nodes, their GPUs loaded 80 %, 40 % and 0 % by work outside the scheduler; a 2 x 10 %
    # job changes F alike everywhere (90 % left still takes quarters), so the least loaded node looked at wins.
    # With max_candidates = 2 only n1 and n2 are looked at: n2.
    b = mps_nodes({"n1": 2, "n2": 2, "n3": 2})
    for h, u in (("n1", 0.8), ("n2", 0.4)):
        for i in range(2):
            b.set_gpu(h, i, utilisation=u)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=10, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25)], max_candidates=2)
    assert d.placement_for(1).nodes == ("n2",)


def test_partial_shares_on_several_gpus_go_on_gpus_already_in_use():
    # n1's two GPUs are half used (no empty GPU on the node): a 2 x 10 % job still fits there.
    b = mps_nodes({"n1": 2})
    use(b, 91, "n1", 0, 50)
    use(b, 92, "n1", 1, 50)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=10, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25)])
    assert {s.gpu_id for s in d.placement_for(1).shares} == {b.gpu_id("n1", 0), b.gpu_id("n1", 1)}


def test_partial_shares_on_several_gpus_against_a_host_aware_mix_are_placed():
    # A mix whose classes ask for CPU: every eligible node is its own case; a 2 x 10 % job on n1's empty GPUs.
    b = mps_nodes({"n1": 2}, cpu={"n1": 16000})
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=10, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert d.placement_for(1).nodes == ("n1",)


def test_a_share_on_gpus_already_in_use_takes_99_percent_of_each():
    # n1's two GPUs run 1 % each (no empty GPU): 2 x 99 % still fits (1 + 99 = 100), mix with no host sizes.
    b = mps_nodes({"n1": 2})
    use(b, 91, "n1", 0, 1)
    use(b, 92, "n1", 1, 1)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=99, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25)])
    assert d.placement_for(1).nodes == ("n1",)


@pytest.mark.parametrize("pct", [99, 100])
def test_a_host_aware_search_prices_each_node_once_for_several_gpus(pct):
    # A host-aware mix, one node with two empty GPUs: a 2 x pct % job is priced there once (whole shares from
    # the bucket of nodes with 2 empty GPUs, partial ones from the list of nodes, never both).
    b = mps_nodes({"n1": 2}, cpu={"n1": 16000})
    job = b.job(1, gpus=2, sharing="mps", mps_compute_pct=pct, mps_memory_mib=MEM)
    placer, cand = found(b, [cls(1, 25, cpu=1000)], job)
    assert cand.shares[0][0].node.name == "n1"
    assert placer.evaluations == 1


def test_a_host_aware_search_places_99_percent_shares_on_several_gpus():
    b = mps_nodes({"n1": 2}, cpu={"n1": 16000})
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=99, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert d.placement_for(1).nodes == ("n1",)


# ----------------------------------------------------------------------------------------- a bucket's oldest node


def test_a_count_of_empty_gpus_is_priced_on_its_oldest_node_unless_that_one_ties_the_best():
    # Mix: quarters. A quarter changes F by 0 wherever it goes (what is left still takes quarters), so the load
    # decides (slowdown 1 / (1 - util x 0.25)). n2 (listed first, the oldest of the bucket of one empty GPU)
    # is 80 % loaded: 1.25; n1, in the same bucket, is idle: 1.0; n3's half-used GPU is idle: 1.0. The bucket
    # is priced on n2, which does not tie the best (n3, 1.0), so n1 is never looked at: n3.
    b = mps_nodes({"n2": 1, "n1": 1, "n3": 1})
    b.set_gpu("n2", 0, utilisation=0.8)
    use(b, 91, "n3", 0, 50)
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25)])
    assert d.placement_for(1).nodes == ("n3",)
    assert d.placement_for(1).cost["slowdown"] == pytest.approx(1.0)


def test_a_count_of_empty_gpus_is_priced_on_its_oldest_node_for_several_whole_shares():
    # The same for a 2 x 100 % job (F changes by 0 anywhere: nothing is left on the GPUs taken). Two empty GPUs:
    # n2 (oldest, 80 % loaded: 1.25) and n1 (idle: 1.0); three: n3 (40 % loaded: 1 / 0.9 = 1.11). n2 does not
    # tie the best (n3), so n1 is not looked at: n3. (Two GPUs all-reduce 1 GiB over NVLink, 900 x 0.53 = 477
    # GB/s, one ring step each way of 2 us, in the step and in the ideal one alike.)
    b = mps_nodes({"n2": 2, "n1": 2, "n3": 3})
    for i in range(2):
        b.set_gpu("n2", i, utilisation=0.8)
    for i in range(3):
        b.set_gpu("n3", i, utilisation=0.4)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 100, mem=0)])
    assert d.placement_for(1).nodes == ("n3",)
    comm = 2 * 1 / 2 * 2**30 / 477e9 + 2 * 2e-6
    assert d.placement_for(1).cost["slowdown"] == pytest.approx((0.1 / 0.9 + comm) / (0.1 + comm))


# ----------------------------------------------------------------------------------------- partitions, host state


@pytest.mark.parametrize("listed", [("a", "b"), ("b", "a")], ids=["a-first", "b-first"])
def test_equal_scores_across_partitions_go_to_the_hostname_that_sorts_first_in_either_partition(listed):
    # Two one-GPU nodes, the first listed with 80 GB H100s, the second with 96 GB ones (two partitions, searched
    # in that order). A whole-GPU share changes F by 0 on either and runs as fast: "a", by its hostname, whether
    # its partition is searched first or last.
    b = SnapBuilder()
    b.spine("S1")
    for name in listed:
        b.leaf(f"L-{name}", [name], {"S1": 1}, gpus=1)
    b.set_gpu(listed[1], 0, memory_mib=98304)
    b.pool(1, "infer", sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 100, mem=0)])
    assert d.placement_for(1).nodes == ("a",)


def test_a_share_asking_host_memory_skips_a_node_with_the_cpu_but_not_the_memory():
    # Host-aware mix (quarters with 1 CPU). n1 has 16 CPUs but 1000 MiB of host memory, n2 1.5 CPUs and 64000
    # MiB; the job asks 1 CPU and 4000 MiB: only n2 can take it, although the quarter class no longer runs there
    # after it (0.5 CPU left: F 0 -> 75) and n1 sorts first.
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 16000, "n2": 1500})
    b.set_node("n1", memory_mib=1000)
    b.set_node("n2", memory_mib=64000)
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM, host_cpu_milli=1000, host_memory_mib=4000)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert d.placement_for(1).nodes == ("n2",)


def test_a_host_aware_mix_on_nodes_that_track_no_host_resources_adds_no_host_best_fit():
    # The mix asks for CPU, the node tracks none (every class is admitted). A quarter on the empty GPU: F 0 -> 0
    # (75 % still takes quarters), and no host leftover term: fragmentation 0.
    b = mps_nodes({"n1": 1})
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert d.placement_for(1).nodes == ("n1",)
    assert d.placement_for(1).cost["fragmentation"] == 0.0


def test_shares_placed_earlier_in_the_round_change_a_nodes_state_for_the_next():
    # Host-aware mix; n1 and n2 alike (16 CPUs, one empty GPU): one state, priced on n1 (hostname). Job 1 (a whole
    # GPU) takes n1; n1's state changes (its GPU is full), so job 2 is priced on n2, still in the first state,
    # and takes it.
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 16000, "n2": 16000})
    b.job(1, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    b.job(2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert (d.placement_for(1).nodes, d.placement_for(2).nodes) == (("n1",), ("n2",))


def test_a_node_that_leaves_a_state_of_its_own_leaves_no_empty_state_behind():
    # n1 (16 CPUs) and n2 (8 CPUs): two states of one node each. Job 1 (a whole GPU) takes n1 (hostname; F 0 ->
    # 0 either way, and the job asks no CPU: each node keeps all of its own, the same host term); n1's old state
    # has no node left. Job 2 then takes n2.
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 16000, "n2": 8000})
    b.job(1, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    b.job(2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert (d.placement_for(1).nodes, d.placement_for(2).nodes) == (("n1",), ("n2",))


def test_a_node_with_exactly_the_host_resources_asked_takes_the_share():
    # Host-aware mix; n1 has exactly the 1 CPU and 4000 MiB the job asks for.
    b = mps_nodes({"n1": 1}, cpu={"n1": 1000})
    b.set_node("n1", memory_mib=4000)
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM, host_cpu_milli=1000, host_memory_mib=4000)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert d.placement_for(1).nodes == ("n1",)


def test_a_share_asking_cpu_skips_a_node_with_the_memory_but_not_the_cpu():
    # Host-aware mix (quarters with 1 CPU). n1: 0.5 CPU and 64000 MiB; n2: 1.5 CPUs and 64000 MiB. The job asks
    # 1 CPU and 4000 MiB: only n2 has the CPU (n1 sorts first, and its quarter class could not run before either).
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 500, "n2": 1500})
    for h in ("n1", "n2"):
        b.set_node(h, memory_mib=64000)
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM, host_cpu_milli=1000, host_memory_mib=4000)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert d.placement_for(1).nodes == ("n2",)


def test_nodes_in_the_same_state_are_priced_on_the_one_whose_hostname_sorts_first():
    # Host-aware mix; n2 (listed first) and n1 alike (16 CPUs, one empty GPU): n1.
    b = mps_nodes({"n2": 1, "n1": 1}, cpu={"n1": 16000, "n2": 16000})
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 25, cpu=1000)])
    assert d.placement_for(1).nodes == ("n1",)


# ------------------------------------------------------------------------------------ slowdown against fragmentation


@pytest.mark.parametrize(("cpu", "host_term"), [(0, 0.0), (1000, 0.02)], ids=["plain-mix", "host-aware-mix"])
def test_a_busy_gpu_that_would_cut_the_fragment_loses_to_an_idle_one_that_adds_to_it(cpu, host_term):
    # A100s (strength 0.4: the ideal step is 0.1 / 0.4, so an idle GPU's slowdown is 1). Mix: whole GPUs (with 1
    # CPU for the host-aware case). n1's GPU has 50 % left and runs 60 % for others; n2's is empty and idle.
    # A 50 % share: on n1, F 50 -> 0: 0.1 x -50 / 100 = -0.05, slowdown 1 / (1 - 0.6 x 0.25) = 1 / 0.85 = 1.176:
    # 1.126. On n2, F 0 -> 50: +0.05, slowdown 1.0: 1.05. n2 wins. (Host-aware: both nodes keep all 16 CPUs,
    # + 0.02 each.)
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 16000, "n2": 16000}, model="A100")
    use(b, 91, "n1", 0, 50)
    b.set_gpu("n1", 0, utilisation=0.6)
    b.job(1, sharing="mps", mps_compute_pct=50, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 100, mem=0, cpu=cpu)])
    assert d.placement_for(1).nodes == ("n2",)
    assert d.placement_for(1).cost["slowdown"] == pytest.approx(1.0)
    assert d.placement_for(1).cost["fragmentation"] == pytest.approx(0.05 + host_term)


@pytest.mark.parametrize("cpu", [0, 1000], ids=["plain-mix", "host-aware-mix"])
def test_a_gpu_model_priced_at_strength_0_still_takes_a_share(cpu):
    # A misconfigured strength of 0: the compute is floored at strength 1e-6 (no division by zero).
    b = mps_nodes({"n1": 1})
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    cost = replace(CostParams(), gpu_strength={"H100": 0.0})
    d = decide(b, [cls(1, 25, cpu=cpu)], cost=cost)
    assert d.placement_for(1).nodes == ("n1",)


# ----------------------------------------------------------------------------------------- the single-GPU search


PLAIN = [cls(1, 25)]  # quarters: one class of one partial GPU (the inline search)
PARTIAL = [cls(1, 25), cls(2, 25)]  # with two quarters on two GPUs (the exact search over the node's GPUs)


def test_an_empty_gpu_is_priced_with_its_nodes_count_of_empty_gpus_not_as_a_used_one():
    # Mix: two whole GPUs. n1: two empty GPUs; n2: one GPU with 50 % left. A quarter on an empty GPU of n1 takes the
    # node from 2 empty GPUs (the class runs) to 1: F 0 -> 175 (+175); on n2's used GPU the free compute drops by
    # 25 (all of it a fragment to the class, which never ran there): -25. n2, although n1 sorts first.
    b = mps_nodes({"n1": 2, "n2": 1})
    use(b, 91, "n2", 0, 50)
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    d = decide(b, [cls(2, 100, mem=0)])
    assert d.placement_for(1).nodes == ("n2",)
    # 0.1 x -25 / 100 = -0.025
    assert d.placement_for(1).cost["fragmentation"] == pytest.approx(-0.025)


@pytest.mark.parametrize("mix", [PLAIN, PARTIAL], ids=["plain", "partial"])
def test_a_gpu_with_99_percent_left_takes_a_share(mix):
    b = mps_nodes({"n1": 1})
    use(b, 91, "n1", 0, 1)
    b.job(1, sharing="mps", mps_compute_pct=10, mps_memory_mib=MEM)
    assert decide(b, mix).placement_for(1).nodes == ("n1",)


@pytest.mark.parametrize("mix", [PLAIN, PARTIAL], ids=["plain", "partial"])
def test_a_used_gpu_with_exactly_the_memory_asked_left_takes_the_share(mix):
    # n1's GPU: 50 % and all but 1000 MiB used; the share asks 1000 MiB.
    b = mps_nodes({"n1": 1})
    b.run(91, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 50, 81920 - MEM)], sharing="mps", mps_compute_pct=50)
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    assert decide(b, mix).placement_for(1).nodes == ("n1",)


@pytest.mark.parametrize("mix", [PLAIN, PARTIAL], ids=["plain", "partial"])
def test_a_used_gpu_on_a_node_without_the_cpu_asked_is_skipped(mix):
    # A mix without host sizes; n1 (0.5 CPU) and n2 (16 CPUs), each GPU half used. A quarter asking 1 CPU: n2.
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 500, "n2": 16000})
    use(b, 91, "n1", 0, 50)
    use(b, 92, "n2", 0, 60)
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM, host_cpu_milli=1000)
    assert decide(b, mix).placement_for(1).nodes == ("n2",)


@pytest.mark.parametrize("mix", [PLAIN, PARTIAL], ids=["plain", "partial"])
def test_an_empty_gpu_on_a_node_without_the_cpu_asked_is_skipped(mix):
    # The same with empty GPUs: n1 (0.5 CPU) is the oldest of the bucket of one empty GPU, n2 has the CPU.
    b = mps_nodes({"n1": 1, "n2": 1}, cpu={"n1": 500, "n2": 16000})
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM, host_cpu_milli=1000)
    assert decide(b, mix).placement_for(1).nodes == ("n2",)


def test_a_node_that_sorts_first_but_lacks_the_cpu_is_not_taken_on_a_tie():
    # n2 (listed first: the bucket's oldest) has the CPU; n1 ties it (an empty GPU, idle) but has 0.5 CPU.
    b = mps_nodes({"n2": 1, "n1": 1}, cpu={"n1": 500, "n2": 16000})
    b.job(1, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM, host_cpu_milli=1000)
    assert decide(b, [cls(1, 100, mem=0)]).placement_for(1).nodes == ("n2",)


def test_ties_in_a_bucket_go_down_the_hostnames_from_the_best_so_far():
    # Buckets of one empty GPU: n4 (listed first, its oldest), n3, n2; n1's GPU is full. A whole-GPU share ties on
    # every empty GPU (score exactly 1.0: idle, F 0 -> 0), so n3 (sorts before n4), then n2 (before n3): n2.
    b = mps_nodes({"n4": 1, "n3": 1, "n2": 1, "n1": 1})
    use(b, 91, "n1", 0, 100)
    b.job(1, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = decide(b, [cls(1, 100, mem=0)])
    assert d.placement_for(1).nodes == ("n2",)
    assert d.placement_for(1).score == 1.0


def test_the_exact_single_gpu_search_prices_an_empty_gpu_once():
    # A mix with a class of two partial GPUs; n1 has one empty GPU and nothing else: priced once in the search
    # of empty GPUs (none is "in use"), then the winner's share once more: 2 evaluations.
    b = mps_nodes({"n1": 1})
    job = b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    placer, cand = found(b, PARTIAL, job)
    assert cand.shares[0][0].node.name == "n1"
    assert placer.evaluations == 2


def test_a_share_asking_cpu_goes_to_the_hostname_that_sorts_first_on_a_tie():
    # n2 (listed first) and n1 alike, both with the CPU; a whole-GPU share asking 1 CPU, mix without host sizes:
    # n1.
    b = mps_nodes({"n2": 1, "n1": 1}, cpu={"n1": 16000, "n2": 16000})
    b.job(1, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM, host_cpu_milli=1000)
    assert decide(b, [cls(1, 100, mem=0)]).placement_for(1).nodes == ("n1",)


# ----------------------------------------------------------------------------------------- the several-GPU search


@pytest.mark.parametrize("mix", [[cls(1, 25)], [cls(1, 25, cpu=1000)]], ids=["plain", "host-aware"])
def test_partial_shares_on_several_gpus_skip_a_node_without_the_cpu_asked(mix):
    # n1 (listed first) has 0.5 CPU, n2 16; a 2 x 25 % job asking 1 CPU: n2.
    b = mps_nodes({"n1": 2, "n2": 2}, cpu={"n1": 500, "n2": 16000})
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM, host_cpu_milli=1000)
    assert decide(b, mix).placement_for(1).nodes == ("n2",)


@pytest.mark.parametrize("mix", [[cls(1, 100, mem=0)], [cls(1, 100, mem=0, cpu=1000)]], ids=["plain", "host-aware"])
def test_whole_shares_on_several_gpus_skip_a_node_without_the_cpu_asked(mix):
    # n1 (listed first: the oldest of the bucket of two empty GPUs) has 0.5 CPU, n2 16; 2 x 100 % asking 1 CPU: n2.
    b = mps_nodes({"n1": 2, "n2": 2}, cpu={"n1": 500, "n2": 16000})
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM, host_cpu_milli=1000)
    assert decide(b, mix).placement_for(1).nodes == ("n2",)


def test_the_several_gpu_search_prices_the_best_node_once():
    # One node with two empty GPUs, a 2 x 100 % job, a mix without host sizes: the bucket's oldest is priced,
    # and no node sorts before it: 1 evaluation.
    b = mps_nodes({"n1": 2})
    job = b.job(1, gpus=2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    placer, cand = found(b, [cls(1, 100, mem=0)], job)
    assert cand.shares[0][0].node.name == "n1"
    assert placer.evaluations == 1


@pytest.mark.parametrize(("cpu", "hmem"), [(1 << 60, 0), (0, 1 << 60)], ids=["cpu", "host-memory"])
def test_a_node_that_tracks_no_host_resources_admits_a_class_of_any_size_after_a_share_too(cpu, hmem):
    # n1 tracks neither CPU nor host memory: a class asking 2**60 of either still runs there after a 2 x 25 %
    # share that asks 1 CPU and 1000 MiB (nothing is taken from an untracked amount): F 0 -> 0 (75 % left on
    # each GPU fits the quarters).
    b = mps_nodes({"n1": 2})
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM, host_cpu_milli=1000, host_memory_mib=MEM)
    d = decide(b, [cls(1, 25, cpu=cpu, hmem=hmem)])
    assert d.placement_for(1).nodes == ("n1",)
    assert d.placement_for(1).cost["fragmentation"] == 0.0


# ----------------------------------------------------------------------------------------- no mix


def no_mix(b: SnapBuilder):
    return schedule(b.snapshot(config(fragmentation_max_classes=0)))


def test_without_a_mix_a_share_weighs_a_busy_gpus_slowdown_against_packing():
    # The term is off (no class): GPUs are tried least room first. n1's GPU 0 has 50 % left but runs 80 % for
    # others: 1 / (1 - 0.8 x 0.25) = 1.25, + 0.01 x 0.5 left = 1.255; its GPU 1 is empty and idle: 1.0 + 0.01 =
    # 1.01. GPU 1.
    b = mps_nodes({"n1": 2})
    use(b, 91, "n1", 0, 50)
    b.set_gpu("n1", 0, utilisation=0.8)
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    assert no_mix(b).placement_for(1).shares == (Share(b.gpu_id("n1", 1), "mps", 25, MEM),)


def test_without_a_mix_a_two_gpu_share_takes_two_gpus_of_one_node():
    b = mps_nodes({"n1": 2})
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    shares = no_mix(b).placement_for(1).shares
    assert sorted(s.gpu_id for s in shares) == [b.gpu_id("n1", 0), b.gpu_id("n1", 1)]
