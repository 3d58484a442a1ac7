"""Many plain rows into one table at once: COPY on PostgreSQL (no model instances, no SQL to compile),
bulk_create elsewhere. Shared by the scheduler's placements and telemetry's time series."""

from __future__ import annotations

import json
from contextlib import nullcontext

from django.db import IntegrityError, connection, models, transaction


def copy_rows(model, columns: list[str], rows: list[tuple], *, ignore_conflicts: bool = False) -> None:
    """Insert `rows` (values in `columns` order; a foreign key as `<name>_id`). JSON fields take Python values.

    With `ignore_conflicts`, a row already there makes COPY fail as a whole (inside a savepoint): then the rows
    go in through bulk_create skipping duplicates, which is rare and still correct. Without it, IntegrityError
    propagates as Django's (unique claims refuse a double insert; callers catch it to retry one by one)."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        fields = [model._meta.get_field(c.removesuffix("_id")) for c in columns]
        json_cols = {i for i, f in enumerate(fields) if isinstance(f, models.JSONField)}
        table = connection.ops.quote_name(model._meta.db_table)
        names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        try:
            with (
                transaction.atomic() if ignore_conflicts else nullcontext(),
                connection.cursor() as cursor,
                connection.wrap_database_errors,  # the raw psycopg COPY raises psycopg errors: make them Django's
                cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy,
            ):
                if json_cols:
                    rows = [_json_row(row, json_cols) for row in rows]
                for row in rows:
                    copy.write_row(row)
            return
        except IntegrityError:
            if not ignore_conflicts:
                raise
    model.objects.bulk_create(
        [model(**dict(zip(columns, row, strict=True))) for row in rows],
        batch_size=2000,
        ignore_conflicts=ignore_conflicts,
    )


def _json_row(row: tuple, json_cols: set[int]) -> list:
    # Most JSON values of a time series are empty (a port's error growth): no encoder call for those.
    out = list(row)
    for i in json_cols:
        v = out[i]
        out[i] = "{}" if v == {} else json.dumps(v)
    return out
