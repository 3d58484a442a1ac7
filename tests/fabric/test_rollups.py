"""Time series upkeep: 1-minute and 1-hour rollups, retention, and the chart selector that reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric import actions, tasks
from fabric.models import GPU, GpuMetric, GpuMetricRollup, Port, PortMetric, PortMetricRollup
from fabric.selectors import metric_series, pick_resolution
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
MINUTE, HOUR = 60, 3600


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def gpu() -> GPU:
    cluster = fat_tree("rollups", nodes=2, gpus_per_node=2, leaf_ports=16)
    return GPU.objects.filter(node__cluster=cluster).select_related("node").first()


@pytest.fixture
def port(gpu) -> Port:
    return Port.objects.filter(cluster=gpu.node.cluster, hca__isnull=False).first()


def gpu_sample(gpu, seconds, util, *, memory=1000.0, temp=50.0, power=300.0):
    return GpuMetric.objects.create(
        gpu=gpu, at=at(seconds), utilisation_pct=util, memory_used_mib=memory, temperature_c=temp, power_w=power
    )


def port_sample(port, seconds, tx, *, errors=None):
    return PortMetric.objects.create(
        port=port, at=at(seconds), tx_bytes_per_s=tx, rx_bytes_per_s=tx / 2, xmit_wait_per_s=0.0,
        utilisation=tx / 50e9, errors=errors or {},
    )  # fmt: skip


def minute_rollup(gpu, seconds, *, samples, avg, peak):
    return GpuMetricRollup.objects.create(
        gpu=gpu, resolution_s=MINUTE, at=at(seconds), samples=samples, utilisation_pct_avg=avg,
        utilisation_pct_max=peak,
    )  # fmt: skip


def rollups(model=GpuMetricRollup, resolution_s=MINUTE):
    return {r.at: r for r in model.objects.filter(resolution_s=resolution_s)}


def all_rollups() -> list[dict]:
    return [row for model in (GpuMetricRollup, PortMetricRollup) for row in model.objects.order_by("pk").values()]


# Rollups


def test_minute_buckets_hold_count_average_and_max(gpu):
    for seconds, util, temp in [(0, 10, 40), (10, 20, 60), (20, 60, 50), (65, 40, 45), (120, 99, 99)]:
        gpu_sample(gpu, seconds, util, temp=temp)
    actions.rollup_metrics(now=at(121), resolutions=[MINUTE])
    buckets = rollups()
    assert sorted(buckets) == [at(0), at(60)]  # 12:02 is not complete yet
    first = buckets[at(0)]
    assert first.samples == 3
    assert first.utilisation_pct_avg == pytest.approx(30)
    assert first.utilisation_pct_max == pytest.approx(60)
    assert (first.temperature_c_avg, first.temperature_c_max) == (pytest.approx(50), pytest.approx(60))
    assert (buckets[at(60)].samples, buckets[at(60)].utilisation_pct_avg) == (1, pytest.approx(40))


def test_missing_readings_are_left_out_of_the_average(gpu):
    gpu_sample(gpu, 0, 10, power=None)
    gpu_sample(gpu, 10, 20, power=200.0)
    actions.rollup_metrics(now=at(60), resolutions=[MINUTE])
    bucket = GpuMetricRollup.objects.get()
    assert (bucket.samples, bucket.power_w_avg, bucket.power_w_max) == (2, pytest.approx(200), pytest.approx(200))


def test_port_minute_rollup_sums_error_counters(port):
    port_sample(port, 0, 10e9, errors={"symbol_error": 2})
    port_sample(port, 10, 30e9)
    port_sample(port, 20, 20e9, errors={"symbol_error": 1, "link_downed": 1})
    actions.rollup_metrics(now=at(60), resolutions=[MINUTE])
    bucket = PortMetricRollup.objects.get()
    assert bucket.samples == 3
    assert (bucket.tx_bytes_per_s_avg, bucket.tx_bytes_per_s_max) == (pytest.approx(20e9), pytest.approx(30e9))
    assert bucket.utilisation_max == pytest.approx(0.6)
    assert bucket.errors == {"symbol_error": 3, "link_downed": 1}
    assert bucket.errors_total == 4


def test_hour_from_minutes_is_weighted_by_sample_count(gpu):
    minute_rollup(gpu, 0, samples=6, avg=10.0, peak=20.0)
    minute_rollup(gpu, 30 * MINUTE, samples=2, avg=50.0, peak=90.0)
    minute_rollup(gpu, HOUR, samples=6, avg=70.0, peak=70.0)  # the next hour, not complete at 13:00:30
    actions.rollup_metrics(now=at(HOUR + 30), resolutions=[HOUR])
    hours = rollups(resolution_s=HOUR)
    assert list(hours) == [at(0)]
    assert hours[at(0)].samples == 8
    assert hours[at(0)].utilisation_pct_avg == pytest.approx((6 * 10 + 2 * 50) / 8)  # 20, not the plain mean 30
    assert hours[at(0)].utilisation_pct_max == pytest.approx(90)


def test_hour_sums_the_minutes_error_counters(port):
    for minute, errors in [(0, {"symbol_error": 2}), (1, {}), (59, {"symbol_error": 1, "link_downed": 1})]:
        port_sample(port, minute * MINUTE, 1e9, errors=errors)
    actions.rollup_metrics(now=at(HOUR + 1))
    hour = PortMetricRollup.objects.get(resolution_s=HOUR)
    assert (hour.samples, hour.errors, hour.errors_total) == (3, {"symbol_error": 3, "link_downed": 1}, 4)


def test_rerun_is_idempotent(gpu, port):
    for seconds in range(0, 180, 10):
        gpu_sample(gpu, seconds, seconds / 2)
        port_sample(port, seconds, 1e9, errors={"symbol_error": 1})
    actions.rollup_metrics(now=at(HOUR + 60))
    before = all_rollups()
    actions.rollup_metrics(now=at(HOUR + 60))
    actions.rollup_metrics(now=at(HOUR + 61))
    after = all_rollups()
    assert after == before  # same rows, same ids, same values
    assert GpuMetricRollup.objects.filter(resolution_s=MINUTE).count() == 3


def test_late_sample_reaggregates_its_bucket(gpu):
    gpu_sample(gpu, 10, 10)
    actions.rollup_metrics(now=at(90), resolutions=[MINUTE])
    assert GpuMetricRollup.objects.get(at=at(0)).utilisation_pct_avg == pytest.approx(10)
    gpu_sample(gpu, 50, 30)  # arrives after its minute was rolled up
    gpu_sample(gpu, 70, 5)
    actions.rollup_metrics(now=at(150), resolutions=[MINUTE])
    bucket = GpuMetricRollup.objects.get(at=at(0))
    assert (bucket.samples, bucket.utilisation_pct_avg, bucket.utilisation_pct_max) == (2, 20, 30)


def test_late_minute_reaches_its_hour(gpu):
    gpu_sample(gpu, 10, 10)
    actions.rollup_metrics(now=at(HOUR + 30))
    assert GpuMetricRollup.objects.get(resolution_s=HOUR).samples == 1
    gpu_sample(gpu, HOUR - 5, 30)  # the 12:59 minute, late
    actions.rollup_metrics(now=at(HOUR + 90))
    hour = GpuMetricRollup.objects.get(resolution_s=HOUR)
    assert (hour.samples, hour.utilisation_pct_avg) == (2, pytest.approx(20))


def test_backlog_is_rolled_up_in_bounded_chunks(gpu):
    for minute in range(0, 120, 7):
        gpu_sample(gpu, minute * MINUTE, minute)
    with CaptureQueriesContext(connection) as queries:
        counts = actions.rollup_metrics(now=at(2 * HOUR), resolutions=[MINUTE])
    inserts = [q["sql"] for q in queries if q["sql"].startswith('INSERT INTO "fabric_gpumetricrollup"')]
    assert len(inserts) == 4  # 120 minutes in chunks of 30
    assert counts["60s"]["gpu"] == GpuMetricRollup.objects.count() == len(range(0, 120, 7))


def test_long_backlog_is_worked_off_over_several_runs(gpu, monkeypatch):
    monkeypatch.setattr("fabric.actions.rollups.ROLLUP_MAX_CHUNKS", 1)  # 30 minutes per tier and run
    for minute in range(0, 120, 7):
        gpu_sample(gpu, minute * MINUTE, minute)
    actions.rollup_metrics(now=at(2 * HOUR))
    assert GpuMetricRollup.objects.filter(resolution_s=MINUTE).count() == len(range(0, 30, 7))
    assert not GpuMetricRollup.objects.filter(resolution_s=HOUR).exists()  # its minutes are not all there yet
    for _ in range(5):
        actions.rollup_metrics(now=at(2 * HOUR))
    assert GpuMetricRollup.objects.filter(resolution_s=MINUTE).count() == len(range(0, 120, 7))
    hours = GpuMetricRollup.objects.filter(resolution_s=HOUR).order_by("at")
    assert [h.samples for h in hours] == [len(range(0, 60, 7)), len(range(63, 120, 7))]


def test_finished_hours_are_not_recomputed_every_minute(gpu):
    for seconds in range(0, HOUR + 40 * MINUTE, 30):
        gpu_sample(gpu, seconds, 50)
    hour_rows = [actions.rollup_metrics(now=at(HOUR + m * MINUTE + 5))["3600s"]["gpu"] for m in range(30)]
    # 12:00 is written at 13:00, redone while its last minutes are (late samples), then left alone
    redone = 2 + actions.ROLLUP_LATE_BUCKETS[MINUTE]
    assert hour_rows == [1] * redone + [0] * (30 - redone)
    assert GpuMetricRollup.objects.get(resolution_s=HOUR).samples == 120


def test_rollup_task_runs_the_action(gpu):
    gpu_sample(gpu, 0, 10)
    tasks.rollup_metrics.apply()  # now: far past T0 and its retention, so the bucket is too old to store
    assert not GpuMetricRollup.objects.exists()
    GpuMetric.objects.update(at=datetime.now(UTC) - timedelta(minutes=5))
    tasks.rollup_metrics.apply()
    assert GpuMetricRollup.objects.filter(resolution_s=MINUTE).count() == 1


# Retention


@pytest.mark.parametrize(
    ("tier", "kept_age", "pruned_age"),
    [
        (0, timedelta(hours=23), timedelta(hours=25)),
        (MINUTE, timedelta(days=6), timedelta(days=8)),
        (HOUR, timedelta(days=89), timedelta(days=91)),
    ],
)
def test_prune_keeps_what_is_within_retention(gpu, port, tier, kept_age, pruned_age):
    now = at(0)
    for age in (kept_age, pruned_age):
        if tier == 0:
            GpuMetric.objects.create(gpu=gpu, at=now - age, utilisation_pct=1.0)
            PortMetric.objects.create(port=port, at=now - age, tx_bytes_per_s=1.0)
        else:
            GpuMetricRollup.objects.create(gpu=gpu, resolution_s=tier, at=now - age, samples=1)
            PortMetricRollup.objects.create(port=port, resolution_s=tier, at=now - age, samples=1)
    counts = actions.prune_metrics(now=now)
    suffix = "raw" if tier == 0 else f"{tier}s"
    assert counts[f"gpu_{suffix}"] == counts[f"port_{suffix}"] == 1
    assert sum(counts.values()) == 2
    for model in (GpuMetric, PortMetric) if tier == 0 else (GpuMetricRollup, PortMetricRollup):
        assert list(model.objects.values_list("at", flat=True)) == [now - kept_age]


def test_prune_follows_the_retention_settings(gpu, settings):
    settings.TELEMETRY_RETENTION_RAW_H = 1
    GpuMetric.objects.create(gpu=gpu, at=at(-2 * HOUR), utilisation_pct=1.0)
    GpuMetric.objects.create(gpu=gpu, at=at(-HOUR / 2), utilisation_pct=1.0)
    assert actions.prune_metrics(now=at(0))["gpu_raw"] == 1
    assert GpuMetric.objects.get().at == at(-HOUR / 2)


def test_prune_deletes_in_bounded_batches(gpu):
    GpuMetric.objects.bulk_create(GpuMetric(gpu=gpu, at=at(-2 * 86400 + i), utilisation_pct=1.0) for i in range(5))
    with CaptureQueriesContext(connection) as queries:
        counts = actions.prune_metrics(now=at(0), batch_size=2)
    deletes = [q["sql"] for q in queries if q["sql"].startswith('DELETE FROM "fabric_gpumetric"')]
    assert counts["gpu_raw"] == 5 and not GpuMetric.objects.exists()
    assert len(deletes) == 3  # 2 + 2 + 1
    assert all("LIMIT 2" in sql for sql in deletes)


# Chart selector


def test_resolution_follows_the_span():
    now = at(0)
    assert pick_resolution(now - timedelta(hours=1), now, 500, now=now) == 0  # 360 raw samples
    assert pick_resolution(now - timedelta(hours=24), now, 500, now=now) == MINUTE  # 8,640 raw: too many
    assert pick_resolution(now - timedelta(days=7), now, 500, now=now) == HOUR  # 10,080 minutes: too many
    assert pick_resolution(now - timedelta(days=365), now, 500, now=now) == HOUR


def test_resolution_skips_tiers_already_pruned():
    now = at(0)
    since = now - timedelta(days=2)  # 10 minutes, but two days ago: raw samples are gone
    assert pick_resolution(since, since + timedelta(minutes=10), 500, now=now) == MINUTE
    since = now - timedelta(days=30)
    assert pick_resolution(since, since + timedelta(minutes=10), 500, now=now) == HOUR


def test_series_reads_raw_samples_for_a_short_span(gpu):
    gpu_sample(gpu, 0, 10)
    gpu_sample(gpu, 10, 30)
    points = metric_series("gpu", gpu.pk, at(-60), at(60), now=at(60))
    assert [p[0] for p in points] == [at(0), at(10)]
    assert points[1][1]["utilisation_pct"] == points[1][1]["utilisation_pct_max"] == 30
    assert points[1][1]["samples"] == 1


def test_series_reads_rollups_for_a_long_span(port):
    for seconds in range(0, 2 * HOUR, 10):
        port_sample(port, seconds, 1e9 * (1 + seconds // HOUR), errors={"symbol_error": 1} if seconds == 0 else None)
    actions.rollup_metrics(now=at(2 * HOUR))
    points = metric_series("port", port.pk, at(0), at(2 * HOUR), now=at(2 * HOUR), max_points=100)
    assert len(points) == 100  # 120 minutes merged into 100 slots
    assert sum(p[1]["samples"] for p in points) == 720
    assert points[0][1]["errors_total"] == 1
    assert points[-1][1]["tx_bytes_per_s"] == pytest.approx(2e9)
    days = metric_series("port", port.pk, at(-3 * 86400), at(2 * HOUR), now=at(2 * HOUR), max_points=100)
    assert [p[0] for p in days] == [at(0), at(HOUR)]  # hour rollups
    assert days[0][1]["tx_bytes_per_s_max"] == pytest.approx(1e9) and days[0][1]["samples"] == 360


def test_series_is_capped_at_max_points_in_one_bounded_query(gpu):
    GpuMetric.objects.bulk_create(GpuMetric(gpu=gpu, at=at(i * 10), utilisation_pct=i % 2 * 100) for i in range(100))
    with CaptureQueriesContext(connection) as queries:
        points = metric_series("gpu", gpu.pk, at(0), at(1000), max_points=30, now=at(1000))
    assert len(queries) == 1 and "LIMIT 120" in queries[0]["sql"]
    assert len(points) <= 30
    assert sum(p[1]["samples"] for p in points) == 100
    weighted = sum(p[1]["utilisation_pct"] * p[1]["samples"] for p in points) / 100
    assert weighted == pytest.approx(50)
    assert max(p[1]["utilisation_pct_max"] for p in points) == 100
    assert [p[0] for p in points] == sorted(p[0] for p in points)


def test_series_refuses_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        metric_series("switch", 1, at(0), at(60))
