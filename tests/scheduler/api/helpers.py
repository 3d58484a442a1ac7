"""Helpers shared by the scheduler API tests (fixtures live in conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone
from rest_framework.test import APIClient

from clusterctl.tokens import issue_token
from fabric.models import GPU, Cluster, Node
from scheduler import actions
from scheduler.choices import JobStatus, ShareKind
from scheduler.models import Allocation, Job, JobEvent, Pool, Quota, Tenant
from scheduler.selectors import pool_gpus

JOBS = "/api/v1/jobs/"
QUOTAS = "/api/v1/quotas/"
POOLS = "/api/v1/pools/"


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user)[1]}")
    return client


@dataclass
class Site:
    """The whole setup, by name, so tests read as sentences."""

    cluster: Cluster
    default: Pool  # exclusive: 2 compute nodes x 8 H100 (+ the storage node, which has no GPUs)
    mps: Pool  # MPS: 1 node x 8 H100
    mig: Pool  # MIG: 1 node x 8 H100
    tenant_a: Tenant
    tenant_b: Tenant
    storage: Node
    compute: list[Node]


def start(
    job: Job,
    gpus: int | None = None,
    *,
    kind: str = ShareKind.WHOLE,
    compute_pct: int = 100,
    on: list[GPU] | None = None,
) -> Job:
    """Give a pending job GPUs of its pool and mark it running, as an applied placement would:
    scheduler.actions.allocate, then the private status move a round uses."""
    count = job.gpus if gpus is None else gpus
    if on is None:
        busy = Allocation.objects.filter(active=True).values("gpu_id")
        on = list(pool_gpus(job.pool).exclude(pk__in=busy).order_by("node__hostname", "index")[:count])
    assert len(on) == count, f"pool {job.pool} has no {count} free GPUs"
    shares = [
        actions.ShareSpec(
            g.pk, kind, compute_pct=compute_pct, memory_mib=g.memory_mib if kind == ShareKind.WHOLE else 0
        )
        for g in on
    ]
    actions.allocate(job, shares)
    actions.move_job(
        job,
        JobStatus.RUNNING,
        "placed by the test",
        actor="test",
        expect=[JobStatus.PENDING],
        started_at=timezone.now(),
    )
    job.refresh_from_db()
    return job


def snapshot() -> dict:
    """Everything a request could change: every job's state, events, allocations, quotas, pools."""
    return {
        "jobs": list(
            Job.objects.order_by("pk").values_list(
                "pk",
                "tenant_id",
                "pool_id",
                "name",
                "gpus",
                "status",
                "status_reason",
                "pending_reason",
                "held",
                "queue_seq",
                "borrowed",
                "version",
                "priority_class_id",
                "finished_at",
            )
        ),
        "events": JobEvent.objects.count(),
        "allocations": list(
            Allocation.objects.filter(active=True).order_by("pk").values_list("pk", "job_id", "gpu_id")
        ),
        "quotas": list(
            Quota.objects.order_by("pk").values_list("pk", "tenant_id", "pool_id", "guaranteed_gpus", "borrow_limit")
        ),
        "pools": list(Pool.objects.order_by("pk").values_list("pk", "name", "sharing", "timeslice_replicas")),
    }
