"""Time series upkeep: rollups of raw samples into minutes and hours, and retention."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import NotSupportedError, connections, transaction
from django.db.models import Avg, Count, ExpressionWrapper, F, FloatField, JSONField, Max, Min, Q, QuerySet, Sum, Value
from django.db.models.functions import Trunc
from django.utils import timezone

from fabric.actions.common import BATCH, batches
from fabric.models.telemetry import (
    GpuMetric,
    GpuMetricRollup,
    PortMetric,
    PortMetricRollup,
    Resolution,
    bucket_start,
    retention,
)

log = logging.getLogger(__name__)


#
# Time series: rollups and retention. Raw samples (ingest) -> 1-minute buckets -> 1-hour buckets; beat runs both
# through fabric.tasks. Set-based SQL: one INSERT ... SELECT ... GROUP BY ... ON CONFLICT DO UPDATE per series
# and chunk of buckets (PostgreSQL and SQLite), so reruns are idempotent and a late sample re-aggregates its bucket.
#

# Buckets recomputed behind the newest stored one on every run: a sample that arrives up to this many buckets
# late (a slow ingest) still counts. The hour tier redoes the hours whose minutes were redone.
ROLLUP_LATE_BUCKETS = {Resolution.MINUTE: 3, Resolution.HOUR: 1}
# Buckets per statement (and transaction) while catching up on a backlog: bounded work per statement.
ROLLUP_CHUNK_BUCKETS = {Resolution.MINUTE: 30, Resolution.HOUR: 24}
# Chunks per tier and run: a long backlog (the task was down) is worked off over several runs.
ROLLUP_MAX_CHUNKS = 8
# Rows per DELETE when pruning: each batch is its own short transaction.
PRUNE_BATCH = 10_000


@dataclass(frozen=True)
class _Series:
    raw: type[GpuMetric] | type[PortMetric]
    rollup: type[GpuMetricRollup] | type[PortMetricRollup]
    owner: str  # the foreign key: "gpu" or "port"

    @property
    def fields(self) -> tuple[str, ...]:
        return self.raw.SERIES_FIELDS


SERIES = {"gpu": _Series(GpuMetric, GpuMetricRollup, "gpu"), "port": _Series(PortMetric, PortMetricRollup, "port")}


def _bucket_select(series: _Series, resolution_s: int, start: datetime, end: datetime) -> QuerySet:
    """SELECT of the rollup rows for buckets in [start, end); annotation "r_<column>" fills rollup column <column>."""
    aggregates: dict[str, Any] = {}
    if resolution_s == Resolution.MINUTE:
        source = series.raw.objects.filter(at__gte=start, at__lt=end)
        aggregates["r_samples"] = Count("pk")
        for name in series.fields:
            aggregates[f"r_{name}_avg"] = Avg(name)
            aggregates[f"r_{name}_max"] = Max(name)
    else:
        # Hours from minutes: averages weighted by each minute's sample count (over the minutes that have a value).
        source = series.rollup.objects.filter(resolution_s=Resolution.MINUTE, at__gte=start, at__lt=end)
        aggregates["r_samples"] = Sum("samples")
        for name in series.fields:
            avg, has = f"{name}_avg", Q(**{f"{name}_avg__isnull": False})
            weighted = Sum(F(avg) * F("samples"), filter=has, output_field=FloatField())
            aggregates[f"r_{avg}"] = ExpressionWrapper(weighted / Sum("samples", filter=has), output_field=FloatField())
            aggregates[f"r_{name}_max"] = Max(f"{name}_max")
    aggregates["r_resolution_s"] = Value(int(resolution_s))
    if series.owner == "port":
        # Error counters are summed afterwards in Python (_rollup_port_errors): rare, and JSON differs per database.
        aggregates["r_errors_total"] = Value(0)
        aggregates["r_errors"] = Value({}, output_field=JSONField())
    kind = "minute" if resolution_s == Resolution.MINUTE else "hour"
    return (
        source.annotate(r_at=Trunc("at", kind, tzinfo=UTC))
        .values(f"{series.owner}_id", "r_at")
        .annotate(**aggregates)
        .order_by()
    )


def _upsert_from_select(model, select: QuerySet, unique: list[str]) -> int:
    """INSERT INTO model (...) <select> ON CONFLICT (unique) DO UPDATE: one statement, no rows through Python."""
    conn = connections[select.db]
    if conn.vendor not in ("postgresql", "sqlite"):
        raise NotSupportedError(f"rollups need PostgreSQL or SQLite, not {conn.vendor}")
    compiler = select.query.get_compiler(using=select.db)
    select_sql, params = compiler.as_sql()
    columns = [(alias or expr.target.column).removeprefix("r_") for expr, _, alias in compiler.select]
    expected = {f.column for f in model._meta.concrete_fields if not f.primary_key}
    if set(columns) != expected:  # a new rollup field without its aggregate, or the reverse
        raise ValueError(f"rollup SELECT gives {sorted(columns)}, {model.__name__} has {sorted(expected)}")
    q = conn.ops.quote_name
    updates = ", ".join(f"{q(c)} = excluded.{q(c)}" for c in columns if c not in unique)
    sql = (
        f"INSERT INTO {q(model._meta.db_table)} ({', '.join(map(q, columns))}) {select_sql} "
        f"ON CONFLICT ({', '.join(map(q, unique))}) DO UPDATE SET {updates}"
    )
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        return max(cursor.rowcount, 0)


def _rollup_port_errors(resolution_s: int, start: datetime, end: datetime) -> None:
    """Sum error counter growth per counter into the port rollups of [start, end) (few rows have any)."""
    if resolution_s == Resolution.MINUTE:
        rows = PortMetric.objects.filter(at__gte=start, at__lt=end).exclude(errors={})
    else:
        rows = PortMetricRollup.objects.filter(
            resolution_s=Resolution.MINUTE, at__gte=start, at__lt=end, errors_total__gt=0
        )
    sums: dict[tuple[int, datetime], dict[str, float]] = {}
    for port_id, at, errors in rows.values_list("port_id", "at", "errors").iterator(chunk_size=BATCH):
        acc = sums.setdefault((port_id, bucket_start(at, resolution_s)), {})
        for counter, growth in (errors or {}).items():
            acc[counter] = acc.get(counter, 0) + growth
    ports = sorted({port_id for port_id, _ in sums})
    for chunk in batches(ports, 1000):
        changed = []
        for rollup in PortMetricRollup.objects.filter(
            resolution_s=resolution_s, at__gte=start, at__lt=end, port_id__in=chunk
        ).only("pk", "port_id", "at"):
            acc = sums.get((rollup.port_id, rollup.at))
            if acc:
                rollup.errors, rollup.errors_total = acc, round(sum(acc.values()))
                changed.append(rollup)
        PortMetricRollup.objects.bulk_update(changed, ["errors", "errors_total"], batch_size=500)


def _rollup_start(
    series: _Series, resolution_s: int, now: datetime, rewritten_from: datetime | None = None
) -> datetime | None:
    """First bucket to (re)compute, None when there is nothing to roll up.

    The bucket after the newest stored one, and also: the buckets whose source rows this run rewrote
    (`rewritten_from`, the finer tier's first rewritten bucket), or without that the last few
    (ROLLUP_LATE_BUCKETS). With nothing stored yet, the oldest source row. Never a bucket retention would delete.
    """
    latest = series.rollup.objects.filter(resolution_s=resolution_s).aggregate(m=Max("at"))["m"]
    if latest is None:
        source = series.raw.objects.all()
        if resolution_s != Resolution.MINUTE:
            source = series.rollup.objects.filter(resolution_s=Resolution.MINUTE)
        oldest = source.aggregate(m=Min("at"))["m"]
        if oldest is None:
            return None
        start = bucket_start(oldest, resolution_s)
    elif rewritten_from is not None:
        start = min(latest + timedelta(seconds=resolution_s), bucket_start(rewritten_from, resolution_s))
    else:
        start = latest - timedelta(seconds=ROLLUP_LATE_BUCKETS[resolution_s] * resolution_s)
    return max(start, bucket_start(now - retention(resolution_s), resolution_s))


def rollup_metrics(
    now: datetime | None = None, resolutions: Iterable[int] = (Resolution.MINUTE, Resolution.HOUR)
) -> dict[str, dict[str, int]]:
    """Aggregate every complete bucket not rolled up yet (and the last few again) into the rollup tables.

    1-minute buckets from the raw samples, then 1-hour buckets from the 1-minute ones; a bucket is complete once
    `now` is past its end. When both tiers run, the hour tier redoes only the hours whose minutes were rewritten,
    and a backlog is worked off at most ROLLUP_MAX_CHUNKS chunks per tier and run. Idempotent: rerunning writes
    the same rows. Returns rows written per resolution and series, e.g.
    {"60s": {"gpu": 960, "port": 2400}, "3600s": {"gpu": 0, "port": 0}}.
    """
    now = now or timezone.now()
    counts: dict[str, dict[str, int]] = {}
    rewritten: dict[str, tuple[datetime, datetime]] = {}  # series -> [from, to) the finer tier covered this run
    for resolution_s in sorted(int(r) for r in resolutions):
        Resolution(resolution_s)  # ValueError for anything but 60 and 3600
        step = timedelta(seconds=ROLLUP_CHUNK_BUCKETS[resolution_s] * resolution_s)
        written = counts[f"{resolution_s}s"] = {}
        for name, series in SERIES.items():
            written[name] = 0
            end = bucket_start(now, resolution_s)
            finer = rewritten.get(name)
            if finer is not None:  # no further than the finer tier got
                end = min(end, bucket_start(finer[1], resolution_s))
            start = _rollup_start(series, resolution_s, now, finer[0] if finer else None) or end
            first, chunks = start, 0
            while start < end and chunks < ROLLUP_MAX_CHUNKS:
                stop = min(start + step, end)
                with transaction.atomic():
                    select = _bucket_select(series, resolution_s, start, stop)
                    written[name] += _upsert_from_select(series.rollup, select, [f"{name}_id", "resolution_s", "at"])
                    if name == "port":
                        _rollup_port_errors(resolution_s, start, stop)
                start, chunks = stop, chunks + 1
            rewritten[name] = (min(first, start), start)
    log.debug("rollup_metrics at %s: %s", now, counts)
    return counts


def _delete_in_batches(queryset: QuerySet, batch_size: int) -> int:
    """Delete the rows of `queryset` batch_size at a time, each DELETE in its own short transaction."""
    total = 0
    while True:
        batch = queryset.model.objects.filter(pk__in=queryset.values("pk")[:batch_size])
        with transaction.atomic():
            deleted, _ = batch.delete()
        total += deleted
        if deleted < batch_size:
            return total


def prune_metrics(now: datetime | None = None, batch_size: int = PRUNE_BATCH) -> dict[str, int]:
    """Delete samples past retention: raw after TELEMETRY_RETENTION_RAW_H hours, 1-minute rollups after
    TELEMETRY_RETENTION_MINUTE_D days, 1-hour rollups after TELEMETRY_RETENTION_HOUR_D days. Returns rows deleted."""
    now = now or timezone.now()
    counts: dict[str, int] = {}
    for name, series in SERIES.items():
        counts[f"{name}_raw"] = _delete_in_batches(series.raw.objects.filter(at__lt=now - retention(0)), batch_size)
        for resolution_s in (Resolution.MINUTE, Resolution.HOUR):
            old = series.rollup.objects.filter(resolution_s=resolution_s, at__lt=now - retention(resolution_s))
            counts[f"{name}_{resolution_s}s"] = _delete_in_batches(old, batch_size)
    log.debug("prune_metrics at %s: %s", now, counts)
    return counts
