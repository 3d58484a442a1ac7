"""A small generated cluster with the scheduler set up, and helpers to submit jobs through the actions."""

from __future__ import annotations

import pytest

from fabric.models import GPU
from scheduler import actions
from scheduler.models import PriorityClass
from tests.factories import fat_tree


@pytest.fixture
def cluster(db):
    return fat_tree("sched", nodes=4, gpus_per_node=8, leaf_ports=16)


@pytest.fixture
def pool(cluster):
    return actions.ensure_scheduler(cluster)


@pytest.fixture
def tenant(db):
    return actions.create_tenant("acme", max_priority="high")


@pytest.fixture
def normal(db):
    return PriorityClass.objects.get(name="normal")


@pytest.fixture
def submit(tenant, pool, normal):
    def make(gpus: int = 1, **request):
        request.setdefault("name", f"job-{gpus}")
        return actions.submit_job(tenant, pool, normal, gpus=gpus, **request)

    return make


@pytest.fixture
def gpus(cluster):
    return list(GPU.objects.filter(node__cluster=cluster).order_by("node__hostname", "index"))
