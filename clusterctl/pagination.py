from __future__ import annotations

import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

_DIGITS = re.compile(r"[0-9]+")


class Pagination(LimitOffsetPagination):
    """?limit=&offset=; 100 by default, at most 10,000 rows a page (a whole GPU heat map).

    DRF's own LimitOffsetPagination reads `?offset=null` or `?limit=-5` as "not given" and clamps a limit over
    the maximum; here both must be whole numbers within the bounds the schema declares, or the answer is 400
    naming the parameter. The offset's bound keeps LIMIT/OFFSET within every database's integer range.
    """

    default_limit = 100
    max_limit = 10_000
    max_offset = 2**31 - 1

    def get_limit(self, request) -> int:
        return query_int(request, self.limit_query_param, 1, self.max_limit, self.default_limit)

    def get_offset(self, request) -> int:
        return query_int(request, self.offset_query_param, 0, self.max_offset, 0)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        limit, offset = super().get_schema_operation_parameters(view)
        limit["schema"].update(minimum=1, maximum=self.max_limit, default=self.default_limit)
        limit["description"] = f"Rows per page, 1-{self.max_limit:,} (default {self.default_limit})."
        offset["schema"].update(minimum=0, maximum=self.max_offset, default=0)
        offset["description"] = "How many rows to skip (default 0)."
        return [limit, offset]


def query_int(request, name: str, low: int, high: int, default: int) -> int:
    """A whole-number query parameter within [low, high] (`default` when absent); else 400 naming it."""
    values = request.query_params.getlist(name)
    if not values:
        return default
    if len(values) > 1:
        raise ValidationError({name: [f"give {name} once, not {len(values)} times"]})
    value = values[0]
    # The length first: int() of thousands of digits is refused by Python itself (and slow before that).
    if not _DIGITS.fullmatch(value) or len(value) > len(str(high)) or not low <= int(value) <= high:
        raise ValidationError({name: [f"{value[:40]!r} is not a whole number from {low} to {high:,}"]})
    return int(value)
