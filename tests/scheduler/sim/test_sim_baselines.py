"""Each baseline's semantics on tiny hand-made traces (times in seconds, network model off)."""

import pytest

from scheduler.sim import build_cluster, parse_cluster_spec, replay
from scheduler.sim.baselines import TiresiasBaseline, load_gittins_table, make_baseline
from scheduler.sim.simulator import Simulator
from scheduler.sim.traces.base import Trace, TraceJob


def trace(*jobs: tuple[int, float, float]) -> Trace:
    """(gpus, submit, duration) per job, ids in submission order."""
    return Trace("test", "hand-made", tuple(TraceJob(i, f"j{i}", s, g, float(d)) for i, (g, s, d) in enumerate(jobs)))


def run(policy: str, t: Trace, spec: str = "1x4"):
    r = replay(t, build_cluster(parse_cluster_spec(spec)), [policy])[0]
    return {j.name: j for j in r.jobs}, r


# j0 holds 2 of 4 GPUs until 100; j1 needs all 4; j2 needs 1.
BLOCKED = trace((2, 0, 100), (4, 1, 10), (1, 2, 10))


def test_fifo_head_of_line_blocking():
    jobs, _ = run("fifo", BLOCKED)
    assert jobs["j1"].start == 100  # waits for j0
    assert jobs["j2"].start == 110  # fits at once, but waits behind j1 (head of line)


def test_fjf_lets_a_later_job_start_when_it_fits():
    jobs, _ = run("fjf", BLOCKED)
    assert jobs["j2"].start == 2  # jumps j1
    assert jobs["j1"].start == 100


def test_fifo_consolidates_yarn_style_but_counting_does_not():
    # Two nodes x 4: j0 and j1 take 3 GPUs each, one node each; j2 (2 GPUs) fits no single node.
    t = trace((3, 0, 100), (3, 0, 100), (2, 1, 10))
    yarn, _ = run("fifo", t, "2x4")
    count, _ = run("fifo@count", t, "2x4")
    assert yarn["j2"].start == 100  # YARN-CS: one node per job that fits a node
    assert count["j2"].start == 1  # counting: 2 GPUs are free somewhere
    assert not count["j2"].one_island


def test_srtf_preempts_for_a_shorter_job():
    t = trace((4, 0, 1000), (4, 5, 10))
    jobs, r = run("srtf", t)
    assert jobs["j1"].start == 5 and jobs["j1"].end == 15
    assert jobs["j0"].preemptions == 1
    assert jobs["j0"].end == 1010  # free preemption: it loses no work
    assert r.preemptions == 1


def test_srtf_does_not_preempt_for_a_longer_job():
    jobs, r = run("srtf", trace((4, 0, 100), (4, 5, 1000)))
    assert jobs["j1"].start == 100 and r.preemptions == 0


def test_tiresias_l_demotes_on_attained_gpu_time_at_the_simulator_events():
    # j0 (4 GPUs) reaches 3250 GPU-s at 812.5 s. Demotion is checked at events only; at j1's arrival
    # (t=100) the simulator schedules its next check floor((3250 - 100 executed s) / 4) = 787 s later, at
    # t=887 (its formula subtracts seconds, not GPU-seconds): j0 is demoted there and j1 (Q0) preempts it.
    jobs, _ = run("tiresias-l", trace((4, 0, 3000), (4, 100, 50)))
    assert jobs["j1"].start == 887
    assert jobs["j0"].preemptions == 1
    assert jobs["j0"].end == 3000 + 50


def test_tiresias_l_new_jobs_wait_behind_running_q0_jobs():
    # Below the first threshold both are in Q0, the running one first: no preemption.
    jobs, _ = run("tiresias-l", trace((4, 0, 500), (4, 100, 50)))
    assert jobs["j1"].start == 500 and jobs["j0"].preemptions == 0


def test_tiresias_l_an_arrival_event_demotes_at_once():
    # At j2's arrival (t=900) j0 has 3600 GPU-s >= 3250: demoted, and j1, waiting in Q0, runs.
    jobs, _ = run("tiresias-l", trace((4, 0, 5000), (4, 500, 100), (4, 900, 100)))
    assert jobs["j1"].start == 900 and jobs["j2"].start == 1000
    assert jobs["j0"].preemptions == 1


def test_tiresias_l_attained_service_is_gpus_times_time():
    # A 1-GPU job needs 3250 s to leave Q0; the 4-GPU job above needed 812.5 s.
    jobs, _ = run("tiresias-l", trace((1, 0, 5000), (1, 100, 10)), "1x1")
    assert jobs["j1"].start == 3250  # j0 demoted at its jump (floor(3250 / 1) = 3250)


def test_tiresias_l_second_threshold():
    b = TiresiasBaseline()
    assert b.limits[:2] == (3250, 7200) and len(b.queues) == 3


def test_tiresias_l_starvation_variant_promotes_waiting_jobs():
    # dlas-gpu-2: a demoted job that waited twice its executed time goes back to Q0 (figures checked
    # against the Tiresias simulator's dlas_sim_jobs(gputime=True, solve_starvation=2)).
    t = trace((1, 0, 9000), (2, 100, 9000), (4, 3100, 9000))
    c = build_cluster(parse_cluster_spec("1x4"))
    plain = {j.name: (j.end, j.preemptions) for j in Simulator(t, c, TiresiasBaseline()).run().jobs}
    k2 = Simulator(t, c, TiresiasBaseline(starvation=2)).run()
    assert k2.policy == "tiresias-l-2"
    assert plain == {"j0": (11865, 2), "j1": (11965, 2), "j2": (18100, 2)}
    assert {j.name: (j.end, j.preemptions) for j in k2.jobs} == {"j0": (13286, 3), "j1": (13386, 3), "j2": (18100, 3)}


def test_gittins_table_matches_the_simulator():
    data, gi = load_gittins_table()
    assert len(data) == 1001 and data[0] == 121 and data[-1] == 53294624
    assert all(g >= 0 for g in gi)
    b = make_baseline("tiresias-g")
    assert b.gittins_index(data[-1] + 1) == 0.0
    assert b.gittins_index(0) == gi[0]


def test_tiresias_g_serves_the_highest_gittins_index_first():
    # A fresh job's index beats one that has already had 400 GPU-seconds: j1 preempts j0 at once (the
    # Tiresias simulator's dlas-gpu-gittins gives the same; LAS would wait for the demotion at 887 s).
    jobs, _ = run("tiresias-g", trace((4, 0, 3000), (4, 100, 50)))
    assert (jobs["j1"].start, jobs["j1"].end, jobs["j0"].end, jobs["j0"].preemptions) == (100, 150, 3050, 1)
    jobs, _ = run("tiresias-g", trace((4, 0, 5000), (4, 900, 4000), (4, 950, 100)))
    assert {k: (j.start, j.end, j.preemptions) for k, j in jobs.items()} == {
        "j0": (0, 7537, 1),
        "j1": (900, 9100, 2),
        "j2": (950, 1050, 0),
    }


def test_unknown_baseline():
    with pytest.raises(KeyError):
        make_baseline("srtf@yarn")
    with pytest.raises(KeyError):
        make_baseline("lottery")


def test_job_larger_than_the_cluster_never_runs():
    jobs, r = run("fjf", trace((8, 0, 10), (1, 1, 10)))
    assert r.unfinished == ["j0"]
    assert jobs["j1"].end == 11


# ------------------------------------------------------------------ jobs larger than a leaf, gangs

ALL_POLICIES = (
    "fifo",
    "fjf",
    "fifo@count",
    "fjf@count",
    "srtf",
    "tiresias-l",
    "tiresias-g",
    "default",
    "default-blind",
)


@pytest.mark.parametrize("policy", ALL_POLICIES)
@pytest.mark.parametrize("shape", ["any", "gang"])
def test_a_job_larger_than_a_leaf_but_not_the_cluster_runs(policy, shape):
    # 4x4/2: two leaves of 2 nodes x 4 GPUs (8 GPUs a leaf, 16 in all). 12 GPUs fit only across leaves;
    # alone on the cluster with the network model off it runs its 100 s at once.
    job = TraceJob(
        0, "big", 0, 12, 100.0, nodes=3 if shape == "gang" else None, gpus_per_node=4 if shape == "gang" else None
    )
    jobs, r = run(policy, Trace("t", "x", (job,)), "4x4/2")
    assert not r.unfinished
    assert (jobs["big"].start, jobs["big"].end, jobs["big"].one_leaf) == (0, 100, False)


class Recording(Simulator):
    """The nodes each start used."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.starts = []

    def start(self, job, positions):
        super().start(job, positions)
        self.starts.append((job.job.name, sorted({self.cluster.gpu_node[p] for p in positions})))


def test_yarn_spreads_a_job_larger_than_a_leaf_over_the_fewest_leaves():
    # 6x4/2: leaves {0,1} {2,3} {4,5}. j0 (4 GPUs) takes node 0. The 12-GPU job needs 3 whole nodes: the
    # leaves with most whole free nodes first (leaf 2: nodes 2,3; then leaf 3: node 4), not nodes 1,2,3.
    t = trace((4, 0, 100), (12, 1, 10))
    sim = Recording(t, build_cluster(parse_cluster_spec("6x4/2")), make_baseline("fifo"))
    sim.run()
    assert sim.starts == [("j0", [0]), ("j1", [2, 3, 4])]


def test_yarn_keeps_a_job_that_fits_a_leaf_waiting_for_one():
    # 4x4/2, leaves {0,1} {2,3}. j0, j1, j2 take nodes 0, 1, 2 (first node with room). At 50 j1 ends:
    # nodes 1 and 3 are free but under different leaves, so the 8-GPU j3 waits for leaf 1 (nodes 0, 1)
    # to empty at 100 (Tiresias' YARN-CS: all GPUs of a job under one switch when a switch can hold it).
    t = trace((4, 0, 100), (4, 0, 50), (4, 0, 200), (8, 1, 10))
    jobs, _ = run("fifo", t, "4x4/2")
    assert jobs["j3"].start == 100 and jobs["j3"].one_leaf


def test_yarn_places_a_gang_on_the_first_nodes_of_one_leaf():
    # 4x4/2, leaves {0,1} {2,3}. j0 (3 GPUs) on node 0 leaves 1 free there, so leaf 1 has one node with
    # 2 free GPUs (node 1): the 2 x 2 gang takes nodes 2 and 3. The same 4 GPUs of any shape fit node 1.
    t = Trace("t", "x", (TraceJob(0, "j0", 0, 3, 100.0), TraceJob(1, "g", 1, 4, 10.0, nodes=2, gpus_per_node=2)))
    t2 = Trace("t", "x", (TraceJob(0, "j0", 0, 3, 100.0), TraceJob(1, "g", 1, 4, 10.0)))
    sim = Recording(t, build_cluster(parse_cluster_spec("4x4/2")), make_baseline("fifo"))
    sim.run()
    assert sim.starts[1] == ("g", [2, 3])
    sim = Recording(t2, build_cluster(parse_cluster_spec("4x4/2")), make_baseline("fifo"))
    sim.run()
    assert sim.starts[1] == ("g", [1])


def test_counting_does_not_preempt_for_a_gang_that_still_would_not_fit():
    # srtf on 2x4. j0 and j1 (2 GPUs each) fill node 0, j2 (3 GPUs) takes node 1. At 5 the short 2 x 2
    # gang j3 comes first by remaining time; counting admits it (4 GPUs) with j0 and j1 and evicts j2,
    # but then node 1 alone is free: no two nodes with 2 free GPUs each. So nothing is preempted, and j3
    # starts when j2 ends at 1002 (j0 at 1000 and j1 at 1001 leave node 1 with 1 free GPU only).
    t = Trace(
        "t",
        "x",
        (
            TraceJob(0, "j0", 0, 2, 1000.0),
            TraceJob(1, "j1", 0, 2, 1001.0),
            TraceJob(2, "j2", 0, 3, 1002.0),
            TraceJob(3, "j3", 5, 4, 10.0, nodes=2, gpus_per_node=2),
        ),
    )
    jobs, r = run("srtf", t, "2x4")
    assert r.preemptions == 0
    assert (jobs["j3"].start, jobs["j3"].end) == (1002, 1012)


def test_counting_places_a_gang_on_the_fullest_nodes_that_hold_it():
    # tiresias-l on 3x4: j0 (1 GPU) on node 0, j1 (2 GPUs) on node 0 too (fullest that holds it): node 0
    # has 1 free, nodes 1 and 2 have 4. A 2 x 1 gang takes node 0 (1 free) and node 1 (best fit, then order).
    t = Trace(
        "t",
        "x",
        (
            TraceJob(0, "j0", 0, 1, 100.0),
            TraceJob(1, "j1", 0, 2, 100.0),
            TraceJob(2, "g", 1, 2, 10.0, nodes=2, gpus_per_node=1),
        ),
    )
    sim = Recording(t, build_cluster(parse_cluster_spec("3x4")), make_baseline("tiresias-l"))
    sim.run()
    assert sim.starts == [("j0", [0]), ("j1", [0]), ("g", [0, 1])]
