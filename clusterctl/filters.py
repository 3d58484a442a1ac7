"""Filters that accept what the schema declares and answer 400 for the rest, shared by the apps' filtersets.

django-filter reads a filter it cannot parse as "no filter": `?held=null`, `?submitted_after=` or `?width=0.5` list
every row, so a typo silently widens a query. Here a typed filter's value must parse (a boolean is true or false,
an integer a whole number), a present filter must have a value (an empty text filter is the empty text), and a
filter takes one value unless it is a list; each failure is a 400 naming the parameter.
"""

from __future__ import annotations

import datetime as dt
import re

import django_filters as filters
from django import forms
from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import filters as drf_filters
from rest_framework.exceptions import ValidationError

MAX_ID = 2**63 - 1  # a BIGINT primary key
MAX_NUMBER = 1e50  # django-filter's own bound on a number filter


class _BooleanField(forms.Field):
    default_error_messages = {"invalid": "must be true or false"}

    def to_python(self, value):
        if value in (None, ""):
            return None
        text = str(value).lower()
        if text not in ("true", "false"):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return text == "true"


@extend_schema_field({"type": "boolean"})
class BooleanFilter(filters.BooleanFilter):
    field_class = _BooleanField


@extend_schema_field({"type": "integer"})
class IntegerFilter(filters.NumberFilter):
    field_class = forms.IntegerField


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(IntegerFilter):
    """An object's id: a whole number, 1 or more. An id that names no object matches nothing (it is no error,
    so a filter never tells a tenant which ids exist beyond its own)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


@extend_schema_field({"type": "number", "minimum": -MAX_NUMBER, "maximum": MAX_NUMBER})
class NumberFilter(filters.NumberFilter):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("min_value", -MAX_NUMBER)
        kwargs.setdefault("max_value", MAX_NUMBER)
        super().__init__(*args, **kwargs)

    def get_max_validator(self):
        return None  # max_value above, declared in the schema


class _UtcDateTimeField(filters.fields.IsoDateTimeField):
    """An ISO 8601 date-time, read in UTC. PostgreSQL refuses an offset beyond 15:59 (`?submitted_after=
    0735-03-12T23:31:38-17:04` was a DataError, a 500), so the value goes to the database as UTC; one that UTC
    cannot hold (year 1 with a positive offset) is a 400."""

    default_error_messages = {"out_of_range": "is out of range: give a date-time between years 1 and 9999 in UTC"}

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(dt.UTC)
        except OverflowError:
            raise forms.ValidationError(self.error_messages["out_of_range"], code="out_of_range") from None


@extend_schema_field({"type": "string", "format": "date-time"})
class DateTimeFilter(filters.IsoDateTimeFilter):
    field_class = _UtcDateTimeField


class ChoiceFilter(filters.ChoiceFilter):
    """A choice filter; where the choices include the empty value (a switch of unknown role), `?role=` selects it
    like any other choice instead of meaning "no filter"."""

    def filter(self, qs, value):
        if value == "" and self.field_name in self.parent.data and "" in dict(self.extra.get("choices", ())):
            return qs.filter(**{f"{self.field_name}__{self.lookup_expr}": ""})
        return super().filter(qs, value)


_INTEGERS = (
    models.AutoField, models.BigAutoField, models.SmallIntegerField, models.IntegerField, models.BigIntegerField,
    models.PositiveIntegerField, models.PositiveSmallIntegerField, models.PositiveBigIntegerField,
)  # fmt: skip


class StrictFilterSet(filters.FilterSet):
    FILTER_DEFAULTS = {
        **filters.FilterSet.FILTER_DEFAULTS,
        models.BooleanField: {"filter_class": BooleanFilter},
        **{field: {"filter_class": IntegerFilter} for field in _INTEGERS},
        models.FloatField: {"filter_class": NumberFilter},
        models.DecimalField: {"filter_class": NumberFilter},
        models.DateTimeField: {"filter_class": DateTimeFilter},
    }

    def get_form_class(self):
        base = super().get_form_class()
        declared = self.filters

        def clean(form):
            cleaned = base.clean(form)
            for name, filter_ in declared.items():
                values = form.data.getlist(name) if hasattr(form.data, "getlist") else [form.data.get(name)]
                values = [v for v in values if v is not None]
                if not values:
                    continue
                listed = isinstance(filter_, (filters.MultipleChoiceFilter, filters.BaseCSVFilter))
                if len(values) > 1 and not listed:
                    form.add_error(name, f"give {name} once, not {len(values)} times")
                elif "" in values and not isinstance(filter_, filters.CharFilter) and not _empty_is_a_choice(filter_):
                    form.add_error(name, f"{name} is empty: give a value or leave it out")
            return cleaned

        return type(base.__name__, (base,), {"clean": clean})


def _empty_is_a_choice(filter_) -> bool:
    return isinstance(filter_, ChoiceFilter) and "" in dict(filter_.extra.get("choices", ()))


class OrderingFilter(drf_filters.OrderingFilter):
    """`?ordering=a,-b`: every term must be one of the view's ordering fields (DRF ignores the others, so a typo
    silently changes the order); the schema lists them as a pattern."""

    def get_ordering(self, request, queryset, view):
        values = request.query_params.getlist(self.ordering_param)
        if not values:
            return self.get_default_ordering(view)
        name = self.ordering_param
        if len(values) > 1:
            raise ValidationError({name: [f"give {name} once, with its fields comma-separated"]})
        valid = self._valid(queryset, view, {"request": request})
        terms = [term.strip() for term in values[0].split(",")]
        bad = [term for term in terms if term.removeprefix("-") not in valid]
        if bad:
            raise ValidationError(
                {name: [f"cannot order by {bad[0][:40]!r}: use {', '.join(sorted(valid))} ('-' first: descending)"]}
            )
        return terms

    def get_template_context(self, request, queryset, view):
        # The browsable API draws the ordering menu even for a request whose ordering was refused.
        try:
            return super().get_template_context(request, queryset, view)
        except ValidationError:
            return {"request": request, "current": None, "param": self.ordering_param, "options": []}

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        model = getattr(getattr(view.get_serializer_class(), "Meta", None), "model", None)
        if model is None:
            return parameters
        names = "|".join(re.escape(n) for n in sorted(self._valid(model._default_manager.none(), view, {})))
        for parameter in parameters:
            parameter["schema"]["pattern"] = f"^-?({names})(,-?({names}))*$"
            parameter["description"] = "Comma-separated fields to order by, '-' first for descending: " + ", ".join(
                sorted(self._valid(model._default_manager.none(), view, {}))
            )
        return parameters

    def _valid(self, queryset, view, context) -> set[str]:
        return {item[0] for item in self.get_valid_fields(queryset, view, context)}
