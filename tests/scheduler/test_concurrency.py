"""Concurrent submitters, finishers, cancellers, API clients and rounds on real PostgreSQL: no deadlock reaches
a caller, no request answers a server error, and no GPU is ever held twice.

Runs in separate processes with their own connections (a transactional test: nothing is wrapped in
one test transaction, so row locks and CHECKs behave as in production). SQLite cannot show this.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter

import pytest
from django.db import connection, connections

from scheduler import actions
from scheduler.invariants import INVARIANTS as VIOLATIONS
from scheduler.invariants import violations
from tests.factories import fat_tree
from tests.scheduler.concurrency_worker import api_clients, race, rounds_and_nodes, worker

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("row locks and concurrency need PostgreSQL"),
]

PROCESSES = 8
ITERATIONS = 12
RACE_PROCESSES = 16
RACE_ITERATIONS = 40
API_PROCESSES, API_CLIENTS_EACH, API_REQUESTS = 4, 16, 10  # 64 API clients at once
ROUND_PROCESSES = 4  # beside them: rounds back to back, and running jobs finishing (the node side)


def _url() -> str:
    db = connection.settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST'] or ''}:{db['PORT'] or 5432}/{db['NAME']}"
    if not db["HOST"]:  # a unix socket (the throwaway server): libpq takes its directory as ?host=
        url = f"postgres://{db['USER']}@/{db['NAME']}?host={db['OPTIONS'].get('host', '/tmp')}"
    return url


def _spawn(target, argss: list[tuple], timeout: float = 300) -> list[tuple]:
    """Start one spawned process per args tuple (a fresh interpreter: no inherited sockets, threads or event
    loops) and collect what each reported."""
    connections.close_all()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, queue)) for args in argss]
    for p in procs:
        p.start()
    reports = [queue.get(timeout=timeout) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return reports


def _deadlocks_detected() -> int:
    """Deadlocks PostgreSQL detected in this database so far (each aborted one transaction)."""
    with connection.cursor() as cursor:
        if connection.pg_version >= 150000:  # counters are flushed lazily since PostgreSQL 15
            cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _violations() -> dict[str, int]:
    with connection.cursor() as cursor:
        return {name: len(ids) for name, ids in violations(cursor).items()}


def test_16_processes_submitting_finishing_cancelling_and_scheduling_meet_no_deadlock():
    cluster = fat_tree("race", nodes=16, gpus_per_node=8, leaf_ports=16)  # 128 GPUs
    pool = actions.ensure_scheduler(cluster)
    for i in range(2):
        actions.create_tenant(f"t{i}")
    before = _deadlocks_detected()
    reports = _spawn(race, [(s, _url(), cluster.pk, pool.pk, RACE_ITERATIONS) for s in range(RACE_PROCESSES)])
    seen = sum((Counter(r[2]) for r in reports), Counter())
    errors = [e for r in reports for e in r[3]]
    detected = _deadlocks_detected() - before
    print(f"race: {dict(seen)}; deadlocks PostgreSQL detected: {detected}")
    assert (seen["deadlock"], seen["serialization"], seen["database error"]) == (0, 0, 0), errors
    assert errors == []
    assert detected == 0  # the lock order prevents them; the retry is only the net under it
    assert seen["round"] > 0 and seen["finish"] > 0 and seen["cancel"] > 0  # the race really mixed them
    assert _violations() == dict.fromkeys(VIOLATIONS, 0)


def test_64_api_clients_beside_rounds_get_no_server_error():
    cluster = fat_tree("api-race", nodes=16, gpus_per_node=8, leaf_ports=16)  # 128 GPUs
    pool = actions.ensure_scheduler(cluster)
    for i in range(2):
        tenant = actions.create_tenant(f"t{i}", max_priority="high")
        actions.set_quota(tenant, pool, guaranteed_gpus=64, borrow_limit=64)
    before = _deadlocks_detected()
    connections.close_all()
    ctx = multiprocessing.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    rounds = [
        ctx.Process(target=rounds_and_nodes, args=(s, _url(), cluster.pk, pool.pk, stop, queue))
        for s in range(ROUND_PROCESSES)
    ]
    clients = [
        ctx.Process(target=api_clients, args=(s, _url(), cluster.pk, pool.pk, API_CLIENTS_EACH, API_REQUESTS, queue))
        for s in range(API_PROCESSES)
    ]
    for p in rounds + clients:
        p.start()
    reports = [queue.get(timeout=300) for _ in clients]
    stop.set()
    reports += [queue.get(timeout=60) for _ in rounds]
    for p in rounds + clients:
        p.join(timeout=30)
    answers = sum((Counter(r[2]) for r in reports if r[0] == "api"), Counter())
    done = sum((Counter(r[2]) for r in reports if r[0] == "scheduler"), Counter())
    failures = [f for r in reports for f in r[3]]
    detected = _deadlocks_detected() - before
    print(f"64 clients: answers {dict(answers)}; rounds and nodes {dict(done)}; deadlocks detected: {detected}")
    assert failures == []
    assert sum(n for code, n in answers.items() if code >= 500) == 0
    assert sum(answers.values()) == API_PROCESSES * API_CLIENTS_EACH * API_REQUESTS
    assert answers[201] > 0 and answers[200] > 0 and done["round"] > 0  # they really ran together
    assert _violations() == dict.fromkeys(VIOLATIONS, 0)


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

    found = _violations()
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM scheduler_allocation WHERE active")
        active = cursor.fetchone()[0]
    assert found == dict.fromkeys(VIOLATIONS, 0)
    assert active > 0
