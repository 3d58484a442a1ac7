"""The demo's failure, for real: the embedded worker (one thread, in-memory broker) busy for longer than the node-down
threshold while beat keeps ticking. Before, every node went down at the first poll after the stall; now the polls
that waited expire unsent, nobody is blamed, and the pipeline alert names the stall."""

from __future__ import annotations

import time

import pytest
from celery import shared_task

from clusterctl.embedded import EmbeddedCelery
from fabric import stored_twin
from fabric.ingest import forget_liveness
from fabric.latest import last_seen
from fabric.models import Alert, Node
from fabric.telemetry.liveness import DOWN, STALLED, UNREACHABLE
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db(transaction=True)


@shared_task(name="tests.fabric.stall_worker", ignore_result=True)
def stall_worker(seconds: float) -> None:
    """Holds the worker, as a process starved of CPU would."""
    time.sleep(seconds)


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_a_stalled_worker_takes_no_node_down(settings):
    settings.TELEMETRY_UNREACHABLE_POLLS, settings.TELEMETRY_DOWN_POLLS = 3, 10  # down after 5 s at 0.5 s polls
    stored_twin.forget_twins()
    cluster = fat_tree("stall", nodes=4, gpus_per_node=8, leaf_ports=16)
    hosts = set(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True))
    try:
        with EmbeddedCelery(poll_interval_s=0.5, round_interval_s=60.0, hold_down_s=2.0):
            assert wait_for(lambda: hosts <= set(last_seen(cluster.pk)), 20)
            stall_worker.apply_async((7.0,))  # 14 intervals: beat's polls wait behind it and expire
            time.sleep(7.0)
            seen = dict(last_seen(cluster.pk))
            # After the stall every node answers again, and stays judged for a while.
            assert wait_for(lambda: all(last_seen(cluster.pk)[h] > seen[h] for h in hosts), 15)
            time.sleep(3.0)
        assert not Alert.objects.filter(rule__in=(UNREACHABLE, DOWN)).exists()
        assert set(Node.objects.filter(cluster=cluster).values_list("state", flat=True)) == {"up"}
        # One pipeline alert, refreshed with what was behind at each poll (no poll sent, then ingest catching up).
        assert Alert.objects.filter(rule=STALLED).exists()
    finally:
        forget_liveness(cluster.pk)
