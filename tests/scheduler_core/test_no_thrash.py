"""No thrashing (issue 12, point 4): consecutive rounds with the engine's state carried over the way the
production adapter carries it (scheduler/adapters.py reads back what scheduler/actions/apply.py wrote).

The livelock, as found by a race of concurrent submitters: a borrowing tenant "b" fills node n1 with 1-GPU
jobs of a higher priority class; tenant "a", under its guarantee, submits a 1-GPU job; a gang of tenant "c"
waits for a whole node with a reservation. Each round "a" reclaimed one of b's GPUs, and the next round the
victim, ahead of "a" in line (priority 100 over 50), was put back on the GPU it had just been taken from,
so "a" never started while the engine preempted once per round.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.core import schedule
from scheduler.core.types import Decisions, RunningJob, Snapshot
from tests.scheduler_core.builders import SnapBuilder

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
    for p in dec.preemptions:
        rj = running[p.job_id]
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


@pytest.mark.xfail(strict=True, reason="issue 12: the reclaim livelock (fixed by the next commit)")
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
