"""A round starts at most Config.max_placements_per_round jobs (scheduler/core/engine.py): the jobs after the last
one it starts wait for the next round with a reason that says so, and the round plans no migration onto the GPUs
they will take. Expected values are worked out by hand in the comments."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduler.core import FifoPolicy, build_topology, schedule
from scheduler.core.carry import RoundCarry
from scheduler.core.synthetic import next_round, synthetic_snapshot
from tests.scheduler.core.builders import SnapBuilder, config
from tests.scheduler.core.decisions import everything
from tests.scheduler.core.test_migration import split_job
from tests.scheduler.core.test_no_thrash import one_node_full_but_gpu0

LIMIT_3 = "waiting for the next round: this round started its limit of 3 jobs"


def five_one_gpu_jobs() -> SnapBuilder:
    """One node of 8 free GPUs; jobs 1-5 ask one GPU each (FIFO: in that order)."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=8)
    b.pool(1, "p")
    for j in range(1, 6):
        b.job(j)
    return b


def test_a_round_starts_its_limit_and_the_rest_wait_for_the_next_round():
    # 8 free GPUs would start all five; a limit of 3 starts jobs 1, 2, 3 (first in line) and no more.
    d = schedule(five_one_gpu_jobs().snapshot(config(max_placements_per_round=3)), FifoPolicy())
    assert [p.job_id for p in d.placements] == [1, 2, 3]
    assert d.pending_reasons == {4: LIMIT_3, 5: LIMIT_3}
    assert d.queue_reasons == [None, None, None, LIMIT_3, LIMIT_3]
    assert d.stats["left_for_next_round"] == 2


def test_a_limit_of_zero_is_no_limit():
    d = schedule(five_one_gpu_jobs().snapshot(config(max_placements_per_round=0)), FifoPolicy())
    assert [p.job_id for p in d.placements] == [1, 2, 3, 4, 5]
    assert d.stats["left_for_next_round"] == 0


def test_a_round_that_starts_exactly_its_limit_leaves_nobody():
    # Five jobs, limit 5: the fifth start reaches the limit with nobody left in line.
    d = schedule(five_one_gpu_jobs().snapshot(config(max_placements_per_round=5)), FifoPolicy())
    assert len(d.placements) == 5
    assert d.stats["left_for_next_round"] == 0 and d.pending_reasons == {}


def test_jobs_that_cannot_start_do_not_count_toward_the_limit():
    # Jobs 1 and 2 ask 9 GPUs of a node of 8: they never fit and take no start. Jobs 3-5 are the three starts.
    b = five_one_gpu_jobs()
    b.pending.clear()
    b.job(1, gpus=9)
    b.job(2, gpus=9)
    for j in (3, 4, 5, 6):
        b.job(j)
    d = schedule(b.snapshot(config(max_placements_per_round=3)), FifoPolicy())
    assert [p.job_id for p in d.placements] == [3, 4, 5]
    assert d.pending_reasons[6] == LIMIT_3
    assert d.pending_reasons[1] != LIMIT_3 and d.stats["left_for_next_round"] == 1


def test_the_next_round_starts_the_rest():
    b = five_one_gpu_jobs()
    snap = b.snapshot(config(max_placements_per_round=3))
    carry = RoundCarry()
    first = schedule(snap, FifoPolicy(), carry)
    second = schedule(next_round(snap, first, finish=0.0), FifoPolicy(), carry)
    assert [p.job_id for p in second.placements] == [4, 5]
    assert second.stats["left_for_next_round"] == 0 and second.pending_reasons == {}


def test_a_claimant_placed_before_the_line_keeps_its_start_when_the_limit_cuts_the_line():
    # Job 20 was preempted 10 s ago for job 1, which has first call on GPU 0 before the line (test_no_thrash). Its
    # start is the round's one start of a limit of 1: job 20, first in line, waits for the next round, and job 1,
    # placed before the line was walked, is neither given the limit's reason nor left out of the placements.
    b = one_node_full_but_gpu0()
    gpu0 = b.gpu_id("n1", 0)
    b.job(20, tenant="b", priority=100, preempted_for=1, preempted_at=b.now - 10, preempted_gpus=(gpu0,))
    b.job(1, tenant="a", priority=50)
    d = schedule(b.snapshot(config(max_placements_per_round=1)))
    assert d.queue_order == [20, 1]
    assert [p.job_id for p in d.placements] == [1]
    assert d.queue_reasons == ["waiting for the next round: this round started its limit of 1 jobs", None]
    assert 1 not in d.pending_reasons and d.stats["left_for_next_round"] == 1


@pytest.mark.parametrize("limit, moves", [(0, 1), (1, 0), (2, 1)])
def test_a_round_that_leaves_jobs_waiting_at_its_limit_plans_no_migration(limit, moves):
    # Job 20 runs 4 + 4 over n1 and n2 with a hot link on n1; n3 (8 GPUs) is free, so it moves there when nothing
    # stops it (test_migration). Jobs 1 and 2 ask one GPU each and start on n1's or n2's free GPUs. With a limit
    # of 1, job 2 waits for the next round, whose jobs have the free GPUs first: no move. With 2 (nobody left) or
    # none, job 20 moves.
    b = split_job()
    b.util["n1-L1"] = 0.97
    b.job(1)
    b.job(2)
    d = schedule(b.snapshot(config(max_placements_per_round=limit)), FifoPolicy())
    assert len(d.placements) == (limit or 2)
    assert len(d.migrations) == moves


def test_a_limit_cuts_the_line_at_the_same_job_whatever_order_the_jobs_come_in():
    # The line is the policy's: shuffling the snapshot's pending list changes nothing a limited round decides.
    b = five_one_gpu_jobs()
    snap = b.snapshot(config(max_placements_per_round=3))
    base = everything(schedule(snap))
    for seed in range(5):
        pending = list(snap.pending)
        random.Random(seed).shuffle(pending)
        assert everything(schedule(replace(snap, pending=pending))) == base


def test_limited_rounds_decide_the_same_with_a_carry():
    # A cluster filled 40 starts a round (with preemptions from the fourth on): each round with the carry decides
    # what a round without one decides.
    snap = synthetic_snapshot(gpus=1024, pending=4000, seed=5)
    snap = replace(snap, topology=build_topology(snap.fabric), config=config(max_placements_per_round=40))
    carry = RoundCarry()
    limited = 0
    for i in range(5):
        dec = schedule(snap, None, carry)
        assert everything(dec) == everything(schedule(snap))
        limited += dec.stats["left_for_next_round"] > 0
        assert len(dec.placements) == 40
        snap = next_round(snap, dec, 0.0, seed=i)
    assert limited == 5  # 40 starts a round never empty a line of 4,000 jobs
