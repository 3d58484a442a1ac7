"""Backfill (EASY): the top blocked job gets a reservation; smaller jobs run ahead only when they do not
delay it."""

from dataclasses import replace

from scheduler.core import schedule
from scheduler.core.types import Share
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


def one_node_running(*jobs: tuple[int, list[int], float]) -> SnapBuilder:
    """n1 (8 GPUs) alone in pool 1 'train', with running jobs (id, GPUs on n1, seconds until their end)."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.pool(1, "train")
    for jid, gpus, ends_in in jobs:
        b.run(jid, {"n1": gpus}, started_at=b.now, est_runtime_s=ends_in)
    return b


def test_reservation_starts_when_the_earliest_ending_job_frees_enough():
    # Job 30 (4 GPUs) ends in 1000 s, job 10 (the other 4) in 3000 s: a 4-GPU job can start after 30, the
    # earlier end, whatever the job ids.
    b = one_node_running((30, [0, 1, 2, 3], 1000.0), (10, [4, 5, 6, 7], 3000.0))
    b.job(81, gpus=4)
    (r,) = schedule(b.snapshot()).reservations
    assert r.start_at == b.now + 1000.0
    assert sorted(r.gpu_ids) == [b.gpu_id("n1", i) for i in range(4)]


def no_whole_node_until_two_jobs_end() -> SnapBuilder:
    """For job 81, which needs 8 GPUs on one node. n1: job 10 (GPUs 0-4) ends in 1000 s, job 11 (5-7) in
    2000 s; n2 (GPU 7 broken, so never a whole node): job 12 (0-3) ends in 3000 s, 4-6 free. After job 10
    there are 8 GPUs free (5 + 3) but on no single node, so that try fails; after job 11, n1 is whole."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.set_gpu("n2", 7, healthy=False)
    b.pool(1, "train")
    b.run(10, {"n1": [0, 1, 2, 3, 4]}, started_at=b.now, est_runtime_s=1000.0)
    b.run(11, {"n1": [5, 6, 7]}, started_at=b.now, est_runtime_s=2000.0)
    b.run(12, {"n2": [0, 1, 2, 3]}, started_at=b.now, est_runtime_s=3000.0)
    return b


def test_reservation_is_at_the_first_release_where_the_job_fits():
    b = no_whole_node_until_two_jobs_end()
    b.job(81, gpus=8, nodes=1)
    (r,) = schedule(b.snapshot()).reservations
    assert r.start_at == b.now + 2000.0 and r.nodes == ("n1",)


def test_second_probe_within_the_limit_finds_the_start():
    # Two tries allowed: the first (after job 10) fails, the second (after job 11) fits.
    b = no_whole_node_until_two_jobs_end()
    b.job(81, gpus=8, nodes=1)
    (r,) = schedule(b.snapshot(config(backfill_probes=2))).reservations
    assert r.start_at == b.now + 2000.0


def test_when_the_probes_run_out_the_reservation_is_at_the_end_of_the_last_job():
    # One try allowed: it fails after job 10; then every job is taken as gone, so the start is the last
    # end (job 12's, 3000 s), later than the true start (2000 s) but never earlier.
    b = no_whole_node_until_two_jobs_end()
    b.job(81, gpus=8, nodes=1)
    (r,) = schedule(b.snapshot(config(backfill_probes=1))).reservations
    assert r.start_at == b.now + 3000.0
    assert r.nodes == ("n1",) and sorted(r.gpu_ids) == [b.gpu_id("n1", i) for i in range(8)]


def test_a_job_started_in_another_pool_does_not_set_the_last_end():
    # As above (one try, then everything released), plus job 5 started this round in pool 2 on n3 for
    # 10000 s: the reservation is at the end of pool 1's last job (3000 s), not of job 5.
    b = no_whole_node_until_two_jobs_end()
    b.leaf("L2", ["n3"], {"S1": 1})  # pool 1 already has n1 and n2
    b.pool(2, "other", hosts=["n3"])
    b.job(5, gpus=8, pool=2, est_runtime_s=10000.0)
    b.job(81, gpus=8, nodes=1)
    d = schedule(b.snapshot(config(backfill_probes=1, service_order=False)))
    assert [p.job_id for p in d.placements] == [5]
    (r,) = d.reservations
    assert r.job_id == 81 and r.start_at == b.now + 3000.0


def test_with_no_probes_the_reservation_is_planned_with_every_job_gone():
    # backfill_probes=0: no try at each release, only the one with everything released, so the start is
    # the end of the last job (3000 s) although the 4-GPU job would fit after the first (1000 s).
    b = one_node_running((10, [0, 1, 2, 3], 1000.0), (11, [4, 5], 2000.0), (12, [6, 7], 3000.0))
    b.job(81, gpus=4)
    (r,) = schedule(b.snapshot(config(backfill_probes=0))).reservations
    assert r.start_at == b.now + 3000.0


def test_a_release_that_leaves_too_few_gpus_free_costs_no_probe():
    # n1: job 10 (2 GPUs) ends in 1000 s, job 11 (4) in 2000 s, job 12 (2) in 3000 s; a 6-GPU job. After job
    # 10 only 2 GPUs are free, so placement is not even tried: the one try allowed comes after job 11
    # (6 free) and fits.
    b = one_node_running((10, [0, 1], 1000.0), (11, [2, 3, 4, 5], 2000.0), (12, [6, 7], 3000.0))
    b.job(81, gpus=6)
    (r,) = schedule(b.snapshot(config(backfill_probes=1))).reservations
    assert r.start_at == b.now + 2000.0


def test_jobs_ending_together_are_released_in_job_id_order():
    # Jobs 12 (n1) and 5 (n2) both end in 1000 s, job 3 holds the other halves for longer. A deterministic
    # plan counts the lower id as ending first: the 4-GPU job is planned on job 5's GPUs.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], {"S1": 1})
    b.pool(1, "train")
    b.run(3, {"n1": [4, 5, 6, 7], "n2": [4, 5, 6, 7]}, started_at=b.now, est_runtime_s=5000.0)
    b.run(12, {"n1": [0, 1, 2, 3]}, started_at=b.now, est_runtime_s=1000.0)
    b.run(5, {"n2": [0, 1, 2, 3]}, started_at=b.now, est_runtime_s=1000.0)
    b.job(81, gpus=4)
    (r,) = schedule(b.snapshot()).reservations
    assert r.start_at == b.now + 1000.0 and r.nodes == ("n2",)


def test_planning_a_reservation_leaves_the_running_jobs_as_they_were():
    # Two reservations per pool. Job 81's plan (one try, then everything released) must undo its releases
    # exactly: job 82 (5 GPUs on one node) then still sees job 10's five GPUs on n1 free in 1000 s.
    b = no_whole_node_until_two_jobs_end()
    b.job(81, gpus=8, nodes=1)
    b.job(82, gpus=5, nodes=1)
    d = schedule(b.snapshot(config(backfill_probes=1, reservations_per_pool=2, service_order=False)))
    starts = {r.job_id: r.start_at - b.now for r in d.reservations}
    assert starts == {81: 3000.0, 82: 1000.0}


def test_reserved_gpu_left_after_a_short_job_stays_held():
    # The reservation holds n1's free GPUs 6 and 7; short job 2 takes one of them, the other stays held:
    # job 3 (two hours, past the reserved start) may not take it.
    b = cluster()
    b.job(81, gpus=8)
    b.job(2, gpus=1, est_runtime_s=100.0)
    b.job(3, gpus=1, est_runtime_s=7200.0)
    d = schedule(b.snapshot(FIFO))
    assert [p.job_id for p in d.placements] == [2]
    assert d.pending_reasons[3] == "waiting for reserved start of job 81 (backfill window too short)"


def test_shared_gpu_reservation_names_its_node_once():
    # MPS pool, one node with 2 GPUs, each 80 % used by job 9 (started 600 s ago for an hour: ends in 3000 s).
    # Job 1 wants 30 % on each of 2 GPUs: reserved on both GPUs of n1, listed as one node.
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1}, gpus=2)
    b.pool(1, "shared", sharing="mps")
    g0, g1 = b.gpu_id("n1", 0), b.gpu_id("n1", 1)
    b.run(9, {}, shares=[Share(g0, "mps", 80, 1000), Share(g1, "mps", 80, 1000)], sharing="mps", est_runtime_s=3600.0)
    b.job(1, gpus=2, sharing="mps", mps_compute_pct=30, mps_memory_mib=1000)
    (r,) = schedule(b.snapshot()).reservations
    assert r.start_at == b.now + 3000.0
    assert r.nodes == ("n1",) and sorted(r.gpu_ids) == sorted([g0, g1])


def test_a_reservation_follows_a_running_jobs_new_estimate_under_a_kept_index():
    # The same cluster in two rounds with a carry (the index kept): job 20's estimate goes from one hour (it ends in
    # 3000 s) to two (in 6600 s), and job 81's reservation moves with it.
    from scheduler.core import build_topology
    from scheduler.core.carry import RoundCarry

    b = cluster()
    b.job(81, gpus=8)
    snap = b.snapshot()
    snap = replace(snap, topology=build_topology(snap.fabric))  # one fabric index, as the adapter caches it
    carry = RoundCarry()
    (r,) = schedule(snap, carry=carry).reservations
    assert r.start_at == b.now + 3000.0
    kept = carry.state
    longer = [replace(rj, request=replace(rj.request, est_runtime_s=7200.0)) for rj in snap.running]
    (r2,) = schedule(replace(snap, running=longer), carry=carry).reservations
    assert carry.state is kept  # brought to the new snapshot, not built again
    assert r2.start_at == b.now + 6600.0
