"""Embedded mode: a worker and beat in threads of this process on the in-memory broker, polling the twin.

What `manage.py demo` runs behind its web server, on a small generated cluster for a few seconds."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from clusterctl.celery import app
from clusterctl.embedded import NODES_READ, EmbeddedCelery, fit_poll_interval, time_one_poll
from fabric import stored_twin
from fabric.latest import last_seen, latest_utilisation
from fabric.models import GPU, Node
from scheduler import actions
from scheduler.models import Allocation, Job, PriorityClass
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_embedded_worker_and_beat_keep_a_generated_cluster_alive():
    stored_twin.forget_twins()
    cluster = fat_tree("live", nodes=2, gpus_per_node=8, leaf_ports=16)
    hosts = sorted(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True))
    gpu_ids = set(GPU.objects.filter(node__cluster=cluster).values_list("pk", flat=True))
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme", max_priority="high")
    broker_before = app.conf.broker_url
    runner = EmbeddedCelery(poll_interval_s=1.0, round_interval_s=2.0)
    with runner:
        assert app.conf.broker_url.startswith("memory://") and not app.conf.task_always_eager
        assert settings.TELEMETRY_COLLECTOR == "twin" and settings.TELEMETRY_NODE_QUEUES is False
        # telemetry: every GPU's load, and link load once two polls gave rates
        assert wait_for(lambda: set(latest_utilisation(cluster.pk, hosts)[1]) == gpu_ids), runner.counts
        assert wait_for(lambda: latest_utilisation(cluster.pk, hosts)[0]), runner.counts
        # a submit is scheduled by the worker (not inline), and its GPUs get busy in the twin
        job = actions.submit_job(tenant, pool, PriorityClass.objects.get(name="normal"), gpus=8, name="train")
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "running"), runner.counts
        held = set(Allocation.objects.filter(job=job, active=True).values_list("gpu_id", flat=True))
        assert len(held) == 8

        def busy() -> set[int]:
            return {pk for pk, u in latest_utilisation(cluster.pk, hosts)[1].items() if u > 0.5}

        assert wait_for(lambda: busy() == held), (busy(), held, runner.counts)
    # the twin is read centrally: a round is one read of every node here (fabric.tasks.poll_nodes), not a task a node
    assert runner.counts["fabric.tasks.poll_nodes"] >= 2 and runner.counts[NODES_READ] >= 2 * len(hosts)
    assert runner.counts["fabric.tasks.poll_node"] == 0
    assert runner.counts["fabric.tasks.poll_switches"] >= 1
    assert runner.counts["scheduler.tasks.run_round"] >= 1
    # the process's own Celery settings are back
    assert app.conf.broker_url == broker_before and settings.TELEMETRY_NODE_QUEUES is True


@pytest.mark.parametrize(
    ("asked", "one_poll", "fit"),
    [
        (5.0, 2.5, 5.0),  # half of the interval: kept
        (5.0, 2.6, 6.0),  # 5.2 s needed: whole seconds
        (5.0, 7.9, 16.0),  # 2,000 servers on one busy core: 15.8 s needed
        (1.0, 0.1, 1.0),
    ],
)
def test_the_poll_interval_is_stretched_to_what_one_process_can_keep(asked, one_poll, fit):
    assert fit_poll_interval(asked, one_poll) == fit


def test_polling_may_take_a_share_of_the_process_between_none_and_all():
    assert fit_poll_interval(5.0, 5.0, share=1.0) == 5.0
    with pytest.raises(ValueError, match="share must be in"):
        fit_poll_interval(5.0, 1.0, share=0.0)


def test_one_poll_is_timed_here_and_fills_the_latest_state():
    stored_twin.forget_twins()
    cluster = fat_tree("timed", nodes=4, gpus_per_node=8, leaf_ports=16)
    hosts = set(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True))
    try:
        took, nodes = time_one_poll()
    finally:
        stored_twin.forget_twins()  # the twin of a cluster this test's database forgets
    assert nodes == len(hosts) and 0 < took < 30
    assert hosts < set(last_seen(cluster.pk))  # and the fabric agent's switch ports
    links, gpus = latest_utilisation(cluster.pk, sorted(hosts), smoothed=False)
    assert set(gpus) == set(GPU.objects.filter(node__cluster=cluster).values_list("pk", flat=True)) and links
