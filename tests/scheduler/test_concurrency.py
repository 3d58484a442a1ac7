"""Concurrent submitters and rounds on real PostgreSQL: no GPU is ever held twice.

Runs in separate processes with their own connections (a transactional test: nothing is wrapped in
one test transaction, so row locks and CHECKs behave as in production). SQLite cannot show this.
"""

from __future__ import annotations

import multiprocessing

import pytest
from django.db import connection, connections

from scheduler import actions
from tests.factories import fat_tree
from tests.scheduler.concurrency_worker import worker

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES = 8
ITERATIONS = 12


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
    db = connection.settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST'] or ''}:{db['PORT'] or 5432}/{db['NAME']}"
    if not db["HOST"]:  # a unix socket (the throwaway server): libpq takes its directory as ?host=
        url = f"postgres://{db['USER']}@/{db['NAME']}?host={db['OPTIONS'].get('host', '/tmp')}"
    connections.close_all()
    # Spawned, not forked: a fresh interpreter per process, no inherited sockets, threads or event loops.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(s, url, cluster.pk, pool.pk, ITERATIONS, queue)) for s in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    reports = []
    while len([r for r in reports if r[0] == "done"]) < PROCESSES:
        reports.append(queue.get(timeout=30))
    errors = [r for r in reports if r[0] == "error"]
    assert not errors, errors
    done = [r for r in reports if r[0] == "done"]
    assert len(done) == PROCESSES
    assert sum(r[2] for r in done) > 0  # rounds really ran concurrently with submits

    with connection.cursor() as cursor:
        found = {}
        for name, sql in VIOLATIONS.items():
            cursor.execute(sql)
            found[name] = len(cursor.fetchall())
        cursor.execute("SELECT COUNT(*) FROM scheduler_allocation WHERE active")
        active = cursor.fetchone()[0]
    assert found == dict.fromkeys(VIOLATIONS, 0)
    assert active > 0
