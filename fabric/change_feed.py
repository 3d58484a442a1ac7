"""Rows written since a reader's last read, on PostgreSQL: the change feed of the tables a scheduling round reads
every few seconds (scheduler.snapshot_from_db). Ground floor: the scheduler's migration reuses what fabric's makes.

A trigger stamps every inserted or updated row of a fed table with the writing transaction's id (`change_xid`), and
a statement trigger records each statement that deletes rows (or TRUNCATE) in `clusterctl_deletions`. Triggers
rather than code: they see every write, whatever made it (an action, the admin, a bulk update, SQL by hand).

A reader takes the `mark` before it reads, and next time reads the rows with change_xid >= that mark: every
transaction before the mark had ended when it was taken, so its writes were visible to the reads after it; writes by
the mark's transaction or later ones are read (again) next time, whenever they commit. A table with a deletion since
the mark is read whole. SQLite has neither the transaction ids nor the triggers: readers read everything there.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.backends.base.base import BaseDatabaseWrapper

# Run by the migrations that feed a table (fabric 0009: the functions and the deletions table, then per table): what
# they ran is in the databases, so a change here needs a migration of its own.
FUNCTIONS = [
    """CREATE FUNCTION clusterctl_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.change_xid := txid_current();
        RETURN NEW;
    END $$""",
    # One row per statement that deleted rows of a fed table, kept a week (readers read whole tables more often).
    "CREATE TABLE clusterctl_deletions (tbl text NOT NULL, xid bigint NOT NULL, at timestamptz NOT NULL DEFAULT now())",
    "CREATE INDEX clusterctl_deletions_tbl_xid ON clusterctl_deletions (tbl, xid)",
    """CREATE FUNCTION clusterctl_record_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM clusterctl_deletions WHERE at < now() - interval '7 days';
        INSERT INTO clusterctl_deletions (tbl, xid) VALUES (TG_TABLE_NAME, txid_current());
        RETURN NULL;
    END $$""",
]
NO_FUNCTIONS = [
    "DROP FUNCTION IF EXISTS clusterctl_record_deletion()",
    "DROP TABLE IF EXISTS clusterctl_deletions",
    "DROP FUNCTION IF EXISTS clusterctl_stamp_change()",
]


def feed_table(table: str) -> list[str]:
    """The triggers that feed `table` (it has a nullable bigint `change_xid`, indexed)."""
    return [
        f"""CREATE TRIGGER {table}_changed BEFORE INSERT OR UPDATE ON {table}
            FOR EACH ROW EXECUTE FUNCTION clusterctl_stamp_change()""",
        f"""CREATE TRIGGER {table}_deleted AFTER DELETE OR TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION clusterctl_record_deletion()""",
    ]


def unfeed_table(table: str) -> list[str]:
    return [f"DROP TRIGGER IF EXISTS {table}_deleted ON {table}", f"DROP TRIGGER IF EXISTS {table}_changed ON {table}"]


def on_postgresql(statements: list[str]):
    """A RunPython function that runs `statements` on PostgreSQL and nothing elsewhere."""

    def run(apps, schema_editor) -> None:
        if schema_editor.connection.vendor == "postgresql":
            for sql in statements:
                schema_editor.execute(sql, params=None)

    return run


def supported(connection: BaseDatabaseWrapper) -> bool:
    return connection.vendor == "postgresql"


def deleted_since(connection: BaseDatabaseWrapper, tables: Iterable[str], since: int | None) -> tuple[int, set[str]]:
    """In one statement: (the mark to read from next time, taken before the reads that follow; the tables of
    `tables` some statement deleted rows of since the mark `since`, none when `since` is None)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT txid_snapshot_xmin(txid_current_snapshot()), ARRAY(SELECT DISTINCT tbl FROM clusterctl_deletions "
            "WHERE %s IS NOT NULL AND tbl = ANY(%s) AND xid >= %s)",
            [since, list(tables), since],
        )
        mark, deleted = cursor.fetchone()
        return mark, set(deleted)


def written_since(connection: BaseDatabaseWrapper, tables: Iterable[str], since: int | None) -> tuple[int, bool, bool]:
    """In one statement: (the mark to read from next time; whether a row of `tables` was inserted, updated or deleted
    since the mark `since` (None: no), as far as this statement sees; whether this session's open transaction wrote
    any, which may yet be rolled back, leaving no trace for a later check to find). The mark is the statement's own
    snapshot's: a write it does not see has an id at or after it."""
    tables = list(tables)
    quote = connection.ops.quote_name
    since_any = " OR ".join(f"EXISTS (SELECT 1 FROM {quote(t)} WHERE change_xid >= %s)" for t in tables)
    own_any = " OR ".join(f"EXISTS (SELECT 1 FROM {quote(t)} WHERE change_xid = own.xid)" for t in tables)
    deleted = "EXISTS (SELECT 1 FROM clusterctl_deletions d WHERE d.tbl = ANY(%s) AND d.xid {} {})"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT txid_snapshot_xmin(txid_current_snapshot()), "
            f"%s IS NOT NULL AND ({since_any} OR {deleted.format('>=', '%s')}), "
            f"own.xid IS NOT NULL AND ({own_any} OR {deleted.format('=', 'own.xid')}) "
            "FROM (SELECT txid_current_if_assigned() AS xid) own",
            [since, *([since] * len(tables)), tables, since, tables],
        )
        mark, written, wrote = cursor.fetchone()
        return mark, bool(written), bool(wrote)
