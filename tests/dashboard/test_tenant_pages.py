"""A tenant's own job pages (issue 14): /my/jobs/<id>/ shows its own job (state, place, expected start, reason,
where it runs, events), another tenant's is a 404; the operators' job URL of its own job leads there, anyone else's
is still a 403; and the job names on /my/ are links to those pages."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from dashboard import selectors
from dashboard.views import NO_ESTIMATE, start_text
from scheduler import actions
from scheduler.models import Job
from scheduler.rounds import run_round
from scheduler.selectors import QueueEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(site):
    """Alice's running gang (16 GPUs, one hour) and her 16-GPU job reserved after it (8 are free); Bob's running
    8-GPU notebook."""
    gang = site.submit(site.tenant_a, 16, name="llm-pretrain", nodes=2, gpus_per_node=8, est_runtime_s=3600)
    notebook = site.submit(site.tenant_b, 8, name="notebook", est_runtime_s=3600)
    run_round(site.cluster.pk, "test")
    sweep = site.submit(site.tenant_a, 16, name="sweep-a")
    run_round(site.cluster.pk, "test")
    for job in (gang, notebook, sweep):
        job.refresh_from_db()
    assert (gang.status, notebook.status, sweep.status) == ("running", "running", "pending")
    return {"gang": gang, "notebook": notebook, "sweep": sweep}


@pytest.fixture
def alice(client, user_a):
    client.force_login(user_a)
    return client


def my_job(job: Job) -> str:
    return reverse("my-job", args=[job.pk])


def test_a_tenant_opens_its_own_running_job(alice, jobs):
    response = alice.get(my_job(jobs["gang"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "llm-pretrain" in html and 'data-state="running"' in html
    hosts = set(jobs["gang"].allocations.filter(active=True).values_list("gpu__node__hostname", flat=True))
    assert len(hosts) == 2 and all(f'data-node="{h}"' in html for h in hosts)
    assert f'data-log-url="/api/v1/jobs/{jobs["gang"].pk}/log/"' in html
    assert 'data-testid="job-events"' in html and "placed on" in html


def test_a_tenant_sees_its_pending_jobs_place_expected_start_and_reason(alice, jobs):
    html = alice.get(my_job(jobs["sweep"])).content.decode()
    assert re.search(r'data-testid="queue-position">1<', html)
    # Reserved at the end of the two running jobs' one-hour estimates: just under 60 minutes from now.
    start = re.search(r'data-testid="start-estimate" title="([^"]+)">([^<]+)<', html)
    assert start is not None, html
    assert start.group(1) == "GPUs reserved for it as running jobs end, by their estimated run times"
    assert re.fullmatch(r"in (59 min \d\d s|1 h 00 min) \(reserved\)", start.group(2)), start.group(2)
    assert "reserved to start in about 60 min" in html


def test_another_tenants_job_is_not_found(alice, jobs):
    assert alice.get(my_job(jobs["notebook"])).status_code == 404
    assert alice.get(reverse("my-job", args=[jobs["sweep"].pk + 1000])).status_code == 404


def test_the_operators_job_url_of_its_own_job_leads_to_the_tenant_page(alice, jobs, site):
    response = alice.get(reverse("job", args=[site.cluster.pk, jobs["gang"].pk]))
    assert response.status_code == 302 and response["Location"] == my_job(jobs["gang"])


def test_the_operators_job_url_of_anothers_job_is_still_forbidden(alice, jobs, site):
    for job_id in (jobs["notebook"].pk, jobs["sweep"].pk + 1000):  # Bob's, and one that does not exist: the same
        response = alice.get(reverse("job", args=[site.cluster.pk, job_id]))
        assert response.status_code == 403 and "notebook" not in response.content.decode()


def test_a_job_of_its_own_in_another_cluster_path_is_forbidden_too(alice, jobs, site):
    # The cluster in the path must be the job's: otherwise the operator rule answers (403).
    assert alice.get(reverse("job", args=[site.cluster.pk + 1, jobs["gang"].pk])).status_code == 403


def test_operators_go_from_the_tenant_page_to_theirs(client, operator, jobs, site):
    client.force_login(operator)
    response = client.get(my_job(jobs["notebook"]))
    assert response.status_code == 302 and response["Location"] == reverse(
        "job", args=[site.cluster.pk, jobs["notebook"].pk]
    )


def test_anonymous_users_sign_in_first(client, jobs):
    response = client.get(my_job(jobs["gang"]))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")


def test_a_user_of_no_tenant_is_refused(client, tenant_user, jobs):
    client.force_login(tenant_user)
    assert client.get(my_job(jobs["gang"])).status_code == 403


def test_job_names_on_my_are_links_to_their_pages(alice, jobs):
    gang = jobs["gang"]
    old = Job.objects.create(tenant=gang.tenant, pool=gang.pool, name="old", gpus=1, priority_class=gang.priority_class)
    actions.cancel_job(old, actor="test")
    html = alice.get(reverse("my")).content.decode()
    links = dict(re.findall(r'<a href="(/my/jobs/\d+/)"[^>]*data-testid="job-link">([^<]+)</a>', html))
    assert links == {
        my_job(jobs["gang"]): f"llm-pretrain (#{jobs['gang'].pk})",  # running
        my_job(jobs["sweep"]): f"sweep-a (#{jobs['sweep'].pk})",  # pending
        my_job(old): f"old (#{old.pk})",  # finished
    }


def test_my_shows_the_expected_start_of_a_pending_job(alice, jobs):
    html = alice.get(reverse("my")).content.decode()
    cell = re.search(r'data-testid="start-estimate">([^<]+)<', html)
    assert cell is not None and cell.group(1).endswith("(reserved)")


def test_the_queue_topic_carries_the_expected_start(site, jobs):
    data = selectors.build(site.cluster.pk, ["queue"])["queue"]
    (sweep,) = [j for j in data["pending"] if j["id"] == jobs["sweep"].pk]
    assert sweep["start_estimate"] == "backfill"
    at = datetime.fromisoformat(sweep["start_at"])
    assert abs((at - (jobs["gang"].started_at + timedelta(seconds=3600))).total_seconds()) < 0.002


def test_start_text_reads_the_wait_and_its_basis():
    t0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    entry = QueueEntry(1, "", t0 + timedelta(seconds=3303), "backfill")
    assert start_text(entry, now=t0) == "in 55 min 03 s (reserved)"
    assert start_text(entry._replace(start_estimate="preempting"), now=t0 + timedelta(seconds=3400)) == (
        "any moment (after preemption)"
    )
    assert start_text(QueueEntry(2, "", None, "none"), now=t0) == NO_ESTIMATE


def test_the_tenant_job_page_reads_in_a_bounded_number_of_queries(alice, jobs):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        assert alice.get(my_job(jobs["gang"])).status_code == 200
    assert len(ctx.captured_queries) <= 12, [q["sql"][:80] for q in ctx.captured_queries]


@pytest.fixture
def ops_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("ops", "ops@example.org", "pw-ops", is_staff=True))
    return client


def test_the_operators_job_page_shows_the_expected_start_of_a_waiting_job(ops_client, site, jobs):
    html = ops_client.get(reverse("job", args=[site.cluster.pk, jobs["sweep"].pk])).content.decode()
    # As the tenant's page: reserved at the end of the gang's one-hour estimate, just under 60 minutes from now.
    start = re.search(r'data-testid="start-estimate" title="([^"]+)">([^<]+)<', html)
    assert start is not None, html
    assert start.group(1) == "GPUs reserved for it as running jobs end, by their estimated run times"
    assert re.fullmatch(r"in (59 min \d\d s|1 h 00 min) \(reserved\)", start.group(2)), start.group(2)


def test_the_operators_job_page_of_a_running_job_has_no_expected_start(ops_client, site, jobs):
    html = ops_client.get(reverse("job", args=[site.cluster.pk, jobs["gang"].pk])).content.decode()
    assert re.search(r'data-testid="start-estimate">([^<]+)<', html).group(1) == NO_ESTIMATE


def test_both_job_pages_show_the_host_cpu_and_memory_a_job_asks(ops_client, site, user_a):
    job = site.submit(site.tenant_a, 8, name="etl", host_cpu_milli=12_500, host_memory_mib=65_536)
    html = ops_client.get(reverse("job", args=[site.cluster.pk, job.pk])).content.decode()
    shape = re.search(r'data-testid="job-shape">([^<]+)<', html).group(1)
    assert shape.endswith(" · host 12.5 CPUs, 64 GiB per node"), shape
    ops_client.force_login(user_a)
    html = ops_client.get(my_job(job)).content.decode()
    assert re.search(r'data-testid="job-shape">([^<]+)<', html).group(1) == shape


def test_a_job_that_asks_no_host_resources_says_nothing_of_them(ops_client, site, jobs):
    html = ops_client.get(reverse("job", args=[site.cluster.pk, jobs["gang"].pk])).content.decode()
    assert "host" not in re.search(r'data-testid="job-shape">([^<]+)<', html).group(1)
