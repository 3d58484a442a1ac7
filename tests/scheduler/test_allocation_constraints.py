"""Double allocation cannot be stored: the ledger's CHECKs, unique claims, and all-or-nothing gangs."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from scheduler import actions
from scheduler.actions import ShareSpec, StaleDecision
from scheduler.models import Allocation, GpuLedger, MigSliceClaim

pytestmark = pytest.mark.django_db


def refused(fn) -> bool:
    try:
        with transaction.atomic():
            fn()
    except IntegrityError:
        return True
    return False


def whole(gpu) -> ShareSpec:
    return ShareSpec(gpu.pk, "whole", compute_pct=100, memory_mib=gpu.memory_mib)


def test_raw_second_whole_allocation_refused(submit, gpus):
    a, b = submit(1), submit(1)
    Allocation.objects.create(job=a, gpu=gpus[0], kind="whole")
    assert refused(lambda: Allocation.objects.create(job=b, gpu=gpus[0], kind="whole"))


def test_raw_overlapping_mig_slot_refused(submit, gpus):
    a, b = submit(1), submit(1)
    first = Allocation.objects.create(job=a, gpu=gpus[0], kind="mig", mig_profile="3g.40gb", mig_start=4, mig_slices=4)
    MigSliceClaim.objects.create(gpu=gpus[0], slice=5, allocation=first)
    second = Allocation.objects.create(job=b, gpu=gpus[0], kind="mig", mig_profile="1g.10gb", mig_start=5, mig_slices=1)
    assert refused(lambda: MigSliceClaim.objects.create(gpu=gpus[0], slice=5, allocation=second))


def test_raw_replica_held_twice_refused(submit, gpus):
    a, b = submit(1), submit(1)
    Allocation.objects.create(job=a, gpu=gpus[0], kind="timeslice", compute_pct=0, replica=0)
    assert refused(lambda: Allocation.objects.create(job=b, gpu=gpus[0], kind="timeslice", compute_pct=0, replica=0))


def test_ledger_refuses_compute_over_100(gpus):
    GpuLedger.objects.create(gpu=gpus[0], compute_pct=60, memory_total_mib=gpus[0].memory_mib)
    assert refused(lambda: GpuLedger.objects.filter(gpu=gpus[0]).update(compute_pct=160))


def test_ledger_refuses_memory_over_total(gpus):
    GpuLedger.objects.create(gpu=gpus[0], memory_total_mib=1000)
    assert refused(lambda: GpuLedger.objects.filter(gpu=gpus[0]).update(memory_mib=1001))


def test_ledger_refuses_two_sharing_kinds(gpus):
    GpuLedger.objects.create(gpu=gpus[0], compute_pct=50, memory_total_mib=gpus[0].memory_mib)
    assert refused(lambda: GpuLedger.objects.filter(gpu=gpus[0]).update(mig_slices=1))


def test_allocate_then_release_restores_ledger(submit, gpus):
    job = submit(2)
    actions.allocate(job, [whole(gpus[0]), whole(gpus[1])])
    ledger = GpuLedger.objects.get(gpu=gpus[0])
    assert (ledger.compute_pct, ledger.memory_mib) == (100, gpus[0].memory_mib)
    assert actions.release_allocations(job) == 2
    ledger.refresh_from_db()
    assert (ledger.compute_pct, ledger.memory_mib) == (0, 0)
    assert not Allocation.objects.filter(job=job, active=True).exists()


def test_stale_whole_gpu_refused(submit, gpus):
    actions.allocate(submit(1), [whole(gpus[0])])
    with pytest.raises(StaleDecision):
        actions.allocate(submit(1), [whole(gpus[0])])


def test_gang_is_all_or_nothing(submit, gpus):
    actions.allocate(submit(1), [whole(gpus[1])])
    gang = submit(2)
    with pytest.raises(StaleDecision):
        actions.allocate(gang, [whole(gpus[0]), whole(gpus[1])])
    assert not Allocation.objects.filter(job=gang).exists()
    assert GpuLedger.objects.get(gpu=gpus[0]).compute_pct == 0


def test_mps_shares_pack_to_100_and_no_further(submit, gpus):
    for pct in (50, 30, 20):
        actions.allocate(submit(1), [ShareSpec(gpus[0].pk, "mps", compute_pct=pct, memory_mib=1024)])
    with pytest.raises(StaleDecision):
        actions.allocate(submit(1), [ShareSpec(gpus[0].pk, "mps", compute_pct=1, memory_mib=1)])
    assert GpuLedger.objects.get(gpu=gpus[0]).compute_pct == 100


def test_whole_gpu_refused_under_mps(submit, gpus):
    actions.allocate(submit(1), [ShareSpec(gpus[0].pk, "mps", compute_pct=10, memory_mib=10)])
    with pytest.raises(StaleDecision):
        actions.allocate(submit(1), [whole(gpus[0])])


def test_mig_instances_share_a_gpu_without_overlap(submit, gpus):
    a = ShareSpec(gpus[0].pk, "mig", compute_pct=0, memory_mib=40960, mig_profile="3g.40gb", mig_start=0, mig_slices=4)
    b = ShareSpec(gpus[0].pk, "mig", compute_pct=0, memory_mib=40960, mig_profile="3g.40gb", mig_start=4, mig_slices=4)
    actions.allocate(submit(1), [a])
    actions.allocate(submit(1), [b])
    assert MigSliceClaim.objects.filter(gpu=gpus[0]).count() == 8
    with pytest.raises(StaleDecision):
        actions.allocate(submit(1), [a])


def test_timeslice_replicas_capped(submit, gpus):
    for r in range(2):
        actions.allocate(submit(1), [ShareSpec(gpus[0].pk, "timeslice", compute_pct=0, replica=r)], replicas_max=2)
    with pytest.raises(StaleDecision):
        actions.allocate(submit(1), [ShareSpec(gpus[0].pk, "timeslice", compute_pct=0, replica=2)], replicas_max=2)
