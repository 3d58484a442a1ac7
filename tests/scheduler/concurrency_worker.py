"""Bodies of the concurrent processes of tests/scheduler/test_concurrency.py (spawned: a fresh interpreter each,
its own connections). Each reports to the parent through a queue; the parent fails the test on what they report."""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter


def _setup(database_url: str, *, inline_rounds: bool = True) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "clusterctl.test_settings"
    import django

    django.setup()
    if not inline_rounds:
        # The test settings run the round each commit requests inline (eager Celery): with every process doing so
        # after every action, rounds would be most of the run. Here rounds run where the race runs them, as a
        # worker would, beside the actions.
        from scheduler import enqueue

        enqueue.request_round = lambda cluster_id, trigger, **kwargs: False


def _sqlstate(exc: BaseException | None) -> str | None:
    """The PostgreSQL SQLSTATE behind a Django database error (psycopg's error is its cause), if any."""
    while exc is not None:
        state = getattr(exc, "sqlstate", None)
        if state:
            return state
        exc = exc.__cause__
    return None


DEADLOCK, SERIALIZATION = "40P01", "40001"


def worker(seed: int, database_url: str, cluster_id: int, pool_id: int, iterations: int, queue) -> None:
    """Submit, run a round, finish a running job: rounds racing submitters."""
    _setup(database_url)
    from django.db import connections

    from scheduler import actions
    from scheduler.models import Job, Pool, PriorityClass, Tenant
    from scheduler.rounds import RoundBusy, run_round

    rng = random.Random(seed)
    rounds = busy = 0
    try:
        pool = Pool.objects.get(pk=pool_id)
        tenant = Tenant.objects.get(name=f"t{seed % 2}")
        normal = PriorityClass.objects.get(name="normal")
        for i in range(iterations):
            size = rng.choice([1, 1, 2, 4, 8, 16])
            shape = {"nodes": size // 8, "gpus_per_node": 8} if size >= 16 else {}
            actions.submit_job(tenant, pool, normal, name=f"w{seed}-{i}", gpus=size, **shape)
            try:
                run_round(cluster_id, f"worker {seed}")
                rounds += 1
            except RoundBusy:
                busy += 1
            for job in Job.objects.filter(pool=pool, status="running").order_by("?")[:1]:
                try:
                    actions.finish_job(job, succeeded=True)
                except (actions.ActionError, actions.StaleDecision):
                    pass  # another process finished or moved it first: exactly the race under test
    except Exception as exc:  # reported to the parent, which fails the test
        queue.put(("error", seed, repr(exc)))
    finally:
        connections.close_all()
    queue.put(("done", seed, rounds, busy))


def race(seed: int, database_url: str, cluster_id: int, pool_id: int, iterations: int, queue) -> None:
    """One of many processes doing everything at once on one cluster: submit (one and in bulk), finish, cancel,
    hold, release, requeue and run rounds. Refusals (the job moved on, a round already running) are the race
    working; a database error that reaches this caller (a deadlock, a serialization failure) is what is counted."""
    _setup(database_url, inline_rounds=False)
    from django.db import DatabaseError, connections

    from scheduler import actions
    from scheduler.models import Job, Pool, PriorityClass, Tenant
    from scheduler.rounds import RoundBusy, run_round

    rng = random.Random(seed)
    seen: Counter = Counter()
    errors: list[str] = []
    try:
        pool = Pool.objects.get(pk=pool_id)
        tenant = Tenant.objects.get(name=f"t{seed % 2}")
        classes = list(PriorityClass.objects.filter(name__in=["low", "normal", "high"]))

        def some(*statuses: str) -> Job | None:
            return Job.objects.filter(pool=pool, status__in=statuses).order_by("?").first()

        def submit(i: int) -> None:
            size = rng.choice([1, 1, 2, 4, 8, 16])
            shape = {"nodes": size // 8, "gpus_per_node": 8} if size >= 16 else {}
            actions.submit_job(tenant, pool, rng.choice(classes), name=f"r{seed}-{i}", gpus=size, **shape)

        def bulk(i: int) -> None:
            requests = [{"name": f"b{seed}-{i}-{k}", "gpus": rng.choice([1, 2])} for k in range(5)]
            actions.submit_jobs_bulk(tenant, pool, rng.choice(classes), requests)

        def on(fn, *statuses, **kwargs):
            def act(i: int) -> None:
                job = some(*statuses)
                if job is not None:
                    fn(job, **kwargs)

            return act

        def hold_or_release(i: int) -> None:
            job = Job.objects.filter(pool=pool, status="pending").order_by("?").first()
            if job is not None:
                (actions.release_job if job.held else actions.hold_job)(job, actor="ops")

        def round_(i: int) -> None:
            run_round(cluster_id, f"race {seed}")

        ops = [
            ("submit", submit, 6),
            ("bulk submit", bulk, 1),
            ("finish", on(actions.finish_job, "running", succeeded=True), 4),
            ("cancel", on(actions.cancel_job, "pending", "running", actor="t"), 3),
            ("hold/release", hold_or_release, 1),
            ("requeue", on(actions.requeue_job, "running", actor="ops"), 1),
            ("round", round_, 4),
        ]
        names, fns, weights = zip(*ops, strict=True)
        for i in range(iterations):
            k = rng.choices(range(len(ops)), weights=weights)[0]
            try:
                fns[k](i)
                seen[names[k]] += 1
            except (actions.ActionError, actions.StaleDecision, RoundBusy):
                seen["refused"] += 1
            except DatabaseError as exc:
                state = _sqlstate(exc)
                seen[{DEADLOCK: "deadlock", SERIALIZATION: "serialization"}.get(state, "database error")] += 1
                errors.append(f"{names[k]}: {state} {str(exc).splitlines()[0]}")
    except Exception as exc:  # anything else is a bug the parent reports
        errors.append(f"crashed: {exc!r}")
    finally:
        connections.close_all()
    queue.put(("done", seed, dict(seen), errors))


def api_clients(
    seed: int, database_url: str, cluster_id: int, pool_id: int, clients: int, requests: int, queue
) -> None:
    """`clients` threads, each one tenant's or operator's API client (token auth, the real DRF views): submit,
    list, cancel; operators hold, release, requeue. Each thread has its own database connection, as a web
    server's request threads do. Reports every status code and every answer of 500 or more."""
    _setup(database_url, inline_rounds=False)
    from django.contrib.auth import get_user_model
    from django.db import connections

    from scheduler import actions
    from scheduler.models import Job, Tenant
    from tests.scheduler.api.helpers import JOBS, token_client

    statuses: Counter = Counter()
    failures: list[str] = []
    lock = threading.Lock()
    User = get_user_model()

    def client(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        try:
            operator = n % 8 == 7
            name = f"c{seed}-{n}"
            if operator:
                user = User.objects.create_user(name, is_staff=True)
            else:
                user = User.objects.create_user(name)
                actions.add_member(Tenant.objects.get(name=f"t{n % 2}"), user)
            api = token_client(user)
            api.raise_request_exception = False  # a crash is an answer of 500 to count, as a client would see it
            connections.close_all()  # as after a request: each request opens its own connection
            for i in range(requests):
                if operator:
                    job = Job.objects.filter(pool_id=pool_id, status__in=["pending", "running"]).order_by("?")
                    job = job.values("pk", "status", "held").first()
                    connections.close_all()
                    if job is None:
                        answer = api.get(JOBS)
                    else:
                        verb = "requeue" if job["status"] == "running" else ("release" if job["held"] else "hold")
                        answer = api.post(f"{JOBS}{job['pk']}/{verb}/", {}, format="json")
                else:
                    r = rng.random()
                    if r < 0.55:
                        size = rng.choice([1, 1, 2, 4, 8])
                        priority = rng.choice(["low", "normal", "high"])  # high ones preempt: rounds stop jobs
                        body = {"name": f"{name}-{i}", "gpus": size, "pool": pool_id, "priority_class": priority}
                        answer = api.post(JOBS, body, format="json")
                    elif r < 0.8:
                        mine = api.get(JOBS, {"status": "running"} if r < 0.7 else {"status": "pending"})
                        answer = mine
                        rows = mine.json().get("results", []) if mine.status_code == 200 else []
                        if rows:
                            answer = api.post(f"{JOBS}{rng.choice(rows)['id']}/cancel/", {}, format="json")
                    else:
                        answer = api.get(JOBS)
                with lock:
                    statuses[answer.status_code] += 1
                    if answer.status_code >= 500:
                        failures.append(f"{answer.status_code} {answer.get('Retry-After')} {answer.content[:300]!r}")
        except Exception as exc:
            with lock:
                failures.append(f"client {n} crashed: {exc!r}")
        finally:
            connections.close_all()

    # One request before the threads: each test client builds its own handler, and the first middleware load of a
    # process registers the Prometheus metrics, which two threads doing it at once would register twice. A server
    # loads its middleware once, before it serves.
    from rest_framework.test import APIClient

    APIClient().get(JOBS)
    connections.close_all()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(("api", seed, dict(statuses), failures, time.perf_counter() - t0))


def rounds_and_nodes(seed: int, database_url: str, cluster_id: int, pool_id: int, stop, queue) -> None:
    """The scheduler and the node side beside the API clients, until `stop` is set: rounds back to back, and
    running jobs finishing."""
    _setup(database_url, inline_rounds=False)
    from django.db import DatabaseError, connections

    from scheduler import actions
    from scheduler.models import Job
    from scheduler.rounds import RoundBusy, run_round

    rng = random.Random(seed)
    seen: Counter = Counter()
    errors: list[str] = []
    try:
        while not stop.is_set():
            try:
                if rng.random() < 0.5:
                    run_round(cluster_id, f"api run {seed}")
                    seen["round"] += 1
                else:
                    job = Job.objects.filter(pool_id=pool_id, status="running").order_by("?").first()
                    if job is not None:
                        actions.finish_job(job, succeeded=True)
                        seen["finish"] += 1
            except (actions.ActionError, actions.StaleDecision, RoundBusy):
                seen["refused"] += 1
            except DatabaseError as exc:
                errors.append(f"{_sqlstate(exc)} {str(exc).splitlines()[0]}")
    except Exception as exc:
        errors.append(f"crashed: {exc!r}")
    finally:
        connections.close_all()
    queue.put(("scheduler", seed, dict(seen), errors))
