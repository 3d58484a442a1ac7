"""A carry between rounds (scheduler.core.carry) keeps per-job values; a round decides exactly as without it."""

from collections import Counter
from dataclasses import replace

import pytest

from scheduler.core import FifoPolicy, LasPolicy, build_topology, schedule
from scheduler.core import engine as engine_mod
from scheduler.core.carry import RoundCarry
from scheduler.core.synthetic import next_round, synthetic_snapshot
from scheduler.core.types import Config, TenantState
from tests.scheduler.core.builders import config, two_leaves
from tests.scheduler.core.decisions import everything

CASES = {
    "default": (Config(), None),
    "no service order": (Config(service_order=False, service_preemption=False), None),
    "service aging": (Config(service_aging_s=1800.0), None),
    "one service level": (Config(service_levels=1), None),
    "fifo": (Config(), FifoPolicy()),
    "las": (Config(), LasPolicy()),
}


@pytest.mark.parametrize("name", CASES)
def test_churn_rounds_decide_the_same_with_a_carry(name):
    # A filled cluster, then four churn rounds (5 % of the running jobs end, as many arrive, preempted and
    # requeued jobs wait again): the rounds with one carry decide what rounds without one decide.
    cfg, policy = CASES[name]
    snap = synthetic_snapshot(gpus=1024, pending=4000, seed=5)
    snap = replace(snap, topology=build_topology(snap.fabric), config=cfg)
    carry = RoundCarry()
    dec = schedule(snap, policy, carry)
    assert everything(dec) == everything(schedule(snap, policy))
    for i in range(4):
        snap = next_round(snap, dec, 0.05, seed=i)
        dec = schedule(snap, policy, carry)
        assert everything(dec) == everything(schedule(snap, policy))


@pytest.fixture(params=[None, 3], ids=["kept table", "table of 3"])
def turn_table_size(request, monkeypatch):
    """The carry's room for turn signatures: as shipped, or 3 only (the table starts again every round)."""
    if request.param is not None:
        monkeypatch.setattr(engine_mod, "_MAX_TURN_SIGNATURES", request.param)


@pytest.mark.usefixtures("turn_table_size")
def test_the_carry_counts_the_waiting_jobs_of_each_turn_signature_as_they_come_and_go():
    # The counts the leaf wait reads (multi-node jobs waiting per pool) are kept as jobs come, change and go; with room
    # for 3 signatures only, the table (and its counts) start again every round.
    carry = RoundCarry()
    for _, dec in _churn(synthetic_snapshot(gpus=512, pending=1500, seed=4), carry, 3):
        counted = Counter(carry.turn_ids[j] for j in dec.queue_order)
        assert {t: n for t, n in carry.turn_count.items() if n} == counted
        assert sum(counted.values()) == len(dec.queue_order) > 1000


@pytest.mark.usefixtures("turn_table_size")
def test_the_carry_keeps_a_lower_bound_of_each_turn_signatures_estimates():
    # The placement loop reads, per turn signature, the least estimate of its waiting jobs (could one end before a
    # reservation?): kept as jobs come, it may stay below the least of those still waiting, never above it.
    carry = RoundCarry()
    for snap, _ in _churn(synthetic_snapshot(gpus=512, pending=1500, seed=4), carry, 3):
        least: dict[int, float] = {}
        for j in snap.pending:
            if j.est_runtime_s is not None and j.id in carry.turn_ids:
                t = carry.turn_ids[j.id]
                least[t] = min(least.get(t, j.est_runtime_s), j.est_runtime_s)
        assert len(least) > 2
        assert all(carry.turn_floor.get(t, float("inf")) <= e for t, e in least.items())


def _two_tenants():
    b = two_leaves()
    b.pool(1, "train")
    b.tenant("a", max_priority=100)
    b.tenant("b", max_priority=100)
    for h in ("n1", "n2", "n3", "n4"):
        b.run(20 + int(h[1]), {h: list(range(8))}, tenant="b")
    b.job(1, gpus=8, tenant="a", priority=80)
    b.job(2, gpus=8, tenant="b", priority=50)
    return b


def test_a_new_priority_cap_reorders_the_queue_kept_in_the_carry():
    # Job 1 (tenant a, priority 80) is ahead of job 2 (b, 50). Then a's cap drops to 10: job 1 goes behind.
    b = _two_tenants()
    snap = b.snapshot(config(service_preemption=False))
    carry = RoundCarry()
    assert schedule(snap, carry=carry).queue_order == [1, 2]
    capped = [TenantState("a", max_priority=10), TenantState("b", max_priority=100)]
    assert schedule(replace(snap, tenants=capped), carry=carry).queue_order == [2, 1]


def test_a_job_changed_between_rounds_takes_its_new_place():
    # The same job id with a new request (its priority raised from 50 to 90): it goes ahead of job 1.
    b = _two_tenants()
    snap = b.snapshot(config(service_preemption=False))
    carry = RoundCarry()
    assert schedule(snap, carry=carry).queue_order == [1, 2]
    raised = [j if j.id != 2 else replace(j, priority=90) for j in snap.pending]
    assert schedule(replace(snap, pending=raised), carry=carry).queue_order == [2, 1]


def test_a_job_gone_between_rounds_leaves_the_carry():
    b = _two_tenants()
    snap = b.snapshot(config(service_preemption=False))
    carry = RoundCarry()
    schedule(snap, carry=carry)
    d = schedule(replace(snap, pending=[j for j in snap.pending if j.id != 1]), carry=carry)
    assert d.queue_order == [2]
    assert set(carry.jobs) == {2} and set(carry.line_of) == {2} and set(carry.service_keys) == {2}


def test_a_round_that_fails_half_way_clears_the_carry(monkeypatch):
    b = _two_tenants()
    snap = b.snapshot(config(service_preemption=False))
    carry = RoundCarry()
    schedule(snap, carry=carry)
    assert carry.jobs

    def broken(*args, **kwargs):
        raise RuntimeError("placement failed")

    monkeypatch.setattr(engine_mod._Round, "_place_all", broken)
    with pytest.raises(RuntimeError):
        schedule(snap, carry=carry)
    assert not carry.jobs and not carry.lines and not carry.turn_ids


def test_a_full_table_of_turn_signatures_starts_again(monkeypatch):
    # With room for 3 signatures only, the table is rebuilt in every round; the decisions stay the same.
    monkeypatch.setattr(engine_mod, "_MAX_TURN_SIGNATURES", 3)
    for snap, dec in _churn(synthetic_snapshot(gpus=256, pending=600, seed=2), RoundCarry(), 2):
        assert everything(dec) == everything(schedule(snap))


def _churn(snap, carry, rounds):
    """A filling round, then `rounds` churn rounds (5 % of the running jobs end, as many arrive) with `carry`:
    (snapshot, decisions) of each churn round."""
    dec = schedule(snap, carry=carry)
    for i in range(rounds):
        snap = next_round(snap, dec, 0.05, seed=i)
        dec = schedule(snap, carry=carry)
        yield snap, dec


def test_a_carry_kept_across_a_change_of_policy_still_orders_every_job():
    # Fair share, then FIFO with a new job 3, then fair share again: job 3 is in line (the FIFO round kept no
    # lines for it; a new policy starts the carry again).
    b = _two_tenants()
    snap = b.snapshot(config(service_preemption=False))
    carry = RoundCarry()
    schedule(snap, carry=carry)
    more = replace(snap, pending=[*snap.pending, replace(snap.pending[1], id=3, queue_seq=99)])
    assert schedule(more, FifoPolicy(), carry).queue_order == [1, 2, 3]
    assert schedule(more, carry=carry).queue_order == [1, 2, 3]
