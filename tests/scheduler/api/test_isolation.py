"""Tenant isolation (BOLA) of the scheduler API: tenants A and B against every job, quota and pool
endpoint and verb. A tenant never reads, lists, changes or acts on the other tenant's objects; the
operator-only actions refuse tenants even on their own jobs; writes the API does not offer change
nothing. Every case also checks that nothing stored changed (helpers.snapshot)."""

from __future__ import annotations

import json

import pytest

from scheduler import actions
from scheduler.models import Job, Quota
from tests.scheduler.api.helpers import JOBS, POOLS, QUOTAS, snapshot, start

pytestmark = pytest.mark.django_db

OTHER = {"A": "B", "B": "A"}
TENANT_NAME = {"A": "tenant-a", "B": "tenant-b"}
TARGETS = ("pending", "held", "running", "mps")
# What a malicious client sends with a write: another owner, another state, another size.
HOSTILE_BODY = {"name": "pwned", "tenant": "tenant-a", "status": "cancelled", "held": False, "gpus": 1, "pool": 1}


@pytest.fixture
def world(site, submit, user_a, user_b):
    """Each tenant has a pending, a held, a running and an MPS job; names carry a secret marker."""
    jobs: dict[str, dict[str, Job]] = {}
    for key, tenant in (("A", site.tenant_a), ("B", site.tenant_b)):
        tag = key.lower()
        pending = submit(tenant, site.default, f"{tag}-pending-secret", gpus=2)
        held = actions.hold_job(submit(tenant, site.default, f"{tag}-held-secret", gpus=1), actor="ops")
        running = start(submit(tenant, site.default, f"{tag}-running-secret", gpus=2))
        mps = submit(tenant, site.mps, f"{tag}-mps-secret", gpus=1, mps_compute_pct=25)
        jobs[key] = {"pending": pending, "held": held, "running": running, "mps": mps}
    return jobs


@pytest.fixture
def clients(api_a, api_b):
    return {"A": api_a, "B": api_b}


def _send(client, method: str, url: str):
    if method == "get":
        return client.get(url)
    return getattr(client, method)(url, HOSTILE_BODY, format="json")


def _ids(body) -> set[int]:
    return {row["id"] for row in body["results"]}


#
# Jobs: the other tenant's job, every verb
#

JOB_VERBS = [
    # (method, suffix, statuses that count as refused)
    ("get", "", {404}),
    ("post", "cancel/", {404}),
    ("post", "hold/", {403, 404}),
    ("post", "release/", {403, 404}),
    ("post", "requeue/", {403, 404}),
    ("put", "", {404, 405}),
    ("patch", "", {404, 405}),
    ("delete", "", {404, 405}),
    ("post", "", {404, 405}),
]
OTHER_JOB_CASES = [(actor, m, s, ok, t) for actor in "AB" for (m, s, ok) in JOB_VERBS for t in TARGETS]


@pytest.mark.parametrize(
    ("actor", "method", "suffix", "refused", "target"),
    OTHER_JOB_CASES,
    ids=[f"{a}-{m}-{s.strip('/') or 'detail'}-on-other-{t}" for a, m, s, _, t in OTHER_JOB_CASES],
)
def test_other_tenants_job_is_out_of_reach(clients, world, actor, method, suffix, refused, target):
    job = world[OTHER[actor]][target]
    before = snapshot()
    resp = _send(clients[actor], method, f"{JOBS}{job.pk}/{suffix}")
    assert resp.status_code in refused, (resp.status_code, resp.content[:300])
    assert b"secret" not in resp.content and TENANT_NAME[OTHER[actor]].encode() not in resp.content
    assert snapshot() == before


#
# Jobs: the tenant's own job, verbs it may not use
#

OWN_JOB_VERBS = [
    ("post", "hold/", {403}),  # operator-only, even on one's own job
    ("post", "release/", {403}),
    ("post", "requeue/", {403}),
    ("put", "", {405}),  # no updates or deletes through the API: cancel is the only way out
    ("patch", "", {405}),
    ("delete", "", {405}),
]
OWN_JOB_CASES = [(actor, m, s, ok, t) for actor in "AB" for (m, s, ok) in OWN_JOB_VERBS for t in TARGETS]


@pytest.mark.parametrize(
    ("actor", "method", "suffix", "refused", "target"),
    OWN_JOB_CASES,
    ids=[f"{a}-{m}-{s.strip('/') or 'detail'}-on-own-{t}" for a, m, s, _, t in OWN_JOB_CASES],
)
def test_tenant_cannot_use_operator_actions_or_writes_on_own_job(
    clients, world, actor, method, suffix, refused, target
):
    job = world[actor][target]
    before = snapshot()
    resp = _send(clients[actor], method, f"{JOBS}{job.pk}/{suffix}")
    assert resp.status_code in refused, (resp.status_code, resp.content[:300])
    assert snapshot() == before


#
# Lists and their filters never leak the other tenant's jobs
#


# Each filter is built from the site, the other tenant's jobs and the other tenant's key ("A" or "B").
JOB_LIST_FILTERS = {
    "none": lambda site, theirs, other: {},
    "tenant-name": lambda site, theirs, other: {"tenant": TENANT_NAME[other]},
    "tenant-id": lambda site, theirs, other: {"tenant": theirs["pending"].tenant_id},
    "tenant__name": lambda site, theirs, other: {"tenant__name": TENANT_NAME[other]},
    "tenant_id": lambda site, theirs, other: {"tenant_id": theirs["pending"].tenant_id},
    "cluster": lambda site, theirs, other: {"cluster": site.cluster.name},
    "status-pending": lambda site, theirs, other: {"status": "pending"},
    "status-running": lambda site, theirs, other: {"status": "running"},
    "status-many": lambda site, theirs, other: {"status": ["pending", "running", "cancelled"]},
    "held": lambda site, theirs, other: {"held": "true"},
    "name-exact": lambda site, theirs, other: {"name": theirs["pending"].name},
    "name-part": lambda site, theirs, other: {"name": "secret"},
    "pool": lambda site, theirs, other: {"pool": site.default.pk},
    "sharing": lambda site, theirs, other: {"sharing": "mps"},
    "priority": lambda site, theirs, other: {"priority_class": "normal"},
    "id": lambda site, theirs, other: {"id": theirs["pending"].pk},
    "pk-in": lambda site, theirs, other: {"id__in": ",".join(str(j.pk) for j in theirs.values())},
    "search": lambda site, theirs, other: {"search": theirs["running"].name},
    "limit-max": lambda site, theirs, other: {"limit": 10_000, "offset": 0},
    "limit-1-offset-1": lambda site, theirs, other: {"limit": 1, "offset": 1},
    "offset-past": lambda site, theirs, other: {"offset": 5},
    "ordering": lambda site, theirs, other: {"ordering": "-id"},
    "everything": lambda site, theirs, other: {
        "tenant": TENANT_NAME[other],
        "cluster": site.cluster.name,
        "status": "pending",
        "name": theirs["pending"].name,
        "limit": 1000,
    },
}
JOB_LIST_CASES = [(actor, f) for actor in "AB" for f in JOB_LIST_FILTERS]


def _all_pages(client, url: str, params: dict) -> list[dict]:
    resp = client.get(url, params)
    assert resp.status_code == 200, resp.content[:300]
    body = resp.json()
    rows = list(body["results"])
    while body["next"]:
        body = client.get(body["next"]).json()
        rows.extend(body["results"])
    return rows


@pytest.mark.parametrize(("actor", "which"), JOB_LIST_CASES, ids=[f"{a}-{f}" for a, f in JOB_LIST_CASES])
def test_job_list_filters_never_show_other_tenants_jobs(site, clients, world, actor, which):
    params = JOB_LIST_FILTERS[which](site, world[OTHER[actor]], OTHER[actor])
    rows = _all_pages(clients[actor], JOBS, params)
    own = {j.pk for j in world[actor].values()}
    theirs = {j.pk for j in world[OTHER[actor]].values()}
    assert {r["id"] for r in rows} <= own
    assert not {r["id"] for r in rows} & theirs
    assert {r["tenant"] for r in rows} <= {TENANT_NAME[actor]}
    assert all(r["name"].startswith(f"{actor.lower()}-") for r in rows), json.dumps(rows)[:300]


def test_ordering_by_a_field_outside_the_list_is_refused_not_ignored(clients, world):
    # Ordering by tenant__name once was silently ignored; now it is a 400 naming the parameter (and no rows).
    for actor in "AB":
        resp = clients[actor].get(JOBS, {"ordering": "tenant__name"})
        assert resp.status_code == 400
        assert list(resp.json()) == ["ordering"] and "tenant__name" in resp.json()["ordering"][0]


def test_unfiltered_job_list_shows_exactly_own_jobs(clients, world):
    for actor in "AB":
        rows = _all_pages(clients[actor], JOBS, {})
        assert {r["id"] for r in rows} == {j.pk for j in world[actor].values()}


#
# Quotas: the other tenant's quotas, every verb; own quotas are read-only
#

QUOTA_VERBS = [("get", {404}), ("put", {404, 405}), ("patch", {404, 405}), ("delete", {404, 405})]
# A holds quotas in default, mps, mig; B in default, mps.
OTHER_QUOTA_CASES = [
    (actor, m, ok, pool)
    for actor, pools in (("A", ("default", "mps")), ("B", ("default", "mps", "mig")))
    for (m, ok) in QUOTA_VERBS
    for pool in pools
]


@pytest.mark.parametrize(
    ("actor", "method", "refused", "pool"),
    OTHER_QUOTA_CASES,
    ids=[f"{a}-{m}-other-quota-{p}" for a, m, _, p in OTHER_QUOTA_CASES],
)
def test_other_tenants_quota_is_out_of_reach(site, clients, world, actor, method, refused, pool):
    other = site.tenant_b if actor == "A" else site.tenant_a
    quota = Quota.objects.get(tenant=other, pool__name=pool)
    before = snapshot()
    resp = _send(clients[actor], method, f"{QUOTAS}{quota.pk}/")
    assert resp.status_code in refused, (resp.status_code, resp.content[:300])
    assert TENANT_NAME[OTHER[actor]].encode() not in resp.content
    assert snapshot() == before


OWN_QUOTA_CASES = [(actor, m) for actor in "AB" for m in ("put", "patch", "delete", "post-list")]


@pytest.mark.parametrize(("actor", "method"), OWN_QUOTA_CASES, ids=[f"{a}-{m}-own-quota" for a, m in OWN_QUOTA_CASES])
def test_tenant_cannot_change_own_quota(site, clients, world, actor, method):
    tenant = site.tenant_a if actor == "A" else site.tenant_b
    quota = Quota.objects.get(tenant=tenant, pool=site.default)
    before = snapshot()
    client = clients[actor]
    if method == "post-list":
        body = {"tenant": TENANT_NAME[actor], "pool": site.default.pk, "guaranteed_gpus": 999, "borrow_limit": 999}
        resp = client.post(QUOTAS, body, format="json")
    else:
        resp = getattr(client, method)(f"{QUOTAS}{quota.pk}/", {"guaranteed_gpus": 999}, format="json")
    assert resp.status_code == 405, (resp.status_code, resp.content[:300])
    assert snapshot() == before


QUOTA_LIST_CASES = [(actor, f) for actor in "AB" for f in ("none", "tenant-name", "tenant-id", "pool", "limit-max")]


@pytest.mark.parametrize(("actor", "which"), QUOTA_LIST_CASES, ids=[f"{a}-{f}" for a, f in QUOTA_LIST_CASES])
def test_quota_list_filters_never_show_other_tenants_quotas(site, clients, world, actor, which):
    other = site.tenant_b if actor == "A" else site.tenant_a
    params = {
        "none": {},
        "tenant-name": {"tenant": other.name},
        "tenant-id": {"tenant": other.pk},
        "pool": {"pool": site.default.pk},
        "limit-max": {"limit": 10_000},
    }[which]
    rows = _all_pages(clients[actor], QUOTAS, params)
    assert rows, "the tenant's own quotas are listed"
    assert {r["tenant"] for r in rows} == {TENANT_NAME[actor]}
    assert not {r["id"] for r in rows} & set(Quota.objects.filter(tenant=other).values_list("pk", flat=True))


#
# Pools: a tenant sees the pools it holds a quota in; nobody but the operator changes pools
#

POOL_CASES = [
    # (actor, method, pool, refused)
    ("B", "get", "mig", {404}),
    ("B", "put", "mig", {404, 405}),
    ("B", "patch", "mig", {404, 405}),
    ("B", "delete", "mig", {404, 405}),
    *[(a, m, p, {405}) for a in "AB" for m in ("put", "patch", "delete") for p in ("default", "mps")],
    *[(a, "post-list", "-", {405}) for a in "AB"],
]


@pytest.mark.parametrize(
    ("actor", "method", "pool", "refused"), POOL_CASES, ids=[f"{a}-{m}-pool-{p}" for a, m, p, _ in POOL_CASES]
)
def test_pool_out_of_reach_or_read_only(site, clients, world, actor, method, pool, refused):
    client = clients[actor]
    before = snapshot()
    if method == "post-list":
        resp = client.post(POOLS, {"name": "mine", "cluster": site.cluster.name, "sharing": "exclusive"}, format="json")
    else:
        target = {"default": site.default, "mps": site.mps, "mig": site.mig}[pool]
        resp = _send(client, method, f"{POOLS}{target.pk}/")
    assert resp.status_code in refused, (resp.status_code, resp.content[:300])
    assert snapshot() == before


@pytest.mark.parametrize(
    "params",
    [{}, {"tenant": "tenant-a"}, {"cluster": "sched"}, {"limit": 10_000}],
    ids=["none", "tenant", "cluster", "limit-max"],
)
def test_pool_list_shows_only_pools_with_a_quota(site, api_a, api_b, world, params):
    assert {r["name"] for r in _all_pages(api_a, POOLS, params)} == {"default", "mps", "mig"}
    assert {r["name"] for r in _all_pages(api_b, POOLS, params)} == {"default", "mps"}


def test_pool_detail_of_pool_with_quota_is_readable(site, api_b, world):
    resp = api_b.get(f"{POOLS}{site.mps.pk}/")
    assert resp.status_code == 200
    assert resp.json()["name"] == "mps"


#
# The size of the matrix: every combination above must be refused
#

CROSS_TENANT_COMBINATIONS = (
    len(OTHER_JOB_CASES) + len(JOB_LIST_CASES) + len(OTHER_QUOTA_CASES) + len(QUOTA_LIST_CASES) + 4 + 2 * 4
)  # + B's 4 verbs on the MIG pool (no quota there) + the pool list, 4 filters x 2 tenants
FORBIDDEN_OWN_COMBINATIONS = len(OWN_JOB_CASES) + len(OWN_QUOTA_CASES) + len(POOL_CASES) - 4


def test_matrix_size():
    """2 tenants x 9 verbs x 4 jobs of the other tenant, 2 x 23 list filters, 2 x quota verbs on the other's
    quotas (4 x (2 + 3)), 2 x 5 quota-list filters, 4 verbs of B on the MIG pool, 2 x 4 pool-list filters."""
    assert len(OTHER_JOB_CASES) == 72
    assert len(JOB_LIST_CASES) == 46
    assert len(OTHER_QUOTA_CASES) == 20
    assert len(QUOTA_LIST_CASES) == 10
    assert CROSS_TENANT_COMBINATIONS == 160
    assert FORBIDDEN_OWN_COMBINATIONS == 48 + 8 + 14


#
# Protected fields, priority, who may call at all
#


def test_submit_ignores_protected_fields(site, api_a, world):
    body = {
        "name": "sneaky",
        "pool": site.default.pk,
        "gpus": 2,
        "tenant": "tenant-b",
        "cluster": "elsewhere",
        "status": "running",
        "status_reason": "forged",
        "pending_reason": "forged",
        "held": True,
        "queue_position": 1,
        "borrowed": True,
        "id": 99_999,
        "started_at": "2020-01-01T00:00:00Z",
        "finished_at": "2020-01-01T00:00:00Z",
        "submitted_at": "2020-01-01T00:00:00Z",
        "version": 77,
        "queue_seq": -5,
        "attained_gpu_s": 1e9,
        "placement": [{"node": "gpu0001", "gpu_index": 0}],
        "events": [{"to_status": "completed"}],
    }
    resp = api_a.post(JOBS, body, format="json")
    assert resp.status_code == 201, resp.json()
    job = Job.objects.get(pk=resp.json()["id"])
    assert job.pk != 99_999
    assert job.tenant == site.tenant_a
    assert (job.status, job.status_reason, job.pending_reason) == ("pending", "", "")
    assert (job.held, job.borrowed) == (False, False)
    assert resp.json()["queue_position"] is None
    assert (job.started_at, job.finished_at) == (None, None)
    assert (job.version, job.queue_seq, job.attained_gpu_s) == (0, job.pk, 0.0)
    assert not job.allocations.exists()
    assert list(job.events.values_list("to_status", flat=True)) == ["pending"]
    assert resp.json()["tenant"] == "tenant-a" and resp.json()["cluster"] == "sched"


def test_submit_naming_other_tenant_by_id_still_files_under_own_tenant(site, api_a, world):
    resp = api_a.post(
        JOBS, {"name": "x", "pool": site.default.pk, "gpus": 1, "tenant": site.tenant_b.pk}, format="json"
    )
    assert resp.status_code == 201
    assert Job.objects.get(pk=resp.json()["id"]).tenant_id == site.tenant_a.pk
    assert site.tenant_b.jobs.count() == 4


def test_priority_above_tenant_allowance_is_refused(site, api_a):
    resp = api_a.post(JOBS, {"name": "x", "pool": site.default.pk, "gpus": 1, "priority_class": "high"}, format="json")
    assert resp.status_code == 400
    assert "priority_class" in resp.json()
    assert not Job.objects.exists()


def test_priority_within_raised_allowance_is_accepted(site, api_a):
    actions.create_tenant("tenant-a", description="team A", max_priority="high")
    resp = api_a.post(JOBS, {"name": "x", "pool": site.default.pk, "gpus": 1, "priority_class": "high"}, format="json")
    assert resp.status_code == 201, resp.json()
    assert resp.json()["priority_class"] == "high"


def test_priority_at_or_below_default_is_accepted(site, api_a):
    for name in ("normal", "low", "best-effort"):
        resp = api_a.post(
            JOBS, {"name": name, "pool": site.default.pk, "gpus": 1, "priority_class": name}, format="json"
        )
        assert resp.status_code == 201, resp.json()


def test_operator_sees_every_tenants_jobs(ops_api, world):
    rows = _all_pages(ops_api, JOBS, {})
    assert {r["id"] for r in rows} == {j.pk for jobs in world.values() for j in jobs.values()}
    assert {r["tenant"] for r in rows} == {"tenant-a", "tenant-b"}


def test_operator_reads_any_job_quota_and_pool(site, ops_api, world):
    assert ops_api.get(f"{JOBS}{world['B']['pending'].pk}/").status_code == 200
    assert len(_all_pages(ops_api, QUOTAS, {})) == 5
    assert {r["name"] for r in _all_pages(ops_api, POOLS, {})} == {"default", "mps", "mig"}


def test_operator_filters_every_tenants_jobs_by_status(site, ops_api, world):
    rows = _all_pages(ops_api, JOBS, {"status": "running"})
    assert {r["id"] for r in rows} == {world["A"]["running"].pk, world["B"]["running"].pk}


def test_operator_without_tenant_cannot_submit(site, ops_api):
    resp = ops_api.post(JOBS, {"name": "x", "pool": site.default.pk, "gpus": 1}, format="json")
    assert resp.status_code == 403
    assert not Job.objects.exists()


def _endpoints(site, world) -> list[tuple[str, str]]:
    job = world["A"]["pending"]
    quota = Quota.objects.filter(tenant=site.tenant_a).first()
    return [
        ("get", JOBS),
        ("get", f"{JOBS}{job.pk}/"),
        ("post", JOBS),
        ("post", f"{JOBS}{job.pk}/cancel/"),
        ("post", f"{JOBS}{job.pk}/hold/"),
        ("get", QUOTAS),
        ("get", f"{QUOTAS}{quota.pk}/"),
        ("get", POOLS),
        ("get", f"{POOLS}{site.default.pk}/"),
    ]


def test_anonymous_is_refused_everywhere(client, site, world):
    before = snapshot()
    for method, url in _endpoints(site, world):
        if method == "get":
            resp = client.get(url)
        else:
            resp = client.post(url, {"name": "x", "pool": site.default.pk, "gpus": 1}, content_type="application/json")
        assert resp.status_code in (401, 403), (method, url, resp.status_code)
    assert snapshot() == before


def test_signed_in_user_without_tenant_is_refused_everywhere(outsider_api, site, world):
    before = snapshot()
    for method, url in _endpoints(site, world):
        resp = getattr(outsider_api, method)(url, {"name": "x", "pool": site.default.pk, "gpus": 1}, format="json")
        assert resp.status_code == 403, (method, url, resp.status_code)
    assert snapshot() == before


def test_tenant_reads_and_cancels_own_job(clients, world):
    """The positive control of the matrix: the same requests succeed on one's own job."""
    for actor in "AB":
        job = world[actor]["pending"]
        assert clients[actor].get(f"{JOBS}{job.pk}/").status_code == 200
        assert clients[actor].post(f"{JOBS}{job.pk}/cancel/").json()["status"] == "cancelled"
