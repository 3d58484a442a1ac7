"""Backfill (EASY): the top blocked job gets a reservation; smaller jobs run ahead only when they do not
delay it."""

from dataclasses import replace

from scheduler.core import schedule
from tests.scheduler.core.builders import SnapBuilder, config

# EASY backfill around the job the queue put first. The default order inside a tenant would put job 2 (an
# estimate, 2 GPUs) ahead of job 81 (8 GPUs, no estimate), so the tests that need 81 first keep submission
# order (the default's own order is tested in test_policies.py and test_service.py).
FIFO = config(service_order=False)


def cluster(extra_node: bool = False) -> SnapBuilder:
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"] if extra_node else ["n1"], {"S1": 1})
    b.pool(1, "train")
    # Ends in 3000 s: started 600 s ago with a one-hour estimate.
    b.run(20, {"n1": [0, 1, 2, 3, 4, 5]}, est_runtime_s=3600.0)
    return b


def test_top_blocked_job_gets_a_reservation_at_the_end_of_running_jobs():
    b = cluster()
    b.job(81, gpus=8)
    d = schedule(b.snapshot())
    (r,) = d.reservations
    assert r.job_id == 81 and r.start_at == b.now + 3000.0 and r.nodes == ("n1",)
    assert d.pending_reasons[81] == (
        "needs 8 GPUs; 2 free in pool 'train'; reserved to start in about 50 min as running jobs end"
    )


def test_short_job_runs_ahead_on_reserved_gpus():
    b = cluster()
    b.job(81, gpus=8)
    b.job(2, gpus=2, est_runtime_s=1000.0)
    d = schedule(b.snapshot(FIFO))
    assert [p.job_id for p in d.placements] == [2]
    assert d.stats["placed_backfill_window"] == 1


def test_long_job_waits_for_the_reserved_start():
    b = cluster()
    b.job(81, gpus=8)
    b.job(2, gpus=2, est_runtime_s=7200.0)
    d = schedule(b.snapshot(FIFO))
    assert d.placements == []
    assert d.pending_reasons[2] == "waiting for reserved start of job 81 (backfill window too short)"


def test_job_without_an_estimate_never_uses_reserved_gpus():
    b = cluster()
    b.job(81, gpus=8)
    b.job(2, gpus=2)
    d = schedule(b.snapshot())
    assert d.pending_reasons[2] == "waiting for reserved start of job 81 (backfill window too short)"


def test_job_that_fits_elsewhere_runs_without_an_estimate():
    b = cluster(extra_node=True)
    b.run(21, {"n2": [0, 1, 2, 3]}, est_runtime_s=36000.0)
    b.job(81, gpus=8)
    b.job(2, gpus=4)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.placements] == [2]
    assert d.placements[0].nodes == ("n2",)


def test_backfill_off_keeps_strict_order_in_the_pool():
    b = cluster()
    b.job(81, gpus=8)
    b.job(2, gpus=2, est_runtime_s=10.0)
    d = schedule(b.snapshot(config(backfill=False, service_order=False)))
    assert d.placements == []
    assert d.reservations == []
    assert d.pending_reasons[2] == "waiting behind job 81 (backfill off)"


def test_backfill_off_does_not_block_other_pools():
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.leaf("L2", ["n2"], {"S1": 1})
    b.pool(1, "a", hosts=["n1"])
    b.pool(2, "b", hosts=["n2"])
    b.run(20, {"n1": [0, 1, 2, 3]}, pool=1)
    b.job(81, gpus=8, pool=1)
    b.job(2, gpus=2, pool=2)
    d = schedule(b.snapshot(config(backfill=False, service_order=False)))
    assert [p.job_id for p in d.placements] == [2]


def test_reservation_holds_only_what_is_free_now():
    b = cluster()
    b.job(81, gpus=8)
    b.job(2, gpus=1, est_runtime_s=100.0)
    b.job(3, gpus=1, est_runtime_s=100.0)
    b.job(4, gpus=1, est_runtime_s=100.0)
    d = schedule(b.snapshot())
    assert [p.job_id for p in d.placements] == [2, 3]  # the two free GPUs, then nothing is left
    ids = [s.gpu_id for p in d.placements for s in p.shares]
    assert sorted(ids) == sorted([b.gpu_id("n1", 6), b.gpu_id("n1", 7)])


def test_a_job_past_its_estimate_is_expected_to_end_soon():
    # Job 20 (6 GPUs) started 100 s ago with a 40 s estimate: expected to end in min(60 s, 40 / 4) = 10 s,
    # not at once (it still runs) and not a minute later than a job that short could mean.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1, 2, 3, 4, 5]}, started_at=b.now - 100, est_runtime_s=40.0)
    b.job(81, gpus=8)
    (r,) = schedule(b.snapshot()).reservations
    assert r.start_at == b.now + 10.0
    # An hour-long estimate overrun: a minute (min(60, 3600 / 4)).
    b2 = cluster()
    b2.running[0] = replace(b2.running[0], started_at=b2.now - 4000)  # 3600 s estimate, ran 4000 s
    b2.job(81, gpus=8)
    (r2,) = schedule(b2.snapshot()).reservations
    assert r2.start_at == b2.now + 60.0
