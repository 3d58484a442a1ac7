"""Every refusal of a submit has one shape (issue 14): field -> list of messages, whichever layer refused it (a
field's own check, the pool's capacity, the view), and the schema of POST /jobs/ declares exactly that shape."""

from __future__ import annotations

import jsonschema
import pytest
from django.test import override_settings
from drf_spectacular.generators import SchemaGenerator

from scheduler.api.serializers import JOB_WRITABLE, JobSerializer
from scheduler.models import PriorityClass
from scheduler.validation import check_request
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db


def _refusal(api, body: dict, **headers) -> dict:
    resp = api.post(JOBS, body, format="json", **headers)
    assert resp.status_code == 400, (resp.status_code, resp.content[:300])
    return resp.json()


# (body, the exact answer); pools by name, filled in by the test. Each case is refused at a different place.
CASES = {
    "field check": ({"name": "x", "pool": "mps", "gpus": 1, "fraction": 2},
                    {"fraction": ["Ensure this value is less than or equal to 1.0."]}),
    "pool capacity": ({"name": "x", "pool": "default", "gpus": 17},
                      {"gpus": ["asks for 17 GPUs; pool default has 16 in all"]}),
    "two capacity problems": ({"name": "x", "pool": "default", "gpus": 6, "nodes": 2, "gpus_per_node": 16},
                              {"gpus": ["gang of 2 nodes x 16 GPUs is 32 GPUs, not 6"],
                               "gpus_per_node": ["asks for 16 GPUs per node; the largest node of pool default has 8"]}),
    "shared gang (view)": ({"name": "x", "pool": "mps", "gpus": 2, "nodes": 2, "gpus_per_node": 1, "fraction": 0.5},
                           {"nodes": ["gangs run on whole GPUs (exclusive sharing)"]}),
    "dataset node (view)": ({"name": "x", "pool": "default", "gpus": 1, "dataset_node": "nowhere"},
                            {"dataset_node": ["nowhere is not a storage node of cluster sched"]}),
    "pool not named (view)": ({"name": "x", "gpus": 1}, {"pool": [
        "name the pool (this tenant has quotas in several or none)"]}),
    "env (nested)": ({"name": "x", "pool": "default", "gpus": 1, "env": {"A": 7}},
                     {"env": {"A": ["Not a valid string: give text, not a number, boolean, list or object."]}}),
    "not an object": ([1, 2], {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]}),
}  # fmt: skip


def _body(site, body):
    if isinstance(body, dict) and "pool" in body:
        return {**body, "pool": getattr(site, body["pool"]).pk}
    return body


@pytest.mark.parametrize("case", list(CASES))
def test_each_refusal_maps_fields_to_lists_of_messages(api_a, site, case):
    body, expected = CASES[case]
    assert _refusal(api_a, _body(site, body)) == expected


@override_settings(LAUNCHER="process")
def test_a_missing_command_is_a_list_too(api_a, site):
    assert _refusal(api_a, {"name": "x", "pool": site.default.pk, "gpus": 1}) == {
        "command": ["jobs run as processes on the nodes (LAUNCHER=process): give the command to run"]
    }


def test_a_malformed_idempotency_key_is_a_list_too(api_a, site):
    body = {"name": "x", "pool": site.default.pk, "gpus": 1}
    assert _refusal(api_a, body, HTTP_IDEMPOTENCY_KEY="a b") == {
        "Idempotency-Key": ["must be 1-64 letters, digits and . _ : - (for example a UUID)"]
    }


def test_check_request_itself_answers_lists(site):
    normal = PriorityClass.objects.get(name="normal")
    assert check_request(site.tenant_a, site.default, normal, {"gpus": 17}) == {
        "gpus": ["asks for 17 GPUs; pool default has 16 in all"]
    }


def _submit_400() -> dict:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return schema["paths"]["/api/v1/jobs/"]["post"]["responses"]["400"]["content"]["application/json"]["schema"]


def test_the_schema_lists_every_field_a_submit_can_be_refused_for():
    declared = _submit_400()
    assert declared["additionalProperties"] is False
    assert set(declared["properties"]) == {*JOB_WRITABLE, "Idempotency-Key", "non_field_errors", "detail"}
    assert declared["properties"]["gpus"] == {"type": "array", "items": {"type": "string"}}


def test_the_writable_fields_are_the_serializers():
    writable = {name for name, field in JobSerializer().fields.items() if not field.read_only}
    assert set(JOB_WRITABLE) == writable


@pytest.mark.parametrize("case", list(CASES))
def test_each_refusal_is_valid_against_the_declared_schema(api_a, site, case):
    jsonschema.validate(_refusal(api_a, _body(site, CASES[case][0])), _submit_400())
