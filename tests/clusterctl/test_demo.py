"""`manage.py demo`: sets up and exits with --no-serve; serves a live cluster otherwise (worker and beat in the
process, the twin polled). The web server is replaced by a stand-in that watches the cluster come alive."""

from __future__ import annotations

import re
import time
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command

from clusterctl.celery import app
from clusterctl.management.commands import demo as demo_command
from fabric import stored_twin
from fabric.collectors.twin_model import FLAP
from fabric.latest import latest_utilisation
from fabric.models import GPU, Cluster, Node
from fabric.tasks import poller_status
from scheduler.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_twins():
    stored_twin.forget_twins()
    yield
    stored_twin.forget_twins()


def test_no_serve_sets_up_then_exits():
    out = StringIO()
    started = time.monotonic()
    call_command("demo", "--no-serve", "--nodes", "4", stdout=out)
    assert time.monotonic() - started < 30
    assert "clusterctl demo ready" in out.getvalue() and "live:" not in out.getvalue()
    assert set(Cluster.objects.values_list("name", flat=True)) == {"demo", "sx6036"}
    assert Job.objects.filter(status="running").exists()
    assert app.conf.task_always_eager == settings.CELERY_TASK_ALWAYS_EAGER  # nothing left switched on
    call_command("demo", "--no-serve", "--nodes", "4", stdout=StringIO())  # a second run changes nothing
    assert Cluster.objects.get(name="demo").nodes.count() == 4 + 4  # compute + storage


def test_serve_runs_worker_and_beat_that_keep_the_demo_alive(monkeypatch):
    seen = {}

    def stand_in_for_the_web_server(name, *args, **kwargs):
        assert name == "runserver" and kwargs == {"use_reloader": False}
        cluster = Cluster.objects.get(name="demo")
        hosts = list(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True))
        gpus = set(GPU.objects.filter(node__cluster=cluster).values_list("pk", flat=True))
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            links, gpu_load = latest_utilisation(cluster.pk, hosts)
            if set(gpu_load) == gpus and any(u > 0 for u in links.values()):
                break
            time.sleep(0.2)
        seen.update(links=links, gpus=gpu_load, expected=gpus, eager=app.conf.task_always_eager)
        seen["faults"] = list(stored_twin._TWINS[cluster.pk].model.faults)

    monkeypatch.setattr(demo_command, "call_command", _only_runserver(stand_in_for_the_web_server))
    out = StringIO()
    # 12 servers: 4 for the MIG pool, 4 for the MPS pool, 4 for training jobs (some across nodes)
    call_command("demo", "--nodes", "12", "--poll-interval", "1", "--round-interval", "2", stdout=out)
    assert set(seen["gpus"]) == seen["expected"], out.getvalue()
    assert seen["links"] and any(u > 0 for u in seen["links"].values())  # the demo jobs' traffic
    assert any(u > 0.5 for u in seen["gpus"].values())  # and their GPUs
    assert seen["eager"] is False
    assert [f.kind for f in seen["faults"]][:1] == [FLAP]  # the first fault, on cue
    assert "the twin's first fault" in out.getvalue()
    assert app.conf.broker_url == settings.CELERY_BROKER_URL  # the worker stopped, settings restored


def _only_runserver(fake):
    real = demo_command.call_command

    def call(name, *args, **kwargs):
        return fake(name, *args, **kwargs) if name == "runserver" else real(name, *args, **kwargs)

    return call


def test_a_demo_too_big_for_its_poll_interval_stretches_it_and_says_so(monkeypatch):
    seen = {}

    def stand_in_for_the_web_server(name, *args, **kwargs):
        seen["interval"] = settings.TELEMETRY_INTERVAL_S
        seen["beat"] = next(e["schedule"] for e in app.conf.beat_schedule.values() if e["task"].endswith("poll_all"))
        demo = Cluster.objects.get(name="demo").pk
        deadline = time.monotonic() + 12
        while poller_status(demo)["rounds"] < 1 and time.monotonic() < deadline:
            time.sleep(0.2)  # the first round, sent at start
        seen["status"] = demo_command.Command()._cadence()

    # One poll of every node takes 7.9 s here (2,000 servers on a busy core): 15.8 s at half the process's time.
    monkeypatch.setattr(demo_command, "time_one_poll", lambda: (7.9, 2148))
    monkeypatch.setattr(demo_command, "call_command", _only_runserver(stand_in_for_the_web_server))
    out = StringIO()
    call_command("demo", "--nodes", "4", "--poll-interval", "5", stdout=out)
    status = seen.pop("status")  # what the 30 s status line shows
    assert re.fullmatch(r" \(demo: one round every \d+\.\d s, set 16 s\)", status), status
    assert seen == {"interval": 16.0, "beat": 16.0}
    assert (
        "live: one poll of all 2148 nodes takes 7.9 s of this one process, more than half of --poll-interval 5: it "
        "polls every 16 s instead" in out.getvalue()
    )
    assert "the twin is polled every 16 s" in out.getvalue()


def test_a_demo_that_can_keep_its_poll_interval_keeps_it(monkeypatch):
    seen = {}
    monkeypatch.setattr(demo_command, "time_one_poll", lambda: (2.4, 136))
    monkeypatch.setattr(
        demo_command,
        "call_command",
        _only_runserver(lambda *a, **k: seen.setdefault("interval", settings.TELEMETRY_INTERVAL_S)),
    )
    out = StringIO()
    call_command("demo", "--nodes", "4", "--poll-interval", "5", stdout=out)
    assert seen == {"interval": 5.0}
    assert "live: one poll of all 136 nodes takes 2.4 s of this process\n" in out.getvalue()
