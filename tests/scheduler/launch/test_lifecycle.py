"""The central side of the lifecycle against the database, with the node messages captured instead of sent: two-phase
start, completion, refusal and rollback, failure, preemption and migration (GPUs held until the nodes stopped the
job), cancel, timeouts, an agent's hello after a restart, and the twin playing jobs."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import transaction
from django.utils import timezone

from fabric.models import GPU
from scheduler import actions, enqueue, tasks
from scheduler.actions import lifecycle
from scheduler.actions.allocations import ShareSpec
from scheduler.choices import JobStatus
from scheduler.models import Allocation, Job, JobEvent, Launch, PriorityClass
from scheduler.rounds import run_round
from scheduler.snapshot_from_db import build_snapshot
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db
NODE_TASKS = ("node_prepare", "node_start", "node_stop", "node_forget")


@pytest.fixture
def sent(monkeypatch, settings):
    """Node messages, captured: (task, host queue, args). Rounds are run by the tests only."""
    settings.LAUNCHER = "process"
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: None)
    box: list[tuple[str, str, tuple]] = []
    for name in NODE_TASKS:
        task = getattr(tasks, name)
        monkeypatch.setattr(task, "apply_async", lambda args, name=name, **kw: box.append((name, kw["queue"], args)))
    return box


@pytest.fixture
def site(db):
    cluster = fat_tree("life", nodes=2, gpus_per_node=2, leaf_ports=8)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme", max_priority="high")
    actions.set_quota(tenant, pool, guaranteed_gpus=8, borrow_limit=8)
    normal = PriorityClass.objects.get(name="normal")

    def submit(gpus: int = 2, **request) -> Job:
        request.setdefault("command", "python train.py")
        return actions.submit_job(tenant, pool, normal, name="j", gpus=gpus, **request)

    return SimpleNamespace(cluster=cluster, pool=pool, tenant=tenant, submit=submit)


def test_placed_jobs_go_to_launch_in_messages_of_200_each_shown_briefly(
    settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.LAUNCHER = "process"
    box = []
    monkeypatch.setattr(tasks.launch_jobs, "apply_async", lambda args, **kw: box.append((args, kw)))
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.launch_on_commit(range(1000, 1450))
    assert [args for args, _ in box] == [(list(range(1000, 1200)),), (list(range(1200, 1400)),),
                                         (list(range(1400, 1450)),)]  # fmt: skip
    # The monitoring headers name each message's jobs in a few words, not by 200 ids.
    assert [kw["argsrepr"] for _, kw in box] == [
        "([200 jobs: 1000..1199],)", "([200 jobs: 1200..1399],)", "([50 jobs: 1400..1449],)"
    ]  # fmt: skip


def placed(site, sent, django_capture_on_commit_callbacks, **request) -> Job:
    """A job placed by a real round and launched: its prepares are in `sent`."""
    job = site.submit(**request)
    run_round(site.cluster.pk, "test")
    job.refresh_from_db()
    assert (job.status, job.generation) == (JobStatus.ADMITTED, 1)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.launch_job(job.pk)
    return job


def answer(job: Job, host: str, generation: int | None = None, **fields) -> dict:
    return {"job_id": job.pk, "generation": generation or job.generation, "host": host, **fields}


def start(job, sent, capture, pid=100) -> None:
    """Every node of the job prepared and started it."""
    hosts = list(Launch.objects.filter(job=job, generation=job.generation).values_list("hostname", flat=True))
    with capture(execute=True):
        for host in hosts:
            lifecycle.record_prepared(answer(job, host, ok=True, reason=""))
        for i, host in enumerate(hosts):
            lifecycle.record_started(answer(job, host, ok=True, pid=pid + i, reason=""))
    job.refresh_from_db()


def states(job: Job) -> list[tuple]:
    return list(Launch.objects.filter(job=job).order_by("generation", "hostname").values_list("hostname", "state"))


def test_a_gang_starts_only_when_every_node_prepared_and_completes(site, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job = placed(site, sent, capture, gpus=4, nodes=2, gpus_per_node=2)
    assert [(n, q) for n, q, _ in sent] == [("node_prepare", "node.gpu0001"), ("node_prepare", "node.gpu0002")]
    payload = sent[0][2][0]
    assert payload["allocation"]["nodes"][1]["hostname"] == "gpu0002" and payload["command"] == "python train.py"
    assert [g["uuid"] for g in payload["allocation"]["nodes"][0]["gpus"]] == list(
        GPU.objects.filter(node__hostname="gpu0001", node__cluster=site.cluster).order_by("index")
        .values_list("uuid", flat=True)
    )  # fmt: skip
    with capture(execute=True):
        lifecycle.record_prepared(answer(job, "gpu0001", ok=True, reason=""))
        lifecycle.record_prepared(answer(job, "gpu0001", ok=True, reason=""))  # redelivered: nothing more
    assert len(sent) == 2 and states(job) == [("gpu0001", "prepared"), ("gpu0002", "sent")]
    with capture(execute=True):
        lifecycle.record_prepared(answer(job, "gpu0002", ok=True, reason=""))
    assert [(n, q) for n, q, _ in sent[2:]] == [("node_start", "node.gpu0001"), ("node_start", "node.gpu0002")]
    with capture(execute=True):
        lifecycle.record_started(answer(job, "gpu0001", ok=True, pid=11))
    assert Job.objects.get(pk=job.pk).status == JobStatus.ADMITTED
    with capture(execute=True):
        lifecycle.record_started(answer(job, "gpu0002", ok=True, pid=12))
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and job.status_reason == "started on gpu0001 (pid 11), gpu0002 (pid 12)"

    with capture(execute=True):
        lifecycle.record_exit("gpu0002", {"job_id": job.pk, "generation": 1, "state": "exited", "returncode": 0})
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING  # rank 0 still runs
    with capture(execute=True):
        lifecycle.record_exit("gpu0001", {"job_id": job.pk, "generation": 1, "state": "exited", "returncode": 0})
    job.refresh_from_db()
    assert (job.status, job.status_reason) == (JobStatus.COMPLETED, "exited 0 on gpu0001, gpu0002")
    assert not Allocation.objects.filter(job=job, active=True).exists()
    assert [(n, a) for n, _, a in sent[4:]] == [("node_forget", ("gpu0002", job.pk, 1)),
                                                ("node_forget", ("gpu0001", job.pk, 1))]  # fmt: skip


def test_the_nodes_are_told_the_tenants_user(site, sent, django_capture_on_commit_callbacks):
    site.tenant.run_as = "2001:2001"
    site.tenant.save(update_fields=["run_as"])
    placed(site, sent, django_capture_on_commit_callbacks)
    assert {args[0]["run_as"] for name, _, args in sent if name == "node_prepare"} == {"2001:2001"}


def test_a_refusal_rolls_back_and_requeues(site, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job = placed(site, sent, capture, gpus=4, nodes=2, gpus_per_node=2)
    with capture(execute=True):
        lifecycle.record_prepared(answer(job, "gpu0001", ok=True, reason=""))
        lifecycle.record_prepared(answer(job, "gpu0002", ok=False, reason="gpu0002: job 1 cannot take GPU X"))
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.status_reason.startswith("gpu0002 refused the launch: gpu0002:")
    assert states(job) == [("gpu0001", "stopped"), ("gpu0002", "refused")]
    assert not Allocation.objects.filter(job=job, active=True).exists()
    assert [n for n, _, _ in sent] == ["node_prepare", "node_prepare"]  # nothing had started: nothing to stop


def test_a_failing_rank_fails_the_job_and_stops_the_others(site, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job = placed(site, sent, capture, gpus=4, nodes=2, gpus_per_node=2)
    start(job, sent, capture)
    sent.clear()
    with capture(execute=True):
        lifecycle.record_exit("gpu0002", {"job_id": job.pk, "generation": 1, "state": "exited", "returncode": 3})
    job.refresh_from_db()
    assert (job.status, job.status_reason) == (JobStatus.FAILED, "exited with code 3 on gpu0002")
    assert not Allocation.objects.filter(job=job, active=True).exists()
    assert sent == [("node_stop", "node.gpu0001", ("gpu0001", job.pk, 1, 30, "failure")),
                    ("node_forget", "node.gpu0002", ("gpu0002", job.pk, 1))]  # fmt: skip
    with capture(execute=True):
        lifecycle.record_stopped(answer(job, "gpu0001", ok=True, found=True, exited_within_grace=False,
                                        returncode=-9, waited_s=30.0, already_exited=False))  # fmt: skip
    la = Launch.objects.get(job=job, hostname="gpu0001")
    assert (la.state, la.exited_within_grace, la.returncode) == ("stopped", False, -9)
    assert JobEvent.objects.filter(job=job, reason="gpu0001: still running after its 30 s grace period: killed "
                                   "with SIGKILL").exists()  # fmt: skip


def test_preemption_keeps_the_gpus_until_the_nodes_stopped_it(site, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job = placed(site, sent, capture, grace_period_s=12)
    start(job, sent, capture)
    sent.clear()
    with capture(execute=True), transaction.atomic():
        lifecycle.preempt(job, "preempted for job 99", 99)
    job.refresh_from_db()
    assert job.status == JobStatus.PREEMPTED and Allocation.objects.filter(job=job, active=True).count() == 2
    host = Launch.objects.get(job=job).hostname
    assert sent == [("node_stop", f"node.{host}", (host, job.pk, 1, 12, "preemption"))]
    snapshot, _ = build_snapshot(site.cluster.pk)  # the round sees it stopping: its preemptor waits for it
    assert [(r.request.id, r.stopping) for r in snapshot.running] == [(job.pk, True)]

    with capture(execute=True):
        lifecycle.record_stopped(answer(job, host, ok=True, found=True, exited_within_grace=True,
                                        returncode=0, waited_s=1.25, already_exited=False))  # fmt: skip
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and not Allocation.objects.filter(job=job, active=True).exists()
    assert job.status_reason == "requeued after preemption (stopped within its grace period)"
    assert JobEvent.objects.filter(
        job=job, reason=f"{host}: exited 1.2 s after SIGTERM, within its 12 s grace period (code 0)"
    ).exists()
    with capture(execute=True):  # the watcher's report of the same end comes later: nothing changes
        lifecycle.record_exit(host, {"job_id": job.pk, "generation": 1, "state": "exited", "returncode": 0})
    assert Job.objects.get(pk=job.pk).status == JobStatus.PENDING


def test_migration_relaunches_the_next_generation_on_the_new_gpus(site, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job = placed(site, sent, capture)
    start(job, sent, capture)
    old = set(Allocation.objects.filter(job=job, active=True).values_list("gpu__node__hostname", flat=True))
    target = "gpu0002" if old == {"gpu0001"} else "gpu0001"
    gpus = GPU.objects.filter(node__hostname=target, node__cluster=site.cluster)
    new = [ShareSpec(g.pk, "whole", 100, g.memory_mib) for g in gpus]
    move = SimpleNamespace(reason="link hot", placement=SimpleNamespace(nodes=(target,), explanation="cooler"))
    sent.clear()
    with capture(execute=True), transaction.atomic():
        lifecycle.migrate(job, move, new, 1, None, timezone.now())
    job.refresh_from_db()
    assert job.status == JobStatus.MIGRATING and Allocation.objects.filter(job=job, active=True).count() == 4
    assert [n for n, _, _ in sent] == ["node_stop"]
    with capture(execute=True):
        lifecycle.record_stopped(answer(job, sent[0][2][0], ok=True, found=True, exited_within_grace=True,
                                        returncode=0, waited_s=2.0, already_exited=False))  # fmt: skip
    job.refresh_from_db()
    assert (job.status, job.generation) == (JobStatus.ADMITTED, 2)
    held = set(Allocation.objects.filter(job=job, active=True).values_list("gpu__node__hostname", flat=True))
    assert held == {target}  # the old GPUs are released, the new ones kept
    prepare = [a for n, _, a in sent if n == "node_prepare"]  # launch_jobs ran (eagerly) after the commit
    assert [(p[0]["host"], p[0]["generation"]) for p in prepare] == [(target, 2)]


def test_cancel_stops_what_runs(site, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job = placed(site, sent, capture, grace_period_s=5)
    start(job, sent, capture)
    sent.clear()
    with capture(execute=True):
        actions.cancel_job(job, actor="t")
    host = Launch.objects.get(job=job).hostname
    assert sent == [("node_stop", f"node.{host}", (host, job.pk, 1, 5, "cancel"))]
    assert Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED


def test_timeouts_roll_back_and_give_up(site, sent, django_capture_on_commit_callbacks, settings):
    capture = django_capture_on_commit_callbacks
    job = placed(site, sent, capture)
    later = timezone.now() + timedelta(seconds=settings.LAUNCH_ACK_TIMEOUT_S + 1)
    with capture(execute=True):
        assert lifecycle.sweep(later)["timed_out"] == 1
    job.refresh_from_db()
    host = Launch.objects.get(job=job).hostname
    assert job.status == JobStatus.PENDING
    assert f"{host} did not acknowledge the launch within 120 s" in job.status_reason
    assert states(job) == [(host, "timed_out")]

    other = placed(site, sent, capture)  # a preempted job whose node never confirms the stop
    start(other, sent, capture)
    with capture(execute=True), transaction.atomic():
        lifecycle.preempt(other, "preempted", None)
    much_later = timezone.now() + timedelta(seconds=other.grace_period_s + settings.LAUNCH_STOP_TIMEOUT_S + 1)
    with capture(execute=True):
        swept = lifecycle.sweep(much_later)
        assert swept["stops_given_up"] == 1, swept
    other.refresh_from_db()
    assert other.status == JobStatus.PENDING and not Allocation.objects.filter(job=other, active=True).exists()
    assert Launch.objects.get(job=other).state == "lost"


def test_admitted_jobs_whose_launch_was_lost_are_launched_by_the_sweep(site, sent):
    job = site.submit()
    run_round(site.cluster.pk, "test")  # the launch_jobs message never went out (no commit here)
    assert lifecycle.sweep()["launched"] == 1 and Launch.objects.filter(job=job).count() == 1


def test_agent_hello_adopts_kills_reports_and_marks_lost(site, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    starting = placed(site, sent, capture, gpus=1)
    with capture(execute=True):  # prepared, the start sent; its answer gets lost with the agent
        lifecycle.record_prepared(answer(starting, Launch.objects.get(job=starting).hostname, ok=True, reason=""))
    running = placed(site, sent, capture, gpus=1)
    start(running, sent, capture, pid=200)
    finished = placed(site, sent, capture, gpus=1)
    start(finished, sent, capture, pid=300)
    vanished = placed(site, sent, capture, gpus=1)
    start(vanished, sent, capture, pid=400)
    hosts = dict(Launch.objects.values_list("job_id", "hostname"))
    assert len(set(hosts.values())) == 2
    host = hosts[starting.pk]
    mine = [j for j in (running, finished, vanished) if hosts[j.pk] == host]
    found = [
        {"job_id": starting.pk, "generation": 1, "pid": 111, "state": "running", "returncode": None},
        {"job_id": 999_999, "generation": 3, "pid": 5, "state": "running", "returncode": None},  # an orphan
        {"job_id": 999_998, "generation": 1, "pid": 6, "state": "exited", "returncode": 0},  # ended, unknown
    ]
    for job in mine:
        if job is running:
            found.append({"job_id": job.pk, "generation": 1, "pid": 200, "state": "running", "returncode": None})
        elif job is finished:
            found.append({"job_id": job.pk, "generation": 1, "pid": 300, "state": "exited", "returncode": 0})
    sent.clear()
    with capture(execute=True):
        counts = lifecycle.agent_hello(host, found)
    assert Job.objects.get(pk=starting.pk).status == JobStatus.RUNNING  # adopted: started, not started again
    assert Launch.objects.get(job=starting).pid == 111
    assert ("node_stop", f"node.{host}", (host, 999_999, 3, 10, "orphan")) in sent
    assert ("node_forget", f"node.{host}", (host, 999_998, 1)) in sent
    assert not any(n == "node_start" for n, _, _ in sent)
    expected = {"keep": 1 + (running in mine), "kill": 1, "stop_again": 0, "report": int(finished in mine),
                "forget": 1, "missing": int(vanished in mine)}  # fmt: skip
    assert counts == expected
    if finished in mine:
        assert Job.objects.get(pk=finished.pk).status == JobStatus.COMPLETED
    if vanished in mine:  # its node restarted without it: requeued (it did not opt out)
        assert Job.objects.get(pk=vanished.pk).status == JobStatus.PENDING
        assert Launch.objects.get(job=vanished).state == "lost"


def test_agent_hello_asks_again_to_stop_what_is_still_running(site, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    job = placed(site, sent, capture)
    start(job, sent, capture)
    with capture(execute=True), transaction.atomic():
        lifecycle.preempt(job, "preempted", None)
    sent.clear()
    host = Launch.objects.get(job=job).hostname
    with capture(execute=True):
        counts = lifecycle.agent_hello(
            host, [{"job_id": job.pk, "generation": 1, "pid": 100, "state": "running", "returncode": None}]
        )
    assert counts["stop_again"] == 1
    assert sent == [("node_stop", f"node.{host}", (host, job.pk, 1, 30, "stop again"))]


def test_the_twin_plays_jobs_until_their_estimated_runtime(site, settings):
    settings.LAUNCHER = "twin"
    job = site.submit(est_runtime_s=60)
    run_round(site.cluster.pk, "test")
    job.refresh_from_db()
    assert (job.status, job.generation) == (JobStatus.RUNNING, 1) and not Launch.objects.exists()
    assert lifecycle.sweep()["twin_finished"] == 0
    assert lifecycle.sweep(timezone.now() + timedelta(seconds=61))["twin_finished"] == 1
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED and job.events.last().actor == "twin"
    assert lifecycle.read_log(job, 10)["detail"].startswith("the twin plays this job")
