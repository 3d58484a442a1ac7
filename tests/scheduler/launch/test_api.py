"""The API side of running jobs: command, image, workdir and env checked at submission (the same check the nodes
make), launches in the job's detail, and the log endpoint for the tenant's own jobs only."""

from __future__ import annotations

import pytest

from scheduler import actions
from scheduler.models import Launch, PriorityClass
from tests.factories import fat_tree
from tests.scheduler.api.helpers import token_client

pytestmark = pytest.mark.django_db
JOBS = "/api/v1/jobs/"


@pytest.fixture
def tenant(db, tenant_user):
    cluster = fat_tree("api-launch", nodes=2, gpus_per_node=2, leaf_ports=8)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme")
    actions.set_quota(tenant, pool, guaranteed_gpus=4, borrow_limit=0)
    actions.add_member(tenant, tenant_user)
    return tenant


def post(api, **body):
    return api.post(JOBS, {"name": "j", "gpus": 1, **body}, format="json")


def test_the_job_environment_is_checked_at_submission(tenant, tenant_api):
    resp = post(tenant_api, env={"CUDA_VISIBLE_DEVICES": "0", "OK": "1"})
    assert resp.status_code == 400
    assert resp.json()["env"] == [
        "the job's environment may not set CUDA_VISIBLE_DEVICES: clusterctl sets it from the allocation"
    ]
    resp = post(tenant_api, env={"CLUSTERCTL_JOB_ID": "1", "1BAD": "x"})
    assert resp.json()["env"] == ["environment variable name '1BAD' is not valid (letters, digits, _)"]
    resp = post(tenant_api, workdir="relative/dir")
    assert resp.json()["workdir"] == ["'relative/dir' is not an absolute path"]
    resp = post(tenant_api, env={"OK": " spaced "}, workdir="/data/run", command="python train.py")
    assert resp.status_code == 201, resp.json()
    body = resp.json()
    assert (body["env"], body["workdir"], body["generation"]) == ({"OK": " spaced "}, "/data/run", 0)


def test_what_runs_is_required_where_agents_launch(tenant, tenant_api, settings):
    settings.LAUNCHER = "process"
    resp = post(tenant_api, image="pytorch:24.01")
    assert resp.status_code == 400
    assert resp.json()["command"] == [
        "jobs run as processes on the nodes (LAUNCHER=process): give the command to run (an image alone runs only "
        "where LAUNCHER=container)"
    ]
    settings.LAUNCHER = "container"
    assert post(tenant_api, command="python x.py").json()["image"] == [
        "jobs run in containers on the nodes (LAUNCHER=container): give the image to run"
    ]
    assert post(tenant_api, image="pytorch:24.01", command="python x.py").status_code == 201
    settings.LAUNCHER = "twin"
    assert post(tenant_api).status_code == 201  # the twin plays it: nothing to run


def test_slurm_needs_a_command_and_whole_gpus(tenant, tenant_api, settings):
    settings.LAUNCHER = "slurm"
    assert post(tenant_api, image="pytorch:24.01").json()["command"] == [
        "jobs run in Slurm (LAUNCHER=slurm): give the command its batch script runs on each node"
    ]
    assert post(tenant_api, command="python x.py", sharing="mps", fraction=0.5).json()["sharing"] == [
        "jobs run in Slurm (LAUNCHER=slurm), whose --gres gives whole GPUs: mps shares need the node agents "
        "(LAUNCHER=process or container)"
    ]
    assert post(tenant_api, command="python x.py", sharing="exclusive").status_code == 201


def test_log_and_launches_of_own_jobs_only(tenant, tenant_api, settings, django_user_model):
    pool = tenant.quotas.get().pool
    job = actions.submit_job(tenant, pool, PriorityClass.objects.get(name="normal"), name="j", gpus=1, command="x")
    resp = tenant_api.get(f"{JOBS}{job.pk}/log/?lines=5")
    assert resp.status_code == 200
    assert resp.json() == {"job": job.pk, "generation": 0, "lines": 5, "nodes": [],
                           "detail": "the twin plays this job (LAUNCHER=twin): nothing runs on a node, so there is "
                           "no log"}  # fmt: skip
    settings.LAUNCHER = "process"
    assert tenant_api.get(f"{JOBS}{job.pk}/log/").json()["detail"] == "not launched yet: no node has a log of it"
    for bad in ("0", "1001", "x"):
        resp = tenant_api.get(f"{JOBS}{job.pk}/log/?lines={bad}")
        assert resp.status_code == 400 and resp.json() == {"lines": [f"'{bad}' is not a whole number from 1 to 1,000"]}

    node = pool.cluster.nodes.order_by("hostname").first()
    Launch.objects.create(job=job, generation=1, node=node, hostname=node.hostname, state="exited", returncode=0,
                          exited_within_grace=None, changed_at=job.submitted_at)  # fmt: skip
    detail = tenant_api.get(f"{JOBS}{job.pk}/").json()
    assert detail["launches"] == [{
        "generation": 1, "hostname": node.hostname, "state": "exited", "pid": None, "slurm_job_id": None,
        "returncode": 0, "exited_within_grace": None, "stop_why": "", "reason": "",
        "created_at": detail["launches"][0]["created_at"], "started_at": None, "finished_at": None,
    }]  # fmt: skip

    other = actions.create_tenant("other")
    intruder = django_user_model.objects.create_user("intruder", "i@example.org", "pw")
    actions.add_member(other, intruder)
    api = token_client(intruder)
    assert api.get(f"{JOBS}{job.pk}/log/").status_code == 404
    assert api.get(f"{JOBS}{job.pk}/").status_code == 404
