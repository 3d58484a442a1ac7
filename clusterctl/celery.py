"""The Celery app, configured from Django settings (CELERY_* names)."""

import contextlib
import os
from collections.abc import Iterator

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterctl.settings")

# The broker connections reconnect every second or two (clusterctl/broker.py).
app = Celery("clusterctl", amqp="clusterctl.broker:AMQP")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@contextlib.contextmanager
def tasks_left_to_the_server(celery_app=None) -> Iterator[None]:
    """For a management command: run none of the tasks its actions send inside this process.

    Where tasks run eagerly on the in-memory broker (embedded mode), a command that changes a quota would run a
    whole scheduling round and a live-view broadcast in its own process before it exits (a second or more, a log
    line per task, and a wait for the database while the demo's worker writes) for pages and a queue that live in
    the demo's process, which this one cannot reach. Inside this block they go to this process's in-memory broker,
    which no worker reads: the demo's periodic rounds (every ROUND_INTERVAL_S) take up what changed. With a real
    broker (production) nothing changes: tasks are sent to the workers as always."""
    celery_app = celery_app or app
    if not (celery_app.conf.task_always_eager and str(celery_app.conf.broker_url).startswith("memory://")):
        yield
        return
    celery_app.conf.task_always_eager = False
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = True
