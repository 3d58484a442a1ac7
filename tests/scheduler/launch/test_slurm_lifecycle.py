"""LAUNCHER=slurm against the database, with Slurm in memory (tests/slurm/fake.py) answering the real command lines:
one submit per generation pinned to the placed nodes, the watcher's outcomes (running, completed, failed, requeued by
Slurm, forgotten, unstartable), adoption of a submit whose answer was lost, strays cancelled, stop with the grace, and
the sweep's resend. The end-to-end run on a real Slurm is tests/slurm/test_slurm_executor_e2e.py."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from scheduler import actions, enqueue, slurm_launches, tasks
from scheduler.actions import lifecycle
from scheduler.choices import JobStatus
from scheduler.launch.slurm import SlurmLauncher, comment, spec_from_payloads
from scheduler.models import Allocation, Job, JobEvent, Launch, PriorityClass
from scheduler.rounds import run_round
from tests.factories import fat_tree
from tests.slurm.fake import FakeSlurm

pytestmark = pytest.mark.django_db
TAG = "cctest"


@pytest.fixture
def sent(monkeypatch, settings):
    """Messages to the Slurm submit host, captured: (task, queue, args)."""
    settings.LAUNCHER = "slurm"
    settings.SLURM_TAG = TAG
    settings.SLURM_OUTPUT_DIR = "/shared/out"
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: None)
    box: list[tuple[str, str, tuple]] = []
    for name in ("slurm_submit", "slurm_stop", "node_prepare", "node_stop", "node_forget"):
        task = getattr(tasks, name)
        monkeypatch.setattr(task, "apply_async", lambda args, name=name, **kw: box.append((name, kw["queue"], args)))
    return box


@pytest.fixture
def fake():
    return FakeSlurm()


@pytest.fixture
def slurm(fake):
    return SlurmLauncher(TAG, run=fake)


@pytest.fixture
def site(db):
    cluster = fat_tree("sl", nodes=2, gpus_per_node=2, leaf_ports=8)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme", max_priority="high")
    actions.set_quota(tenant, pool, guaranteed_gpus=8, borrow_limit=8)
    normal = PriorityClass.objects.get(name="normal")

    def submit(gpus: int = 4, **request) -> Job:
        request.setdefault("command", "python train.py")
        return actions.submit_job(tenant, pool, normal, name="j", gpus=gpus, **request)

    return SimpleNamespace(cluster=cluster, pool=pool, tenant=tenant, submit=submit)


def placed(site, capture, **request) -> Job:
    job = site.submit(**request)
    run_round(site.cluster.pk, "test")
    job.refresh_from_db()
    assert (job.status, job.generation) == (JobStatus.ADMITTED, 1)
    with capture(execute=True):
        lifecycle.launch_job(job.pk)
    return job


def submitted(site, capture, slurm, **request) -> tuple[Job, int]:
    job = placed(site, capture, **request)
    with capture(execute=True):
        assert slurm_launches.submit(job.pk, 1, slurm=slurm) == "submitted"
    return job, Launch.objects.filter(job=job).values_list("slurm_job_id", flat=True).first()


def watch(slurm, capture, now=None) -> dict:
    with capture(execute=True):
        return slurm_launches.watch(slurm=slurm, now=now)


def states(job: Job) -> list[tuple]:
    return list(Launch.objects.filter(job=job).order_by("generation", "hostname").values_list("hostname", "state"))


def test_a_placement_sends_one_submit_to_the_slurm_queue_and_no_node_message(
    site, sent, django_capture_on_commit_callbacks
):
    job = placed(site, django_capture_on_commit_callbacks, nodes=2, gpus_per_node=2)
    assert sent == [("slurm_submit", "slurm", (job.pk, 1))]
    assert states(job) == [("gpu0001", "sent"), ("gpu0002", "sent")]
    assert {la.payload["node_gpus"] for la in Launch.objects.filter(job=job)} == {2}


def test_the_submit_pins_the_job_to_its_nodes_and_gpus_once(
    site, sent, fake, slurm, django_capture_on_commit_callbacks
):
    job, sid = submitted(site, django_capture_on_commit_callbacks, slurm, nodes=2, gpus_per_node=2)
    (sj,) = fake.jobs.values()
    assert sid == sj.slurm_id == 100
    assert "--nodelist=gpu0001,gpu0002" in sj.argv and "--gres=gpu:2" in sj.argv and "--nodes=2" in sj.argv
    assert "--exclusive" in sj.argv  # both GPUs of both nodes are the job's
    assert f"--comment=clusterctl:{TAG}:{job.pk}:1" in sj.argv and f"--job-name=cc-{job.pk}-g1" in sj.argv
    assert f"--output=/shared/out/cc-{job.pk}-g1-%j.out" in sj.argv
    assert sj.env["CLUSTERCTL_COMMAND"] == "python train.py" and sj.env["WORLD_SIZE"] == "4"
    assert "gpu0001 NODE_RANK=0" in sj.env["CLUSTERCTL_SLURM_NODES"]
    assert "gpu0002 NODE_RANK=1" in sj.env["CLUSTERCTL_SLURM_NODES"]
    assert states(job) == [("gpu0001", "starting"), ("gpu0002", "starting")]
    assert JobEvent.objects.filter(job=job, reason="submitted to Slurm as job 100 on gpu0001, gpu0002").exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert slurm_launches.submit(job.pk, 1, slurm=slurm) == "skipped"  # a redelivery
    assert len(fake.jobs) == 1


def test_a_job_taking_part_of_a_node_shares_it(site, sent, fake, slurm, django_capture_on_commit_callbacks):
    submitted(site, django_capture_on_commit_callbacks, slurm, gpus=1)
    (sj,) = fake.jobs.values()
    assert "--oversubscribe" in sj.argv and "--exclusive" not in sj.argv and "--gres=gpu:1" in sj.argv


def test_a_submit_redelivered_after_its_answer_was_lost_finds_the_first(
    site, sent, fake, slurm, django_capture_on_commit_callbacks, settings
):
    """The worker ran sbatch, then died before recording the answer: the redelivered task submits nothing new."""
    job = placed(site, django_capture_on_commit_callbacks)
    payloads = list(Launch.objects.filter(job=job).values_list("payload", flat=True))
    slurm.submit(spec_from_payloads(payloads, output_dir="/shared/out"))  # the dead worker's sbatch
    with django_capture_on_commit_callbacks(execute=True):
        assert slurm_launches.submit(job.pk, 1, slurm=slurm) == "found"
    assert len(fake.jobs) == 1 and set(Launch.objects.filter(job=job).values_list("slurm_job_id", flat=True)) == {100}


def test_the_watcher_adopts_a_submit_nobody_recorded(site, sent, fake, slurm, django_capture_on_commit_callbacks):
    job = placed(site, django_capture_on_commit_callbacks)
    payloads = list(Launch.objects.filter(job=job).values_list("payload", flat=True))
    slurm.submit(spec_from_payloads(payloads))
    fake.set(100, "RUNNING")
    done = watch(slurm, django_capture_on_commit_callbacks)
    assert (done["adopted"], done["cancelled"]) == (1, 0)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    assert JobEvent.objects.filter(
        job=job, reason__startswith="found in Slurm after its submit's answer was lost"
    ).exists()


def test_running_then_completed_in_slurm_completes_the_job(site, sent, fake, slurm, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job, sid = submitted(site, capture, slurm)
    assert watch(slurm, capture)["changed"] == 1  # pending in Slurm: only the launches say so
    assert set(Launch.objects.filter(job=job).values_list("reason", flat=True)) == {"pending in Slurm as job 100"}
    assert watch(slurm, capture)["changed"] == 0 and Job.objects.get(pk=job.pk).status == JobStatus.ADMITTED
    fake.set(sid, "RUNNING")
    watch(slurm, capture)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and states(job) == [("gpu0001", "running"), ("gpu0002", "running")]
    fake.set(sid, "COMPLETED", exit_code="0:0")
    watch(slurm, capture)
    job.refresh_from_db()
    assert (job.status, job.status_reason) == (JobStatus.COMPLETED, "exited 0 on gpu0001, gpu0002")
    assert set(Launch.objects.filter(job=job).values_list("returncode", flat=True)) == {0}
    assert not Allocation.objects.filter(job=job, active=True).exists()
    assert watch(slurm, capture)["changed"] == 0  # Slurm still lists it for MinJobAge: nothing more happens


def test_a_job_that_fails_in_slurm_fails_with_its_exit_code(
    site, sent, fake, slurm, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    job, sid = submitted(site, capture, slurm)
    fake.set(sid, "RUNNING")
    watch(slurm, capture)
    fake.set(sid, "FAILED", exit_code="3:0")
    watch(slurm, capture)
    job.refresh_from_db()
    assert (job.status, job.status_reason) == (JobStatus.FAILED, "Slurm job 100 ended FAILED (exit 3)")
    assert set(Launch.objects.filter(job=job).values_list("state", "returncode")) == {("exited", 3)}


def test_a_job_slurm_requeues_is_requeued_here_and_its_slurm_job_cancelled(
    site, sent, fake, slurm, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    job, sid = submitted(site, capture, slurm)
    fake.set(sid, "RUNNING")
    watch(slurm, capture)
    fake.set(sid, "PENDING", reason="BeginTime", restarts=1)  # an admin's scontrol requeue
    watch(slurm, capture)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.status_reason.startswith("Slurm job 100 was requeued by Slurm")
    assert states(job) == [("gpu0001", "lost"), ("gpu0002", "lost")]
    assert not Allocation.objects.filter(job=job, active=True).exists()
    assert watch(slurm, capture)["cancelled"] == 1 and fake.jobs[sid].state == "CANCELLED"  # never runs twice


def test_a_job_slurm_forgot_is_requeued(site, sent, fake, slurm, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job, sid = submitted(site, capture, slurm)
    fake.set(sid, "RUNNING")
    watch(slurm, capture)
    del fake.jobs[sid]  # slurmctld restarted without its state
    assert watch(slurm, capture)["lost"] == 1
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and "is gone from Slurm" in job.status_reason


def test_pending_on_a_drained_node_past_the_ack_timeout_rolls_back(
    site, sent, fake, slurm, django_capture_on_commit_callbacks, settings
):
    capture = django_capture_on_commit_callbacks
    job, sid = submitted(site, capture, slurm)
    fake.set(sid, "PENDING", reason="ReqNodeNotAvail,_UnavailableNodes:gpu0002")
    assert watch(slurm, capture)["changed"] == 1  # only the reason on the launches, before the timeout
    assert Job.objects.get(pk=job.pk).status == JobStatus.ADMITTED
    later = timezone.now() + timedelta(seconds=settings.LAUNCH_ACK_TIMEOUT_S + 1)
    watch(slurm, capture, now=later)
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING
    assert job.status_reason.startswith("Slurm could not start job 100 within 120 s: ReqNodeNotAvail")
    assert watch(slurm, capture)["cancelled"] == 1 and fake.jobs[sid].state == "CANCELLED"


def test_resources_pending_past_the_ack_timeout_waits(
    site, sent, fake, slurm, django_capture_on_commit_callbacks, settings
):
    capture = django_capture_on_commit_callbacks
    job, sid = submitted(site, capture, slurm)
    fake.set(sid, "PENDING", reason="Resources")
    later = timezone.now() + timedelta(seconds=settings.LAUNCH_ACK_TIMEOUT_S + 1)
    watch(slurm, capture, now=later)
    with capture(execute=True):
        lifecycle.sweep(now=later)  # the sweep's ack timeout leaves a submitted generation to the watcher
    assert Job.objects.get(pk=job.pk).status == JobStatus.ADMITTED


def test_sbatch_refusing_the_nodes_requeues_with_its_message(
    site, sent, slurm, fake, django_capture_on_commit_callbacks
):
    fake.nodes = {"gpu0001"}
    job = placed(site, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert slurm_launches.submit(job.pk, 1, slurm=slurm) == "refused"
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING
    assert job.status_reason == (
        "Slurm refused the job: Batch job submission failed: Invalid node name specified; requeued"
    )
    assert states(job) == [("gpu0001", "refused"), ("gpu0002", "refused")]
    assert not Allocation.objects.filter(job=job, active=True).exists()


def test_what_slurm_cannot_run_fails_with_the_reason(site, sent, slurm, fake, django_capture_on_commit_callbacks):
    job = placed(site, django_capture_on_commit_callbacks, command="")
    with django_capture_on_commit_callbacks(execute=True):
        assert slurm_launches.submit(job.pk, 1, slurm=slurm) == "refused"
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.status_reason.startswith(
        f"cannot run in Slurm: job {job.pk}: no command"
    )
    assert not fake.jobs


def test_slurm_down_leaves_the_submit_to_a_retry(site, sent, slurm, fake, django_capture_on_commit_callbacks):
    job = placed(site, django_capture_on_commit_callbacks)
    fake.down = True
    with pytest.raises(slurm_launches.SlurmUnavailable, match="Unable to contact slurm controller"):
        slurm_launches.submit(job.pk, 1, slurm=slurm)
    assert states(job) == [("gpu0001", "sent"), ("gpu0002", "sent")]
    fake.down = False
    with django_capture_on_commit_callbacks(execute=True):
        assert slurm_launches.submit(job.pk, 1, slurm=slurm) == "submitted"  # the retry


def test_cancel_signals_the_slurm_job_and_answers_every_node(
    site, sent, slurm, fake, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    job, sid = submitted(site, capture, slurm)
    fake.set(sid, "RUNNING")
    watch(slurm, capture)
    sent.clear()
    with capture(execute=True):
        actions.cancel_job(Job.objects.get(pk=job.pk), actor="test")
    assert sent == [("slurm_stop", "slurm", (job.pk, 1, 30, "cancel"))]
    with capture(execute=True):
        result = slurm_launches.stop(job.pk, 1, 30, "cancel", slurm=slurm)
    assert result["exited_within_grace"] is True and fake.jobs[sid].signals == ["TERM"]
    assert states(job) == [("gpu0001", "stopped"), ("gpu0002", "stopped")]
    assert not [name for name, _, _ in sent if name.startswith("node_")]  # no node agent is told anything
    assert watch(slurm, capture)["cancelled"] == 0


def test_a_stop_before_the_submits_answer_finds_the_job_by_its_comment(
    site, sent, slurm, fake, django_capture_on_commit_callbacks
):
    """Cancelled while the submit's answer was on its way: the generation's Slurm job is cancelled by the watcher."""
    capture = django_capture_on_commit_callbacks
    job = placed(site, capture)
    payloads = list(Launch.objects.filter(job=job).values_list("payload", flat=True))
    slurm.submit(spec_from_payloads(payloads))
    with capture(execute=True):
        actions.cancel_job(Job.objects.get(pk=job.pk), actor="test")
    assert states(job) == [("gpu0001", "stopped"), ("gpu0002", "stopped")]  # never started here
    with capture(execute=True):
        assert slurm_launches.submit(job.pk, 1, slurm=slurm) == "skipped"
    assert watch(slurm, capture)["cancelled"] == 1 and fake.jobs[100].state == "CANCELLED"


def test_strays_of_our_tag_are_cancelled_and_other_jobs_left_alone(
    site, sent, slurm, fake, django_capture_on_commit_callbacks
):
    fake._sbatch(["sbatch", "--job-name=cc-999-g3", f"--comment={comment(TAG, 999, 3)}", "--nodelist=gpu0001"], {}, "")
    fake._sbatch(
        ["sbatch", "--job-name=cc-998-g1", f"--comment={comment('other', 998, 1)}", "--nodelist=gpu0001"], {}, ""
    )
    fake._sbatch(["sbatch", "--job-name=train", "--comment=", "--nodelist=gpu0001"], {}, "")
    assert watch(slurm, django_capture_on_commit_callbacks)["cancelled"] == 1
    assert [j.state for j in fake.jobs.values()] == ["CANCELLED", "PENDING", "PENDING"]


def test_the_sweep_resends_an_unanswered_submit_once(site, sent, django_capture_on_commit_callbacks, settings):
    job = placed(site, django_capture_on_commit_callbacks)
    sent.clear()
    later = timezone.now() + timedelta(seconds=settings.LAUNCH_RESEND_S + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert lifecycle.sweep(now=later)["resent"] == 1
        assert lifecycle.sweep(now=later)["resent"] == 0
    assert sent == [("slurm_submit", "slurm", (job.pk, 1))]


def test_the_log_api_says_where_slurm_writes_the_output(site, sent, slurm, django_capture_on_commit_callbacks):
    job, sid = submitted(site, django_capture_on_commit_callbacks, slurm)
    body = lifecycle.read_log(job, 10)
    assert body["detail"] == (f"runs in Slurm as job {sid}: Slurm writes its output to /shared/out/cc-{job.pk}-g1-"
                              f"{sid}.out (on the job's first node)")  # fmt: skip
