"""`field__any_of=ids`: membership in a long list of values as ONE array parameter on PostgreSQL.

`field__in=[...10,000 ids]` spells 10,000 placeholders: Django prepares each value, psycopg splits the long
query string to bind them, and PostgreSQL parses them all again. A scheduling round locks and updates that many
GPU ledgers and jobs at once, and at 10,000 GPUs those three steps were a third of its apply (issue 16).
`= ANY(%s::bigint[])` sends one array instead: same rows, same plan (an index scan), a statement of constant
size. Elsewhere (SQLite) it is the plain IN list."""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import EmptyResultSet
from django.db.models import Field, ForeignObject, Lookup


class AnyOf(Lookup):
    lookup_name = "any_of"
    prepare_rhs = False

    def get_prep_lookup(self) -> list:
        if isinstance(self.rhs, str | bytes) or not isinstance(self.rhs, Iterable):
            raise TypeError(f"{self.lookup_name} takes a list of values, not {type(self.rhs).__name__}")
        values = list(dict.fromkeys(self.rhs))  # unique, in order
        if all(type(v) is int for v in values):  # ids, the common case: nothing to prepare
            return values
        field = self.lhs.output_field
        return [field.get_prep_value(v) for v in values]

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        if not self.rhs:
            raise EmptyResultSet
        marks = ", ".join(["%s"] * len(self.rhs))
        return f"{lhs} IN ({marks})", (*lhs_params, *self.rhs)

    def as_postgresql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        db_type = self.lhs.output_field.db_type(connection)
        values = self.rhs
        if all(type(v) is int for v in values):  # as the array's text: psycopg would quote each number alone
            values = "{" + ",".join(map(str, values)) + "}"
        return f"{lhs} = ANY(%s::{db_type}[])", (*lhs_params, values)


def register() -> None:
    Field.register_lookup(AnyOf)
    ForeignObject.register_lookup(AnyOf)  # related fields read only the lookups registered from ForeignObject down
