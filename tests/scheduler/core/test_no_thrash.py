"""No thrashing (issue 12, point 4): consecutive rounds with the engine's state carried over the way the
production adapter carries it (scheduler/snapshot_from_db.py reads back what scheduler/actions/apply.py wrote).

The livelock, as found by a race of concurrent submitters: a borrowing tenant "b" fills node n1 with 1-GPU
jobs of a higher priority class; tenant "a", under its guarantee, submits a 1-GPU job; a gang of tenant "c"
waits for a whole node with a reservation. Each round "a" reclaimed one of b's GPUs, and the next round the
victim, ahead of "a" in line (priority 100 over 50), was put back on the GPU it had just been taken from,
so "a" never started while the engine preempted once per round.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduler.core import schedule
from scheduler.core.types import Decisions, RunningJob, Snapshot
from tests.scheduler.core.builders import SnapBuilder, config

ROUND_S = 10.0  # seconds between rounds (the production periodic round, ROUND_INTERVAL_S)


def carry(snap: Snapshot, dec: Decisions, *, stop_rounds: int = 0, stopping_for: dict | None = None) -> Snapshot:
    """The next round's snapshot after `dec` is applied, as the adapter would read it.

    stop_rounds=0 is LAUNCHER=twin: a victim stops at once and is pending again in the next round.
    stop_rounds=1 is node agents: a victim is passed as a stopping running job (holding its GPUs) for one
    round, then requeued. `stopping_for` (victim id -> rounds left) carries that countdown between calls.
    """
    now = snap.now
    stopping_for = {} if stopping_for is None else stopping_for
    running = {rj.request.id: rj for rj in snap.running}
    pending = {j.id: j for j in snap.pending}
    for jid in [j for j, left in stopping_for.items() if left <= 0]:
        del stopping_for[jid]
        rj = running.pop(jid)
        pending[jid] = rj.request
    for jid in stopping_for:
        stopping_for[jid] -= 1
    for jid, _ in dec.requeues:
        pending[jid] = running.pop(jid).request
    for p in dec.preemptions:  # the preemption is recorded on the victim (scheduler/actions/apply.py)
        rj = running[p.job_id]
        rj = replace(
            rj, request=replace(rj.request, preempted_for=p.for_job, preempted_at=now, preempted_gpus=p.gpu_ids)
        )
        running[p.job_id] = rj
        if stop_rounds:
            running[p.job_id] = replace(rj, stopping=True)
            stopping_for[p.job_id] = stop_rounds - 1
        else:
            del running[p.job_id]
            pending[p.job_id] = rj.request
    for m in dec.migrations:
        running[m.job_id] = replace(running[m.job_id], shares=m.placement.shares, last_migrated_at=now)
    for p in dec.placements:
        running[p.job_id] = RunningJob(pending.pop(p.job_id), p.shares, now, None, p.borrowed)
    owner = {s.gpu_id: jid for jid, rj in running.items() for s in rj.shares}
    nodes = [replace(n, gpus=tuple(replace(g, exclusive_job=owner.get(g.id)) for g in n.gpus)) for n in snap.nodes]
    return replace(
        snap,
        now=now + ROUND_S,
        nodes=nodes,
        running=list(running.values()),
        pending=sorted(pending.values(), key=lambda j: j.queue_seq),
    )


def reclaim_race() -> SnapBuilder:
    """Two nodes of 4 GPUs in one leaf, one pool.

    n1: jobs 20-23 of tenant b, 1 GPU each, borrowed (b has no guarantee), priority 100, 10 min estimates.
    n2: job 30 of tenant c, 4 GPUs, within c's guarantee of 4, priority 100, 1 h estimate.
    Pending: job 40, c's 4-GPU gang (borrowing, priority 100): it fits only a whole node and gets the
    pool's reservation; job 1 of tenant a (guarantee 1, none used, priority 50): in quota, so it may
    reclaim a borrowed GPU. Every running job started 1 h ago (past any minimum run time)."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=4)
    b.pool(1, "p")
    b.tenant("a", {1: (1, 0)})
    b.tenant("b", {1: (0, 8)})
    b.tenant("c", {1: (4, 4)})
    started = b.now - 3600
    for i in range(4):
        b.run(20 + i, {"n1": [i]}, tenant="b", borrowed=True, priority=100, est_runtime_s=600, started_at=started)
    b.run(30, {"n2": [0, 1, 2, 3]}, tenant="c", priority=100, est_runtime_s=7200, started_at=started)
    b.job(40, gpus=4, tenant="c", priority=100)
    b.job(1, gpus=1, tenant="a", priority=50)
    return b


def play(snap: Snapshot, rounds: int, stop_rounds: int = 0) -> list[Decisions]:
    out, stopping_for = [], {}
    for _ in range(rounds):
        d = schedule(snap)
        out.append(d)
        snap = carry(snap, d, stop_rounds=stop_rounds, stopping_for=stopping_for)
    return out


def started_round(decisions: list[Decisions], jid: int) -> int | None:
    return next((i for i, d in enumerate(decisions) if d.placement_for(jid) is not None), None)


@pytest.mark.parametrize("stop_rounds", [0, 1], ids=["twin", "agents"])
def test_a_reclaim_lets_its_beneficiary_start_and_preempts_once(stop_rounds):
    decisions = play(reclaim_race().snapshot(), rounds=8, stop_rounds=stop_rounds)
    per_round = [len(d.preemptions) for d in decisions]
    # One reclaim (round 0) frees one GPU of n1 for job 1, which starts on it as soon as its victim has
    # stopped: round 1 under the twin, round 2 when the victim stops in the round after its preemption.
    assert per_round == [1] + [0] * 7
    assert started_round(decisions, 1) == 1 + stop_rounds
    freed = decisions[0].preemptions[0]
    victim_gpus = {s.gpu_id for s in reclaim_race().snapshot().running[freed.job_id - 20].shares}
    assert {s.gpu_id for s in decisions[1 + stop_rounds].placement_for(1).shares} == victim_gpus


def test_the_rounds_are_deterministic_whatever_the_input_order():
    base = [[(p.job_id, p.shares) for p in d.placements] for d in play(reclaim_race().snapshot(), rounds=4)]
    rng = random.Random(12)
    for _ in range(5):
        snap = reclaim_race().snapshot()
        pending, running = list(snap.pending), list(snap.running)
        rng.shuffle(pending)
        rng.shuffle(running)
        shuffled = play(replace(snap, pending=pending, running=running), rounds=4)
        assert [[(p.job_id, p.shares) for p in d.placements] for d in shuffled] == base


# ------------------------------------------------------------------ the beneficiary's claim


def one_node_full_but_gpu0() -> SnapBuilder:
    """n1 (4 GPUs): GPU 0 free, jobs 21-23 of tenant b (borrowed, priority 100) on GPUs 1-3, started 1 h ago.
    Tenant a has a guarantee of 1 GPU, b none."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=4)
    b.pool(1, "p")
    b.tenant("a", {1: (1, 0)})
    b.tenant("b", {1: (0, 8)})
    for i in (1, 2, 3):
        b.run(20 + i, {"n1": [i]}, tenant="b", borrowed=True, priority=100, started_at=b.now - 3600)
    return b


def test_the_beneficiary_takes_the_gpus_freed_for_it_before_the_queue():
    b = one_node_full_but_gpu0()
    gpu0 = b.gpu_id("n1", 0)
    # Job 20 was preempted 10 s ago for job 1 and requeued; it is ahead of job 1 in line (100 over 50).
    b.job(20, tenant="b", priority=100, preempted_for=1, preempted_at=b.now - 10, preempted_gpus=(gpu0,))
    b.job(1, tenant="a", priority=50)
    d = schedule(b.snapshot())
    assert d.queue_order == [20, 1]  # the line shown to users is the policy's
    assert [(p.job_id, [s.gpu_id for s in p.shares]) for p in d.placements] == [(1, [gpu0])]
    assert d.preemptions == []  # job 20 does not take it back, and job 1 does not preempt again
    assert d.stats["claims"] == 1 and d.stats["claims_started"] == 1


def test_a_claim_expires():
    b = one_node_full_but_gpu0()
    gpu0 = b.gpu_id("n1", 0)
    # Preempted 301 s ago (Config.preemption_claim_s is 300): job 1 has no first call left, but job 20 still
    # stays off GPU 0 while job 1 waits, so job 1 gets it in its turn.
    b.job(20, tenant="b", priority=100, preempted_for=1, preempted_at=b.now - 301, preempted_gpus=(gpu0,))
    b.job(1, tenant="a", priority=50)
    d = schedule(b.snapshot())
    assert d.stats["claims"] == 0
    assert [p.job_id for p in d.placements] == [1]


def test_a_victim_stays_off_its_gpus_while_its_beneficiary_waits_and_others_may_take_them():
    b = one_node_full_but_gpu0()
    gpu0 = b.gpu_id("n1", 0)
    b.node("n2", gpus=4)
    b.leaf("L2", ["n2"], {"S1": 1}, gpus=4)
    b.pools.clear()
    b.pool(1, "p")
    b.tenant("a", {1: (4, 0)})
    b.run(5, {"n2": [0, 1, 2, 3]}, tenant="a", priority=100, started_at=b.now - 3600)  # a's guarantee is used up
    b.job(20, tenant="b", priority=100, preempted_for=1, preempted_at=b.now - 10, preempted_gpus=(gpu0,))
    b.job(1, tenant="a", priority=50)  # 4 + 1 > 4 guaranteed, no borrowing: it cannot start
    b.job(30, tenant="d", priority=50)
    d = schedule(b.snapshot())
    assert d.stats["claims_dropped"] == 1  # its victim is gone and it still cannot start
    assert d.pending_reasons[1] == (
        "tenant quota: 4 GPUs in use + 1 asked = 5, more than 4 guaranteed + 0 borrowable = 4"
    )
    assert [(p.job_id, [s.gpu_id for s in p.shares]) for p in d.placements] == [(30, [gpu0])]
    assert d.preemptions == []


def test_a_gpu_still_being_freed_for_a_beneficiary_is_not_reserved_by_another_job():
    b = one_node_full_but_gpu0()
    gpu0 = b.gpu_id("n1", 0)
    b.tenant("e", {1: (1, 0)})
    # Node agents: job 20, preempted for job 1 10 s ago, still checkpointing on GPU 0 (which it holds).
    b.set_gpu("n1", 0)
    b.run(20, {"n1": [0]}, tenant="b", borrowed=True, priority=100, started_at=b.now - 3600, stopping=True,
          preempted_for=1, preempted_at=b.now - 10, preempted_gpus=(gpu0,))  # fmt: skip
    b.job(50, tenant="e", priority=50)  # in quota too, and ahead of job 1 in line
    b.job(1, tenant="a", priority=50)
    d = schedule(b.snapshot())
    held = {r.job_id: r.gpu_ids for r in d.reservations}
    assert held[1] == (gpu0,)  # job 1 waits for its victim
    assert d.pending_reasons[1] == "needs 1 GPU; 0 free in pool 'p'; waiting for preempted jobs to stop"
    # Job 50 may not wait for GPU 0: it reclaims a GPU of its own (one of b's jobs 21-23).
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(21, 50)]


# ------------------------------------------------------------------ a preemption must let its beneficiary start


def reserved_node() -> SnapBuilder:
    """n1: jobs 20-23 of tenant b (1 GPU each, borrowed, priority 100, ending now). n2: job 30 of tenant c
    (4 GPUs, within its guarantee, 2 h left). Job 40, c's 4-GPU gang (priority 100, beyond c's guarantee:
    it would borrow), reserves n1, whose jobs end first. Job 1 of tenant a, in quota, 1 GPU, no estimate."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=4)
    b.pool(1, "p")
    b.tenant("a", {1: (1, 0)})
    b.tenant("b", {1: (0, 8)})
    b.tenant("c", {1: (4, 4)})
    for i in range(4):
        b.run(20 + i, {"n1": [i]}, tenant="b", borrowed=True, priority=100, est_runtime_s=600,
              started_at=b.now - 3600)  # fmt: skip
    b.run(30, {"n2": [0, 1, 2, 3]}, tenant="c", priority=100, est_runtime_s=3 * 3600, started_at=b.now - 3600)
    b.job(40, gpus=4, tenant="c", priority=100)
    b.job(1, gpus=1, tenant="a", priority=50)
    return b


def test_a_reclaim_within_quota_may_take_gpus_reserved_for_a_borrowing_job():
    d = schedule(reserved_node().snapshot())
    assert {r.job_id: r.nodes for r in d.reservations} == {40: ("n1",), 1: ("n1",)}
    assert [(p.job_id, p.for_job) for p in d.preemptions] == [(20, 1)]


def own_jobs_under_a_reservation() -> SnapBuilder:
    """n1: jobs 20-23 of tenant a (1 GPU each, within a's guarantee of 4, priority 10, ending now). n2: job 30
    of tenant c (4 GPUs, within its guarantee, 3 h left). Job 40, c's 4-GPU gang (priority 100, borrowing:
    it may not preempt a's guaranteed jobs), reserves n1. Job 1 of tenant a (priority 50, 1 GPU beyond a's
    guarantee: borrowing, no estimate) may preempt a's own lower-priority jobs, but may not delay job 40."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 2}, gpus=4)
    b.pool(1, "p")
    b.tenant("a", {1: (4, 4)})
    b.tenant("c", {1: (4, 4)})
    for i in range(4):
        b.run(20 + i, {"n1": [i]}, tenant="a", priority=10, est_runtime_s=600, started_at=b.now - 3600)
    b.run(30, {"n2": [0, 1, 2, 3]}, tenant="c", priority=100, est_runtime_s=3 * 3600, started_at=b.now - 3600)
    b.job(40, gpus=4, tenant="c", priority=100)
    b.job(1, gpus=1, tenant="a", priority=50)
    return b


def test_no_preemption_frees_gpus_that_a_reservation_it_may_not_delay_will_take():
    d = schedule(own_jobs_under_a_reservation().snapshot())
    assert {r.job_id: r.nodes for r in d.reservations} == {40: ("n1",)}
    # Every GPU job 1 could free is one job 40 is to start on: freeing it would leave job 1 blocked by the
    # reservation (the GPU idle), or let it delay job 40.
    assert d.preemptions == []
    assert d.pending_reasons[1] == "needs 1 GPU; 0 free in pool 'p'"


def test_a_victim_off_the_reservation_is_chosen_instead():
    b = own_jobs_under_a_reservation()
    b.node("n3", gpus=4)
    b.leaf("L2", ["n3"], {"S1": 1}, gpus=4)
    b.pools.clear()
    b.pool(1, "p")
    # n3: job 60 of a (priority 10, 4 h left: the reservation stays on n1) and c's non-preemptible job 61.
    b.run(60, {"n3": [0]}, tenant="a", priority=10, est_runtime_s=5 * 3600, started_at=b.now - 3600)
    b.run(61, {"n3": [1, 2, 3]}, tenant="c", priority=100, preemptible=False, est_runtime_s=5 * 3600,
          started_at=b.now - 3600)  # fmt: skip
    b.tenant("a", {1: (5, 4)})
    b.tenant("c", {1: (7, 4)})
    d = schedule(b.snapshot())
    assert {r.job_id: r.nodes for r in d.reservations} == {40: ("n1",), 1: ("n3",)}
    assert [(p.job_id, p.for_job, p.gpu_ids) for p in d.preemptions] == [(60, 1, (b.gpu_id("n3", 0),))]


# ------------------------------------------------------------------ minimum run time


def young_borrower(ran_s: float, victim_priority: int = 100, **cfg) -> Decisions:
    """n1 (2 GPUs): job 20 of tenant b (borrowed) has run `ran_s`, job 21 (b, not preemptible) holds the other
    GPU; job 1 of tenant a, in quota, priority 50, waits."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=2)
    b.pool(1, "p")
    b.tenant("a", {1: (1, 0)})
    b.tenant("b", {1: (1, 8)})
    b.run(20, {"n1": [0]}, tenant="b", borrowed=True, priority=victim_priority, started_at=b.now - ran_s)
    b.run(21, {"n1": [1]}, tenant="b", priority=100, preemptible=False, started_at=b.now - 3600)
    b.job(1, tenant="a", priority=50)
    return schedule(b.snapshot(config(backfill=False, **cfg)))


def test_a_job_is_not_reclaimed_before_its_minimum_run_time():
    d = young_borrower(ran_s=100)
    assert d.preemptions == []
    assert d.stats["min_run_protected"] == 1
    # 300 - 100 = 200 s left, said as "3 min" (200 / 60 = 3.3, rounded).
    assert d.pending_reasons[1] == (
        "needs 1 GPU; 0 free in pool 'p'; may preempt in about 3 min, when the jobs it needs have run their"
        " minimum time"
    )


def test_a_job_is_reclaimed_once_it_has_run_its_minimum():
    assert [p.job_id for p in young_borrower(ran_s=301).preemptions] == [20]


def test_the_minimum_counts_from_the_last_move():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=1)
    b.pool(1, "p")
    b.tenant("a", {1: (1, 0)})
    b.run(20, {"n1": [0]}, tenant="b", borrowed=True, started_at=b.now - 3600, last_migrated_at=b.now - 100)
    b.job(1, tenant="a")
    assert schedule(b.snapshot()).preemptions == []


def test_a_higher_priority_preempts_before_the_minimum():
    # Job 20 (priority 10) has run 100 s; job 1 (priority 50) outranks it.
    assert [p.job_id for p in young_borrower(ran_s=100, victim_priority=10).preemptions] == [20]


def test_the_minimum_can_hold_against_every_preemption():
    d = young_borrower(ran_s=100, victim_priority=10, preemption_min_run_priority_exempt=False)
    assert d.preemptions == []


def test_no_minimum_when_set_to_zero():
    assert [p.job_id for p in young_borrower(ran_s=100, preemption_min_run_s=0).preemptions] == [20]


# ------------------------------------------------------------------ migration: the same rules


def split_job(started_ago: float, **run_kw) -> SnapBuilder:
    """Job 20 runs 4+4 over n1 and n2 (10 h estimate); n3 is free: a single node freed up for it."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]}, est_runtime_s=36000, started_at=b.now - started_ago, **run_kw)
    return b


def test_a_job_is_not_moved_before_its_minimum_run_time():
    cfg = config(migration_hold_down_s=0)
    assert schedule(split_job(started_ago=100).snapshot(cfg)).migrations == []
    assert [m.job_id for m in schedule(split_job(started_ago=301).snapshot(cfg)).migrations] == [20]


def preempted_for_job_1(**tenants) -> SnapBuilder:
    """Job 20 was preempted from n3 2 h ago for job 1, then placed again over n1 and n2; n3 is free."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2", "n3"], {"S1": 3})
    b.pool(1, "train")
    for name, quotas in tenants.items():
        b.tenant(name, quotas)
    n3 = tuple(b.gpu_id("n3", i) for i in range(8))
    b.run(20, {"n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]}, est_runtime_s=36000, started_at=b.now - 3600,
          preempted_for=1, preempted_at=b.now - 7200, preempted_gpus=n3)  # fmt: skip
    return b


def test_a_victim_is_not_moved_back_onto_the_gpus_freed_for_its_waiting_beneficiary():
    # Job 1 still waits (tenant a has no quota left). A single node (n3) freed up for job 20, but it is job 1's.
    b = preempted_for_job_1(a={1: (0, 0)})
    b.job(1, gpus=8, tenant="a")
    d = schedule(b.snapshot())
    assert d.placements == [] and d.migrations == []
    assert d.pending_reasons[1] == (
        "needs 8 GPUs, more than the tenant quota allows at once: 0 guaranteed + 0 borrowable = 0"
    )


def test_without_a_waiting_beneficiary_the_same_job_moves():
    # Job 1 gone (started or cancelled): nothing keeps job 20 off n3 any more.
    b = preempted_for_job_1()
    (m,) = schedule(b.snapshot()).migrations
    assert m.job_id == 20 and m.placement.nodes == ("n3",)


def test_a_beneficiary_placed_this_round_keeps_its_victim_off_nothing():
    # As above, but job 1 needs 4 GPUs and starts this round, on the 4 that job 20 leaves free on n1: it waits no
    # more, so nothing keeps job 20 off n3, which it takes whole.
    b = preempted_for_job_1()
    b.job(1, gpus=4)
    d = schedule(b.snapshot())
    assert [(p.job_id, p.nodes) for p in d.placements] == [(1, ("n1",))]
    assert [(m.job_id, m.placement.nodes) for m in d.migrations] == [(20, ("n3",))]
