"""The fragmentation term for MPS shares (FGD, Weng et al. ATC '23) on nodes computed by hand, the placements
it implies, and what it leaves alone (whole GPUs, other sharing modes).

F_n(m): the free compute (%) of node n that a request of class m could not use: all of it when m cannot run
on n (its GPU model, fewer than m's GPUs with p_m % and mem_m MiB free), else that of the GPUs with less than
p_m % (or mem_m MiB) free. F_n(M) = sum_m w_m F_n(m) / sum_m w_m.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduler.core import schedule
from scheduler.core.fragmentation import WEIGHT_SCALE, MixClass, MpsFragmentation, mix_from_jobs, mps_classes
from scheduler.core.types import JobRequest, RequestClass, Share
from tests.scheduler.core.builders import SnapBuilder, config

WHOLE = MixClass(1, 100, 0, None, 1)  # one whole GPU
QUARTER = MixClass(1, 25, 0, None, 1)  # a quarter of one
MEM = 1000  # MiB of every share below (far from any limit)


def mps_cluster(gpus_of: dict[str, int]) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    for name, g in gpus_of.items():
        b.leaf(f"L-{name}", [name], {"S1": 1}, gpus=g)
    b.pool(1, "infer", sharing="mps")
    return b


def mix(*shapes: tuple[int, int, float], pool: int = 1) -> list[RequestClass]:
    """(gpus, pct, weight) -> request classes of MEM MiB (whole GPUs: 0 MiB, any memory)."""
    return [RequestClass(pool, "mps", g, p, 0 if p == 100 else MEM, weight=w) for g, p, w in shapes]


def only_mix(**kw):
    return config(fragmentation_prior_whole=0.0, **kw)


# ----------------------------------------------------------------------------------------- the measure


def test_half_free_gpu_against_half_whole_half_quarter_requests():
    f = MpsFragmentation([WHOLE, QUARTER])
    # One GPU with 50 % free: a whole-GPU request cannot run (all 50 is a fragment to it), a quarter fits
    # (nothing stranded): F = (1 x 50 + 1 x 0) / 2 = 25 % of a GPU.
    assert f.node_num("H100", [(50, 40000)]) == 50 and f.denominator == 2
    # Beside an empty GPU: the whole request runs there and cannot use the 50: (50 + 0) / 2, still 25 %.
    assert f.node_num("H100", [(50, 40000), (100, 81920)]) == 50
    # 10 % left beside an empty GPU: 10 is a fragment to both: (10 + 10) / 2 = 10 %.
    assert f.node_num("H100", [(10, 40000), (100, 81920)]) == 20
    # Nothing free, nothing stranded.
    assert f.node_num("H100", [(0, 0), (0, 0)]) == 0


def test_requests_that_cannot_run_see_all_the_free_compute():
    # A quarter that asks for an A100 cannot run on an H100: all 50 % is a fragment to it.
    assert MpsFragmentation([MixClass(1, 25, 0, "A100", 1)]).node_num("H100", [(50, 40000)]) == 50
    # ... nor where the GPU lacks its memory: 40000 MiB free < 50000 asked.
    assert MpsFragmentation([MixClass(1, 25, 50000, None, 1)]).node_num("H100", [(50, 40000)]) == 50
    # Two whole GPUs: with two empty ones the 30 % GPU is the only fragment; with one, all 130 %.
    two = MpsFragmentation([MixClass(2, 100, 0, None, 1)])
    assert two.node_num("H100", [(100, 81920), (100, 81920), (30, 1000)]) == 30
    assert two.node_num("H100", [(100, 81920), (30, 1000)]) == 130
    # Two 40 % shares on two GPUs: GPUs with 50 and 45 free hold them, the 20 is stranded (20); with only
    # the 50 and the 20, it cannot run: 70.
    pair = MpsFragmentation([MixClass(2, 40, 0, None, 1)])
    assert pair.node_num("H100", [(50, 1000), (45, 1000), (20, 1000)]) == 20
    assert pair.node_num("H100", [(50, 1000), (20, 1000)]) == 70


@pytest.mark.parametrize(("classes", "denominator"), [([], 1), ([QUARTER], 1)], ids=["no-class", "weight-1"])
def test_the_denominator_is_the_total_weight_and_never_0(classes, denominator):
    assert MpsFragmentation(classes).denominator == denominator


def test_one_percent_free_is_a_fragment_too():
    assert MpsFragmentation([WHOLE]).node_num("H100", [(1, 1000)]) == 1


@pytest.mark.parametrize(
    ("cls", "kw"),
    [(MixClass(1, 25, 0, None, 1, cpu=4000), {"cpu": 4000}), (MixClass(1, 25, 0, None, 1, hmem=4096), {"hmem": 4096})],
    ids=["cpu", "host-memory"],
)
def test_a_node_with_exactly_the_host_resources_a_class_asks_for_admits_it(cls, kw):
    assert MpsFragmentation([cls]).node_num("T4", [(60, 8000)], **kw) == 0  # it runs: nothing stranded


@pytest.mark.parametrize(
    ("cls", "aware"),
    [(MixClass(1, 25, 0, None, 1), False), (MixClass(1, 25, 0, None, 1, cpu=1), True),
     (MixClass(1, 25, 0, None, 1, hmem=1), True)],
    ids=["none", "cpu", "host-memory"],
)  # fmt: skip
def test_the_measure_is_host_aware_when_a_class_asks_for_any_cpu_or_host_memory(cls, aware):
    assert MpsFragmentation([cls]).cpu_aware is aware


def test_a_class_of_several_partial_gpus_needs_the_nodes_other_gpus():
    f = MpsFragmentation([MixClass(2, 99, 0, None, 1)])  # 99 %: partial, however close to whole
    with pytest.raises(ValueError, match="other GPUs"):
        f.delta_single("H100", 10, 0, 100, 81920, 1, 1, 81920)


def test_a_gpu_with_99_percent_free_is_not_empty():
    # Node: (99 % free, full memory) + 2 empty GPUs; the 2-GPU whole class runs on the empty ones, the 99 is its
    # fragment. 10 % on the 99: the fragment is 89, -10. Were it counted empty, the class would lose its
    # second empty GPU.
    f = MpsFragmentation([MixClass(2, 100, 0, None, 1)])
    assert f.delta_single("H100", 10, 0, 99, 81920, 2, 3, 81920) == -10


def test_a_whole_class_that_needs_all_the_nodes_gpus_and_their_memory_runs_there():
    # Two empty GPUs of 81920 MiB, a class of 2 whole GPUs of 81920 MiB: it runs (F = 0). After 10 % on one
    # it cannot: F = all 190 left.
    f = MpsFragmentation([MixClass(2, 100, 81920, None, 1)])
    assert f.delta_single("H100", 10, 0, 100, 81920, 2, 2, 81920) == 190


def test_a_gpu_with_exactly_the_memory_a_class_asks_for_fits_it_before_and_after():
    # 8000 MiB left before and after a 0-MiB share: the 8000-MiB quarter fits both times (F = 0 and 0).
    f = MpsFragmentation([MixClass(1, 25, 8000, None, 1)])
    assert f.delta_single("H100", 10, 0, 50, 8000, 0, 1, 81920) == 0


def test_delta_node_runs_a_class_of_the_nodes_model_given_in_lower_case():
    # The quarter fits before (100 %) and after (90 %): no change.
    f = MpsFragmentation([MixClass(1, 25, 0, "T4", 1, cpu=1000)])
    assert f.delta_node("t4", [(100, 16000)], (8000, None), (7000, None), 10, 0, [0]) == [0]


def test_delta_node_a_share_that_takes_a_gpu_below_a_class_strands_what_is_left():
    # 25 % free, exactly a quarter: it fits (F = 0); after 10 % the 15 left cannot take one, and no GPU can: F = 15.
    f = MpsFragmentation([MixClass(1, 25, 0, None, 1, cpu=1000)])
    assert f.delta_node("T4", [(25, 16000)], (8000, None), (8000, None), 10, 0, [0]) == [15]


def test_fast_change_of_one_share_equals_the_node_before_and_after():
    # delta_single (per-GPU memo + empty-GPU count) against node_num on both sides, on random nodes and mixes
    # that have one-GPU, whole multi-GPU, partial multi-GPU and model-restricted classes.
    rng = random.Random(12)
    for _ in range(300):
        classes = [
            MixClass(rng.choice((1, 1, 2, 4)), rng.choice((10, 25, 30, 50, 100)), rng.choice((0, 8000)),
                     rng.choice((None, None, "H100", "A100")), rng.randint(1, 9))
            for _ in range(rng.randint(1, 5))
        ]  # fmt: skip
        f = MpsFragmentation(classes)
        G = rng.choice((1, 2, 4, 8))
        gpus = [(L, 40000 if L < 100 else 81920) for L in (rng.choice((0, 5, 20, 45, 60, 100)) for _ in range(G))]
        pct, mem = rng.choice((5, 10, 25, 50, 100)), rng.choice((1000, 8000))
        for i, (L, M) in enumerate(gpus):
            if L < pct or M < mem:
                continue
            after = list(gpus)
            after[i] = (L - pct, M - mem)
            empty = sum(1 for x, y in gpus if x == 100 and y == 81920)
            others = gpus[:i] + gpus[i + 1 :]
            d = f.delta_single("H100", pct, mem, L, M, empty, G, 81920, others)
            assert d == f.node_num("H100", after) - f.node_num("H100", gpus), (classes, gpus, i, pct, mem)
            if L < 100 and not f.multi_partial:  # the placer's shortcut for GPUs already in use
                assert f.delta_used_gpu("H100", pct, mem, L, M) == d


def test_the_mix_is_merged_cut_at_its_coverage_and_weighed_in_integers():
    m = [
        *mix((1, 25, 3.0), (1, 25, 2.0), (1, 100, 4.0), (1, 10, 0.5)),
        RequestClass(2, "mps", 1, 25, MEM, weight=9.0),  # another pool
        RequestClass(1, "mig", 1, mig_profile="1g.10gb", weight=9.0),  # another mode
    ]
    # Pool 1: 25 % weighs 3 + 2 = 5, whole 4, 10 % 0.5 (9.5 in all). 90 % coverage = 8.55: 25 % (5), whole
    # (9 >= 8.55): the 10 % is left out. Integers: the heaviest = WEIGHT_SCALE, whole 4/5 of it.
    assert mps_classes(m, 1, coverage=0.9) == (
        MixClass(1, 25, MEM, None, WEIGHT_SCALE),
        MixClass(1, 100, 0, None, WEIGHT_SCALE * 4 // 5),
    )
    assert len(mps_classes(m, 1, coverage=1.0)) == 3
    assert len(mps_classes(m, 1, coverage=1.0, max_classes=2)) == 2
    # One pseudo-request of a whole GPU (the prior) joins the whole class: 5 = 5, the larger request first.
    assert mps_classes(m, 1, coverage=0.9, prior_whole=1.0)[0] == MixClass(1, 100, 0, None, WEIGHT_SCALE)
    assert mps_classes(m, 3) == ()  # nothing for that pool: no term, no prior
    assert mps_classes(list(reversed(m)), 1, coverage=0.9) == mps_classes(m, 1, coverage=0.9)


def test_jobs_of_one_shape_make_one_class_weighed_by_their_count():
    one = JobRequest(1, "t", 1, 1, sharing="mps", mps_compute_pct=30, mps_memory_mib=MEM)
    two = replace(one, id=2)
    assert mix_from_jobs([one, two]) == [RequestClass(1, "mps", 1, 30, MEM, weight=2.0)]


def test_exclusive_jobs_are_no_part_of_the_mix():
    whole = JobRequest(1, "t", 1, 2)
    shared = JobRequest(2, "t", 1, 1, sharing="mps", mps_compute_pct=30, mps_memory_mib=MEM)
    assert mix_from_jobs([whole, shared]) == [RequestClass(1, "mps", 1, 30, MEM, weight=1.0)]


def test_a_shared_job_without_mps_sizes_asks_for_0_percent_and_0_mib():
    mig = JobRequest(1, "t", 1, 1, sharing="mig", mig_profile="1g.10gb")
    assert mix_from_jobs([mig]) == [RequestClass(1, "mig", 1, 0, 0, "1g.10gb", weight=1.0)]


def test_the_default_coverage_cuts_the_mix_at_95_percent():
    # 96 of 100 covers 95 %: the 4 % class is left out.
    assert mps_classes(mix((1, 25, 96.0), (1, 10, 4.0)), 1) == (MixClass(1, 25, MEM, None, WEIGHT_SCALE),)


def test_the_default_keeps_at_most_32_classes():
    # 40 classes of equal weight: 32 of them cover 80 %, short of the 95 % coverage, so the count stops them.
    assert len(mps_classes(mix(*((1, p, 1.0) for p in range(1, 41))), 1)) == 32


def test_no_prior_by_default():
    assert mps_classes(mix((1, 25, 1.0)), 1) == (MixClass(1, 25, MEM, None, WEIGHT_SCALE),)


def test_a_zero_prior_adds_no_class_even_when_nothing_is_cut():
    # A coverage above all the weight keeps every class, so a zero-weight whole class would show.
    assert mps_classes(mix((1, 25, 1.0)), 1, coverage=2.0) == (MixClass(1, 25, MEM, None, WEIGHT_SCALE),)


def test_a_prior_below_one_request_still_joins_as_its_own_class():
    # No whole class in the mix: the prior alone makes one, 0.5 / 2 of the heaviest = 2500.
    assert mps_classes(mix((1, 25, 2.0)), 1, coverage=1.0, prior_whole=0.5) == (
        MixClass(1, 25, MEM, None, WEIGHT_SCALE),
        MixClass(1, 100, 0, None, 2500),
    )


def test_a_mix_of_only_weightless_requests_is_no_mix_and_gets_no_prior():
    assert mps_classes(mix((1, 25, 0.0)), 1, prior_whole=1.0) == ()


def test_the_class_that_reaches_the_coverage_exactly_is_the_last():
    # Half of 2 is 1: the first class (1) reaches it, the second is cut.
    assert mps_classes(mix((1, 25, 1.0), (1, 10, 1.0)), 1, coverage=0.5) == (MixClass(1, 25, MEM, None, WEIGHT_SCALE),)


def test_a_class_far_lighter_than_the_heaviest_weighs_at_least_1():
    # 10000 x 1 / 100000 = 0.1 rounds to 0: kept at 1.
    got = mps_classes(mix((1, 25, 100000.0), (1, 10, 1.0)), 1, coverage=1.0)
    assert [c.weight for c in got] == [WEIGHT_SCALE, 1]


@pytest.mark.parametrize(
    ("pct", "kept"), [(0, False), (1, True), (100, True), (101, False)], ids=["0", "1", "100", "101"]
)
def test_only_1_to_100_percent_is_an_mps_request(pct, kept):
    assert len(mps_classes([RequestClass(1, "mps", 1, pct, MEM)], 1)) == (1 if kept else 0)


def test_a_request_of_no_gpu_is_left_out():
    assert mps_classes([RequestClass(1, "mps", 0, 25, MEM)], 1) == ()


def test_negative_memory_and_host_sizes_count_as_none():
    c = RequestClass(1, "mps", 1, 25, -5, host_cpu_milli=-3, host_memory_mib=-7)
    assert mps_classes([c], 1) == (MixClass(1, 25, 0, None, WEIGHT_SCALE, 0, 0),)


def test_the_model_is_compared_in_upper_case_without_blanks():
    c = RequestClass(1, "mps", 1, 25, MEM, gpu_model=" h100 ")
    assert mps_classes([c], 1) == (MixClass(1, 25, MEM, "H100", WEIGHT_SCALE),)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((2, 10, 0, None, 0, 0), (1, 50, 0, None, 0, 0)),  # more GPUs first, whatever their percent
        ((1, 50, 100, None, 0, 0), (1, 25, 200, None, 0, 0)),  # then the larger percent, whatever the memory
        ((1, 25, 200, None, 0, 0), (1, 25, 100, None, 0, 0)),  # then more memory
        ((1, 25, 100, None, 0, 0), (1, 25, 100, "A100", 0, 0)),  # then any model before a named one
        ((1, 25, 100, "A100", 0, 0), (1, 25, 100, "H100", 0, 0)),  # named ones by name
        ((1, 25, 100, None, 2000, 0), (1, 25, 100, None, 0, 4000)),  # then more CPU, whatever the memory
        ((1, 25, 100, None, 0, 4000), (1, 25, 100, None, 0, 0)),  # then more host memory
    ],
    ids=["gpus", "pct", "mem", "any-model", "model-name", "cpu", "host-memory"],
)
def test_classes_of_equal_weight_go_larger_request_first(first, second):
    def req(g, p, m, model, cpu, hmem):
        return RequestClass(1, "mps", g, p, m, gpu_model=model, host_cpu_milli=cpu, host_memory_mib=hmem)

    # Listed in the other order, so that keeping the input order would show.
    got = mps_classes([req(*second), req(*first)], 1, coverage=1.0)
    assert got == tuple(MixClass(*k[:4], WEIGHT_SCALE, *k[4:]) for k in (first, second))


# ----------------------------------------------------------------------------------------- placements


def test_a_quarter_goes_to_the_half_free_gpu_and_the_cost_says_by_how_much():
    # n1: one GPU, half used; n2: one empty GPU. Mix: whole GPUs and quarters, equally often.
    b = mps_cluster({"n1": 1, "n2": 1})
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 50, MEM)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=25, mps_memory_mib=MEM)
    d = schedule(b.snapshot(only_mix(), request_mix=mix((1, 100, 1.0), (1, 25, 1.0))))
    # On n1 (50 -> 25): the whole request's fragment shrinks by 25, the quarter still fits: -25 x 1.
    # On n2 (100 -> 75): the whole request can no longer run there: +75. FGD takes n1.
    p = d.placement_for(1)
    assert p.shares == (Share(b.gpu_id("n1", 0), "mps", 25, MEM),)
    # Its cost: w_fragmentation x change in GPUs = 0.1 x (-25 x 10000) / (20000 x 100) = -0.0125.
    assert p.cost["fragmentation"] == pytest.approx(-0.0125)


def test_a_small_share_keeps_the_slot_the_common_request_needs():
    # GPU 0 has 30 % left, GPU 1 is empty; almost every request is 30 %. A 10 % share on GPU 0 would leave
    # 20 % no 30 % request can use (+20 x w); on GPU 1 the 90 % left still takes 30 % requests (0). Packing
    # (least room left) would take GPU 0. (The prior of 4 whole-GPU pseudo-requests is 4 / 104 of the weight,
    # outside the 95 % coverage.)
    b = mps_cluster({"n1": 2})
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 0), "mps", 70, MEM)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=10, mps_memory_mib=MEM)
    d = schedule(b.snapshot(request_mix=mix((1, 30, 100.0))))
    assert d.placement_for(1).shares == (Share(b.gpu_id("n1", 1), "mps", 10, MEM),)
    off = schedule(b.snapshot(config(fragmentation_max_classes=0), request_mix=mix((1, 30, 100.0))))
    assert off.placement_for(1).shares == (Share(b.gpu_id("n1", 0), "mps", 10, MEM),)  # the term off: packing
    # With whole-GPU requests as common as 30 % ones (whole: 1 + the prior 4 = 5 against 1), GPU 0 wins:
    # there -10 x 5 (whole) + 20 x 1 (30 %) = -30; on GPU 1 +90 x 5 = +450.
    d = schedule(b.snapshot(request_mix=mix((1, 30, 1.0), (1, 100, 1.0))))
    assert d.placement_for(1).shares == (Share(b.gpu_id("n1", 0), "mps", 10, MEM),)


def test_with_a_mix_of_one_request_the_prior_still_packs():
    # The mix is the snapshot's own jobs (one 30 % pending job, the running one gives no MPS size): the prior
    # (4 whole GPUs vs 1) makes the 40 %-free GPU 1 the better choice: -10 x 4 + ... < +70 x 4.
    b = mps_cluster({"n1": 2})
    b.run(9, {}, shares=[Share(b.gpu_id("n1", 1), "mps", 60, 20000)], sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=30, mps_memory_mib=10000)
    d = schedule(b.snapshot())
    assert d.placements[0].shares == (Share(b.gpu_id("n1", 1), "mps", 30, 10000),)


def test_several_whole_shares_leave_the_big_empty_node_whole():
    # n1: 8 empty GPUs; n2: 8 GPUs, 5 of them held whole by MPS jobs. Mix: 8-GPU and 1-GPU whole requests.
    # A 2 x 100 % job on n1: the 8-GPU request can no longer run there: +600 (its fragment: 6 empty GPUs).
    # On n2 (3 -> 1 empty): the 8-GPU request's fragment shrinks from 300 to 100: -200. The 1-GPU request
    # strands nothing either way. Without the term both are free GPUs with no room left after: n1 (first).
    b = mps_cluster({"n1": 8, "n2": 8})
    for i in range(5):
        b.run(90 + i, {}, shares=[Share(b.gpu_id("n2", i), "mps", 100, MEM)], sharing="mps")
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = schedule(b.snapshot(only_mix(), request_mix=mix((8, 100, 1.0), (1, 100, 1.0))))
    assert {b.gpu_id("n2", i) for i in (5, 6, 7)} >= {s.gpu_id for s in d.placement_for(1).shares}
    assert schedule(b.snapshot(config(fragmentation_max_classes=0))).placement_for(1).nodes == ("n1",)
    # Its cost: 0.1 x (-200 x 10000) / (20000 x 100) = -0.1 (one GPU less of expected fragment).
    assert d.placement_for(1).cost["fragmentation"] == pytest.approx(-0.1)


def test_equal_scores_across_partitions_go_to_the_hostname_that_sorts_first():
    # Two empty one-GPU nodes of the same model with different memory (two partitions), "b" listed first: a
    # whole-GPU share changes F by 0 on either and runs as fast, so the hostname decides.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["b"], {"S1": 1}, gpus=1)
    b.leaf("L2", ["a"], {"S1": 1}, gpus=1)
    b.set_gpu("a", 0, memory_mib=95830)
    b.pool(1, "infer", sharing="mps")
    b.job(1, sharing="mps", mps_compute_pct=100, mps_memory_mib=MEM)
    d = schedule(b.snapshot(request_mix=mix((1, 100, 1.0))))
    assert d.placement_for(1).nodes == ("a",)


def test_placements_do_not_depend_on_the_order_of_the_input():
    b = mps_cluster({"n1": 4, "n2": 4, "n3": 2, "n4": 8})
    used = {("n1", 0): 35, ("n1", 1): 80, ("n2", 0): 55, ("n2", 3): 10, ("n3", 1): 65, ("n4", 2): 90}
    for k, ((h, i), pct) in enumerate(used.items()):  # distinct compute left on every used GPU
        b.run(100 + k, {}, shares=[Share(b.gpu_id(h, i), "mps", pct, MEM)], sharing="mps", mps_compute_pct=pct)
    rng = random.Random(5)
    for j in range(1, 16):
        g, p = rng.choice([(1, 10), (1, 25), (1, 40), (1, 100), (2, 100), (2, 30)])
        b.job(j, gpus=g, sharing="mps", mps_compute_pct=p, mps_memory_mib=MEM)
    m = mix((1, 25, 5.0), (1, 40, 3.0), (1, 100, 2.0), (2, 100, 1.0), (2, 30, 1.0))
    snap = b.snapshot(request_mix=m)
    base = {p.job_id: p.shares for p in schedule(snap).placements}
    assert len(base) >= 10
    for seed in range(3):
        r = random.Random(seed)
        pending, running, mx = list(snap.pending), list(snap.running), list(m)
        for xs in (pending, running, mx):
            r.shuffle(xs)
        shuffled = replace(snap, pending=pending, running=running, request_mix=mx)
        assert {p.job_id: p.shares for p in schedule(shuffled).placements} == base


# ----------------------------------------------------------------------------------------- left alone


def test_exclusive_placement_is_unchanged_by_a_mix():
    # n1 has 8 free GPUs, n2 2 (6 held): a 2-GPU job goes to n2 (best fit), with or without a mix.
    b = mps_cluster({"n1": 8, "n2": 8})
    b.pools = []
    b.pool(1, "train")
    b.run(9, {"n2": [0, 1, 2, 3, 4, 5]})
    b.job(1, gpus=2)
    b.job(2, gpus=8)
    plain = schedule(b.snapshot())
    mixed = schedule(b.snapshot(request_mix=mix((1, 25, 5.0), (8, 100, 1.0)) + mix((1, 25, 5.0), pool=2)))
    assert [(p.job_id, p.shares, p.score) for p in mixed.placements] == [
        (p.job_id, p.shares, p.score) for p in plain.placements
    ]
    assert plain.placement_for(1).nodes == ("n2",) and plain.placement_for(2).nodes == ("n1",)


@pytest.mark.parametrize("sharing", ["mig", "timeslice"])
def test_other_sharing_modes_ignore_the_mix(sharing):
    b = mps_cluster({"n1": 2})
    b.pools = []
    b.pool(1, "shared", sharing=sharing, replicas=4)
    kw = {"mig_profile": "1g.10gb"} if sharing == "mig" else {}
    for j in range(1, 4):
        b.job(j, sharing=sharing, **kw)
    plain = schedule(b.snapshot())
    mixed = schedule(b.snapshot(request_mix=[RequestClass(1, sharing, 1, 25, MEM, weight=3.0)]))
    assert [(p.job_id, p.shares) for p in mixed.placements] == [(p.job_id, p.shares) for p in plain.placements]
