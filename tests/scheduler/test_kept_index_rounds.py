"""The worker's rounds keep the cluster index in their carry (scheduler.rounds._CARRIES): brought to the next snapshot
read from the database it is the index a build gives, and a change of more than occupancy makes it build afresh."""

from __future__ import annotations

import pytest

from fabric.choices import GpuHealth
from fabric.models import GPU
from scheduler import actions
from scheduler.core.state import ClusterState
from scheduler.models import Job
from scheduler.rounds import _CARRIES, run_round
from scheduler.snapshot_from_db import build_snapshot
from tests.scheduler.core.fingerprint import fingerprint

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_carries(frozen_snapshot_clock):
    _CARRIES.clear()
    yield
    _CARRIES.clear()


def test_after_rounds_with_placements_and_a_cancel_the_kept_index_is_a_built_one(cluster, submit):
    # 4 nodes x 8 GPUs: round 1 places 8 + 4 + 2 GPUs; then one job is cancelled and two arrive, and round 2 places
    # them. The index the carry holds, brought to the snapshot after round 2, is the one a build gives.
    submit(8)
    four = submit(4)
    submit(2, name="small")
    run_round(cluster.pk, "test")
    actions.cancel_job(Job.objects.get(pk=four.pk), actor="tenant")
    submit(16, name="big")
    submit(1, name="one")
    run_round(cluster.pk, "test")
    kept = _CARRIES[cluster.pk].state
    assert kept is not None and kept.touched  # round 2 held GPUs on it
    snapshot, _ = build_snapshot(cluster.pk)
    assert kept.advance(snapshot, snapshot.topology)
    assert fingerprint(kept) == fingerprint(ClusterState(snapshot, snapshot.topology))


def test_a_gpu_that_failed_between_rounds_makes_the_round_build_its_index_again(cluster, submit, gpus, monkeypatch):
    submit(8)
    run_round(cluster.pk, "test")
    kept = _CARRIES[cluster.pk].state
    GPU.objects.filter(pk=gpus[12].pk).update(health=GpuHealth.FAILED)  # as fabric.actions.alerts does
    built = []
    real_init = ClusterState.__init__

    def counting_init(self, *args):
        built.append(self)
        real_init(self, *args)

    monkeypatch.setattr(ClusterState, "__init__", counting_init)
    run_round(cluster.pk, "test")
    assert len(built) == 1 and _CARRIES[cluster.pk].state is built[0] is not kept
    assert not built[0].gpus[gpus[12].pk].healthy
