"""What a job asks for, in words, the same on every page (issue 14: "1 mps (1 GPUs)" hid the fraction and was
ungrammatical); and the API's own description says what the API does."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.selectors import build, shape_text

CASES = [
    ((1,), "1 GPU"),
    ((8,), "8 GPUs"),
    ((16, 2, 8), "16 GPUs: 2 nodes x 8"),
    ((8, 1, 8), "8 GPUs: 1 node x 8"),
    ((1, None, None, "mps", 25), "MPS, 25 % of 1 GPU"),
    ((2, None, None, "mps", 50), "MPS, 50 % of each of 2 GPUs"),
    ((1, None, None, "mps", None), "MPS on 1 GPU"),
    ((1, None, None, "mig", None, "1g.10gb"), "MIG 1g.10gb"),
    ((2, None, None, "mig", None, "3g.40gb"), "2 x MIG 3g.40gb"),
    ((1, None, None, "timeslice"), "time-slice of 1 GPU"),
    ((3, None, None, "timeslice"), "time-slices of 3 GPUs"),
]


@pytest.mark.parametrize(("args", "text"), CASES, ids=[t for _, t in CASES])
def test_shape_text(args, text):
    assert shape_text(*args) == text


@pytest.mark.django_db
def test_the_queue_topic_and_the_tenant_pages_say_the_mps_share(client, site, user_a):
    from scheduler import actions
    from scheduler.models import PriorityClass

    mps = actions.create_pool(site.cluster, "infer", sharing="mps")
    actions.set_quota(site.tenant_a, mps, guaranteed_gpus=1, borrow_limit=0)
    job = actions.submit_job(site.tenant_a, mps, PriorityClass.objects.get(name="normal"), name="nb", gpus=1,
                             sharing="mps", mps_compute_pct=25, mps_memory_mib=20480)  # fmt: skip
    (item,) = [j for j in build(site.cluster.pk, ["queue"])["queue"]["pending"] if j["id"] == job.pk]
    assert item["shape"] == "MPS, 25 % of 1 GPU"
    client.force_login(user_a)
    for url in (reverse("my"), reverse("my-job", args=[job.pk])):
        html = client.get(url).content.decode()
        assert "MPS, 25 % of 1 GPU" in html and "1 mps" not in html and "GPUs)" not in html, url


@pytest.mark.django_db
def test_the_api_description_says_what_the_api_does():
    from drf_spectacular.generators import SchemaGenerator

    text = SchemaGenerator().get_schema(request=None, public=True)["info"]["description"]
    assert "(soon)" not in text and "jobs" in text and "docs/api.md" in text
