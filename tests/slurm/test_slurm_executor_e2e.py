"""LAUNCHER=slurm end to end: clusterctl places, a real Slurm (tests/slurm/emu.py, 22.05 from Debian) runs.

Real processes throughout: PostgreSQL and Redis, a central Celery worker (rounds, launches), and the Slurm submit
host's worker (queue `slurm`: sbatch, scancel, the watcher) with SLURM_CONF pointing at the emulated cluster, whose
node names are the stored cluster's (gpu0001..gpu0004). The test plays beat: it sends slurm_watch to the submit
host's queue.

- a 2-node job placed by a round runs in Slurm on exactly the nodes clusterctl chose, each node with its own ranks,
  and completes here once Slurm says it completed;
- the submit host's worker killed after sbatch went through but before its answer was recorded, then restarted: the
  watcher adopts the Slurm job (one Slurm job, never two), and a redelivered submit changes nothing;
- a cancelled job that ignores SIGTERM is killed in Slurm after its grace period, and the stop says so;
- a generation Slurm holds pending on a drained node is rolled back after the ack timeout and its Slurm job
  cancelled.
Skipped, saying so, where the Slurm binaries are missing."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.test import override_settings

from clusterctl.celery import app
from scheduler import actions, tasks
from scheduler.choices import JobStatus
from scheduler.enqueue import DEBOUNCE_S
from scheduler.launch.slurm import parse_comment
from scheduler.models import Job, Launch, PriorityClass
from scheduler.rounds import run_round
from tests.factories import fat_tree
from tests.processes import child_env, stop_process, wait_for
from tests.slurm.emu import MISSING, PATHS, SKIP_REASON, SlurmEmu

pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=SKIP_REASON),
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("the workers need a database the test shares"),
]
ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("gpu0001", "gpu0002", "gpu0003", "gpu0004")
RUN = uuid.uuid4().hex[:6]
TAG = f"e2e-{RUN}"
ACK_TIMEOUT_S = 4

SBATCH = """#!/bin/sh
# The real sbatch, then (while {hold} exists) a long pause before its answer: the test kills the worker there.
out=$({sbatch} "$@") || {{ rc=$?; echo "$out"; exit $rc; }}
echo "$out" >> {mark}
while [ -e {hold} ]; do sleep 0.2; done
echo "$out"
"""


class Workers:
    def __init__(self, root: Path, emu: SlurmEmu) -> None:
        self.root, self.emu = root, emu
        self.central, self.slurm = f"central-{RUN}", f"slurm-{RUN}"
        self.bindir = root / "bin"
        self.bindir.mkdir()
        self.mark, self.hold = root / "sbatch-went-through", root / "hold-sbatch-answer"
        (self.bindir / "sbatch").write_text(SBATCH.format(sbatch=PATHS["sbatch"], mark=self.mark, hold=self.hold))
        (self.bindir / "sbatch").chmod(0o755)
        for name in ("squeue", "scancel", "scontrol", "sinfo"):
            (self.bindir / name).symlink_to(PATHS.get(name) or f"/usr/bin/{name}")
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self) -> dict[str, str]:
        return child_env(
            CELERY_TASK_ALWAYS_EAGER="0", CELERY_TASK_DEFAULT_QUEUE=self.central, LAUNCHER="slurm",
            SLURM_QUEUE=self.slurm, SLURM_TAG=TAG, SLURM_CONF=str(self.emu.conf), SLURM_BINDIR=str(self.bindir),
            SLURM_OUTPUT_DIR=str(self.emu.run / "out"), LAUNCH_ACK_TIMEOUT_S=str(ACK_TIMEOUT_S),
        )  # fmt: skip

    def start(self, name: str) -> None:
        queue = self.central if name == "central" else self.slurm
        log = open(self.root / f"worker-{name}.log", "a")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "clusterctl", "worker", "-Q", queue, "--pool", "solo",
             "-n", f"{name}-{RUN}@%h", "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "INFO"],
            cwd=ROOT, env=self.env(), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()

    def stop(self, name: str, *, kill: bool = False) -> None:
        stop_process(self.procs.pop(name, None), kill=kill)

    def said(self) -> str:
        return "\n".join(f"--- {p.name}:\n{p.read_text()[-3000:]}" for p in sorted(self.root.glob("worker-*.log")))

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until no worker holds a task (running, prefetched or waiting for its countdown): cancel_job
        enqueues a debounced round, and one that runs while the test's tables are truncated deadlocks the
        flush. A solo worker answers remote control only between tasks."""
        names = [f"{name}-{RUN}@{socket.gethostname()}" for name in self.procs]
        deadline, quiet = time.monotonic() + timeout, 0
        while time.monotonic() < deadline:
            probe = app.control.inspect(destination=names, timeout=1.0)
            views = [probe.active(), probe.reserved(), probe.scheduled()]
            idle = all(v is not None and len(v) == len(names) and not any(v.values()) for v in views)
            quiet = quiet + 1 if idle else 0
            if quiet == 2:  # twice in a row: a task finishing may enqueue another
                return
            time.sleep(0.5)
        pytest.fail(f"the workers did not go idle in {timeout:.0f} s\n{self.said()}")

    def watch(self) -> None:
        """What beat does every SLURM_WATCH_INTERVAL_S."""
        tasks.slurm_watch.apply_async(queue=self.slurm)


@pytest.fixture(scope="module")
def emu():
    cluster = SlurmEmu(names=list(HOSTS), gpus=2).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def workers(django_db_setup, emu, tmp_path_factory):
    found = Workers(tmp_path_factory.mktemp("slurm-e2e"), emu)
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, found.central
    found.start("central")
    found.start("submit")
    try:
        with override_settings(LAUNCHER="slurm", SLURM_QUEUE=found.slurm, SLURM_TAG=TAG):
            yield found
    finally:
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        for name in list(found.procs):
            found.stop(name)


@pytest.fixture
def site(workers):
    cluster = fat_tree(f"sl-{uuid.uuid4().hex[:6]}", nodes=4, gpus_per_node=2, leaf_ports=8)
    assert sorted(cluster.nodes.values_list("hostname", flat=True)) == list(HOSTS)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant(f"acme-{uuid.uuid4().hex[:4]}", max_priority="high")
    actions.set_quota(tenant, pool, guaranteed_gpus=8, borrow_limit=8)
    normal = PriorityClass.objects.get(name="normal")

    def submit(gpus: int, command: str, **request) -> Job:
        job = actions.submit_job(tenant, pool, normal, name="e2e", gpus=gpus, command=command, **request)
        run_round(cluster.pk, "test")
        return job

    yield cluster, submit
    for job in Job.objects.filter(pool=pool, status__in=[JobStatus.ADMITTED, JobStatus.RUNNING]):
        actions.cancel_job(job, actor="test")  # a failed test leaves nothing running in Slurm
    workers.emu.cmd("scancel", "--partition=gpu")
    time.sleep(DEBOUNCE_S)  # the cancels' debounced round reaches the central worker's schedule
    workers.settle()


def status(job: Job) -> str:
    job.refresh_from_db()
    return job.status


def must(predicate, what: str, workers: Workers, timeout: float = 40.0, *, watch: bool = True) -> None:
    def step():
        if watch:
            workers.watch()
        return predicate()

    if not wait_for(step, timeout=timeout, every=0.5):
        pytest.fail(f"timed out waiting for {what}\n{workers.said()}")


def slurm_jobs(emu: SlurmEmu, job: Job) -> list[tuple[str, str]]:
    """(Slurm id, state) of every Slurm job of ours for the job, whatever its state (squeue -t all)."""
    out = emu.cmd("squeue", "-h", "-a", "-t", "all", "-o", "%i|%k|%T").stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return [(sid, state) for sid, com, state in rows if (parse_comment(com, TAG) or (0,))[0] == job.pk]


def test_a_placed_job_runs_in_slurm_on_the_chosen_nodes_and_completes(site, workers):
    out = workers.emu.run / "out"
    _, submit = site
    command = f"echo $SLURMD_NODENAME $NODE_RANK $RANK $WORLD_SIZE > {out}/j$CLUSTERCTL_JOB_ID-$NODE_RANK; sleep 2"
    job = submit(4, command, nodes=2, gpus_per_node=2)
    must(lambda: status(job) == JobStatus.RUNNING, "the job running in Slurm", workers)
    chosen = sorted(Launch.objects.filter(job=job).values_list("hostname", flat=True))
    assert len(chosen) == 2
    must(lambda: status(job) == JobStatus.COMPLETED, "the job completed", workers)
    ranks = sorted((out / f"j{job.pk}-{r}").read_text().split() for r in (0, 1))
    assert ranks == [[chosen[0], "0", "0", "4"], [chosen[1], "1", "2", "4"]]
    (sid, state), *more = slurm_jobs(workers.emu, job)
    assert not more and state == "COMPLETED"
    assert set(Launch.objects.filter(job=job).values_list("slurm_job_id", "state", "returncode")) == {
        (int(sid), "exited", 0)
    }


def test_the_submit_worker_killed_after_sbatch_is_adopted_on_restart(site, workers):
    _, submit = site
    workers.hold.touch()
    workers.mark.unlink(missing_ok=True)
    job = submit(2, "sleep 3", nodes=1, gpus_per_node=2)
    must(lambda: workers.mark.exists(), "sbatch to go through", workers, watch=False)
    workers.stop("submit", kill=True)  # between sbatch and recording its answer
    workers.hold.unlink()
    assert set(Launch.objects.filter(job=job).values_list("state", "slurm_job_id")) == {("sent", None)}
    workers.start("submit")
    must(lambda: status(job) in (JobStatus.RUNNING, JobStatus.COMPLETED), "the restarted worker to adopt it", workers)
    tasks.slurm_submit.apply_async((job.pk, 1), queue=workers.slurm)  # the killed task's redelivery
    must(lambda: status(job) == JobStatus.COMPLETED, "the adopted job completed", workers)
    assert len(slurm_jobs(workers.emu, job)) == 1  # one Slurm job, never two
    assert job.events.filter(reason__startswith="found in Slurm after its submit's answer was lost").exists()


def test_a_cancelled_job_that_ignores_sigterm_is_killed_after_its_grace(site, workers):
    _, submit = site
    job = submit(2, "trap '' TERM; sleep 60 & wait; sleep 60", nodes=1, gpus_per_node=2, grace_period_s=2)
    must(lambda: status(job) == JobStatus.RUNNING, "the job running in Slurm", workers)
    actions.cancel_job(job, actor="test")
    must(lambda: set(Launch.objects.filter(job=job).values_list("state", flat=True)) == {"stopped"},
         "the stop's answer", workers, watch=False)  # fmt: skip
    (la,) = Launch.objects.filter(job=job)
    assert (
        la.exited_within_grace is False and la.reason == "still running after its 2 s grace period: killed with SIGKILL"
    )
    must(lambda: all(state in ("CANCELLED", "COMPLETED", "FAILED") for _, state in slurm_jobs(workers.emu, job)),
         "Slurm to end it", workers, watch=False)  # fmt: skip


def test_pending_on_a_drained_node_is_rolled_back_and_cancelled(site, workers):
    _, submit = site
    emu = workers.emu
    for host in HOSTS:
        emu.cmd("scontrol", "update", f"NodeName={host}", "State=DRAIN", "Reason=e2e", check=True)
    try:
        job = submit(2, "true", nodes=1, gpus_per_node=2)
        must(lambda: Launch.objects.filter(job=job, state="starting").exists(), "the submit", workers)
        must(lambda: status(job) == JobStatus.PENDING, "the rollback after the ack timeout", workers)
        assert "Slurm could not start job" in job.status_reason and "ReqNodeNotAvail" in job.status_reason
        actions.cancel_job(job, actor="test")  # or the next round places it on the drained nodes again
        must(lambda: all(state == "CANCELLED" for _, state in slurm_jobs(emu, job)), "its Slurm job cancelled", workers)
    finally:
        for host in HOSTS:
            emu.cmd("scontrol", "update", f"NodeName={host}", "State=RESUME")
