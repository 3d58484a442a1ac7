"""Ingest of node samples: rates into the time series, latest state for the scheduler, alerts, no going back."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from fabric.collectors.samples import GpuSample, NodeSample, PortSample
from fabric.ingest import ingest_sample
from fabric.latest import latest_key, latest_utilisation
from fabric.models import GPU, Alert, GpuMetric, Port, PortMetric
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    cluster = fat_tree("ingest", nodes=2, gpus_per_node=8, leaf_ports=16)
    port = Port.objects.filter(cluster=cluster, hca__isnull=False).select_related("hca__node", "link").first()
    yield cluster, port
    cache.delete(latest_key(cluster.pk, port.hca.node.hostname))


def sample(port: Port, t: float, tx_units: int, *, state="ACTIVE", xid=(), symbol_error=0, util=50.0) -> NodeSample:
    host = port.hca.node.hostname
    p = PortSample(
        device=port.hca.device,
        port=port.number,
        state=state,
        counters={"port_xmit_data": tx_units, "port_rcv_data": tx_units // 2, "symbol_error": symbol_error},
    )
    g = GpuSample(index=0, utilisation_gpu_pct=util, memory_used_mib=1000, temperature_c=50, xid_events=list(xid))
    return NodeSample(node=host, collected_at=t, collector="test", gpus=[g], ports=[p])  # fmt: skip


def test_rates_reach_the_time_series_and_latest_state(node):
    cluster, port = node
    ingest_sample(cluster.pk, sample(port, 1000.0, 0))
    # 400 Gb/s link; 25 GB/s = 50 % -> 6.25e9 four-octet units in one second
    result = ingest_sample(cluster.pk, sample(port, 1001.0, 6_250_000_000))
    row = PortMetric.objects.get(port=port)
    assert row.tx_bytes_per_s == pytest.approx(25e9)
    assert row.utilisation == pytest.approx(0.5)
    assert result.link_utilisation == {port.link_id: pytest.approx(0.5)}
    links, gpus = latest_utilisation(cluster.pk, [port.hca.node.hostname])
    assert links[str(port.link_id)] == pytest.approx(0.5)
    gpu0 = GPU.objects.get(node=port.hca.node, index=0)
    assert gpus[gpu0.pk] == pytest.approx(0.5)
    assert GpuMetric.objects.filter(gpu=gpu0).count() == 2


def test_older_sample_is_ignored(node):
    cluster, port = node
    ingest_sample(cluster.pk, sample(port, 1000.0, 0))
    ingest_sample(cluster.pk, sample(port, 1002.0, 1000))
    late = ingest_sample(cluster.pk, sample(port, 1001.0, 500))
    assert not late.stored and "not newer" in late.ignored[port.hca.node.hostname]
    assert cache.get(latest_key(cluster.pk, port.hca.node.hostname))["at"] == 1002.0


def test_duplicate_sample_is_ignored(node):
    cluster, port = node
    ingest_sample(cluster.pk, sample(port, 1000.0, 0))
    again = ingest_sample(cluster.pk, sample(port, 1000.0, 0))
    assert not again.stored
    assert GpuMetric.objects.count() == 1


def test_counter_reset_gives_no_negative_rate(node):
    cluster, port = node
    ingest_sample(cluster.pk, sample(port, 1000.0, 10_000_000))
    ingest_sample(cluster.pk, sample(port, 1001.0, 100))
    assert PortMetric.objects.get(port=port).tx_bytes_per_s == pytest.approx(400)


def test_critical_xid_raises_alert_and_removes_gpu(node):
    cluster, port = node
    result = ingest_sample(cluster.pk, sample(port, 1000.0, 0, xid=[79]))
    assert result.alerts["raised"] == 1
    assert Alert.objects.get().rule == "gpu_xid_critical"
    assert GPU.objects.get(node=port.hca.node, index=0).health == "failed"


def test_link_down_alert_takes_the_link_down(node):
    cluster, port = node
    ingest_sample(cluster.pk, sample(port, 1000.0, 0))
    ingest_sample(cluster.pk, sample(port, 1001.0, 0, state="DOWN"))
    port.link.refresh_from_db()
    assert port.link.state == "down"
    assert Alert.objects.filter(rule="port_down", cleared_at__isnull=True).exists()


def test_scheduler_snapshot_reads_live_load(node):
    from scheduler.actions import ensure_scheduler
    from scheduler.snapshot_from_db import build_snapshot

    cluster, port = node
    ensure_scheduler(cluster)
    ingest_sample(cluster.pk, sample(port, 1000.0, 0, util=80.0))
    ingest_sample(cluster.pk, sample(port, 1001.0, 6_250_000_000, util=80.0))
    snapshot, _ = build_snapshot(cluster.pk)
    assert snapshot.link_utilisation[str(port.link_id)] == pytest.approx(0.5)
    gpu = next(g for n in snapshot.nodes if n.hostname == port.hca.node.hostname for g in n.gpus if g.index == 0)
    assert gpu.utilisation == pytest.approx(0.8)


def test_series_rows_written_twice_are_kept_once(node):
    """Two workers ingesting one batch at the same moment: the second COPY meets the first's rows."""
    from datetime import UTC, datetime

    from django.db import IntegrityError, transaction

    from clusterctl.bulk import copy_rows
    from fabric.ingest import PORT_COLUMNS

    _, port = node
    at = datetime.fromtimestamp(1000.0, tz=UTC)
    rows = [(port.pk, at, 1.0, 2.0, 0.0, 0.5, {"symbol_error": 3})]
    copy_rows(PortMetric, PORT_COLUMNS, rows, ignore_conflicts=True)
    copy_rows(PortMetric, PORT_COLUMNS, rows, ignore_conflicts=True)
    assert PortMetric.objects.get(port=port).errors == {"symbol_error": 3}
    with pytest.raises(IntegrityError), transaction.atomic():
        copy_rows(PortMetric, PORT_COLUMNS, rows)


def another_worker_stored_the_last_poll(cluster_id: int) -> None:
    """This process forgets what it stored: the next poll reads the previous sample from the cache, as a worker
    that did not ingest the last poll does."""
    from fabric import latest

    latest._MEMO.pop(cluster_id, None)


def test_an_uncabled_port_that_goes_down_is_found_from_the_cached_previous_state(node):
    cluster, port = node
    bare = PortSample(device="mlx5_9", port=1, state="ACTIVE", counters={"port_xmit_data": 0})
    first = sample(port, 1000.0, 0)
    first.ports.append(bare)
    ingest_sample(cluster.pk, first)
    another_worker_stored_the_last_poll(cluster.pk)
    later = sample(port, 1001.0, 1000)
    later.ports.append(PortSample(device="mlx5_9", port=1, state="DOWN", counters={"port_xmit_data": 0}))
    ingest_sample(cluster.pk, later)
    # Not cabled, so only the step from ACTIVE (the previous state, as cached) to DOWN makes it a finding.
    assert Alert.objects.filter(rule="port_down", object_key__endswith="mlx5_9/1", cleared_at__isnull=True).exists()


def test_new_uncorrectable_ecc_errors_are_counted_from_the_cached_previous_total(node):
    cluster, port = node
    first = sample(port, 1000.0, 0)
    first.gpus[0].ecc_uncorrected = 3
    ingest_sample(cluster.pk, first)
    another_worker_stored_the_last_poll(cluster.pk)
    later = sample(port, 1001.0, 1000)
    later.gpus[0].ecc_uncorrected = 5
    ingest_sample(cluster.pk, later)
    alert = Alert.objects.get(rule="gpu_ecc_uncorrected", cleared_at__isnull=True)
    assert alert.message.startswith("2 new uncorrectable ECC error(s)")


def test_the_cached_previous_state_holds_the_time_port_states_counters_and_ecc_totals(node):
    cluster, port = node
    first = sample(port, 1000.0, 7)
    first.gpus[0].ecc_uncorrected = 3
    ingest_sample(cluster.pk, first)
    state = cache.get(latest_key(cluster.pk, port.hca.node.hostname))
    assert state == {
        "at": 1000.0,
        "collector": "test",
        "errors": [],
        "ports": [
            (port.hca.device, port.number, "ACTIVE", {"port_xmit_data": 7, "port_rcv_data": 3, "symbol_error": 0})
        ],
        "gpus": [(0, 3)],
    }


def test_ports_listed_in_another_order_than_last_poll_get_their_own_rates(node):
    cluster, port = node
    other = Port.objects.filter(hca__node=port.hca.node).exclude(pk=port.pk).select_related("hca").first()

    def two_ports(t: float, a: int, b: int, flip: bool) -> NodeSample:
        s = sample(port, t, a)
        extra = PortSample(device=other.hca.device, port=other.number, state="ACTIVE", counters={"port_xmit_data": b})
        s.ports = [extra, *s.ports] if flip else [*s.ports, extra]
        return s

    ingest_sample(cluster.pk, two_ports(1000.0, 0, 0, flip=False))
    ingest_sample(cluster.pk, two_ports(1001.0, 1000, 5000, flip=True))
    rates = dict(PortMetric.objects.values_list("port_id", "tx_bytes_per_s"))  # the first poll has no rates
    assert rates == {port.pk: 4000.0, other.pk: 20000.0}  # 1,000 and 5,000 four-octet units in 1 s


def test_the_garbage_collector_is_paused_for_a_batch_and_left_as_it_was(node, monkeypatch):
    import gc

    import fabric.ingest

    cluster, port = node
    during: list[bool] = []
    real = fabric.ingest._node_rows
    monkeypatch.setattr(fabric.ingest, "_node_rows", lambda *a: during.append(gc.isenabled()) or real(*a))
    ingest_sample(cluster.pk, sample(port, 1000.0, 0))
    assert during == [False] and gc.isenabled()
    gc.disable()
    try:
        ingest_sample(cluster.pk, sample(port, 1001.0, 10))
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
