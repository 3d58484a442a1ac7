"""An MPS request is valid and runnable or refused (issue 14): the README's `"sharing": "mps", "fraction": 0.25` with
no memory limit gets the fraction of the pool's GPU memory as its limit, and the next round places it."""

from __future__ import annotations

import pytest

from fabric.models import GPU
from scheduler.models import Allocation, Job
from scheduler.rounds import run_round
from scheduler.selectors import pool_gpus
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db

H100_MIB = 81920  # tests.factories: an H100 of the generated cluster


def test_the_readme_request_gets_its_fraction_of_the_gpu_memory(api_a, site):
    resp = api_a.post(JOBS, {"name": "infer", "pool": site.mps.pk, "gpus": 1, "sharing": "mps", "fraction": 0.25},
                      format="json")  # fmt: skip
    assert resp.status_code == 201, resp.json()
    assert resp.json()["mps_memory_mib"] == 20480  # 25 % of 81920 MiB
    assert Job.objects.get(pk=resp.json()["id"]).mps_memory_mib == 20480


def test_the_readme_request_is_placed_by_the_next_round(api_a, site):
    job_id = api_a.post(JOBS, {"name": "infer", "pool": site.mps.pk, "gpus": 1, "fraction": 0.25},
                        format="json").json()["id"]  # fmt: skip
    run_round(site.cluster.pk, "test")
    job = Job.objects.get(pk=job_id)
    assert job.status == "running", api_a.get(f"{JOBS}{job_id}/").json()["pending_reason"]
    share = Allocation.objects.get(job=job, active=True)
    assert (share.kind, share.compute_pct, share.memory_mib) == ("mps", 25, 20480)


def test_a_memory_limit_given_is_kept(api_a, site):
    resp = api_a.post(JOBS, {"name": "infer", "pool": site.mps.pk, "gpus": 1, "fraction": 0.25,
                             "mps_memory_mib": 4096}, format="json")  # fmt: skip
    assert resp.status_code == 201, resp.json()
    assert resp.json()["mps_memory_mib"] == 4096


def test_the_default_is_taken_from_the_smallest_gpu_of_the_pool(api_a, site):
    # Half the MPS pool's GPUs are 40 GiB: the default must fit whichever GPU the job gets.
    small = list(pool_gpus(site.mps).order_by("index")[:4])
    GPU.objects.filter(pk__in=[g.pk for g in small]).update(memory_mib=40960)
    resp = api_a.post(JOBS, {"name": "infer", "pool": site.mps.pk, "gpus": 1, "fraction": 0.5}, format="json")
    assert resp.status_code == 201, resp.json()
    assert resp.json()["mps_memory_mib"] == 20480  # 50 % of 40960 MiB, not of 81920


def test_the_default_is_rounded_down_to_whole_mib(api_a, site):
    resp = api_a.post(JOBS, {"name": "infer", "pool": site.mps.pk, "gpus": 1, "fraction": 0.33}, format="json")
    assert resp.status_code == 201, resp.json()
    assert resp.json()["mps_memory_mib"] == 27033  # 33 % of 81920 = 27033.6 MiB


def test_the_schema_documents_the_default():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    text = schema["components"]["schemas"]["Job"]["properties"]["mps_memory_mib"]["description"]
    assert "fraction" in text and "smallest GPU" in text, text
