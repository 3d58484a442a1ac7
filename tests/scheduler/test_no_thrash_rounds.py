"""No thrashing (issue 12, point 4) through real rounds: snapshot from the database, the engine decides, the
actions apply, the next round reads back what they wrote (LAUNCHER=twin: a preempted job requeues at once).

The race of concurrent submitters that found the livelock: tenant b borrows a whole node with 1-GPU jobs
of the high class, tenant c runs its guarantee on the other node and queues a 4-GPU gang (which gets the
pool's reservation), then tenant a, under its guarantee, asks for 1 GPU. The round reclaimed one of b's GPUs
for a, and the next put the victim back on it (it is ahead of a in line), round after round.
"""

from __future__ import annotations

import pytest
from django.db.models import F
from django.utils import timezone

from scheduler import actions
from scheduler.models import Allocation, Job, PriorityClass, SchedulingRound
from scheduler.rounds import run_round
from scheduler.selectors import queue_info
from scheduler.snapshot_from_db import build_snapshot
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

ROUNDS = 8


def hosts(job: Job) -> set[str]:
    return set(Allocation.objects.filter(job=job, active=True).values_list("gpu__node__hostname", flat=True))


def gpu_ids(job: Job) -> set[int]:
    return set(Allocation.objects.filter(job=job, active=True).values_list("gpu_id", flat=True))


def set_up(started_ago_s: float | None):
    """Rounds set up as in the module docstring; returns (cluster, job of a, b's jobs). `started_ago_s`: how long
    ago the running jobs started (None: just now, by the setup round)."""
    cluster = fat_tree("thrash", nodes=2, gpus_per_node=4)
    pool = actions.ensure_scheduler(cluster)
    high, normal = PriorityClass.objects.get(name="high"), PriorityClass.objects.get(name="normal")
    a = actions.create_tenant("a")
    b = actions.create_tenant("b", max_priority="high")
    c = actions.create_tenant("c", max_priority="high")
    actions.set_quota(a, pool, guaranteed_gpus=1, borrow_limit=0)
    actions.set_quota(b, pool, guaranteed_gpus=0, borrow_limit=8)
    actions.set_quota(c, pool, guaranteed_gpus=4, borrow_limit=4)
    guaranteed = actions.submit_job(c, pool, high, name="c-run", gpus=4, est_runtime_s=7200)
    borrowers = [actions.submit_job(b, pool, high, name=f"b-{i}", gpus=1, est_runtime_s=600) for i in range(4)]
    run_round(cluster.pk, "setup")
    for job in (guaranteed, *borrowers):
        job.refresh_from_db()
        assert job.status == "running"
    assert len({h for j in borrowers for h in hosts(j)}) == 1  # b fills one node, c the other
    assert all(j.borrowed for j in borrowers) and not guaranteed.borrowed
    if started_ago_s is not None:  # the version bump is what every action does (the adapter caches rows by it)
        Job.objects.filter(status="running").update(
            started_at=timezone.now() - timezone.timedelta(seconds=started_ago_s), version=F("version") + 1
        )
    actions.submit_job(c, pool, high, name="c-gang", gpus=4)
    waiting = actions.submit_job(a, pool, normal, name="a-1", gpus=1)
    return cluster, waiting, borrowers


@pytest.fixture
def race(db):
    return set_up(started_ago_s=3600)  # past any minimum run time


def test_real_rounds_reclaim_once_and_the_beneficiary_starts(race):
    cluster, waiting, borrowers = race
    before = {j.pk: gpu_ids(j) for j in borrowers}
    for i in range(ROUNDS):
        run_round(cluster.pk, f"round {i}")
    rounds = list(SchedulingRound.objects.filter(trigger__startswith="round ").order_by("pk"))
    per_round = [r.preempted for r in rounds]
    # One reclaim in the first round; the freed GPU goes to job a-1 in the next, and nobody is preempted again.
    assert per_round == [1] + [0] * (ROUNDS - 1)
    waiting.refresh_from_db()
    assert waiting.status == "running"
    victim = next(d["job"] for d in rounds[0].decisions if d["kind"] == "preemption")
    assert gpu_ids(waiting) == before[victim]
    assert waiting.pk in {d["job"] for d in rounds[1].decisions if d["kind"] == "placement"}


def test_the_preemption_is_recorded_on_its_victim(race):
    cluster, waiting, borrowers = race
    before = {j.pk: gpu_ids(j) for j in borrowers}
    record = run_round(cluster.pk, "round 0")
    (victim,) = [d["job"] for d in record.decisions if d["kind"] == "preemption"]
    job = Job.objects.get(pk=victim)
    assert job.status == "pending"  # the twin: requeued at once
    assert (job.preempted_for, set(job.preempted_gpus)) == (waiting.pk, before[victim])
    assert job.preempted_at is not None and job.preempted_at >= record.started
    snapshot, _ = build_snapshot(cluster.pk)  # and the next round reads it back
    (request,) = [r for r in snapshot.pending if r.id == victim]
    assert (request.preempted_for, set(request.preempted_gpus)) == (waiting.pk, before[victim])
    assert request.preempted_at == job.preempted_at.timestamp()


def test_jobs_that_just_started_are_not_reclaimed(db):
    cluster, waiting, _ = set_up(started_ago_s=None)  # b's jobs started in the setup round, a moment ago
    record = run_round(cluster.pk, "round 0")
    assert (record.preempted, record.stats["min_run_protected"]) == (0, 1)
    # 300 s minimum, a few ms run: "5 min" left.
    reason = queue_info([cluster.pk])[waiting.pk][1]
    assert reason.endswith("; may preempt in about 5 min, when the jobs it needs have run their minimum time")
