"""MASTER_PORT: two jobs whose rank 0 runs on one node never share a port (issue 11.11e: `job id mod 500` gave jobs 7
and 507 the same port on a shared master). The central side picks it per master node; a partial unique index on
the open launches makes a shared port impossible to store; every node of the job is told the same port."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from scheduler import actions, enqueue, tasks
from scheduler.actions import lifecycle
from scheduler.choices import LaunchState
from scheduler.launch.env import (
    GpuShare,
    JobAllocation,
    LaunchEnvError,
    LaunchSettings,
    NodeAllocation,
    free_master_port,
    job_environment,
    master_hostname,
    torchrun_args,
)
from scheduler.models import Job, Launch, PriorityClass
from scheduler.rounds import run_round
from tests.factories import fat_tree

RANGE = (29500, 29999)


#
# The choice (pure)
#


def test_a_job_gets_its_own_port_when_it_is_free():
    assert free_master_port(7, set(), *RANGE) == 29507


def test_a_job_whose_port_is_held_on_its_master_gets_the_next_free_one():
    assert free_master_port(507, {29507}, *RANGE) == 29508
    assert free_master_port(507, {29507, 29508, 29510}, *RANGE) == 29509


def test_the_choice_wraps_around_the_range():
    assert free_master_port(499, {29999}, *RANGE) == 29500


def test_no_port_when_the_whole_range_is_held():
    assert free_master_port(3, {29500, 29501}, 29500, 29501) is None


def test_the_master_is_the_first_node_in_natural_order():
    assert master_hostname(["gpu10", "gpu2", "gpu9"]) == "gpu2"


def _allocation(master_port: int) -> JobAllocation:
    nodes = (NodeAllocation("gpu2", (GpuShare("GPU-a", 0),)), NodeAllocation("gpu10", (GpuShare("GPU-b", 0),)))
    return JobAllocation(job_id=507, nodes=nodes, generation=1, master_port=master_port)


def test_every_node_uses_the_port_its_allocation_names():
    for host in ("gpu2", "gpu10"):
        assert job_environment(_allocation(29508), host)["MASTER_PORT"] == "29508"
    assert "--master_port=29508" in torchrun_args(_allocation(29508), "gpu10")


def test_an_allocation_without_a_port_falls_back_to_the_job_ids():
    assert job_environment(_allocation(0), "gpu2")["MASTER_PORT"] == "29507"


def test_a_port_outside_the_nodes_range_is_refused():
    with pytest.raises(LaunchEnvError, match="master port 29508 is outside this node's range 40000-40099"):
        job_environment(
            _allocation(29508), "gpu2", settings=LaunchSettings(master_port_min=40000, master_port_max=40099)
        )


#
# The central side, against the database
#


@pytest.fixture
def prepares(monkeypatch, settings):
    """The node_prepare messages, captured (no broker)."""
    settings.LAUNCHER = "process"
    settings.LAUNCH_MASTER_PORTS = "29500-29999"
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: None)
    box: list[dict] = []
    monkeypatch.setattr(tasks.node_prepare, "apply_async", lambda args, **kw: box.append(args[0]))
    return box


@pytest.fixture
def one_node(db):
    """One node with two GPUs: every job placed there has it as its master."""
    cluster = fat_tree("ports", nodes=1, gpus_per_node=2, leaf_ports=4)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme")
    actions.set_quota(tenant, pool, guaranteed_gpus=2, borrow_limit=0)
    normal = PriorityClass.objects.get(name="normal")

    def submit(job_id: int) -> Job:
        return actions.submit_job(tenant, pool, normal, id=job_id, name=f"j{job_id}", gpus=1, command="train")

    return cluster, submit


def _launch(cluster, capture, *jobs: Job) -> None:
    run_round(cluster.pk, "test")
    with capture(execute=True):
        for job in jobs:
            lifecycle.launch_job(job.pk)


def _ports(prepares: list[dict]) -> dict[int, int]:
    return {p["job_id"]: p["allocation"]["master_port"] for p in prepares}


def test_jobs_7_and_507_on_one_master_get_different_ports(one_node, prepares, django_capture_on_commit_callbacks):
    cluster, submit = one_node
    seven, five_o_seven = submit(7), submit(507)
    _launch(cluster, django_capture_on_commit_callbacks, seven, five_o_seven)
    assert _ports(prepares) == {7: 29507, 507: 29508}  # 507 % 500 == 7: the same port before
    assert dict(Launch.objects.values_list("job_id", "master_port")) == {7: 29507, 507: 29508}


def test_a_port_is_free_again_once_the_launch_holding_it_ended(one_node, prepares, django_capture_on_commit_callbacks):
    cluster, submit = one_node
    seven = submit(7)
    _launch(cluster, django_capture_on_commit_callbacks, seven)
    Launch.objects.filter(job=seven).update(state=LaunchState.EXITED)
    five_o_seven = submit(507)
    _launch(cluster, django_capture_on_commit_callbacks, five_o_seven)
    assert _ports(prepares)[507] == 29507


def test_two_open_launches_on_one_master_cannot_store_the_same_port(
    one_node, prepares, django_capture_on_commit_callbacks
):
    cluster, submit = one_node
    seven, five_o_seven = submit(7), submit(507)
    _launch(cluster, django_capture_on_commit_callbacks, seven, five_o_seven)
    with pytest.raises(IntegrityError), transaction.atomic():
        Launch.objects.filter(job=five_o_seven).update(master_port=29507)


def test_a_launch_that_finds_its_port_taken_meanwhile_chooses_again(
    one_node, prepares, django_capture_on_commit_callbacks, monkeypatch
):
    # Another launch stored 29507 on the master after this one read which ports were held: the index refuses the
    # insert, and the launch reads the held ports again.
    cluster, submit = one_node
    seven, five_o_seven = submit(7), submit(507)
    run_round(cluster.pk, "test")
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.launch_job(seven.pk)
    answers = []

    def stale_once(job_id, taken, low, high):
        answers.append(29507 if not answers else free_master_port(job_id, taken, low, high))
        return answers[-1]

    monkeypatch.setattr(lifecycle, "free_master_port", stale_once)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.launch_job(five_o_seven.pk)
    assert answers == [29507, 29508] and _ports(prepares) == {7: 29507, 507: 29508}
