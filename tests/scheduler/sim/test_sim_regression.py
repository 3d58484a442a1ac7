"""Pinned results: the Tiresias 60-job trace on the simulator's cluster shapes (network model off).

Every baseline figure here is what the Tiresias simulator's own code gives (SymbioticLab/Tiresias
`simulator/run_sim.py`: fifo and fjf with `--scheme=yarn`, `@count` with `--scheme=count`, shortest
with `--scheme=count`, dlas-gpu, dlas-gpu-gittins), job by job; docs/policy-lab.md has the tables.
`default` is our engine: it is not pinned by a hash of its own output but by what can be checked by hand
from the trace file (tests/fixtures/tiresias_60_job.csv) and by its ratios to the baselines' pinned figures.
"""

import csv
import hashlib
from pathlib import Path

import pytest

from scheduler.sim import build_cluster, load_trace, parse_cluster_spec, replay

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# (shape, policy): (sum of JCTs, median JCT, makespan, preemptions, sha256 of the per-job JCTs)
PINNED = {
    ("32x4", "fifo"): (10705, 125.0, 3271, 0, "399a1faf4e39"),
    ("32x4", "fjf"): (10705, 125.0, 3271, 0, "399a1faf4e39"),
    ("32x4", "srtf"): (10705, 125.0, 3271, 0, "399a1faf4e39"),
    ("32x4", "tiresias-l"): (10705, 125.0, 3271, 0, "399a1faf4e39"),
    ("32x4", "tiresias-g"): (10705, 125.0, 3271, 0, "399a1faf4e39"),
    ("4x4", "fifo"): (13151, 178.5, 3341, 0, "0dbe6e4cf2dc"),
    ("4x4", "fjf"): (13151, 148.0, 3271, 0, "c7b45b6c7b92"),
    ("4x4", "srtf"): (11527, 126.5, 3271, 4, "1019b9588b0d"),
    ("4x4", "tiresias-l"): (11441, 130.0, 3271, 0, "575af7138fca"),
    ("4x4", "tiresias-g"): (13143, 128.5, 3271, 35, "fed3b225b43b"),
    ("4x4", "fifo@count"): (12049, 149.5, 3335, 0, "8a023e318c5f"),
    ("4x4", "fjf@count"): (11441, 130.0, 3271, 0, "575af7138fca"),
    ("2x4", "fifo"): (93389, 1415.5, 5747, 0, "b8a24eb2ff4e"),
    ("2x4", "fjf"): (46953, 162.0, 4839, 0, "058f52789fcc"),
    ("2x4", "srtf"): (31192, 142.0, 4901, 7, "646227ee30b9"),
    ("2x4", "tiresias-l"): (42916, 150.5, 4806, 0, "04d497898574"),
    ("2x4", "tiresias-g"): (49274, 211.0, 4753, 88, "258615ac7e25"),
    ("2x4", "fifo@count"): (93389, 1415.5, 5747, 0, "b8a24eb2ff4e"),
    ("2x4", "fjf@count"): (42916, 150.5, 4806, 0, "04d497898574"),
}


@pytest.fixture(scope="module")
def trace():
    return load_trace("tiresias", FIXTURES / "tiresias_60_job.csv")


# The trace as the file states it: job id -> (GPUs, submit time, duration). Sums by hand (awk): 60 jobs,
# durations 10705 s in all, 26624 GPU-seconds, the last job to end unqueued ends at 3271 s (submit + duration).
TRACE_ROWS = {
    int(row["job_id"]): (int(row["num_gpu"]), int(row["submit_time"]), int(row["duration"]))
    for row in csv.DictReader((FIXTURES / "tiresias_60_job.csv").open())
}


@pytest.fixture(scope="module")
def results(trace):
    out = {}
    for shape in ("32x4", "4x4", "2x4"):
        policies = [p for (s, p) in PINNED if s == shape] + ["default"]
        for r in replay(trace, build_cluster(parse_cluster_spec(shape)), policies):
            out[(shape, r.policy)] = r
    return out


@pytest.mark.parametrize("key", list(PINNED), ids=lambda k: f"{k[0]}-{k[1]}")
def test_tiresias_60_jobs(results, key):
    r = results[key]
    jcts = tuple(int(j.jct) for j in r.jobs)
    assert all(j.jct == int(j.jct) for j in r.jobs)  # integer seconds, as in the simulator
    got = (
        sum(jcts),
        r.median_jct,
        round(r.makespan),
        r.preemptions,
        hashlib.sha256(repr(jcts).encode()).hexdigest()[:12],
    )
    assert got == PINNED[key]
    assert not r.unfinished and r.migrations == 0


def test_default_on_an_uncontended_cluster_starts_every_job_on_arrival(results):
    # 128 GPUs; the jobs running at once, each from its submit for its duration, never ask more than 26: each job
    # starts when submitted and its JCT is its duration.
    r = _default(results, "32x4")
    assert [(j.id, j.start, j.jct) for j in r.jobs] == [(i, float(s), float(d)) for i, (_, s, d) in TRACE_ROWS.items()]
    assert sum(j.jct for j in r.jobs) == 10705
    assert (r.makespan, r.preemptions) == (3271, 0)


@pytest.mark.parametrize("shape", ["32x4", "4x4", "2x4"])
def test_default_holds_gpus_for_exactly_each_jobs_duration(results, shape):
    # Network model off (the Tiresias simulator's assumptions): a job holds its GPUs for its duration, however often
    # it is preempted, so JCT = duration + queueing delay, job by job, and every job finishes.
    r = _default(results, shape)
    assert not r.unfinished and r.migrations == 0
    assert sorted(j.id for j in r.jobs) == sorted(TRACE_ROWS)
    for j in r.jobs:
        gpus, submit, duration = TRACE_ROWS[j.id]
        assert (j.gpus, j.submit) == (gpus, submit)
        assert j.jct == pytest.approx(duration + j.queueing)
        assert j.queueing >= 0


def test_default_on_4x4_ends_when_the_last_job_would_end_unqueued(results):
    # 16 GPUs: no schedule ends before 3271 s (the latest submit + duration), and the default's ends then.
    assert _default(results, "4x4").makespan == 3271


def test_default_on_2x4_preempts_one_job_once_and_needs_more_than_the_gpu_seconds_bound(results):
    # 8 GPUs: 26624 GPU-seconds need at least 26624 / 8 = 3328 s. Least attained service: job 49 (1 GPU, 1800 s,
    # started on arrival at 1471 s) gives way once, after 600 GPU-s (service level 1), to the 8-GPU jobs that
    # fit-first counting starves; no other job is preempted.
    r = _default(results, "2x4")
    assert [(j.id, j.preemptions, j.start) for j in r.jobs if j.preemptions] == [(49, 1, 1471.0)]
    assert r.preemptions == 1
    assert r.makespan >= 3328


def _default(results, shape):
    return results[(shape, "default")]


def test_contended_shapes_default_against_fifo_and_tiresias_l(results):
    # 93389 / 33411 = 2.795 and 42916 / 33411 = 1.284 on 2x4; 13151 / 11441 = 1.149 and 1.0 on 4x4.
    for shape, fifo_ratio, tiresias_ratio in (("4x4", 1.149, 1.0), ("2x4", 2.795, 1.284)):
        default = results[(shape, "default")].avg_jct
        assert results[(shape, "fifo")].avg_jct / default == pytest.approx(fifo_ratio, abs=1e-3)
        assert results[(shape, "tiresias-l")].avg_jct / default == pytest.approx(tiresias_ratio, abs=1e-3)


def test_uncontended_cluster_all_policies_agree(results):
    assert len({results[("32x4", p)].avg_jct for p in ("fifo", "fjf", "srtf", "tiresias-l", "default")}) == 1
    r = results[("32x4", "fifo")]
    assert r.avg_queueing == 0 and r.avg_jct == pytest.approx(10705 / 60)
