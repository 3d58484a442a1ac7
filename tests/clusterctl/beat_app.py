"""The clusterctl Celery app as a beat for tests/clusterctl/test_beat.py: one probe entry on a queue of the test's
own, and the RedBeat key prefix and lock timeout the test chose (so a run never meets another run's beats or the
real schedule)."""

import os

from clusterctl.celery import app

app.conf.beat_schedule = {
    "probe": {"task": "tests.beat.probe", "schedule": 0.5, "options": {"queue": os.environ["BEAT_TEST_QUEUE"]}}
}
app.conf.redbeat_key_prefix = os.environ["BEAT_TEST_PREFIX"]
app.conf.redbeat_lock_timeout = int(os.environ["BEAT_TEST_LOCK_TIMEOUT"])
app.conf.beat_max_loop_interval = 0.5
