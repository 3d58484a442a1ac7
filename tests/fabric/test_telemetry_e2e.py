"""End to end with a real Celery worker on real Redis (not eager): poll -> node queue -> ingest -> latest state
-> alert, and the failed GPU leaves capacity. The worker is a separate process with its own connections."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from clusterctl.celery import app
from fabric import tasks
from fabric.latest import latest_key
from fabric.models import GPU, Alert, Node
from tests.factories import fat_tree
from tests.processes import child_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(request):
    queue = f"central-{uuid.uuid4().hex[:8]}"
    hosts = request.param
    env = child_env(
        CELERY_TASK_ALWAYS_EAGER="0",
        CELERY_TASK_DEFAULT_QUEUE=queue,
        # The twin's faults at ten a second of simulated time, from a fixed seed: the first polls see some.
        TWIN_SEED="7",
        TWIN_FAULT_RATE="36000",
    )
    queues = ",".join([queue, *(f"node.{h}" for h in hosts)])
    # Polls an earlier run left in these node queues (its worker gone) would make poll_cluster skip the nodes as
    # "its last poll still waits untaken": every run starts with empty node queues.
    if settings.REDIS_URL:
        redis.Redis.from_url(settings.REDIS_URL).delete(*(f"node.{h}" for h in hosts))
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "clusterctl", "worker", "-Q", queues, "--pool", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, queue
    try:
        yield proc
    finally:
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.postgres("the worker needs a database both processes share")
@pytest.mark.parametrize("worker", [["gpu0001", "gpu0002"]], indirect=True)
def test_poll_reaches_alert_through_a_real_worker(worker):
    cluster = fat_tree("e2e", nodes=2, gpus_per_node=8, leaf_ports=16)
    assert sorted(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True)) == ["gpu0001", "gpu0002"]
    tasks.poll_cluster.delay(cluster.pk, "xid")
    ok = wait_for(lambda: Alert.objects.filter(cluster=cluster, rule="gpu_xid_critical").count() == 2)
    if not ok:
        worker.terminate()
        pytest.fail(f"no alerts; worker said:\n{worker.communicate(timeout=10)[0][-3000:]}")
    assert set(GPU.objects.filter(node__cluster=cluster, index=0).values_list("health", flat=True)) == {"failed"}
    assert cache.get(latest_key(cluster.pk, "gpu0001"))["collector"] == "static"


TWIN_FAULT_RULES = {"gpu_xid_critical", "gpu_xid", "port_down", "port_errors"}


@pytest.mark.postgres("the worker needs a database both processes share")
@pytest.mark.parametrize("worker", [["gpu0001", "gpu0002"]], indirect=True)
def test_a_twin_fault_raises_an_alert_through_a_real_worker(worker):
    """poll -> node queue (the twin plays the hardware) -> ingest inbox -> batch -> latest state -> alert."""
    cluster = fat_tree("e2e-twin", nodes=2, gpus_per_node=8, leaf_ports=16)

    def polled_into_an_alert() -> bool:
        tasks.poll_cluster.delay(cluster.pk, "twin")
        return Alert.objects.filter(cluster=cluster, rule__in=TWIN_FAULT_RULES).exists()

    if not wait_for(polled_into_an_alert, timeout=60):
        worker.terminate()
        pytest.fail(f"no twin fault alert; worker said:\n{worker.communicate(timeout=10)[0][-3000:]}")
    assert cache.get(latest_key(cluster.pk, "gpu0001"))["collector"] == "twin"
