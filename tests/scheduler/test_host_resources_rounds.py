"""Host CPU and memory through real rounds: the adapter gives the engine the nodes' cpu_milli / memory_mib (what the
node agent reported, or the operator set), the jobs' host_cpu_milli / host_memory_mib and the request mix's, in a
fixed number of queries; a job goes where a node has the CPUs left, and waits, saying so, where none has.

The generated cluster's four compute nodes get hand-picked host figures: A 16 CPUs, B 64 CPUs, C and D 32 (512 GiB
each); C and D are drained so that the choice is between A and B."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric import actions as fabric_actions
from fabric.models import Node
from scheduler import actions, snapshot_from_db
from scheduler.choices import SharingMode
from scheduler.models import Allocation
from scheduler.rounds import run_round
from scheduler.selectors import queue_info
from scheduler.snapshot_from_db import build_snapshot

pytestmark = pytest.mark.django_db
GIB_512 = 515_797  # MiB: MemTotal of a 512 GiB server


@pytest.fixture
def nodes(cluster, pool):
    a, b, c, d = Node.objects.filter(cluster=cluster, role="compute").order_by("hostname")
    figures = {a.hostname: (16000, GIB_512), b.hostname: (64000, GIB_512)}
    fabric_actions.record_host_resources(
        cluster.pk, {**figures, c.hostname: (32000, GIB_512), d.hostname: (32000, GIB_512)}
    )
    fabric_actions.set_node_state([c, d], "drain", reason="not in this test")
    return a, b


def node_of(job) -> set[str]:
    return set(Allocation.objects.filter(job=job, active=True).values_list("gpu__node__hostname", flat=True))


def test_the_snapshot_carries_nodes_and_jobs_host_figures(cluster, nodes, submit):
    a, b = nodes
    job = submit(1, host_cpu_milli=500, host_memory_mib=4096)
    snap, _ = build_snapshot(cluster.pk)
    by_name = {n.hostname: n for n in snap.nodes}
    assert (by_name[a.hostname].cpu_milli, by_name[a.hostname].memory_mib) == (16000, GIB_512)
    assert (by_name[b.hostname].cpu_milli, by_name[b.hostname].memory_mib) == (64000, GIB_512)
    [request] = [r for r in snap.pending if r.id == job.pk]
    assert (request.host_cpu_milli, request.host_memory_mib) == (500, 4096)


def test_a_job_that_asks_none_asks_zero(cluster, nodes, submit):
    job = submit(1)
    [request] = [r for r in build_snapshot(cluster.pk)[0].pending if r.id == job.pk]
    assert (request.host_cpu_milli, request.host_memory_mib) == (0, 0)


def test_the_request_mix_carries_host_figures(cluster, nodes, tenant, normal):
    mps = actions.create_pool(cluster, "mps", sharing=SharingMode.MPS)
    actions.assign_nodes(mps, [nodes[1]])
    actions.submit_job(tenant, mps, normal, gpus=1, name="s", sharing=SharingMode.MPS, mps_compute_pct=25,
                       mps_memory_mib=20480, host_cpu_milli=4000, host_memory_mib=32768)  # fmt: skip
    [c] = build_snapshot(cluster.pk)[0].request_mix
    assert (c.mps_compute_pct, c.host_cpu_milli, c.host_memory_mib) == (25, 4000, 32768)


def test_snapshot_queries_do_not_grow_with_jobs_that_ask_host_resources(cluster, nodes, submit):
    def count() -> int:
        snapshot_from_db.clear_caches()
        with CaptureQueriesContext(connection) as queries:
            build_snapshot(cluster.pk)
        return len(queries)

    submit(1, host_cpu_milli=1000, host_memory_mib=1024)
    run_round(cluster.pk, "test")
    few = count()
    for i in range(12):
        submit(1, name=f"more-{i}", host_cpu_milli=1000, host_memory_mib=1024)
    run_round(cluster.pk, "test")  # some run now, on both nodes: their shares carry host amounts
    assert Allocation.objects.filter(active=True).values("job").distinct().count() > 1
    assert count() == few


def test_a_job_goes_to_the_node_with_the_cpus_left(cluster, nodes, submit):
    a, b = nodes
    fabric_actions.set_node_state([b], "drain", reason="first job on A")
    first = submit(1, name="first", host_cpu_milli=12000)
    run_round(cluster.pk, "test")
    assert node_of(first) == {a.hostname}  # A: 16 - 12 = 4 CPUs left, 7 GPUs free
    fabric_actions.set_node_state([b], "up", reason="")
    second = submit(1, name="second", host_cpu_milli=8000)
    run_round(cluster.pk, "test")
    second.refresh_from_db()
    assert second.status == "running"
    assert node_of(second) == {b.hostname}  # A has the GPUs but 4 CPUs; B 64


def test_the_waiting_reason_names_the_cpus_when_no_node_has_them(cluster, nodes, submit):
    _, b = nodes
    fabric_actions.set_node_state([b], "drain", reason="first job on A")
    submit(1, name="on-a", host_cpu_milli=12000)
    run_round(cluster.pk, "test")
    fabric_actions.set_node_state([b], "up", reason="")
    submit(1, name="on-b", host_cpu_milli=8000)
    run_round(cluster.pk, "test")  # left: A 4 CPUs, B 56
    waiting = submit(1, name="big", host_cpu_milli=60000)
    run_round(cluster.pk, "test")
    waiting.refresh_from_db()
    assert waiting.status == "pending"
    reason = queue_info([cluster.pk])[waiting.pk][1]
    assert reason.startswith(
        "needs 60 CPUs on each node; the 2 nodes of pool 'default' with room for its GPUs have too little of it left"
    ), reason


def test_a_job_larger_than_any_node_never_fits(cluster, nodes, submit):
    job = submit(1, name="huge", host_cpu_milli=96000)  # past the API's check: the node shrank since (an operator)
    run_round(cluster.pk, "test")
    assert queue_info([cluster.pk])[job.pk][1].startswith(
        "needs 96 CPUs on each node; no node in pool 'default' has that much in all"
    )


def test_an_operators_cap_is_what_the_round_places_against(cluster, nodes, submit):
    a, b = nodes
    fabric_actions.set_host_resources(b, cpu_milli=8000)  # 56 of B's 64 cores kept for the system
    fabric_actions.set_node_state([a], "drain", reason="only B")
    job = submit(1, name="ten", host_cpu_milli=10000)
    run_round(cluster.pk, "test")
    assert queue_info([cluster.pk])[job.pk][1].startswith("needs 10 CPUs on each node")
    fabric_actions.set_host_resources(b, cpu_milli=None)  # follow the agent again: 64
    run_round(cluster.pk, "test")
    assert node_of(job) == {b.hostname}
