"""Concurrent submitters and rounds on real PostgreSQL: no GPU is ever held twice.

Runs in separate processes with their own connections (a transactional test: nothing is wrapped in
one test transaction, so row locks and CHECKs behave as in production). SQLite cannot show this.
"""

from __future__ import annotations

import multiprocessing
import random

import pytest
from django.db import connection, connections

from scheduler import actions
from scheduler.models import PriorityClass, Tenant
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES = 8
ITERATIONS = 12


def worker(seed: int, cluster_id: int, pool_id: int, queue) -> None:
    connections.close_all()  # a fresh connection of our own (fork copied the parent's socket)
    from scheduler.models import Job, Pool
    from scheduler.rounds import RoundBusy, run_round

    rng = random.Random(seed)
    pool = Pool.objects.get(pk=pool_id)
    tenant = Tenant.objects.get(name=f"t{seed % 2}")
    normal = PriorityClass.objects.get(name="normal")
    rounds = busy = errors = 0
    try:
        for i in range(ITERATIONS):
            size = rng.choice([1, 1, 2, 4, 8, 16])
            shape = {"nodes": size // 8, "gpus_per_node": 8} if size >= 16 else {}
            actions.submit_job(tenant, pool, normal, name=f"w{seed}-{i}", gpus=size, **shape)
            try:
                run_round(cluster_id, f"worker {seed}")
                rounds += 1
            except RoundBusy:
                busy += 1
            running = list(Job.objects.filter(pool=pool, status="running").order_by("?")[:2])
            for job in running[:1]:
                try:
                    actions.finish_job(job, succeeded=True)
                except (actions.ActionError, actions.StaleDecision):
                    pass
    except Exception as exc:  # reported to the parent, which fails the test
        errors += 1
        queue.put(("error", repr(exc)))
    queue.put(("done", rounds, busy, errors))
    connections.close_all()


VIOLATIONS = {
    "share sum over 100 %": """
        SELECT gpu_id FROM scheduler_allocation WHERE active GROUP BY gpu_id HAVING SUM(compute_pct) > 100""",
    "whole GPU held twice": """
        SELECT gpu_id FROM scheduler_allocation WHERE active AND kind = 'whole' GROUP BY gpu_id HAVING COUNT(*) > 1""",
    "ledger differs from allocations": """
        SELECT l.gpu_id FROM scheduler_gpuledger l
        LEFT JOIN (SELECT gpu_id, SUM(compute_pct) AS pct FROM scheduler_allocation WHERE active GROUP BY gpu_id) a
          ON a.gpu_id = l.gpu_id
        WHERE l.compute_pct <> COALESCE(a.pct, 0)""",
    "running job without allocation": """
        SELECT j.id FROM scheduler_job j WHERE j.status = 'running'
        AND NOT EXISTS (SELECT 1 FROM scheduler_allocation a WHERE a.job_id = j.id AND a.active)""",
    "finished job still holding": """
        SELECT DISTINCT a.job_id FROM scheduler_allocation a JOIN scheduler_job j ON j.id = a.job_id
        WHERE a.active AND j.status IN ('completed', 'failed', 'cancelled', 'pending')""",
}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks and concurrency need PostgreSQL")
def test_concurrent_rounds_never_double_allocate():
    cluster = fat_tree("conc", nodes=32, gpus_per_node=8, leaf_ports=16)  # 256 GPUs
    pool = actions.ensure_scheduler(cluster)
    for i in range(2):
        actions.create_tenant(f"t{i}")
    connections.close_all()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(s, cluster.pk, pool.pk, queue)) for s in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    reports = [queue.get(timeout=5) for _ in range(len(procs))]
    while not queue.empty():
        reports.append(queue.get())
    errors = [r for r in reports if r[0] == "error"]
    assert not errors, errors
    done = [r for r in reports if r[0] == "done"]
    assert len(done) == PROCESSES
    assert sum(r[1] for r in done) > 0  # rounds really ran concurrently with submits

    with connection.cursor() as cursor:
        found = {}
        for name, sql in VIOLATIONS.items():
            cursor.execute(sql)
            found[name] = len(cursor.fetchall())
        cursor.execute("SELECT COUNT(*) FROM scheduler_allocation WHERE active")
        active = cursor.fetchone()[0]
    assert found == dict.fromkeys(VIOLATIONS, 0)
    assert active > 0
