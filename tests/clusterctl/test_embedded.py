"""Embedded mode: a worker and beat in threads of this process on the in-memory broker, polling the twin.

What `manage.py demo` runs behind its web server, on a small generated cluster for a few seconds."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from clusterctl.celery import app
from clusterctl.embedded import EmbeddedCelery
from fabric import stored_twin
from fabric.latest import latest_utilisation
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
    assert runner.counts["fabric.tasks.poll_node"] >= 2 * len(hosts)
    assert runner.counts["fabric.tasks.poll_switches"] >= 1
    assert runner.counts["scheduler.tasks.run_round"] >= 1
    # the process's own Celery settings are back
    assert app.conf.broker_url == broker_before and settings.TELEMETRY_NODE_QUEUES is True
