"""Body of one concurrent submitter/scheduler process (spawned: a fresh interpreter, its own connection)."""

from __future__ import annotations

import os
import random


def worker(seed: int, database_url: str, cluster_id: int, pool_id: int, iterations: int, queue) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "clusterctl.test_settings"
    import django

    django.setup()
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
