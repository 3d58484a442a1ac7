"""A job's host CPU and memory per node through the tenant API: `cpus` (CPUs, to 0.001) and `host_memory_mib`, stored
as Job.host_cpu_milli / host_memory_mib, and refused (400 naming the field) when malformed or more than any node of
the pool has. The default pool's two compute nodes are given host figures of two real shapes: a 64-core server with
512 GiB (MemTotal 515797 MiB) and a 32-core one with 1 TiB (1031594 MiB)."""

from __future__ import annotations

import pytest

from fabric import actions as fabric_actions
from scheduler.models import Job
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db


@pytest.fixture
def hosts(site):
    a, b = site.compute[0], site.compute[1]  # the default pool's compute nodes
    changed = fabric_actions.record_host_resources(
        site.cluster.pk, {a.hostname: (64000, 515_797), b.hostname: (32000, 1_031_594)}
    )
    assert sorted(changed) == sorted([a.hostname, b.hostname])
    return a, b


def post(api, site, **fields):
    return api.post(JOBS, {"name": "train", "pool": site.default.pk, "gpus": 1, **fields}, format="json")


def refused(api, site, **fields) -> dict:
    jobs = Job.objects.count()
    resp = post(api, site, **fields)
    assert resp.status_code == 400, (resp.status_code, resp.content[:500])
    assert Job.objects.count() == jobs
    return resp.json()


def test_submit_with_cpus_and_host_memory(api_a, site, hosts):
    resp = post(api_a, site, cpus=0.5, host_memory_mib=4096)
    assert resp.status_code == 201, resp.content[:500]
    body = resp.json()
    assert (body["cpus"], body["host_memory_mib"]) == (0.5, 4096)
    job = Job.objects.get(pk=body["id"])
    assert (job.host_cpu_milli, job.host_memory_mib) == (500, 4096)
    assert api_a.get(f"{JOBS}{job.pk}/").json()["cpus"] == 0.5


def test_cpus_to_a_thousandth(api_a, site, hosts):
    body = post(api_a, site, cpus="12.345").json()
    assert body["cpus"] == 12.345
    assert Job.objects.get(pk=body["id"]).host_cpu_milli == 12345


def test_without_them_none_is_asked(api_a, site, hosts):
    body = post(api_a, site).json()
    assert (body["cpus"], body["host_memory_mib"]) == (None, None)
    assert Job.objects.filter(pk=body["id"], host_cpu_milli__isnull=True, host_memory_mib__isnull=True).exists()


def test_negative_cpus(api_a, site, hosts):
    assert refused(api_a, site, cpus=-1) == {"cpus": ["Ensure this value is greater than or equal to 0.001."]}


def test_zero_cpus(api_a, site, hosts):
    assert refused(api_a, site, cpus=0) == {"cpus": ["Ensure this value is greater than or equal to 0.001."]}


def test_cpus_finer_than_a_thousandth(api_a, site, hosts):
    assert refused(api_a, site, cpus=0.0005) == {"cpus": ["Ensure that there are no more than 3 decimal places."]}


def test_cpus_not_a_number(api_a, site, hosts):
    assert refused(api_a, site, cpus="four") == {"cpus": ["A valid number is required."]}


def test_negative_host_memory(api_a, site, hosts):
    assert refused(api_a, site, host_memory_mib=-1) == {
        "host_memory_mib": ["Ensure this value is greater than or equal to 1."]
    }


def test_more_cpus_than_any_node_has(api_a, site, hosts):
    assert refused(api_a, site, cpus=96) == {
        "cpus": ["asks for 96 CPUs on each node; the largest node of pool default has 64 CPUs"]
    }


def test_more_host_memory_than_any_node_has(api_a, site, hosts):
    assert refused(api_a, site, host_memory_mib=2_000_000) == {
        "host_memory_mib": [
            "asks for 2000000 MiB of host memory on each node; the largest node of pool default has 1031594 MiB"
        ]
    }


def test_cpus_and_memory_no_node_has_both(api_a, site, hosts):
    problem = (
        "asks for 48 CPUs and 600000 MiB of host memory on each node; no node of pool default has both (the one "
        "with the most CPUs has 64 CPUs and 515797 MiB, the one with the most memory 32 CPUs and 1031594 MiB)"
    )
    assert refused(api_a, site, cpus=48, host_memory_mib=600_000) == {"cpus": [problem], "host_memory_mib": [problem]}


def test_a_gang_needs_that_many_nodes_with_the_cpus(api_a, site, hosts):
    # Both nodes have 32 CPUs; only the first has 48.
    assert post(api_a, site, gpus=16, nodes=2, gpus_per_node=8, cpus=32).status_code == 201
    assert refused(api_a, site, gpus=16, nodes=2, gpus_per_node=8, cpus=48) == {
        "cpus": ["a gang of 2 nodes asks for 48 CPUs on each; only 1 node of pool default has that much"]
    }


def test_a_node_that_does_not_track_cpus_takes_any_number(api_a, site, hosts):
    fabric_actions.set_host_resources(hosts[1], cpu_milli=0)  # the operator turns the CPU constraint off there
    assert post(api_a, site, cpus=96).status_code == 201


def test_the_schema_lists_both_fields(api_a):
    schema = api_a.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    job = schema["components"]["schemas"]["Job"]["properties"]
    assert job["cpus"]["type"] == "number" and job["cpus"]["minimum"] == 0.001
    assert job["host_memory_mib"]["type"] == "integer" and job["host_memory_mib"]["minimum"] == 1
