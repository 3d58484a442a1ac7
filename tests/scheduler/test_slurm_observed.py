"""Observing a Slurm cluster clusterctl does not schedule: the real `scontrol show job -d -o` of Slurm 22.05
(tests/fixtures/scontrol_show_job_d_o_slurm_22.05.txt: train-llm on gpu0001-0002 x 8 GPUs, finetune on gpu0003
GPUs 0-2, eval on gpu0004 GPUs 0-1, big-sweep pending on Resources, held pending on JobHeldUser) mirrored read-only
onto a stored cluster with the same host names."""

from __future__ import annotations

import dataclasses
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from dashboard import selectors
from fabric.models import GPU
from scheduler import actions, enqueue, slurm_mirror
from scheduler.actions.errors import ActionError
from scheduler.choices import JobStatus
from scheduler.launch.slurm_observe import ObserveError, parse_job_line, parse_scontrol_jobs
from scheduler.models import Allocation, Job, PriorityClass
from scheduler.rounds import run_round
from tests.conftest import FIXTURES
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db
CAPTURE = FIXTURES / "scontrol_show_job_d_o_slurm_22.05.txt"


@pytest.fixture
def cluster(monkeypatch):
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: None)
    c = fat_tree("obs", nodes=4, gpus_per_node=8, leaf_ports=16)
    actions.ensure_scheduler(c)
    return c


def observed() -> list:
    return parse_scontrol_jobs(CAPTURE.read_text())


def mirror(slurm_id: int) -> Job:
    return Job.objects.get(observed_slurm_id=slurm_id)


def held(job: Job) -> list[tuple[str, int]]:
    rows = Allocation.objects.filter(job=job, active=True).values_list("gpu__node__hostname", "gpu__index")
    return sorted(rows)


def test_the_capture_parses_into_slurms_jobs_with_their_gpus():
    jobs = {j.slurm_id: j for j in observed()}
    assert [(j.name, j.state, j.reason, j.gpus_requested) for j in jobs.values()] == [
        ("train-llm", "RUNNING", "", 16), ("finetune", "RUNNING", "", 3), ("eval", "RUNNING", "", 2),
        ("big-sweep", "PENDING", "Resources", 32), ("held", "PENDING", "JobHeldUser", 1),
    ]  # fmt: skip
    assert jobs[1].gpus == tuple((h, i) for h in ("gpu0001", "gpu0002") for i in range(8))
    assert jobs[2].gpus == (("gpu0003", 0), ("gpu0003", 1), ("gpu0003", 2)) and jobs[2].user == "root"
    assert jobs[4].gpus == () and jobs[4].nodes == ""


def test_a_gres_index_list_with_gaps_and_a_typed_gpu():
    line = ("JobId=9 JobName=x UserId=ann(1001) JobState=RUNNING Reason=None NodeList=n[1-2] NumNodes=2 "
            "TresPerNode=gres:gpu:a100:2 JOB_GRES=gpu:a100:4 Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:a100:2(IDX:0,3) "
            "Nodes=n2 CPU_IDs=0 Mem=0 GRES=gpu:a100:2(IDX:5-6),nic:1(IDX:0)")  # fmt: skip
    job = parse_job_line(line)
    assert job.gpus == (("n1", 0), ("n1", 3), ("n2", 5), ("n2", 6)) and job.gpus_requested == 4 and job.user == "ann"


def test_a_line_that_is_not_scontrols_is_refused_naming_it():
    with pytest.raises(ObserveError, match="scontrol line 2: no JobId=<number>"):
        parse_scontrol_jobs("No jobs in the system\nJobName=x\n")


def test_running_jobs_hold_exactly_the_gpus_slurm_bound_them_to(cluster):
    assert slurm_mirror.observe(["obs"], jobs=observed())["obs"]["new"] == 5
    train = mirror(1)
    assert (train.status, train.tenant.name, train.preemptible) == (JobStatus.RUNNING, "slurm", False)
    assert held(train) == [(h, i) for h in ("gpu0001", "gpu0002") for i in range(8)]
    assert held(mirror(2)) == [("gpu0003", 0), ("gpu0003", 1), ("gpu0003", 2)]
    assert held(mirror(3)) == [("gpu0004", 0), ("gpu0004", 1)]
    sweep = mirror(4)
    assert (sweep.status, sweep.pending_reason, sweep.gpus) == (JobStatus.PENDING, "Slurm: Resources", 32)
    assert mirror(5).pending_reason == "Slurm: JobHeldUser" and not held(sweep)
    assert train.events.get().reason == "observed in Slurm as job 1 (user root, partition gpu) on gpu[0001-0002]"


def test_the_same_reading_twice_changes_nothing(cluster):
    slurm_mirror.observe(["obs"], jobs=observed())
    versions = dict(Job.objects.values_list("pk", "version"))
    again = slurm_mirror.observe(["obs"], jobs=observed())["obs"]
    assert again == {"new": 0, "changed": 0, "ended": 0, "unknown_gpus": 0, "conflicts": 0}
    assert dict(Job.objects.values_list("pk", "version")) == versions


def test_rounds_place_around_slurms_jobs_and_never_preempt_or_place_them(cluster):
    slurm_mirror.observe(["obs"], jobs=observed())
    tenant = actions.create_tenant("acme", max_priority="high")
    pool = cluster.pools.get(is_default=True)
    actions.set_quota(tenant, pool, guaranteed_gpus=32, borrow_limit=0)
    high = PriorityClass.objects.get(name="high")
    five = actions.submit_job(tenant, pool, high, name="five", gpus=5, nodes=1, command="x")
    eight = actions.submit_job(tenant, pool, high, name="eight", gpus=8, nodes=1, command="x")
    run_round(cluster.pk, "test")
    five.refresh_from_db()
    eight.refresh_from_db()
    # gpu0003 has 5 GPUs free (3-7), gpu0004 6; no node has 8: the 8-GPU job waits, nothing of Slurm's gives way.
    assert five.status in (JobStatus.ADMITTED, JobStatus.RUNNING) and eight.status == JobStatus.PENDING
    assert {h for h, _ in held(five)} <= {"gpu0003", "gpu0004"}
    assert all(mirror(s).status == JobStatus.RUNNING for s in (1, 2, 3))
    assert len(held(mirror(1))) == 16 and mirror(4).status == JobStatus.PENDING  # Slurm's queue, not ours


def test_what_ended_in_slurm_ends_here_and_frees_its_gpus(cluster):
    slurm_mirror.observe(["obs"], jobs=observed())
    jobs = {j.slurm_id: j for j in observed()}
    later = [
        dataclasses.replace(jobs[2], state="COMPLETED", exit_code=0),
        dataclasses.replace(jobs[3], state="FAILED", exit_code=2),
        dataclasses.replace(jobs[4], state="RUNNING", reason="", gpus=(("gpu0001", 0),), nodes="gpu0001"),
        jobs[5],
    ]  # train-llm (1) is no longer listed
    assert slurm_mirror.observe(["obs"], jobs=later)["obs"]["ended"] == 3
    assert (mirror(1).status, mirror(1).status_reason) == (
        JobStatus.COMPLETED, "Slurm job 1 is no longer listed by Slurm (its end is in Slurm's records)")  # fmt: skip
    assert mirror(2).status == JobStatus.COMPLETED and mirror(3).status == JobStatus.FAILED
    assert mirror(3).status_reason == "Slurm job 3 ended FAILED (exit 2)"
    assert not held(mirror(1)) and not held(mirror(2)) and not held(mirror(3))
    assert mirror(4).status == JobStatus.RUNNING and held(mirror(4)) == [("gpu0001", 0)]


def test_operator_actions_refuse_slurms_jobs(cluster):
    slurm_mirror.observe(["obs"], jobs=observed())
    for act in (actions.cancel_job, actions.hold_job):
        with pytest.raises(ActionError, match="is Slurm's job 4, observed read-only: use scancel"):
            act(mirror(4), actor="op")


def test_the_command_mirrors_a_saved_output_and_the_pages_mark_them(cluster, client, operator):
    out = StringIO()
    call_command("slurm_observe", "--cluster", "obs", "--file", str(CAPTURE), stdout=out)
    assert out.getvalue() == "obs: new 5, changed 0, ended 0, unknown_gpus 0, conflicts 0\n"
    client.force_login(operator)
    page = client.get(reverse("job", args=[cluster.pk, mirror(1).pk])).content.decode()
    assert "Slurm's job 1, observed read-only" in page
    sweep = client.get(reverse("job", args=[cluster.pk, mirror(4).pk])).content.decode()
    assert "Slurm: Resources" in sweep
    rows = {row["name"]: row for row in selectors.queue(selectors._Cluster(cluster.pk))["pending"]}
    assert (rows["big-sweep"]["reason"], rows["big-sweep"]["position"], rows["big-sweep"]["tenant"]) == (
        "Slurm: Resources",
        None,
        "slurm",
    )


def test_an_unknown_cluster_is_refused_by_name(cluster):
    with pytest.raises(Exception, match="SLURM_OBSERVE names clusters that do not exist: nope"):
        slurm_mirror.observe(["obs", "nope"], jobs=[])


def test_a_broken_gpu_under_slurms_job_leaves_it_to_slurm(cluster):
    slurm_mirror.observe(["obs"], jobs=observed())
    GPU.objects.filter(node__cluster=cluster, node__hostname="gpu0001", index=0).update(health="failed")
    run_round(cluster.pk, "test")
    train = mirror(1)
    assert train.status == JobStatus.RUNNING and len(held(train)) == 16  # not requeued here: Slurm's to decide


def test_a_pass_reads_the_mirrors_allocations_in_one_query_whatever_their_number(
    cluster, django_assert_max_num_queries
):
    slurm_mirror.observe(["obs"], jobs=observed())
    many = [dataclasses.replace(j, slurm_id=100 + i, gpus=((f"gpu000{1 + i % 4}", i // 4),), nodes="x")
            for i, j in enumerate([observed()[2]] * 24)]  # fmt: skip
    slurm_mirror.observe(["obs"], jobs=many)  # 24 one-GPU jobs now
    with django_assert_max_num_queries(12):  # unchanged reading of 24 running jobs: a bounded number of queries
        assert slurm_mirror.observe(["obs"], jobs=many)["obs"]["changed"] == 0
