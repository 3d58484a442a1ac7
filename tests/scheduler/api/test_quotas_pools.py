"""Quotas with what is used and borrowed now, pools with capacity, free GPUs, free blocks and queue counts,
and list endpoints whose query count does not grow with the rows they return."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.choices import GpuHealth, NodeState
from scheduler import actions
from scheduler.choices import ShareKind, SharingMode
from scheduler.models import PriorityClass
from scheduler.selectors import pool_gpus
from tests.scheduler.api.helpers import JOBS, POOLS, QUOTAS, start

pytestmark = pytest.mark.django_db


def _quotas(api) -> dict[str, dict]:
    return {q["pool"]: q for q in api.get(QUOTAS).json()["results"]}


def _pools(api) -> dict[str, dict]:
    return {p["name"]: p for p in api.get(POOLS).json()["results"]}


#
# Quotas
#


def test_quota_shows_guarantee_and_borrow_limit(api_a, api_b):
    quotas = _quotas(api_a)
    assert set(quotas) == {"default", "mps", "mig"}
    assert quotas["default"] == {
        "id": quotas["default"]["id"],
        "tenant": "tenant-a",
        "cluster": "sched",
        "pool": "default",
        "guaranteed_gpus": 8,
        "borrow_limit": 4,
        "used_gpus": 0,
        "borrowed_gpus": 0,
    }
    assert (quotas["mig"]["guaranteed_gpus"], quotas["mig"]["borrow_limit"]) == (2, 0)
    assert {(q["guaranteed_gpus"], q["borrow_limit"]) for q in _quotas(api_b).values()} == {(4, 8), (1, 1)}


def test_used_gpus_counts_active_allocations(site, api_a, submit):
    start(submit(site.tenant_a, site.default, "r1", gpus=2))
    start(submit(site.tenant_a, site.default, "r2", gpus=1))
    submit(site.tenant_a, site.default, "waiting", gpus=8)  # pending: holds nothing
    quota = _quotas(api_a)["default"]
    assert (quota["used_gpus"], quota["borrowed_gpus"]) == (3, 0)
    assert _quotas(api_a)["mps"]["used_gpus"] == 0


def test_used_gpus_beyond_guarantee_are_borrowed(site, api_b, submit):
    start(submit(site.tenant_b, site.default, "big", gpus=6))  # B is guaranteed 4
    quota = _quotas(api_b)["default"]
    assert (quota["guaranteed_gpus"], quota["used_gpus"], quota["borrowed_gpus"]) == (4, 6, 2)


def test_used_gpus_are_per_tenant(site, api_a, api_b, submit):
    start(submit(site.tenant_a, site.default, "a", gpus=3))
    start(submit(site.tenant_b, site.default, "b", gpus=5))
    assert _quotas(api_a)["default"]["used_gpus"] == 3
    assert _quotas(api_b)["default"]["used_gpus"] == 5


def test_shared_gpu_counts_once_per_tenant(site, api_a, submit):
    gpu = pool_gpus(site.mps).order_by("index").first()
    for name in ("m1", "m2"):
        job = submit(site.tenant_a, site.mps, name, mps_compute_pct=25)
        start(job, kind=ShareKind.MPS, compute_pct=25, on=[gpu])
    assert _quotas(api_a)["mps"]["used_gpus"] == 1


def test_released_allocations_no_longer_count(site, api_a, submit):
    job = start(submit(site.tenant_a, site.default, "r", gpus=4))
    assert _quotas(api_a)["default"]["used_gpus"] == 4
    actions.cancel_job(job, actor="alice")
    assert _quotas(api_a)["default"]["used_gpus"] == 0


def test_operator_sees_usage_of_every_tenant(site, ops_api, submit):
    start(submit(site.tenant_a, site.default, "a", gpus=2))
    start(submit(site.tenant_b, site.default, "b", gpus=7))
    rows = ops_api.get(QUOTAS).json()["results"]
    used = {(q["tenant"], q["pool"]): (q["used_gpus"], q["borrowed_gpus"]) for q in rows}
    assert used == {
        ("tenant-a", "default"): (2, 0),
        ("tenant-a", "mps"): (0, 0),
        ("tenant-a", "mig"): (0, 0),
        ("tenant-b", "default"): (7, 3),
        ("tenant-b", "mps"): (0, 0),
    }


def test_quota_list_filters_by_pool(site, api_a):
    rows = api_a.get(QUOTAS, {"pool": site.mps.pk}).json()["results"]
    assert [q["pool"] for q in rows] == ["mps"]


#
# Pools
#


def test_pool_shows_capacity_by_model(site, api_a):
    pools = _pools(api_a)
    assert pools["default"]["capacity"]["models"] == {
        "H100": {"total": 16, "usable": 16, "free": 16, "memory_mib": 81920}
    }
    assert pools["mps"]["capacity"]["models"]["H100"]["total"] == 8
    assert pools["mig"]["capacity"]["models"]["H100"]["total"] == 8
    assert (pools["default"]["sharing"], pools["mps"]["sharing"], pools["mig"]["sharing"]) == (
        "exclusive",
        "mps",
        "mig",
    )
    assert pools["default"]["is_default"] and not pools["mps"]["is_default"]
    assert pools["default"]["capacity"]["gpus_per_node_max"] == 8


def test_empty_pool_has_whole_free_blocks(api_a):
    capacity = _pools(api_a)["default"]["capacity"]
    assert capacity["free_blocks"] == {"1": 16, "2": 8, "4": 4, "8": 2}
    assert capacity["nodes_fully_free"] == 2


def test_allocated_gpus_are_not_free_and_break_blocks(site, api_a, submit):
    start(submit(site.tenant_a, site.default, "one", gpus=1))  # one GPU of the first node
    start(submit(site.tenant_a, site.default, "four", gpus=4))  # four more GPUs of the first node
    capacity = _pools(api_a)["default"]["capacity"]
    assert capacity["models"]["H100"]["free"] == 11
    assert capacity["models"]["H100"]["usable"] == 16
    # First node: 3 free; second node: 8 free.
    assert capacity["free_blocks"] == {"1": 11, "2": 1 + 4, "4": 0 + 2, "8": 0 + 1}
    assert capacity["nodes_fully_free"] == 1


def test_gpu_shared_by_mps_is_not_free(site, api_a, submit):
    gpu = pool_gpus(site.mps).order_by("index").first()
    start(submit(site.tenant_a, site.mps, "m", mps_compute_pct=25), kind=ShareKind.MPS, compute_pct=25, on=[gpu])
    capacity = _pools(api_a)["mps"]["capacity"]
    assert capacity["models"]["H100"]["free"] == 7
    assert capacity["free_blocks"] == {"1": 7, "2": 3, "4": 1, "8": 0}


def test_unhealthy_gpu_and_drained_node_are_not_usable(site, api_a):
    gpu = pool_gpus(site.default).order_by("node__hostname", "index").first()
    gpu.health = GpuHealth.FAILED
    gpu.save(update_fields=["health"])
    drained = site.compute[1]
    drained.state = NodeState.DRAIN
    drained.save(update_fields=["state"])
    h100 = _pools(api_a)["default"]["capacity"]["models"]["H100"]
    assert (h100["total"], h100["usable"], h100["free"]) == (16, 7, 7)


def test_pool_queue_counts(site, api_a, api_b, submit):
    submit(site.tenant_a, site.default, "p1", gpus=1)
    submit(site.tenant_b, site.default, "p2", gpus=2)
    start(submit(site.tenant_a, site.default, "r", gpus=1))
    actions.cancel_job(submit(site.tenant_a, site.default, "c", gpus=1), actor="alice")
    submit(site.tenant_a, site.mps, "m", mps_compute_pct=50)
    pools = _pools(api_a)
    assert pools["default"]["queue"] == {"pending": 2, "running": 1}
    assert pools["mps"]["queue"] == {"pending": 1, "running": 0}
    assert pools["mig"]["queue"] == {"pending": 0, "running": 0}
    assert _pools(api_b)["default"]["queue"] == {"pending": 2, "running": 1}


def test_pool_detail_matches_list_row(site, api_a):
    detail = api_a.get(f"{POOLS}{site.default.pk}/").json()
    assert detail["capacity"] == _pools(api_a)["default"]["capacity"]
    assert set(detail) == {"id", "cluster", "name", "sharing", "timeslice_replicas", "is_default", "capacity", "queue"}


#
# Bounded queries
#


def _fill(site, count: int, start_at: int = 0) -> None:
    normal = PriorityClass.objects.get(name="normal")
    for i in range(start_at, start_at + count):
        tenant = site.tenant_a if i % 2 == 0 else site.tenant_b
        pool = (site.default, site.mps)[i % 4 // 2]
        extra = {"mps_compute_pct": 10} if pool.sharing == SharingMode.MPS else {}
        actions.submit_job(
            tenant,
            pool,
            normal,
            name=f"j{i}",
            gpus=1,
            sharing=pool.sharing,
            dataset_node=site.storage if i % 3 == 0 else None,
            **extra,
        )


def _queries(api, url: str, params: dict | None = None) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as ctx:
        resp = api.get(url, params or {"limit": 1000})
    assert resp.status_code == 200
    return len(ctx.captured_queries), resp.json()["count"]


@pytest.mark.parametrize("who", ["tenant", "operator"])
def test_job_list_query_count_does_not_grow_with_jobs(site, api_a, ops_api, who):
    api = api_a if who == "tenant" else ops_api
    _fill(site, 10)
    few, count_few = _queries(api, JOBS)
    _fill(site, 90, start_at=10)
    many, count_many = _queries(api, JOBS)
    assert (count_few, count_many) == ((5, 50) if who == "tenant" else (10, 100))
    assert many == few, (few, many)


def test_job_list_page_of_one_hundred_jobs_is_a_handful_of_queries(site, ops_api):
    _fill(site, 100)
    queries, count = _queries(ops_api, JOBS)
    assert count == 100
    assert queries <= 6  # auth token, count, page (joins), and nothing per row


def test_job_detail_query_count_does_not_grow_with_gpus_or_events(site, api_a, submit):
    small = start(submit(site.tenant_a, site.default, "small", gpus=1))
    large = start(submit(site.tenant_a, site.default, "large", gpus=8))
    for _ in range(5):
        actions.hold_job(submit(site.tenant_a, site.default, "h", gpus=1), actor="ops")
    with CaptureQueriesContext(connection) as one:
        api_a.get(f"{JOBS}{small.pk}/")
    with CaptureQueriesContext(connection) as eight:
        api_a.get(f"{JOBS}{large.pk}/")
    assert len(one) == len(eight)


def test_quota_list_query_count_does_not_grow_with_quotas(site, ops_api):
    few, n_few = _queries(ops_api, QUOTAS)
    for i in range(20):
        tenant = actions.create_tenant(f"extra-{i}")
        actions.set_quota(tenant, site.default, guaranteed_gpus=1, borrow_limit=1)
        job = actions.submit_job(tenant, site.default, PriorityClass.objects.get(name="low"), name="x", gpus=1)
        if i < 5:
            start(job)
    many, n_many = _queries(ops_api, QUOTAS)
    assert (n_few, n_many) == (5, 25)
    assert many == few, (few, many)


def test_pool_list_query_count_does_not_grow_with_pools(site, ops_api):
    few, n_few = _queries(ops_api, POOLS)
    for i in range(10):
        actions.create_pool(site.cluster, f"extra-{i}", sharing=SharingMode.TIMESLICE)
    many, n_many = _queries(ops_api, POOLS)
    assert (n_few, n_many) == (3, 13)
    assert many == few, (few, many)
