"""The request mix the adapter gives the fragmentation term: recent shared-GPU submissions, decayed, and every
pending one, in one grouped query."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler import actions
from scheduler.choices import SharingMode
from scheduler.models import Job
from scheduler.snapshot_from_db import _request_mix, build_snapshot

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)  # on the hour: ages below are exact


@pytest.fixture
def mps(cluster):
    pool = actions.create_pool(cluster, "mps", sharing=SharingMode.MPS)
    actions.assign_nodes(pool, list(cluster.nodes.filter(role="compute"))[:1])
    return pool


def job(tenant, pool, normal, submitted, status="pending", pct=25, **kw):
    kw.setdefault("sharing", SharingMode.MPS)
    if kw["sharing"] == SharingMode.MPS:
        kw.update(mps_compute_pct=pct, mps_memory_mib=pct * 328)
    j = actions.submit_job(tenant, pool, normal, gpus=1, name=f"j{pct}", **kw)
    Job.objects.filter(pk=j.pk).update(submitted_at=submitted, status=status)
    return j


def by_shape(mix):
    out: dict[tuple, float] = {}
    for c in mix:
        k = (c.pool, c.sharing, c.gpus, c.mps_compute_pct, c.mps_memory_mib)
        out[k] = out.get(k, 0.0) + c.weight
    return out


def test_recent_and_pending_shared_requests_decayed(mps, pool, tenant, normal, django_assert_max_num_queries):
    for _ in range(3):
        job(tenant, mps, normal, T0)  # pending, age 0: weight 1 each
    job(tenant, mps, normal, T0 - timedelta(hours=6), status="completed", pct=50)  # 6 h = one half-life: 0.5
    job(tenant, mps, normal, T0 - timedelta(hours=30), status="completed", pct=50)  # outside the day: gone
    job(tenant, mps, normal, T0 - timedelta(hours=30), pct=50)  # pending: counted, aged 24 h at most: 0.5^4
    job(tenant, pool, normal, T0, sharing=SharingMode.EXCLUSIVE)  # not shared
    with django_assert_max_num_queries(1):
        mix = _request_mix(mps.cluster_id, T0.timestamp())
    assert by_shape(mix) == pytest.approx(
        {(mps.pk, "mps", 1, 25, 25 * 328): 3.0, (mps.pk, "mps", 1, 50, 50 * 328): 0.5 + 0.0625}
    )


def test_the_snapshot_carries_the_mix(mps, tenant, normal):
    actions.submit_job(tenant, mps, normal, gpus=1, name="s", sharing=SharingMode.MPS, mps_compute_pct=30,
                       mps_memory_mib=4096)  # fmt: skip
    snap, _ = build_snapshot(mps.cluster_id)
    [c] = snap.request_mix
    assert (c.pool, c.sharing, c.mps_compute_pct, c.mps_memory_mib) == (mps.pk, "mps", 30, 4096)
    assert 0.5 ** (1 / 6) <= c.weight <= 1.0  # submitted within the hour
