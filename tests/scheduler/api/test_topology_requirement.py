"""A tenant says where a job's GPUs must be (`require`: one node, leaf or pod) and what it communicates
(`allreduce_mb`, `step_compute_ms`); the round's engine gets exactly that, and a requirement no domain of the pool
can meet is a 400 naming `require`."""

from __future__ import annotations

import pytest

from scheduler import actions
from scheduler.models import Job
from scheduler.snapshot_from_db import build_snapshot
from tests.factories import fat_tree
from tests.scheduler.api.helpers import JOBS, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(db, django_user_model):
    # 6 nodes x 8 GPUs, one HCA each; a 4-port leaf at 1:1 has 2 ports down: three leaves of 2 nodes = 16 GPUs
    # each, joined by the spines (one pod of 48 GPUs).
    cluster = fat_tree("topo", nodes=6, gpus_per_node=8, leaf_ports=4, hcas_per_node=1)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("team")
    actions.set_quota(tenant, pool, guaranteed_gpus=48, borrow_limit=0)
    user = django_user_model.objects.create_user("u", "u@example.org", "pw")
    actions.add_member(tenant, user)
    return token_client(user)


def _post(api, **body):
    return api.post(JOBS, {"name": "j", "command": "x", **body}, format="json")


def test_a_leaf_requirement_within_a_leaf_is_queued_and_reaches_the_engine(api):
    resp = _post(api, gpus=16, nodes=2, gpus_per_node=8, require="leaf", allreduce_mb=102.4, step_compute_ms=126)
    assert resp.status_code == 201, resp.content
    assert (resp.json()["require"], resp.json()["allreduce_mb"], resp.json()["step_compute_ms"]) == ("leaf", 102.4, 126)
    job = Job.objects.get(pk=resp.json()["id"])
    snapshot, _ = build_snapshot(job.pool.cluster_id)
    (request,) = [j for j in snapshot.pending if j.id == job.pk]
    # 102.4 MB = 102,400,000 bytes; 126 ms = 0.126 s
    assert (request.require, request.allreduce_bytes, request.step_compute_s) == ("leaf", 102_400_000, 0.126)


def test_no_requirement_and_no_profile_reach_the_engine_as_none(api):
    job = _post(api, gpus=8).json()["id"]
    snapshot, _ = build_snapshot(Job.objects.get(pk=job).pool.cluster_id)
    (request,) = [j for j in snapshot.pending if j.id == job]
    assert (request.require, request.allreduce_bytes, request.step_compute_s) == (None, None, None)


def test_a_leaf_requirement_larger_than_any_leaf_is_refused(api):
    resp = _post(api, gpus=24, nodes=3, gpus_per_node=8, require="leaf")
    assert resp.status_code == 400
    assert resp.json() == {"require": ["asks for 24 GPUs in one leaf; the largest leaf of pool default has 16"]}
    assert not Job.objects.exists()


def test_a_pod_requirement_is_held_against_the_pod(api):
    assert _post(api, gpus=48, nodes=6, gpus_per_node=8, require="pod").status_code == 201


def test_a_gang_cannot_require_one_node(api):
    resp = _post(api, gpus=16, nodes=2, gpus_per_node=8, require="node")
    assert resp.json() == {"require": ["a gang of 2 nodes cannot be on one node"]}


def test_an_unknown_requirement_is_refused(api):
    resp = _post(api, gpus=8, require="rack")
    assert resp.status_code == 400 and list(resp.json()) == ["require"]


def test_a_negative_allreduce_size_is_refused(api):
    resp = _post(api, gpus=8, allreduce_mb=-1)
    assert resp.status_code == 400 and list(resp.json()) == ["allreduce_mb"]
