"""Serializer fields that accept what the schema says and nothing else.

DRF's own fields are lenient in ways the OpenAPI schema cannot say: a CharField takes the number 7 and stores "7",
a BooleanField takes 0, 1, "yes", "off" or "t". A client that sends those is mistaken (a string field given a
number is usually a client bug) and is better told so with a 400 naming the field. In form bodies (multipart,
as `curl -F` sends) every value is text, so there a boolean is "true" or "false", as the browsable API's
checkboxes send it.
"""

from __future__ import annotations

from django.db import models
from rest_framework import serializers


class _TextOnly:
    default_error_messages = {"not_text": "Not a valid string: give text, not a number, boolean, list or object."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_text")
        # The limit applies to what was sent: DRF would trim surrounding whitespace first and let a longer text in.
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class StrictCharField(_TextOnly, serializers.CharField):
    pass


class StrictSlugField(_TextOnly, serializers.SlugField):
    pass


class StrictSlugRelatedField(serializers.SlugRelatedField):
    """An object named by text: text only, and never NUL (PostgreSQL refuses it in a query: a DataError, a 500)."""

    default_error_messages = {
        "not_text": "Not a valid string: give text, not a number, boolean, list or object.",
        "null_characters": "Null characters are not allowed.",
    }

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_text")
        if "\x00" in data:
            self.fail("null_characters")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data.lower() in ("true", "false"):
            return data.lower() == "true"
        if self.allow_null and data in ("", "null", None):
            return None
        self.fail("invalid")


class StrictModelSerializer(serializers.ModelSerializer):
    """A ModelSerializer whose generated text and boolean fields are strict (explicit fields choose their own).

    In a form body DRF reads an empty value of an optional field as "not given" (`workload=` queued a training
    job): here it is the empty value, refused where the field takes no blank and no null."""

    def to_internal_value(self, data):
        if hasattr(data, "getlist"):  # a form body (QueryDict): JSON bodies already refuse "" where they should
            errors = {
                name: ["This field may not be blank."]
                for name, field in self.fields.items()
                if not field.read_only
                and name in data
                and data.get(name) == ""
                and not field.allow_null
                and not getattr(field, "allow_blank", False)
            }
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        models.SlugField: StrictSlugField,
        models.BooleanField: StrictBooleanField,
    }
