"""bench/chaos.py: how its figures are worked out from the rows it reads (pure), and an opt-in full short run.

The full run starts PostgreSQL-backed web, worker and beat processes and takes about 3 minutes: it runs only with
CHAOS_SMOKE=1 (and DATABASE_URL pointing at a PostgreSQL server), e.g.
    CHAOS_SMOKE=1 .venv/bin/python scripts/with_services.py -- .venv/bin/python -m pytest tests/bench -q
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_chaos():
    spec = importlib.util.spec_from_file_location("bench_chaos", ROOT / "bench" / "chaos.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


chaos = _load_chaos()


def job(job_id, status="pending", submitted=0.0, placed=None, first_round=None, finished=None, held_reason=""):
    return {
        "id": job_id, "name": f"chaos-{job_id}", "status": status, "held_reason": held_reason,
        "submitted": submitted, "finished": finished, "placed": placed, "first_round": first_round,
    }  # fmt: skip


def test_a_job_is_lost_unless_finished_running_or_pending_with_a_reason():
    jobs = [
        job(1, "completed"),
        job(2, "running"),
        job(3),  # queued by the last round with a reason
        job(4),  # queued with an empty reason
        job(5, held_reason="held by op"),  # not in the queue, held by an operator
        job(7),  # in no round's queue
    ]
    queue = {"order": [3, 4], "reason": [0, 1], "texts": ["no 8 free GPUs on one node", ""]}
    out = chaos.classify(jobs, queue, submitted={1, 2, 3, 4, 5, 6, 7})  # 6: accepted but never stored
    assert (out["completed"], out["running"], out["pending_with_reason"], out["lost"]) == (1, 1, 2, 3)
    assert out["lost_jobs"] == [{"id": 4, "status": "pending"}, {"id": 6, "status": "missing"},
                                {"id": 7, "status": "pending"}]  # fmt: skip


def test_waits_after_a_fault_count_from_its_end_and_stop_at_the_next_fault():
    # The fault began at 100, was over at 110; the next began at 150.
    phase = chaos.Phase("1", "kill", start=100.0, end=110.0, until=150.0)
    jobs = [
        job(1, submitted=90, placed=95),  # placed before the fault: not counted
        job(2, submitted=95, first_round=112),  # waiting when it began: 112 - 110 = 2
        job(3, submitted=105, placed=111, first_round=111.5),  # during it: the placement, 111 - 110 = 1
        job(4, submitted=120, first_round=123.5),  # after it: 3.5
        job(5, submitted=140, first_round=160),  # still waiting at 150: 150 - 140 = 10, a lower bound
        job(6, "cancelled", submitted=130, finished=134),  # cancelled unplaced: 4
        job(7, submitted=155, first_round=156),  # after the next fault began: not counted
    ]
    out = chaos.phase_waits(jobs, {1, 2, 3, 4, 5, 6, 7}, phase, until=150.0)
    assert out == {
        "waited": 5,
        "longest_wait_s": 10.0,
        "longest_wait_job": 5,
        "longest_is_lower_bound": True,
        "median_wait_s": 3.5,  # of 1, 2, 3.5, 4, 10
        "still_waiting_at_next": 1,
    }


def test_only_jobs_the_api_accepted_count_as_waiting():
    phase = chaos.Phase("0", "baseline", start=0.0, end=0.0, until=50.0)
    out = chaos.phase_waits([job(1, submitted=10, first_round=11), job(2, submitted=10)], {1}, phase, until=50.0)
    assert (out["waited"], out["longest_wait_s"], out["still_waiting_at_next"]) == (1, 1.0, 0)


def test_a_503_is_a_retry_later_not_a_server_error():
    answers = [chaos.Call(0.0, 0.1, "list", status) for status in (200, 500, 502, 503, None)]
    assert [chaos.is_server_error(c) for c in answers] == [False, True, True, False, False]


def test_a_503_counts_against_the_run_only_outside_a_fault_and_its_margin():
    baseline = chaos.Phase("0", "none", start=100.0, end=100.0)
    redis = chaos.Phase("2", "restart Redis", start=130.0, end=134.0)  # 503s allowed from 130 to 134 + 10
    calls = [chaos.Call(at, 0.1, "list", 503) for at in (120.0, 130.0, 140.0, 144.0, 144.5, 200.0)]
    stray = chaos.retry_later_outside_faults([*calls, chaos.Call(150.0, 0.1, "list", 500)], [baseline, redis], 10.0)
    assert [c.at for c in stray] == [120.0, 144.5, 200.0]


def test_a_503_to_a_request_sent_just_before_a_fault_and_answered_during_it_is_the_faults():
    postgres = chaos.Phase("3", "terminate backends", start=130.0, end=133.0)
    in_flight = chaos.Call(129.9, 0.3, "submit", 503)  # answered at 130.2, inside the fault
    answered_before = chaos.Call(129.0, 0.5, "submit", 503)  # answered at 129.5, before it
    assert chaos.retry_later_outside_faults([in_flight, answered_before], [postgres], 10.0) == [answered_before]


def test_an_html_error_page_is_reported_by_its_title():
    page = '\n<!doctype html>\n<html lang="en">\n<head>\n  <title>Server Error (500)</title>\n</head><body></body>'
    assert chaos.brief(page) == "Server Error (500)"


@pytest.mark.skipif(os.environ.get("CHAOS_SMOKE") != "1", reason="a 3-minute run of real processes: CHAOS_SMOKE=1")
def test_the_short_chaos_run_completes_and_reports_every_figure(tmp_path):
    out = tmp_path / "chaos.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "chaos.py"), "--short", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]  # 2: the run itself failed
    fig = json.loads(out.read_text())
    assert [f["fault"] for f in fig["faults"]] == ["0", "1", "2", "3", "4", "5", "6"]
    assert fig["jobs"]["submitted"] > 0 and fig["invariants"]["checks"] > 0
    assert proc.returncode == (0 if fig["passed"] else 1)


def test_a_name_stored_as_two_jobs_is_a_submit_queued_twice():
    jobs = [
        {"id": 1, "name": "chaos-1"},
        {"id": 2, "name": "chaos-2"},
        {"id": 3, "name": "chaos-1"},
        {"id": 4, "name": "x"},
    ]
    assert chaos.stored_twice(jobs, {"chaos-1", "chaos-2"}) == ["chaos-1"]
