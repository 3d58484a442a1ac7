"""The running jobs a reservation plan walks, by expected end (scheduler.core.backfill: EndsLine, ordered_ends): in
the order worked out by hand, and, kept from round to round, in the order a line built afresh gives."""

from __future__ import annotations

import pytest

from scheduler.core import backfill
from scheduler.core.backfill import EndsLine, ends_line, ordered_ends
from scheduler.core.carry import RoundCarry
from scheduler.core.engine import schedule
from scheduler.core.state import ClusterState
from scheduler.core.synthetic import next_round, synthetic_snapshot
from scheduler.core.topology import build_topology
from tests.scheduler.core.builders import SnapBuilder


def _cluster() -> tuple[SnapBuilder, ClusterState]:
    b = SnapBuilder()  # now = 1,000,000; a job started 600 s ago unless said
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 1})
    b.pool(1, "train")
    b.run(10, {"n1": [0, 1]}, est_runtime_s=3600.0)  # ends by its estimate: now + 3000
    b.run(11, {"n1": [2, 3]}, est_runtime_s=400.0)  # 200 s past it: soon is min(60, 100), now + 60
    b.run(12, {"n2": [0, 1]}, est_runtime_s=200.0)  # 400 s past it: soon is min(60, 50), now + 50
    b.run(13, {"n2": [2, 3]})  # no estimate: the default 4 h, now + 13,800
    b.run(14, {"n1": [4]}, est_runtime_s=36000.0, stopping=True)  # the grace period: now + 120
    b.run(15, {"n2": [4]}, est_runtime_s=700.0)  # now + 100
    b.run(16, {"n3": [0]}, est_runtime_s=100.0)  # on a node that is down: not in the line
    b.run(17, {"n2": [5]}, est_runtime_s=640.0)  # by its estimate now + 40, but soon is min(60, 160): now + 60
    b.set_node("n3", up=False)
    snap = b.snapshot()
    return b, ClusterState(snap, build_topology(snap.fabric))


def _order(st: ClusterState, line: EndsLine, extra=()) -> list[tuple[float, int]]:
    return [(end, j) for end, j, _ in ordered_ends(st, line, list(extra))]


def test_the_jobs_come_by_expected_end_then_id_with_those_started_this_round():
    b, st = _cluster()
    line = ends_line(st, st.pool_parts[1])
    started = (b.now + 100, 50, [])  # a job this round started, ending with job 15: ids break the tie
    assert _order(st, line, [started]) == [
        (b.now + 50, 12),
        (b.now + 60, 11),
        (b.now + 60, 17),
        (b.now + 100, 15),
        (b.now + 100, 50),
        (b.now + 120, 14),
        (b.now + 3000, 10),
        (b.now + 13_800, 13),
    ]


def test_each_job_comes_with_the_gpus_it_holds():
    _, st = _cluster()
    line = ends_line(st, st.pool_parts[1])
    held = {j: sorted((g.node.name, g.index) for g, _ in shares) for _, j, shares in ordered_ends(st, line)}
    assert held[10] == [("n1", 0), ("n1", 1)]
    assert held[14] == [("n1", 4)]


def test_a_job_dropped_this_round_is_left_out_at_once():
    _, st = _cluster()
    line = ends_line(st, st.pool_parts[1])
    st.drop_running(11)  # requeued: its GPUs released for the round
    assert [j for _, j in _order(st, line)] == [12, 17, 15, 14, 10, 13]


def test_a_job_that_stops_this_round_ends_after_the_grace_period():
    b, st = _cluster()
    line = ends_line(st, st.pool_parts[1])
    st.stopping.add(10)  # preempted in the round
    assert (b.now + 120, 10) in _order(st, line)
    assert [j for _, j in _order(st, line)] == [12, 11, 17, 15, 10, 14, 13]


def test_a_line_is_kept_for_the_round_that_reads_it_again():
    _, st = _cluster()
    assert ends_line(st, st.pool_parts[1]) is ends_line(st, st.pool_parts[1])


def _reference(st: ClusterState, parts) -> list[tuple[float, int]]:
    """Every running job on the partitions' eligible nodes, its expected end worked out by the rule, sorted."""
    now, cfg = st.now, st.config
    jobs = {j for p in parts for n in p.nodes if n.eligible for j in st.jobs_on_node.get(n.name, ())}
    out = []
    for j in jobs:
        rj = st.running.get(j)
        if rj is None:
            continue
        if j in st.stopping:
            out.append((now + cfg.preemption_grace_s, j))
            continue
        run = rj.request.est_runtime_s if rj.request.est_runtime_s is not None else cfg.default_runtime_s
        out.append((max(rj.started_at + run, now + min(60.0, run / 4)), j))
    return sorted(out)


@pytest.mark.parametrize("minimum_run", [True, False], ids=["as configured", "no minimum run: preemptions"])
def test_lines_kept_over_churn_rounds_give_the_order_of_the_whole_list(monkeypatch, minimum_run):
    monkeypatch.setattr(backfill, "_REBUILD_SHARE", 0)  # always brought up to date, never built again
    snap = synthetic_snapshot(512, 2000, 0.7, seed=3)
    if not minimum_run:
        from dataclasses import replace

        snap = replace(snap, config=replace(snap.config, preemption_min_run_s=0.0))
    carry = RoundCarry()
    dec = schedule(snap, carry=carry)
    updated = 0
    for r in range(5):
        st = carry.state
        sets = [tuple(parts) for parts in st.pool_parts.values()] + [(p,) for p in st.partitions.values()]
        before = {s: ends_line(st, s) for s in sets}
        snap = next_round(snap, dec, 0.02, seed=r)
        dec = schedule(snap, carry=carry)
        st = carry.state
        assert st.running_changes(), "the round changed running jobs"
        for s in sets:
            line = ends_line(st, s)
            updated += line is before[s]
            assert _order(st, line) == _reference(st, s), f"round {r}, partitions {[p.key for p in s]}"
    assert updated == 5 * len(sets)


def test_a_job_within_a_minute_of_its_estimate_ends_when_soon_says():
    b, st = _cluster()
    st.stopping.discard(14)  # no job stopping: only the minute decides which jobs are worked out one by one
    line = ends_line(st, st.pool_parts[1])
    assert _order(st, line)[:3] == [(b.now + 50, 12), (b.now + 60, 11), (b.now + 60, 17)]
    assert [j for _, j in _order(st, line)] == [12, 11, 17, 15, 10, 13, 14]
