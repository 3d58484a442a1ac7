"""A generated cluster with three pools (exclusive default, MPS, MIG), two tenants with a member and a
token client each, an operator, and a signed-in user who belongs to no tenant. Built through
scheduler.actions, as the admin and the API build it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from fabric.models import Node
from scheduler import actions
from scheduler.choices import SharingMode
from scheduler.models import Job, Pool, PriorityClass, Tenant
from tests.factories import fat_tree
from tests.scheduler.api.helpers import Site, token_client


@pytest.fixture
def site(db) -> Site:
    cluster = fat_tree("sched", nodes=4, gpus_per_node=8, gpu_model="H100", leaf_ports=16, storage_nodes=1)
    default = actions.ensure_scheduler(cluster)
    compute = list(Node.objects.filter(cluster=cluster, role="compute").order_by("hostname"))
    storage = Node.objects.get(cluster=cluster, role="storage")
    mps = actions.create_pool(cluster, "mps", sharing=SharingMode.MPS)
    mig = actions.create_pool(cluster, "mig", sharing=SharingMode.MIG)
    actions.assign_nodes(mps, [compute[2]])
    actions.assign_nodes(mig, [compute[3]])
    tenant_a = actions.create_tenant("tenant-a", description="team A")
    tenant_b = actions.create_tenant("tenant-b", description="team B")
    # A holds quotas in all three pools, B in the default and MPS pools only (the MIG pool is not B's to see).
    actions.set_quota(tenant_a, default, guaranteed_gpus=8, borrow_limit=4)
    actions.set_quota(tenant_a, mps, guaranteed_gpus=2, borrow_limit=2)
    actions.set_quota(tenant_a, mig, guaranteed_gpus=2, borrow_limit=0)
    actions.set_quota(tenant_b, default, guaranteed_gpus=4, borrow_limit=8)
    actions.set_quota(tenant_b, mps, guaranteed_gpus=1, borrow_limit=1)
    return Site(cluster, default, mps, mig, tenant_a, tenant_b, storage, compute)


@pytest.fixture
def user_a(site, django_user_model):
    user = django_user_model.objects.create_user("alice", "alice@a.example.org", "pw-alice")
    actions.add_member(site.tenant_a, user)
    return user


@pytest.fixture
def user_b(site, django_user_model):
    user = django_user_model.objects.create_user("bob", "bob@b.example.org", "pw-bob")
    actions.add_member(site.tenant_b, user)
    return user


@pytest.fixture
def api_a(user_a) -> APIClient:
    return token_client(user_a)


@pytest.fixture
def api_b(user_b) -> APIClient:
    return token_client(user_b)


@pytest.fixture
def outsider_api(site, django_user_model) -> APIClient:
    """Signed in, but neither an operator nor a member of any tenant."""
    return token_client(django_user_model.objects.create_user("carol", "carol@example.org", "pw-carol"))


@pytest.fixture
def ops_api(site, django_user_model) -> APIClient:
    return token_client(django_user_model.objects.create_user("ops", "ops@example.org", "pw-ops", is_staff=True))


@pytest.fixture
def submit():
    """Queue a job directly through the action (setup, not what is under test)."""

    def make(tenant: Tenant, pool: Pool, name: str = "job", *, priority: str = "normal", **request) -> Job:
        request.setdefault("gpus", 1)
        request.setdefault("sharing", pool.sharing)
        return actions.submit_job(tenant, pool, PriorityClass.objects.get(name=priority), name=name, **request)

    return make
