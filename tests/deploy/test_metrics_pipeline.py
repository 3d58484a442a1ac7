"""/metrics exposes the control plane's own progress: beat's heartbeat, ingest lag, the inbox, the last poll."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from prometheus_client.parser import text_string_to_metric_families

from clusterctl.beat import HEARTBEAT_KEY, record_heartbeat
from fabric import inbox
from fabric.ingest import forget_liveness, record_answers, record_round
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


def scrape(client) -> dict[str, dict[tuple, float]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples}
        for f in text_string_to_metric_families(response.content.decode())
    }


@pytest.fixture
def cluster():
    c = fat_tree("progress", nodes=2, leaf_ports=16)
    yield c
    inbox.drain(c.pk)
    forget_liveness(c.pk)
    cache.delete(HEARTBEAT_KEY)


def test_beat_heartbeat_age(client, cluster):
    record_heartbeat(time.time() - 12)
    age = scrape(client)["clusterctl_beat_heartbeat_age_seconds"][()]
    assert 12 <= age < 20


def test_no_heartbeat_no_sample(client, cluster):
    cache.delete(HEARTBEAT_KEY)
    assert scrape(client)["clusterctl_beat_heartbeat_age_seconds"] == {}


def test_ingest_lag_inbox_and_last_poll(client, cluster):
    now = time.time()
    record_round(cluster.pk, now - 20, ["gpu0001", "gpu0002"])
    record_answers(cluster.pk, [], [], ingested_until=now - 40)  # the last batch started 40 s ago
    for _ in range(3):
        inbox.push(cluster.pk, {"node": "gpu0001"})  # waiting for a batch that has not run
    families = scrape(client)
    labels = (("cluster", "progress"),)
    assert families["clusterctl_telemetry_inbox_results"][labels] == 3
    assert 40 <= families["clusterctl_telemetry_ingest_lag_seconds"][labels] < 50
    assert 20 <= families["clusterctl_telemetry_last_poll_age_seconds"][labels] < 30


def test_ingest_is_caught_up_when_nothing_waits(client, cluster):
    record_answers(cluster.pk, [], [], ingested_until=time.time() - 40)
    assert scrape(client)["clusterctl_telemetry_ingest_lag_seconds"][(("cluster", "progress"),)] < 1
