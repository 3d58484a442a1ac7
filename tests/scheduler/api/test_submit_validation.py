"""Submitting jobs: impossible requests get 400 with a field error naming the problem and store nothing;
possible ones are queued (201, pending, a "submitted" event). Cancel, and the operator's hold, release and
requeue, with 409 for a move the job's state does not allow."""

from __future__ import annotations

import pytest

from fabric.models import Node
from scheduler import actions
from scheduler.models import Allocation, Job, JobEvent
from tests.factories import fat_tree
from tests.scheduler.api.helpers import JOBS, start

pytestmark = pytest.mark.django_db


def _refused(api, body: dict, field: str, *words: str) -> dict:
    """POST must answer 400 with an error on `field` whose text contains every one of `words`."""
    jobs = Job.objects.count()
    resp = api.post(JOBS, body, format="json")
    assert resp.status_code == 400, (resp.status_code, resp.content[:300])
    errors = resp.json()
    assert field in errors, errors
    text = str(errors[field]).lower()
    for word in words:
        assert word.lower() in text, (field, errors[field], word)
    assert Job.objects.count() == jobs, "a refused request stores nothing"
    return errors


@pytest.fixture
def exclusive(site):
    return {"name": "train", "pool": site.default.pk}


@pytest.fixture
def mps(site):
    return {"name": "infer", "pool": site.mps.pk, "gpus": 1}


@pytest.fixture
def mig(site):
    return {"name": "notebook", "pool": site.mig.pk, "gpus": 1}


#
# Refused: the pool cannot run it
#


def test_more_gpus_than_the_pool_has(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 17}, "gpus", "17", "16")


def test_gpu_model_the_pool_lacks(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "gpu_model": "A100"}, "gpu_model", "A100", "H100")


def test_more_gpu_memory_than_any_gpu_has(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "gpu_memory_mib": 200_000}, "gpu_memory_mib", "200000")


def test_gang_whose_shape_does_not_multiply_to_gpus(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 6, "nodes": 2, "gpus_per_node": 4}, "gpus", "2 nodes", "4", "8", "6")


def test_gang_with_nodes_but_no_gpus_per_node(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 8, "nodes": 2}, "nodes", "gpus_per_node")


def test_gang_with_more_gpus_per_node_than_any_node(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 16, "nodes": 1, "gpus_per_node": 16}, "gpus_per_node", "16", "8")


def test_mig_job_in_an_exclusive_pool(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "sharing": "mig", "mig_profile": "1g.10gb"}, "sharing", "exclusive")


def test_mps_job_in_an_exclusive_pool(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "sharing": "mps", "fraction": 0.5}, "sharing", "exclusive", "mps")


def test_exclusive_job_in_an_mps_pool(api_a, mps):
    _refused(api_a, {**mps, "sharing": "exclusive"}, "sharing", "mps", "exclusive")


def test_shared_gang_is_refused(api_a, mps):
    _refused(api_a, {**mps, "gpus": 2, "nodes": 2, "gpus_per_node": 1, "fraction": 0.5}, "nodes", "exclusive")


#
# Refused: fractions, MIG profiles
#


@pytest.mark.parametrize("fraction", [1.5, 1.01, 2], ids=str)
def test_fraction_above_one(api_a, mps, fraction):
    _refused(api_a, {**mps, "fraction": fraction}, "fraction")


@pytest.mark.parametrize("fraction", [0, 0.0, -0.25, -1], ids=str)
def test_fraction_zero_or_negative(api_a, mps, fraction):
    _refused(api_a, {**mps, "fraction": fraction}, "fraction")


def test_mps_job_without_fraction(api_a, mps):
    _refused(api_a, mps, "fraction", "fraction")


def test_fraction_on_an_exclusive_job(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "fraction": 0.5}, "fraction", "mps")


def test_mps_memory_above_the_gpus(api_a, mps):
    _refused(api_a, {**mps, "fraction": 0.5, "mps_memory_mib": 100_000}, "mps_memory_mib", "100000")


@pytest.mark.parametrize("profile", ["1g.5gb", "9g.99gb", "7g.40gb", "3g.40GB", "bogus"])
def test_mig_profile_the_gpu_model_lacks(api_a, mig, profile):
    _refused(api_a, {**mig, "mig_profile": profile}, "mig_profile", profile, "H100", "1g.10gb")


def test_mig_job_without_profile(api_a, mig):
    _refused(api_a, mig, "mig_profile", "profile")


def test_mig_profile_on_an_exclusive_job(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "mig_profile": "1g.10gb"}, "mig_profile", "mig")


#
# Refused: numbers out of range
#


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpus", -1),
        ("gpus", 0),
        ("est_runtime_s", -5),
        ("est_runtime_s", 0),
        ("checkpoint_cost_s", -1),
        ("grace_period_s", -1),
        ("nodes", -1),
        ("gpus_per_node", -2),
        ("gpu_memory_mib", -1),
        ("gpus", "eight"),
        ("gpus", 1.5),
    ],
    ids=lambda v: str(v),
)
def test_negative_or_invalid_number(api_a, exclusive, field, value):
    body = {**exclusive, "gpus": 1, field: value}
    _refused(api_a, body, field)


def test_missing_gpus(api_a, exclusive):
    _refused(api_a, exclusive, "gpus", "required")


def test_unknown_priority_class(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "priority_class": "urgent"}, "priority_class", "urgent")


def test_unknown_pool(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "pool": 999_999}, "pool")


def test_without_pool_when_the_tenant_has_quotas_in_several(api_a):
    _refused(api_a, {"name": "x", "gpus": 1}, "pool", "pool")


#
# Refused: datasets
#


def test_data_intensive_job_without_dataset_node(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "workload": "data-intensive"}, "dataset_node", "storage")


def test_dataset_node_that_is_not_a_storage_node(site, api_a, exclusive):
    body = {**exclusive, "gpus": 1, "workload": "data-intensive", "dataset_node": site.compute[0].hostname}
    _refused(api_a, body, "dataset_node", site.compute[0].hostname)


def test_dataset_node_that_does_not_exist(api_a, exclusive):
    _refused(api_a, {**exclusive, "gpus": 1, "workload": "data-intensive", "dataset_node": "nosuch01"}, "dataset_node")


def test_dataset_node_in_another_cluster(site, api_a, exclusive):
    fat_tree("other", nodes=1, gpus_per_node=8, leaf_ports=16, storage_nodes=1, name_prefix="o-")
    far = Node.objects.get(cluster__name="other", role="storage")
    body = {**exclusive, "gpus": 1, "workload": "data-intensive", "dataset_node": far.hostname}
    _refused(api_a, body, "dataset_node", far.hostname, "sched")


def test_dataset_node_hostname_shared_by_two_clusters_resolves_in_the_pools_cluster(site, api_a, exclusive):
    fat_tree("other", nodes=1, gpus_per_node=8, leaf_ports=16, storage_nodes=1)  # also has "stor01"
    assert Node.objects.filter(hostname=site.storage.hostname, role="storage").count() == 2
    body = {**exclusive, "gpus": 1, "workload": "data-intensive", "dataset_node": site.storage.hostname}
    resp = api_a.post(JOBS, body, format="json")
    assert resp.status_code == 201, (resp.status_code, resp.content[:200])
    assert Job.objects.get(pk=resp.json()["id"]).dataset_node == site.storage


#
# Accepted
#


def test_exclusive_job_is_queued(site, api_a, exclusive):
    resp = api_a.post(JOBS, {**exclusive, "gpus": 8}, format="json")
    assert resp.status_code == 201, resp.json()
    body = resp.json()
    assert (body["status"], body["tenant"], body["pool"], body["sharing"]) == (
        "pending",
        "tenant-a",
        site.default.pk,
        "exclusive",
    )
    job = Job.objects.get(pk=body["id"])
    assert (job.status, job.gpus, job.priority_class.name) == ("pending", 8, "normal")
    assert list(job.events.values_list("from_status", "to_status", "reason")) == [("", "pending", "submitted")]


def test_gang_job_is_queued(api_a, exclusive):
    resp = api_a.post(JOBS, {**exclusive, "gpus": 16, "nodes": 2, "gpus_per_node": 8}, format="json")
    assert resp.status_code == 201, resp.json()
    assert (resp.json()["nodes"], resp.json()["gpus_per_node"]) == (2, 8)


def test_mps_fraction_is_stored_as_percent_and_returned_as_fraction(api_a, mps):
    resp = api_a.post(JOBS, {**mps, "fraction": 0.25}, format="json")
    assert resp.status_code == 201, resp.json()
    assert resp.json()["fraction"] == 0.25
    assert resp.json()["sharing"] == "mps"
    job = Job.objects.get(pk=resp.json()["id"])
    assert job.mps_compute_pct == 25
    assert api_a.get(f"{JOBS}{job.pk}/").json()["fraction"] == 0.25


def test_mps_whole_gpu_fraction_is_accepted(api_a, mps):
    resp = api_a.post(JOBS, {**mps, "fraction": 1}, format="json")
    assert resp.status_code == 201, resp.json()
    assert Job.objects.get(pk=resp.json()["id"]).mps_compute_pct == 100


@pytest.mark.parametrize("profile", ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"])
def test_mig_job_with_a_valid_profile_is_queued(api_a, mig, profile):
    resp = api_a.post(JOBS, {**mig, "mig_profile": profile}, format="json")
    assert resp.status_code == 201, resp.json()
    assert (resp.json()["sharing"], resp.json()["mig_profile"]) == ("mig", profile)


def test_data_intensive_job_names_its_storage_node(site, api_a, exclusive):
    body = {**exclusive, "gpus": 8, "workload": "data-intensive", "dataset_node": site.storage.hostname}
    resp = api_a.post(JOBS, body, format="json")
    assert resp.status_code == 201, resp.json()
    assert Job.objects.get(pk=resp.json()["id"]).dataset_node == site.storage


def test_preemptible_defaults_to_the_priority_class(site, api_a):
    actions.create_tenant("tenant-a", description="team A", max_priority="high")
    for name, expected in (("normal", True), ("high", False)):
        body = {"name": name, "pool": site.default.pk, "gpus": 1, "priority_class": name}
        resp = api_a.post(JOBS, body, format="json")
        assert resp.status_code == 201, resp.json()
        assert Job.objects.get(pk=resp.json()["id"]).preemptible is expected


def test_preemptible_can_be_turned_off_explicitly(site, api_a):
    resp = api_a.post(JOBS, {"name": "x", "pool": site.default.pk, "gpus": 1, "preemptible": False}, format="json")
    assert resp.status_code == 201
    assert Job.objects.get(pk=resp.json()["id"]).preemptible is False


def test_form_encoded_submit_without_preemptible_takes_the_class_default(site, api_a):
    resp = api_a.post(JOBS, {"name": "form", "pool": site.default.pk, "gpus": 1})  # multipart, as curl -F sends
    assert resp.status_code == 201, resp.json()
    assert Job.objects.get(pk=resp.json()["id"]).preemptible is True


@pytest.mark.parametrize(
    "env", [[1, 2], "PATH=/bin", 5, {"A": {"nested": 1}}], ids=["list", "string", "number", "nested"]
)
def test_env_must_be_an_object_of_strings(api_a, exclusive, env):
    _refused(api_a, {**exclusive, "gpus": 1, "env": env}, "env")


def test_env_of_strings_is_stored(api_a, exclusive):
    resp = api_a.post(JOBS, {**exclusive, "gpus": 1, "env": {"NCCL_DEBUG": "INFO"}}, format="json")
    assert resp.status_code == 201
    assert Job.objects.get(pk=resp.json()["id"]).env == {"NCCL_DEBUG": "INFO"}


def test_only_pool_with_quota_is_the_default(site, django_user_model):
    from tests.scheduler.api.helpers import token_client

    solo = actions.create_tenant("solo")
    actions.set_quota(solo, site.mps, guaranteed_gpus=1, borrow_limit=0)
    user = django_user_model.objects.create_user("sam", "sam@example.org", "pw")
    actions.add_member(solo, user)
    resp = token_client(user).post(JOBS, {"name": "x", "gpus": 1, "fraction": 0.5}, format="json")
    assert resp.status_code == 201, resp.json()
    assert resp.json()["pool"] == site.mps.pk


#
# Detail: placement and events
#


def test_pending_job_detail_has_empty_placement_and_its_events(api_a, exclusive):
    job_id = api_a.post(JOBS, {**exclusive, "gpus": 4}, format="json").json()["id"]
    body = api_a.get(f"{JOBS}{job_id}/").json()
    assert body["placement"] == []
    assert [(e["from_status"], e["to_status"], e["reason"]) for e in body["events"]] == [("", "pending", "submitted")]


def test_running_job_detail_shows_its_gpus(site, api_a, submit):
    job = start(submit(site.tenant_a, site.default, "r", gpus=4))
    body = api_a.get(f"{JOBS}{job.pk}/").json()
    assert body["status"] == "running"
    assert len(body["placement"]) == 4
    assert {p["node"] for p in body["placement"]} == {site.compute[0].hostname}
    assert {p["kind"] for p in body["placement"]} == {"whole"}
    assert sorted(p["gpu_index"] for p in body["placement"]) == [0, 1, 2, 3]
    assert [e["to_status"] for e in body["events"]] == ["pending", "running"]


def test_job_list_rows_have_no_placement_or_events(api_a, exclusive):
    api_a.post(JOBS, {**exclusive, "gpus": 1}, format="json")
    row = api_a.get(JOBS).json()["results"][0]
    assert "placement" not in row and "events" not in row


#
# Cancel
#


def test_cancel_pending_job(api_a, exclusive):
    job_id = api_a.post(JOBS, {**exclusive, "gpus": 1}, format="json").json()["id"]
    resp = api_a.post(f"{JOBS}{job_id}/cancel/", {"reason": "changed my mind"}, format="json")
    assert resp.status_code == 200, resp.json()
    assert resp.json()["status"] == "cancelled"
    job = Job.objects.get(pk=job_id)
    assert (job.status, job.status_reason) == ("cancelled", "changed my mind")
    assert job.finished_at is not None
    assert job.events.last().actor == "alice"


def test_cancel_twice_is_a_conflict(api_a, exclusive):
    job_id = api_a.post(JOBS, {**exclusive, "gpus": 1}, format="json").json()["id"]
    assert api_a.post(f"{JOBS}{job_id}/cancel/").status_code == 200
    events = JobEvent.objects.count()
    resp = api_a.post(f"{JOBS}{job_id}/cancel/")
    assert resp.status_code == 409
    assert "cancelled" in resp.json()["detail"]
    assert JobEvent.objects.count() == events


def test_cancel_running_job_frees_its_gpus(site, api_a, submit):
    job = start(submit(site.tenant_a, site.default, "r", gpus=8))
    assert Allocation.objects.filter(job=job, active=True).count() == 8
    resp = api_a.post(f"{JOBS}{job.pk}/cancel/")
    assert resp.status_code == 200
    assert resp.json()["status"] == "cancelled"
    assert not Allocation.objects.filter(job=job, active=True).exists()


#
# Operator: hold, release, requeue
#


def test_operator_holds_and_releases_pending_job(site, ops_api, submit):
    job = submit(site.tenant_a, site.default, "p", gpus=1)
    resp = ops_api.post(f"{JOBS}{job.pk}/hold/", {"reason": "maintenance"}, format="json")
    assert resp.status_code == 200, resp.json()
    assert (resp.json()["held"], resp.json()["pending_reason"], resp.json()["status"]) == (
        True,
        "maintenance",
        "pending",
    )
    resp = ops_api.post(f"{JOBS}{job.pk}/release/")
    assert resp.status_code == 200
    assert (resp.json()["held"], resp.json()["pending_reason"]) == (False, "")
    assert [e.reason for e in job.events.all()] == ["submitted", "maintenance", "released by an operator"]


def test_hold_of_running_job_is_a_conflict(site, ops_api, submit):
    job = start(submit(site.tenant_a, site.default, "r", gpus=1))
    assert ops_api.post(f"{JOBS}{job.pk}/hold/").status_code == 409


def test_hold_of_held_job_is_a_conflict(site, ops_api, submit):
    job = submit(site.tenant_a, site.default, "p", gpus=1)
    assert ops_api.post(f"{JOBS}{job.pk}/hold/").status_code == 200
    events = JobEvent.objects.count()
    assert ops_api.post(f"{JOBS}{job.pk}/hold/").status_code == 409
    assert JobEvent.objects.count() == events


def test_release_of_job_not_held_is_a_conflict(site, ops_api, submit):
    job = submit(site.tenant_a, site.default, "p", gpus=1)
    resp = ops_api.post(f"{JOBS}{job.pk}/release/")
    assert resp.status_code == 409
    assert "not held" in resp.json()["detail"]


def test_requeue_of_pending_job_is_a_conflict(site, ops_api, submit):
    job = submit(site.tenant_a, site.default, "p", gpus=1)
    resp = ops_api.post(f"{JOBS}{job.pk}/requeue/")
    assert resp.status_code == 409
    assert "pending" in resp.json()["detail"]
    job.refresh_from_db()
    assert (job.status, job.version) == ("pending", 0)


def test_operator_requeues_running_job_keeping_its_place(site, ops_api, submit):
    job = start(submit(site.tenant_a, site.default, "r", gpus=2))
    seq = job.queue_seq
    resp = ops_api.post(f"{JOBS}{job.pk}/requeue/", {"reason": "node going down"}, format="json")
    assert resp.status_code == 200, resp.json()
    assert resp.json()["status"] == "pending"
    job.refresh_from_db()
    assert (job.status, job.status_reason, job.queue_seq, job.started_at) == ("pending", "node going down", seq, None)
    assert not Allocation.objects.filter(job=job, active=True).exists()


def test_operator_cancels_any_tenants_job(site, ops_api, submit):
    job = submit(site.tenant_b, site.default, "p", gpus=1)
    resp = ops_api.post(f"{JOBS}{job.pk}/cancel/")
    assert resp.status_code == 200
    assert job.events.last().actor == "ops"


def test_action_reason_longer_than_allowed_is_refused(site, ops_api, submit):
    job = submit(site.tenant_a, site.default, "p", gpus=1)
    resp = ops_api.post(f"{JOBS}{job.pk}/hold/", {"reason": "x" * 300}, format="json")
    assert resp.status_code == 400
    assert "reason" in resp.json()
    job.refresh_from_db()
    assert not job.held
