from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    """?limit=&offset=; 100 by default, at most 10,000 rows a page (a whole GPU heat map)."""

    default_limit = 100
    max_limit = 10_000
