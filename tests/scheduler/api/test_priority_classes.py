"""Priority classes a tenant can find (issue 14): an unknown or too-high class is refused with the classes that exist
and those the tenant may ask for, and /api/v1/choices/ lists them."""

from __future__ import annotations

import pytest

from scheduler import actions
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db

CLASSES = "high (100), normal (50), low (10), best-effort (0)"


def _priority_error(api, site, name: str) -> list[str]:
    resp = api.post(JOBS, {"name": "x", "pool": site.default.pk, "gpus": 1, "priority_class": name}, format="json")
    assert resp.status_code == 400, resp.json()
    return resp.json()["priority_class"]


def test_an_unknown_class_is_refused_with_the_classes_there_are(api_a, site):
    # tenant-a has no max_priority: the default class (normal) and those below it.
    assert _priority_error(api_a, site, "critical") == [
        f'no priority class "critical": the classes are {CLASSES}; tenant tenant-a may ask for normal (50), low (10), '
        "best-effort (0)"
    ]


def test_an_unknown_class_for_a_tenant_allowed_high(api_a, site):
    actions.create_tenant("tenant-a", max_priority="high")
    assert _priority_error(api_a, site, "urgent") == [
        f'no priority class "urgent": the classes are {CLASSES}; tenant tenant-a may ask for {CLASSES}'
    ]


def test_a_class_above_the_tenants_allowance_names_the_allowed_ones(api_a, site):
    assert _priority_error(api_a, site, "high") == [
        "tenant tenant-a may ask for priority up to 50 (normal (50), low (10), best-effort (0)), not high (100)"
    ]


def test_choices_list_the_priority_classes_for_a_tenant(api_a, site):
    body = api_a.get("/api/v1/choices/").json()
    assert [(c["value"], c["priority"], c["allowed"]) for c in body["priority_class"]] == [
        ("high", 100, False), ("normal", 50, True), ("low", 10, True), ("best-effort", 0, True),
    ]  # fmt: skip
    low = body["priority_class"][2]
    assert (low["preemptible_default"], low["always_preemptible"]) == (True, True)
    assert low["label"] == "Runs when there is room; preempted first."


def test_choices_for_an_operator_say_nothing_of_a_tenant(ops_api, site):
    body = ops_api.get("/api/v1/choices/").json()
    assert [c["allowed"] for c in body["priority_class"]] == [None, None, None, None]


def test_the_schema_declares_the_priority_classes_of_choices():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    body = schema["paths"]["/api/v1/choices/"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert body["properties"]["priority_class"]["items"]["required"] == [
        "value", "label", "priority", "preemptible_default", "always_preemptible", "allowed",
    ]  # fmt: skip
