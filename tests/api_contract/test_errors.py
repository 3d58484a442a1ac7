"""The API refuses what its schema does not allow, in one error shape, and its schema declares those answers."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

from fabric.models import Node, Switch
from scheduler import actions
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


@pytest.fixture
def cluster(db):
    cluster = fat_tree("errors", nodes=2, gpus_per_node=8, gpu_model="H100", leaf_ports=16, storage_nodes=1)
    actions.ensure_scheduler(cluster)
    return cluster


@pytest.fixture
def tenant_api_with_quota(cluster, tenant_user, tenant_api):
    tenant = actions.create_tenant("team")
    actions.set_quota(tenant, cluster.pools.get(is_default=True), guaranteed_gpus=8, borrow_limit=0)
    actions.add_member(tenant, tenant_user)
    return tenant_api


@pytest.fixture
def schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def _operations(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


#
# Pagination: whole numbers within the declared bounds, or 400 naming the parameter
#


def test_an_offset_that_is_not_a_whole_number_is_refused(operator_api, cluster):
    resp = operator_api.get("/api/v1/nodes/?offset=null")
    assert resp.status_code == 400
    assert resp.json() == {"offset": ["'null' is not a whole number from 0 to 2,147,483,647"]}


def test_a_limit_over_the_maximum_is_refused_not_clamped(operator_api, cluster):
    resp = operator_api.get("/api/v1/nodes/?limit=10001")
    assert resp.status_code == 400
    assert resp.json() == {"limit": ["'10001' is not a whole number from 1 to 10,000"]}


def test_a_pagination_parameter_given_twice_is_refused(operator_api, cluster):
    resp = operator_api.get("/api/v1/nodes/?limit=5&limit=6")
    assert resp.status_code == 400
    assert resp.json() == {"limit": ["give limit once, not 2 times"]}


def test_the_schema_declares_the_pagination_bounds(schema):
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/nodes/"]["get"]["parameters"]}
    assert parameters["limit"] == {"type": "integer", "minimum": 1, "maximum": 10_000, "default": 100}
    assert parameters["offset"] == {"type": "integer", "minimum": 0, "maximum": 2**31 - 1, "default": 0}


#
# Filters and ordering
#


def test_a_boolean_filter_that_is_neither_true_nor_false_is_refused(operator_api, cluster):
    resp = operator_api.get("/api/v1/gpus/?mig_enabled=null")
    assert resp.status_code == 400
    assert resp.json() == {"mig_enabled": ["must be true or false"]}


def test_an_empty_date_filter_is_refused(tenant_api_with_quota):
    resp = tenant_api_with_quota.get(f"{JOBS}?submitted_after=")
    assert resp.status_code == 400
    assert resp.json() == {"submitted_after": ["submitted_after is empty: give a value or leave it out"]}


def _job_submitted_at(api, when: str) -> int:
    from scheduler.models import Job

    resp = api.post(JOBS, {"name": "dated", "gpus": 1}, format="json")
    assert resp.status_code == 201, resp.content
    Job.objects.filter(pk=resp.json()["id"]).update(submitted_at=when)
    return resp.json()["id"]


def test_a_date_filter_with_an_offset_postgresql_refuses_is_read_in_utc(tenant_api_with_quota):
    # 2026-01-02T06:00-17:04 is 2026-01-02T23:04Z: after a job submitted at 12:00Z, so it is not listed.
    _job_submitted_at(tenant_api_with_quota, "2026-01-02T12:00:00Z")
    resp = tenant_api_with_quota.get(f"{JOBS}?submitted_after=2026-01-02T06:00:00-17:04")
    assert resp.status_code == 200 and resp.json()["results"] == []


def test_a_date_filter_with_a_large_positive_offset_lists_what_came_after_it_in_utc(tenant_api_with_quota):
    # 2026-01-02T20:00+17:30 is 2026-01-02T02:30Z: before 12:00Z, so the job is listed.
    job = _job_submitted_at(tenant_api_with_quota, "2026-01-02T12:00:00Z")
    resp = tenant_api_with_quota.get(f"{JOBS}?submitted_after=2026-01-02T20:00:00%2B17:30")
    assert resp.status_code == 200 and [j["id"] for j in resp.json()["results"]] == [job]


def test_a_date_that_utc_cannot_hold_is_refused(tenant_api_with_quota):
    resp = tenant_api_with_quota.get(f"{JOBS}?submitted_after=0001-01-01T00:00:00%2B05:00")
    assert resp.status_code == 400
    assert resp.json() == {"submitted_after": ["is out of range: give a date-time between years 1 and 9999 in UTC"]}


def test_an_integer_filter_refuses_a_fraction(operator_api, cluster):
    resp = operator_api.get("/api/v1/links/?width=0.5")
    assert resp.status_code == 400
    assert list(resp.json()) == ["width"]


def test_a_pool_filter_naming_no_pool_lists_nothing_instead_of_telling_which_pools_exist(tenant_api_with_quota):
    resp = tenant_api_with_quota.get("/api/v1/quotas/?pool=999999")
    assert resp.status_code == 200 and resp.json()["results"] == []


def test_an_empty_role_selects_the_switches_of_unknown_role(operator_api, cluster):
    Switch.objects.filter(cluster=cluster).update(role="spine")
    unknown = Switch.objects.filter(cluster=cluster).first()
    Switch.objects.filter(pk=unknown.pk).update(role="")
    resp = operator_api.get("/api/v1/switches/?role=")
    assert resp.status_code == 200
    assert [s["id"] for s in resp.json()["results"]] == [unknown.pk]


def test_ordering_by_a_field_that_is_not_offered_is_refused(operator_api, cluster):
    resp = operator_api.get("/api/v1/nodes/?ordering=-hostname,cpu")
    assert resp.status_code == 400
    assert resp.json() == {"ordering": ["cannot order by 'cpu': use hostname, rack, state ('-' first: descending)"]}


def test_the_schema_lists_the_ordering_fields(schema):
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/nodes/"]["get"]["parameters"]}
    assert parameters["ordering"]["schema"]["pattern"] == "^-?(hostname|rack|state)(,-?(hostname|rack|state))*$"


def test_a_text_query_parameter_declares_that_nul_is_refused(schema, operator_api, cluster):
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/nodes/"]["get"]["parameters"]}
    assert parameters["hostname__startswith"] == {"type": "string", "pattern": "^[^\\u0000]*$"}
    assert operator_api.get("/api/v1/nodes/?hostname__startswith=%00").status_code == 400


#
# Bodies: text is text, a boolean true or false, a length limit applies to what was sent
#


def test_a_text_field_refuses_a_number(operator_api, cluster):
    node = Node.objects.filter(cluster=cluster).first()
    resp = operator_api.patch(f"/api/v1/nodes/{node.pk}/", {"rack": 7}, format="json")
    assert resp.status_code == 400
    assert resp.json() == {"rack": ["Not a valid string: give text, not a number, boolean, list or object."]}


def test_a_boolean_in_a_form_body_is_true_or_false_not_0(operator_api, cluster):
    gpu = Node.objects.filter(cluster=cluster, role="compute").first().gpus.first()
    resp = operator_api.patch(f"/api/v1/gpus/{gpu.pk}/", {"mig_enabled": "0"}, format="multipart")
    assert resp.status_code == 400
    assert resp.json() == {"mig_enabled": ["Must be true or false."]}


def test_the_length_limit_counts_the_whitespace_that_was_sent(operator_api, cluster):
    node = Node.objects.filter(cluster=cluster).first()
    resp = operator_api.post(f"/api/v1/nodes/{node.pk}/drain/", {"reason": "x" + " " * 255}, format="json")
    assert resp.status_code == 400
    assert resp.json() == {"reason": ["Ensure this field has no more than 255 characters."]}


#
# One error shape
#


def test_a_field_error_raised_by_a_view_is_a_list_of_messages(tenant_api_with_quota):
    # perform_create raises {"dataset_node": "..."} itself; DRF would pass the bare string through.
    resp = tenant_api_with_quota.post(JOBS, {"name": "j", "gpus": 1, "dataset_node": "nowhere"}, format="json")
    assert resp.status_code == 400
    assert resp.json() == {"dataset_node": ["nowhere is not a storage node of cluster errors"]}


def test_a_path_no_route_matches_under_the_api_answers_json(tenant_api_with_quota):
    # An id with a dot matches no route (a detail route's id has none; a dot starts a format suffix).
    resp = tenant_api_with_quota.get(f"{JOBS}0.5/log/")
    assert (resp.status_code, resp["Content-Type"], resp.json()) == (404, "application/json", {"detail": "Not found."})


def test_every_operation_declares_the_errors_any_request_can_get(schema):
    for path, method, operation in _operations(schema):
        codes = set(operation["responses"])
        assert {"401", "403", "413", "429", "503"} <= codes, (method, path, codes)
        if "{" in path:
            assert "404" in codes, (method, path)
        if "requestBody" in operation or any(p["in"] == "query" for p in operation.get("parameters", [])):
            assert "400" in codes, (method, path)
        if "requestBody" in operation:
            assert "415" in codes, (method, path)


def test_a_body_that_is_not_one_the_operation_reads_is_refused_with_415(operator_api, cluster):
    resp = operator_api.post("/api/v1/clusters/", data=b"<x/>", content_type="application/xml")
    assert resp.status_code == 415
    assert resp.json() == {"detail": 'Unsupported media type "application/xml" in request.'}


def test_errors_are_declared_with_their_body_shapes(schema):
    responses = schema["paths"]["/api/v1/jobs/{id}/cancel/"]["post"]["responses"]
    body = {code: r["content"]["application/json"]["schema"]["$ref"] for code, r in responses.items() if code != "200"}
    assert body == {
        "400": "#/components/schemas/ValidationError",
        **{code: "#/components/schemas/Error" for code in ("401", "403", "404", "409", "413", "415", "429", "503")},
    }
    assert "Retry-After" in responses["429"]["headers"] and "Retry-After" in responses["503"]["headers"]


def test_the_log_declares_its_bounds(schema):
    (lines,) = [p for p in schema["paths"]["/api/v1/jobs/{id}/log/"]["get"]["parameters"] if p["name"] == "lines"]
    assert lines["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}


def test_a_priority_class_named_with_nul_is_a_400_not_a_database_error(tenant_api_with_quota):
    # schemathesis sent "\x96:\x00h" as priority_class: PostgreSQL refused the NUL in the lookup (a 500)
    resp = tenant_api_with_quota.post(JOBS, {"name": "j", "gpus": 1, "priority_class": "nor\x00mal"}, format="json")
    assert resp.status_code == 400
    assert resp.json() == {"priority_class": ["Null characters are not allowed."]}


def test_a_priority_class_named_by_a_number_is_refused(tenant_api_with_quota):
    resp = tenant_api_with_quota.post(JOBS, {"name": "j", "gpus": 1, "priority_class": 50}, format="json")
    assert resp.status_code == 400 and list(resp.json()) == ["priority_class"]


def test_an_empty_choice_in_a_form_body_is_refused_not_read_as_left_out(tenant_api_with_quota):
    # schemathesis: `gpus=1&name=0&workload=` queued a training job (DRF reads "" of an optional form field as absent)
    resp = tenant_api_with_quota.post(JOBS, {"gpus": "1", "name": "0", "workload": ""})
    assert resp.status_code == 400
    assert resp.json() == {"workload": ["This field may not be blank."]}
