"""/healthz reports the database, the broker and the beat's heartbeat; 503 when one fails, and a stale beat raises
an alert on every cluster (the check runs in the web process, which still runs when the beat is dead)."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache

from clusterctl import health
from clusterctl.beat import HEARTBEAT_KEY, record_heartbeat
from fabric.models import Alert
from fabric.telemetry.liveness import BEAT_STALLED
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def beat(settings):
    """A beat that ticked just now; the alert check is not throttled by an earlier test."""
    settings.BEAT_STALE_S = 30.0
    cache.delete(health.ALERT_CHECK_KEY)
    record_heartbeat()
    yield
    cache.delete_many([HEARTBEAT_KEY, health.ALERT_CHECK_KEY])


def test_healthy(client):
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json()["checks"] == {"database": "ok", "broker": "ok", "beat": "ok"}
    assert 0 <= resp.json()["beat_age_s"] < 5


def test_broker_down_is_503(client, settings):
    from clusterctl.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        resp = client.get("/healthz")
    finally:
        app.conf.broker_url = previous
    assert resp.status_code == 503
    assert resp.json()["status"] == "unavailable"
    assert resp.json()["checks"]["database"] == "ok"
    assert resp.json()["checks"]["broker"] != "ok"


def test_a_beat_silent_past_the_limit_is_degraded(client):
    record_heartbeat(time.time() - 45)
    resp = client.get("/healthz")
    assert resp.status_code == 503
    body = resp.json()
    assert body["status"] == "degraded" and body["checks"]["database"] == body["checks"]["broker"] == "ok"
    assert body["checks"]["beat"].startswith("stale: last tick 45 s ago by ")
    assert body["checks"]["beat"].endswith("(limit 30 s)")
    assert 45 <= body["beat_age_s"] < 50


def test_no_heartbeat_at_all_is_degraded_once_the_process_had_time_to_see_one(client, monkeypatch):
    cache.delete(HEARTBEAT_KEY)
    monkeypatch.setattr(health, "PROCESS_STARTED", time.time() - 5)
    assert client.get("/healthz").status_code == 200  # beat starts beside web: its first tick may still come
    monkeypatch.setattr(health, "PROCESS_STARTED", time.time() - 60)
    resp = client.get("/healthz")
    assert resp.status_code == 503 and resp.json()["checks"]["beat"].startswith("no beat has ticked")


def test_a_stale_beat_raises_one_alert_per_cluster_which_clears_when_it_ticks_again(client):
    clusters = [fat_tree("a", nodes=2, leaf_ports=16), fat_tree("b", nodes=2, leaf_ports=16)]
    record_heartbeat(time.time() - 45)
    client.get("/healthz")
    client.get("/healthz")  # asked again within ALERT_CHECK_S: nothing more is written
    alerts = Alert.objects.filter(rule=BEAT_STALLED, cleared_at__isnull=True)
    assert sorted(a.cluster_id for a in alerts) == sorted(c.pk for c in clusters)
    alert = alerts.first()
    assert (alert.severity, alert.object_kind, alert.object_key, alert.removes_capacity) == (
        "critical", "cluster", "cluster", False,
    )  # fmt: skip
    assert alert.message.startswith("beat's last tick was 45 s ago (limit 30 s)")
    record_heartbeat()
    cache.delete(health.ALERT_CHECK_KEY)  # ALERT_CHECK_S later
    assert client.get("/healthz").status_code == 200
    assert not Alert.objects.filter(rule=BEAT_STALLED, cleared_at__isnull=True).exists()
