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
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

ROUNDS = 8


def hosts(job: Job) -> set[str]:
    return set(Allocation.objects.filter(job=job, active=True).values_list("gpu__node__hostname", flat=True))


def gpu_ids(job: Job) -> set[int]:
    return set(Allocation.objects.filter(job=job, active=True).values_list("gpu_id", flat=True))


@pytest.fixture
def race(db):
    """Rounds set up as in the module docstring; returns (cluster, job of a, b's jobs)."""
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
    # They started an hour ago (past any minimum run time); the version bump is what every action does.
    Job.objects.filter(status="running").update(
        started_at=timezone.now() - timezone.timedelta(hours=1), version=F("version") + 1
    )
    actions.submit_job(c, pool, high, name="c-gang", gpus=4)
    waiting = actions.submit_job(a, pool, normal, name="a-1", gpus=1)
    return cluster, waiting, borrowers


@pytest.mark.xfail(strict=True, reason="issue 12: the reclaim livelock (fixed by the next commit)")
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
