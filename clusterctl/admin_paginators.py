"""Admin paginators for tables too big to COUNT(*) on every changelist page (time series: millions of rows)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property


class EstimatedCountPaginator(Paginator):
    """Counts without scanning the table.

    Unfiltered on PostgreSQL: the planner's row estimate (pg_class.reltuples, kept by autovacuum/ANALYZE),
    shown as "about N". Otherwise, or while the estimate is small or unknown: an exact count that stops at
    `cap` + 1 rows (COUNT over a LIMITed subquery), shown as "10,000+" past the cap. Pair it with
    `show_full_result_count = False` on the ModelAdmin, or the admin counts the whole table anyway.
    The admin shows `count_label` through templates/admin/fabric/pagination.html.
    """

    cap = 10_000

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.count_is_estimate = False
        self.count_is_capped = False

    @cached_property
    def count(self) -> int:
        items = self.object_list
        if not isinstance(items, QuerySet):
            return len(items)
        if not items.query.where and not items.query.is_sliced and not items.query.combinator:
            estimate = table_row_estimate(items)
            if estimate is not None and estimate > self.cap:
                self.count_is_estimate = True
                return estimate
        n = items.order_by()[: self.cap + 1].count()
        self.count_is_capped = n > self.cap
        return n

    @property
    def count_label(self) -> str:
        n = self.count
        if self.count_is_estimate:
            return f"about {n:,}"
        if self.count_is_capped:
            return f"{self.cap:,}+"
        return f"{n:,}"


def table_row_estimate(queryset: QuerySet) -> int | None:
    """PostgreSQL's estimate of the rows in the queryset's table; None elsewhere or before the first ANALYZE."""
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
            [connection.ops.quote_name(queryset.model._meta.db_table)],
        )
        row = cursor.fetchone()
    return row[0] if row and row[0] is not None and row[0] >= 0 else None
