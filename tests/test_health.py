"""/healthz reports the database and the broker, and fails when one is unreachable."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_healthy(client):
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json()["checks"] == {"database": "ok", "broker": "ok"}


def test_broker_down_is_503(client, settings):
    from clusterctl.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        resp = client.get("/healthz")
    finally:
        app.conf.broker_url = previous
    assert resp.status_code == 503
    assert resp.json()["checks"]["database"] == "ok"
    assert resp.json()["checks"]["broker"] != "ok"
