"""Many plain rows into one table at once: COPY on PostgreSQL (no model instances, no SQL to compile),
bulk_create elsewhere. Shared by the scheduler's placements and telemetry's time series."""

from __future__ import annotations

from contextlib import nullcontext

from django.db import IntegrityError, connection, transaction


def copy_rows(model, columns: list[str], rows: list[tuple], *, ignore_conflicts: bool = False) -> None:
    """Insert `rows` (values in `columns` order; a foreign key as `<name>_id`). JSON fields take Python values.

    With `ignore_conflicts`, a row already there makes COPY fail as a whole (inside a savepoint): then the rows
    go in through bulk_create skipping duplicates, which is rare and still correct. Without it, IntegrityError
    propagates as Django's (unique claims refuse a double insert; callers catch it to retry one by one)."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        fields = [model._meta.get_field(c.removesuffix("_id")) for c in columns]
        table = connection.ops.quote_name(model._meta.db_table)
        names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        try:
            with (
                transaction.atomic() if ignore_conflicts else nullcontext(),
                connection.cursor() as cursor,
                connection.wrap_database_errors,  # the raw psycopg COPY raises psycopg errors: make them Django's
            ):
                types = _column_types(cursor, model._meta.db_table, [f.column for f in fields])
                # Binary: the values go as they are, with no text to format and parse (a third of the time of
                # text COPY for a poll's 20,000 port rows); JSON columns take Python values, encoded by psycopg.
                with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(types)
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


_TYPES: dict[tuple[str, tuple[str, ...]], list[int]] = {}  # (table, columns) -> the columns' type OIDs


def _column_types(cursor, table: str, columns: list[str]) -> list[int]:
    """The PostgreSQL type of each column, as binary COPY needs them (once per table and column list)."""
    key = (table, tuple(columns))
    types = _TYPES.get(key)
    if types is None:
        cursor.execute(
            "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped",
            [table],
        )
        found = dict(cursor.fetchall())
        types = _TYPES[key] = [int(found[c]) for c in columns]
    return types
