"""The clusterctl Celery app as a worker for tests/resilience/test_redis_restart.py: the production settings, broker
transport and reconnection, plus one task that holds its message a while (acknowledged late, like every task here)."""

import time

from clusterctl.celery import app


@app.task(name="tests.resilience.nap", acks_late=True)
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds
