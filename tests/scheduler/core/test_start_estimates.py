"""Each reservation says what its estimated start rests on (Reservation.basis), the data behind the reason's
"reserved to start in about ..." (issue 14: the ETA as fields, with how sure it is)."""

from scheduler.core import schedule
from scheduler.core.types import RESERVATION_BASES
from tests.scheduler.core.builders import SnapBuilder, two_leaves
from tests.scheduler.core.test_leaf_wait import fabric


def one_node() -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "train")
    return b


def test_a_backfill_reservation_rests_on_the_running_jobs_estimates():
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3, 4, 5]}, est_runtime_s=3600.0)  # started 600 s ago: ends in 3000 s
    b.job(81, gpus=8)
    (r,) = schedule(b.snapshot()).reservations
    assert (r.job_id, r.start_at - b.now, r.basis) == (81, 3000.0, "backfill")


def test_a_preemptor_starts_when_its_victims_have_had_their_grace_period():
    b = one_node()
    b.run(20, {"n1": [0, 1, 2, 3]}, priority=10)
    b.job(1, gpus=8, priority=100)
    d = schedule(b.snapshot())
    (r,) = [r for r in d.reservations if r.job_id == 1]
    assert (r.start_at - b.now, r.basis) == (120.0, "preempting")  # Config.preemption_grace_s


def test_a_job_waiting_for_jobs_already_stopping():
    b = two_leaves(hosts_per_leaf=1)
    b.pool(1, "train")
    b.run(20, {"n1": list(range(8))}, priority=10, stopping=True)
    b.run(21, {"n2": list(range(8))}, priority=10)
    b.job(1, gpus=8, priority=100)
    d = schedule(b.snapshot())
    (r,) = d.reservations
    assert (r.job_id, r.start_at - b.now, r.basis) == (1, 120.0, "stopping")


def test_a_gang_waiting_for_one_leaf():
    b = fabric()  # n2 frees in 100 s; two gangs would share the uplinks across leaves
    b.job(1, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    b.job(2, gpus=16, nodes=2, gpus_per_node=8, est_runtime_s=3600.0)
    d = schedule(b.snapshot())
    (r,) = [r for r in d.reservations if r.job_id == 1]
    assert (r.start_at - b.now, r.basis) == (100.0, "leaf")


def test_the_bases_are_the_four_kinds():
    assert RESERVATION_BASES == ("preempting", "stopping", "backfill", "leaf")
