"""Decisions.queue_reasons: every waiting job's reason in queue order, beside the dict the API reads, None for a job
the round placed. The queue's record reads it (scheduler.actions.apply._record_queue)."""

from dataclasses import replace

import pytest

from scheduler.core import build_topology, schedule
from scheduler.core.carry import RoundCarry
from scheduler.core.synthetic import next_round, synthetic_snapshot
from tests.scheduler.core.builders import SnapBuilder


def _aligned(dec):
    placed = {p.job_id for p in dec.placements}
    return [None if j in placed else dec.pending_reasons.get(j, "") for j in dec.queue_order]


def test_by_hand_placed_and_waiting():
    # One node of 4 GPUs: job 1 (4 GPUs) is placed; job 2 (4 GPUs) waits with a reservation for when job 1 ends,
    # job 3 (4 GPUs) waits behind it.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=4)
    b.pool(1, "train")
    for jid in (1, 2, 3):
        b.job(jid, gpus=4)
    dec = schedule(b.snapshot())
    assert dec.queue_order == [1, 2, 3]
    assert dec.queue_reasons == [None, dec.pending_reasons[2], "needs 4 GPUs; 0 free in pool 'train'"]
    assert dec.queue_reasons[1].startswith("needs 4 GPUs; 0 free in pool 'train'; reserved to start")


@pytest.mark.parametrize("carry", [True, False])
def test_churn_rounds_give_each_job_its_reason_in_queue_order(carry):
    snap = synthetic_snapshot(gpus=1024, pending=4000, seed=3)
    snap = replace(snap, topology=build_topology(snap.fabric))
    kept = RoundCarry() if carry else None
    dec = schedule(snap, carry=kept)
    assert dec.queue_reasons == _aligned(dec)
    for i in range(3):
        snap = next_round(snap, dec, 0.05, seed=i)
        dec = schedule(snap, carry=kept)
        assert dec.placements and dec.queue_reasons == _aligned(dec)
