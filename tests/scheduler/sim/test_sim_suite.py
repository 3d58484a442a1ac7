"""The policy suite: cases, bounds, ratios, the best baseline without an oracle, the table."""

from pathlib import Path

import pytest

from scheduler.sim.suite import (
    CASES,
    VARIATIONS,
    Case,
    Metric,
    _metric,
    find_in,
    format_suite,
    jct_bounds,
    run_suite,
    select_cases,
)
from scheduler.sim.traces import load_trace

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def locate(name):
    return find_in(name, [FIXTURES])


@pytest.fixture(scope="module")
def tiresias_2x4():
    return run_suite(locate, select_cases("tiresias-2x4"))


def test_the_suite_covers_every_shipped_trace():
    assert [(c.kind, c.cluster, c.network) for c in CASES] == [
        ("tiresias", "2x4", False),
        ("tiresias", "4x4", False),
        ("tiresias", "32x4", False),
        ("pollux", "16x4/4:2", True),
        ("gavel", "12x4/4:2", True),
        ("slurm", "32x8/8:2", True),
        ("alibaba", None, False),
    ]
    churn = next(c for c in CASES if c.kind == "slurm")
    assert [(m.name, m.peer) for m in churn.metrics][:2] == [("avg_jct", "default-blind"), ("makespan", "bound")]


def test_tiresias_2x4_figures_and_ratios(tiresias_2x4):
    (case,) = tiresias_2x4["cases"]
    (m,) = case["metrics"]
    assert case["policies"] == ["fifo", "fjf", "srtf", "tiresias-l", "tiresias-g", "default", "default-blind"]
    # The pinned sums of JCTs (tests/scheduler/sim/test_sim_regression.py) over 60 jobs: fifo 93389, srtf 31192,
    # tiresias-l 42916; the bound is the mean duration, the sum of JCTs on the uncontended 32x4 (10705).
    assert m["values"]["fifo"] == pytest.approx(93389 / 60, abs=0.01)
    assert m["values"]["bound"] == pytest.approx(10705 / 60, abs=0.01)
    assert m["ratios"]["fifo"] == pytest.approx(93389 / 42916, abs=1e-3)
    assert m["ratios"]["tiresias-l"] == 1.0
    assert m["ratios"]["bound"] == pytest.approx(10705 / 42916, abs=1e-3)
    # srtf (31192) beats tiresias-l but knows every duration: the best baseline without an oracle is
    # tiresias-l; default's sum is 33411 (test_sim_regression.py): 33411 / 42916 = 0.779.
    assert m["best_baseline"] == {"policy": "tiresias-l", "value": pytest.approx(42916 / 60, abs=0.01)}
    assert m["default_vs_best_baseline"] == pytest.approx(33411 / 42916, abs=1e-3)
    assert set(case["policy_wall_s"]) == set(case["policies"]) and case["wall_s"] > 0


def test_the_table_shows_figures_ratios_and_where_default_stands(tiresias_2x4):
    text = format_suite(tiresias_2x4)
    assert "Tiresias 60-job 2x4 off" in text and "x tiresias-l" in text
    row = next(line for line in text.splitlines() if line.startswith("Tiresias 60-job 2x4 off"))
    assert row.split()[-8:] == ["1556.5", "782.5", "519.9", "715.3", "821.2", "556.9", "556.9", "178.4"]
    assert "default 556.9 vs tiresias-l 715.3 = 0.779x" in text
    assert "suite wall time" in text and "LIMITED" not in text


def test_bounds_of_the_churn_table():
    # 66641 GPU-seconds on 256 GPUs = 260.3 s > the longest job (30 s, all submitted at 0).
    t = load_trace("slurm", FIXTURES / "slurm_churn_500_seed1.tsv")
    b = jct_bounds(t, 256)
    assert b["makespan"] == pytest.approx(66641 / 256)
    assert b["avg_jct"] == pytest.approx(sum(j.duration_s for j in t.jobs) / 500)


def test_a_missing_trace_is_reported_not_dropped():
    res = run_suite(lambda name: None, select_cases("gavel"))
    assert res["cases"][0]["skipped"] == "gavel_physical_max_min_fairness.trace not found in the trace folders"
    assert "skipped: gavel_physical_max_min_fairness.trace not found" in format_suite(res)


def test_a_limit_is_said():
    res = run_suite(locate, select_cases("slurm-churn"), jct_policies=["fifo", "default-blind"], limit=20)
    assert res["limit"] == 20 and res["cases"][0]["jobs"] == 20
    assert "LIMITED to the first 20 jobs/pods" in format_suite(res)


def test_unknown_case():
    with pytest.raises(ValueError, match=r"unknown suite case.*lottery.*known: tiresias-2x4"):
        select_cases("tiresias-2x4,lottery")


def test_unfinished_jobs_get_no_ratio_and_cannot_be_the_best():
    # fifo's 100 s average covers only the jobs it finished: no ratio, not the best baseline.
    m = _metric(
        Metric("avg_jct", "tiresias-l"),
        {"fifo": 100.0, "fjf": 300.0, "tiresias-l": 200.0, "default": 150.0},
        {},
        {"fifo": 3},
        ["fifo", "fjf", "tiresias-l", "default"],
    )
    assert m["ratios"] == {"fifo": None, "fjf": 1.5, "tiresias-l": 1.0, "default": 0.75}
    assert m["best_baseline"] == {"policy": "tiresias-l", "value": 200.0}
    assert m["default_vs_best_baseline"] == 0.75


def test_higher_is_better_for_the_first_failure():
    values = {"best-fit": 91.2, "fgd": 84.5, "default": 19.2}
    m = _metric(Metric("first_failure", "best-fit"), values, {}, {}, list(values))
    assert m["better"] == "higher"
    assert m["best_baseline"] == {"policy": "best-fit", "value": 91.2}
    assert m["default_vs_best_baseline"] == pytest.approx(19.2 / 91.2, abs=1e-3)


def test_a_case_names_its_peer_per_metric():
    c = Case("k", "t", "tiresias", "x.csv", "2x4", False, (Metric("avg_jct", "tiresias-l"),))
    assert c.metrics[0].peer == "tiresias-l"


def test_a_policy_that_never_failed_a_pod_is_the_best():
    m = _metric(Metric("first_failure", "best-fit"), {"best-fit": 91.2, "fgd": None}, {}, {}, ["best-fit", "fgd"])
    assert m["best_baseline"] == {"policy": "fgd", "value": None}


def test_variations_are_drawn_not_shipped_and_run_only_when_asked():
    assert not set(VARIATIONS) & set(select_cases(None))
    assert select_cases("variations") == VARIATIONS and len(select_cases("all")) == len(CASES) + len(VARIATIONS)
    res = run_suite(lambda name: None, select_cases("churn-seed2"), jct_policies=["fjf"], limit=30)
    (case,) = res["cases"]
    assert case["generated"] == {"jobs": 500, "seed": 2} and case["jobs"] == 30 and "skipped" not in case
