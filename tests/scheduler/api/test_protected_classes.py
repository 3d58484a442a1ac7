"""Priority classes whose jobs are always preemptible (low, best-effort): a job of theirs asking for
preemptible=false is refused, with a 400 naming the field at the API and an ActionError for other callers."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from scheduler import actions
from scheduler.models import Job, PriorityClass
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db


def _post(api, site, **body):
    return api.post(JOBS, {"name": "scavenge", "pool": site.default.pk, "gpus": 1, **body}, format="json")


@pytest.mark.parametrize("priority", ["best-effort", "low"])
def test_a_non_preemptible_job_of_an_always_preemptible_class_is_refused_naming_the_field(api_a, site, priority):
    resp = _post(api_a, site, priority_class=priority, preemptible=False)
    assert resp.status_code == 400
    assert resp.json() == {
        "preemptible": [
            f"jobs of priority class {priority} are always preemptible: leave preemptible out or set it true (a job "
            "that must not be preempted asks for a higher class)"
        ]
    }
    assert not Job.objects.exists()


def test_a_best_effort_job_is_preemptible_when_it_does_not_say(api_a, site):
    resp = _post(api_a, site, priority_class="best-effort")
    assert resp.status_code == 201, resp.json()
    assert Job.objects.get(pk=resp.json()["id"]).preemptible is True


def test_a_normal_job_may_still_ask_not_to_be_preempted(api_a, site):
    resp = _post(api_a, site, priority_class="normal", preemptible=False)
    assert resp.status_code == 201, resp.json()
    assert Job.objects.get(pk=resp.json()["id"]).preemptible is False


def test_the_submit_action_refuses_it_for_callers_other_than_the_api(site):
    best_effort = PriorityClass.objects.get(name="best-effort")
    with pytest.raises(actions.ActionError, match="priority class best-effort are always preemptible"):
        actions.submit_job(site.tenant_a, site.default, best_effort, name="j", gpus=1, preemptible=False)
    assert not Job.objects.exists()


def test_a_batch_submission_refuses_it_too(site):
    low = PriorityClass.objects.get(name="low")
    requests = [{"name": "a", "gpus": 1}, {"name": "b", "gpus": 1, "preemptible": False}]
    with pytest.raises(actions.ActionError, match="priority class low are always preemptible"):
        actions.submit_jobs_bulk(site.tenant_a, site.default, low, requests)
    assert not Job.objects.exists()


def test_the_default_classes_say_which_are_always_preemptible(db):
    assert set(PriorityClass.objects.filter(always_preemptible=True).values_list("name", flat=True)) == {
        "low",
        "best-effort",
    }


def test_recreated_default_classes_say_it_as_well(db):
    PriorityClass.objects.all().delete()
    actions.ensure_priority_classes()
    assert set(PriorityClass.objects.filter(always_preemptible=True).values_list("name", flat=True)) == {
        "low",
        "best-effort",
    }


def test_an_always_preemptible_class_cannot_default_to_not_preemptible(db):
    odd = PriorityClass(name="odd", value=5, preemptible_default=False, always_preemptible=True)
    with pytest.raises(ValidationError, match="a class whose jobs are always preemptible is preemptible by default"):
        odd.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        odd.save()
