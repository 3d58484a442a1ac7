"""The job lifecycle end to end, with real processes: real Redis, a central Celery worker (rounds, acks), one Celery
worker per fake node consuming queue node.<name> (the node agents, each with its own run directory), and the process
launcher running small Python programs written to tmp. No GPU: the generated cluster's GPU UUIDs only travel in the
job environment.

- a 2-node job starts only once both nodes acknowledged (one agent down: prepared on one node, nothing started;
  rolled back and requeued after the ack timeout), gets consistent ranks, completes and frees its GPUs;
- a preempted job gets SIGTERM, writes its checkpoint within its grace period, is requeued and relaunched on other
  GPUs, where it resumes from that checkpoint;
- a job that ignores SIGTERM is killed after its grace period, and the stop says so;
- a node agent killed mid-job and restarted adopts the job: exactly one copy runs, and its exit is still reported.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from django.test import override_settings

from clusterctl.celery import app
from fabric.models import GPU, Node
from scheduler import actions
from scheduler.actions.lifecycle import sweep
from scheduler.choices import JobStatus
from scheduler.launch.process import ProcessLauncher
from scheduler.models import Allocation, GpuLedger, Job, JobEvent, Launch, PriorityClass
from tests.factories import fat_tree
from tests.processes import child_env, stop_process, wait_for
from tests.scheduler.api.helpers import token_client
from tests.scheduler.launch.helpers import gone

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("the workers need a database the test shares"),
]
ROOT = Path(__file__).resolve().parents[3]
# Node names of this run only: queues node.<name> live in a Redis other test runs share (their telemetry tests
# consume node.gpu0001), and a message of ours must never reach another run's worker.
RUN = uuid.uuid4().hex[:6]
NODES = (f"gpu{RUN}-1", f"gpu{RUN}-2")


class Workers:
    """The central worker and the node agents, as real `celery worker` processes (solo pool, like one agent)."""

    def __init__(self, root: Path, queue: str) -> None:
        self.root, self.queue = root, queue
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self, name: str) -> dict[str, str]:
        extra = {"CELERY_TASK_ALWAYS_EAGER": "0", "CELERY_TASK_DEFAULT_QUEUE": self.queue, "LAUNCHER": "process"}
        if name != "central":
            extra.update(
                CLUSTERCTL_NODE_NAME=name,
                CLUSTERCTL_RUN_DIR=str(self.run_dir(name)),
                CLUSTERCTL_LOG_DIR=str(self.root / name / "logs"),
                CLUSTERCTL_CHECKPOINT_ROOT=str(self.root / "checkpoints"),  # shared storage: one directory
                CLUSTERCTL_WATCH_INTERVAL_S="0.2",
            )
        return child_env(**extra)

    def run_dir(self, name: str) -> Path:
        return self.root / name / "run"

    def start(self, name: str) -> None:
        queue = self.queue if name == "central" else f"node.{name}"
        log = open(self.root / f"worker-{name}.log", "a")  # the worker writes it until stopped
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "clusterctl", "worker", "-Q", queue, "--pool", "solo",
             "-n", f"{name}-{self.queue}@%h", "--without-heartbeat", "--without-gossip", "--without-mingle",
             "-l", "INFO"],
            cwd=ROOT, env=self.env(name), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()

    def ensure(self, *names: str) -> None:
        for name in names:
            if name not in self.procs or self.procs[name].poll() is not None:
                self.start(name)

    def stop(self, name: str, *, kill: bool = False) -> None:
        stop_process(self.procs.pop(name, None), kill=kill)

    def said(self, name: str) -> str:
        path = self.root / f"worker-{name}.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        for name in NODES:  # a failed test leaves no job behind
            launcher = ProcessLauncher(self.run_dir(name))
            for found in launcher.adopt():
                if found.state == "running":
                    launcher.stop(found.job_id, grace_s=0)


@pytest.fixture(scope="module")
def workers(django_db_setup, tmp_path_factory):
    root = tmp_path_factory.mktemp("lifecycle")
    queue = f"central-{uuid.uuid4().hex[:8]}"
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, queue
    found = Workers(root, queue)
    found.ensure("central", *NODES)
    try:
        with override_settings(LAUNCHER="process"):
            yield found
    finally:
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        found.close()


@pytest.fixture
def site(workers):
    cluster = fat_tree(f"life-{uuid.uuid4().hex[:6]}", nodes=2, gpus_per_node=2, leaf_ports=8)
    for old, new in zip(("gpu0001", "gpu0002"), NODES, strict=True):
        Node.objects.filter(cluster=cluster, hostname=old).update(hostname=new)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme", max_priority="high")
    actions.set_quota(tenant, pool, guaranteed_gpus=8, borrow_limit=8)
    classes = {p.name: p for p in PriorityClass.objects.all()}

    def submit(name: str, gpus: int, command: str, priority: str = "normal", **request) -> Job:
        return actions.submit_job(tenant, pool, classes[priority], name=name, gpus=gpus, command=command, **request)

    return cluster, tenant, submit


def program(workers: Workers, name: str, code: str) -> str:
    path = workers.root / f"{name}.py"
    path.write_text(textwrap.dedent(code))
    return f"{sys.executable} {path}"


def status(job: Job) -> str:
    job.refresh_from_db()
    return job.status


def launches(job: Job, generation: int | None = None) -> list[Launch]:
    rows = Launch.objects.filter(job=job).order_by("generation", "hostname")
    return list(rows if generation is None else rows.filter(generation=generation))


def must(predicate, what: str, workers: Workers, timeout: float = 30.0) -> None:
    if not wait_for(predicate, timeout=timeout, every=0.1):
        logs = "\n".join(f"--- {n}:\n{workers.said(n)}" for n in ("central", *NODES))
        pytest.fail(f"timed out waiting for {what}\n{logs}")


def copies(script: str) -> list[int]:
    """Processes running `python script ...` (the shim's own command line starts `python -I shim`)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if len(argv) > 1 and argv[1].decode() == script and state != "Z":
            pids.append(int(entry.name))
    return pids


RANKS = """
    import json, os, pathlib, sys
    out = pathlib.Path(sys.argv[1])
    keys = ["CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NNODES", "NODE_RANK", "RANK",
            "LOCAL_WORLD_SIZE", "CLUSTERCTL_JOB_ID", "CLUSTERCTL_GENERATION", "CLUSTERCTL_CHECKPOINT_DIR"]
    seen = {k: os.environ.get(k) for k in keys}
    seen["hostfile"] = pathlib.Path(os.environ["CLUSTERCTL_HOSTFILE"]).read_text()
    seen["cwd"] = os.getcwd()
    (out / f"rank-{os.environ['NODE_RANK']}.json").write_text(json.dumps(seen))
    print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], "on", os.environ["NODE_RANK"], flush=True)
"""


def test_two_node_job_starts_only_when_both_nodes_acknowledged(workers, site, tenant_user, tenant_api):
    cluster, tenant, submit = site
    workers.stop(NODES[1])  # its agent is down: its queue keeps the messages
    out = workers.root / "ranks"
    out.mkdir()
    job = submit("ranks", 4, f"{program(workers, 'ranks', RANKS)} {out}", nodes=2, gpus_per_node=2)

    # Phase 1 only: node 1 prepared, node 2 silent; nothing starts anywhere.
    must(lambda: [la.state for la in launches(job)] == ["prepared", "sent"], "node 1 to prepare", workers)
    time.sleep(1.0)
    assert status(job) == JobStatus.ADMITTED and not list(out.iterdir())
    assert [la.state for la in launches(job)] == ["prepared", "sent"]

    # The ack timeout rolls it back: GPUs released, requeued (and placed again by the next round: generation 2).
    with override_settings(LAUNCH_ACK_TIMEOUT_S=0.5):
        assert sweep()["timed_out"] == 2
    first = launches(job, 1)
    assert [(la.hostname, la.state) for la in first] == [(NODES[0], "stopped"), (NODES[1], "timed_out")]
    assert JobEvent.objects.filter(job=job, reason__contains=f"{NODES[1]} did not acknowledge the launch").exists()
    must(lambda: len(launches(job, 2)) == 2, "the job to be placed again", workers)

    workers.ensure(NODES[1])  # the agent comes back: the stale prepare is ignored, generation 2 runs
    must(lambda: status(job) == JobStatus.COMPLETED, "the 2-node job to complete", workers)
    ranks = [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert not (out / "rank-2.json").exists()
    same = ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NNODES", "CLUSTERCTL_JOB_ID", "CLUSTERCTL_GENERATION",
            "CLUSTERCTL_CHECKPOINT_DIR", "hostfile", "cwd"]  # fmt: skip
    assert {k: ranks[0][k] for k in same} == {k: ranks[1][k] for k in same}
    assert (ranks[0]["MASTER_ADDR"], ranks[0]["WORLD_SIZE"], ranks[0]["NNODES"]) == (NODES[0], "4", "2")
    assert ranks[0]["CLUSTERCTL_GENERATION"] == "2" and ranks[0]["CLUSTERCTL_JOB_ID"] == str(job.pk)
    assert ranks[0]["hostfile"] == f"{NODES[0]} slots=2\n{NODES[1]} slots=2\n"
    assert [(r["NODE_RANK"], r["RANK"], r["LOCAL_WORLD_SIZE"]) for r in ranks] == [("0", "0", "2"), ("1", "2", "2")]
    for rank, host in enumerate(NODES):
        uuids = GPU.objects.filter(node__cluster=cluster, node__hostname=host).order_by("index")
        assert ranks[rank]["CUDA_VISIBLE_DEVICES"] == ",".join(g.uuid for g in uuids)
    checkpoints = str(workers.root / "checkpoints" / f"job-{job.pk}")
    assert ranks[0]["cwd"] == ranks[0]["CLUSTERCTL_CHECKPOINT_DIR"] == checkpoints  # the default working directory

    # Both ranks exited 0; the GPUs are free in the ledger and in the allocations.
    assert [(la.state, la.returncode) for la in launches(job, 2)] == [("exited", 0), ("exited", 0)]
    assert not Allocation.objects.filter(job=job, active=True).exists()
    assert set(GpuLedger.objects.filter(gpu__node__cluster=cluster).values_list("compute_pct", flat=True)) == {0}
    must(lambda: not any((workers.run_dir(h) / f"job-{job.pk}.json").exists() for h in NODES), "forget", workers, 10)

    # Its log, from both nodes, for its own tenant only.
    actions.add_member(tenant, tenant_user)
    # The agent just restarted works through its backlog first; on a busy host that took over the 5 s default.
    with override_settings(LAUNCH_LOG_TIMEOUT_S=30):
        body = tenant_api.get(f"/api/v1/jobs/{job.pk}/log/?lines=3").json()
    assert [n["host"] for n in body["nodes"]] == list(NODES) and body["generation"] == 2, body
    for rank, node in enumerate(body["nodes"]):
        assert node["lines"][1:] == [f"rank {2 * rank} of 4 on {rank}", "--- clusterctl: job exited with code 0 ---"], (
            body
        )
        assert node["lines"][0].startswith(f"--- clusterctl: job {job.pk} generation 2 on {node['host']} at ")
    other = actions.create_tenant("other")
    intruder = type(tenant_user).objects.create_user("intruder", "i@example.org", "pw")
    actions.add_member(other, intruder)
    api = token_client(intruder)
    assert api.get(f"/api/v1/jobs/{job.pk}/log/").status_code == 404


CHECKPOINTS = """
    import os, pathlib, signal, sys, time
    ckpt = pathlib.Path(os.environ["CLUSTERCTL_CHECKPOINT_DIR"]) / "state"
    out = pathlib.Path(sys.argv[1])
    if ckpt.exists():
        with out.open("a") as f:
            print(f"resumed from {ckpt.read_text()} in generation {os.environ['CLUSTERCTL_GENERATION']}", file=f)
        sys.exit(0)
    step = 0
    def on_term(signum, frame):
        ckpt.write_text(f"step {step}")
        with out.open("a") as f:
            print(f"checkpointed step {step} on SIGTERM", file=f)
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    while True:
        step += 1
        time.sleep(0.05)
"""
SLEEPS = "import sys, time; time.sleep(float(sys.argv[1]))"


def test_preempted_job_checkpoints_and_resumes_on_another_allocation(workers, site):
    cluster, _, submit = site
    workers.ensure(*NODES)
    out = workers.root / "preempted.txt"
    sleeper = program(workers, "sleeps", SLEEPS)
    other = submit("other", 2, f"{sleeper} 6", preemptible=False)  # ends in 6 s: its GPUs are the next free ones
    victim = submit("victim", 2, f"{program(workers, 'ckpt', CHECKPOINTS)} {out}", priority="low", grace_period_s=10)
    must(lambda: status(victim) == status(other) == JobStatus.RUNNING, "both jobs to run", workers)
    first = launches(victim)[0].hostname

    urgent = submit("urgent", 2, f"{sleeper} 60", priority="high")
    must(lambda: status(urgent) == JobStatus.RUNNING, "the urgent job to run on the victim's GPUs", workers)
    assert launches(urgent)[0].hostname == first
    stop = launches(victim, 1)[0]
    assert (stop.state, stop.stop_why, stop.exited_within_grace, stop.returncode) == ("stopped", "preemption", True, 0)
    assert out.read_text().startswith("checkpointed step ")
    saved = (workers.root / "checkpoints" / f"job-{victim.pk}" / "state").read_text()
    history = list(JobEvent.objects.filter(job=victim).values_list("to_status", flat=True))
    assert history[:4] == ["pending", "admitted", "running", "preempted"] and "pending" in history[4:]

    must(lambda: status(victim) == JobStatus.COMPLETED, "the victim to resume and complete", workers)
    relaunch = launches(victim)[-1]
    assert relaunch.generation > 1 and relaunch.hostname != first  # another allocation
    assert out.read_text().splitlines()[-1] == f"resumed from {saved} in generation {relaunch.generation}"

    actions.cancel_job(urgent, actor="test")  # a cancel stops it the same way (it dies of SIGTERM at once)
    must(lambda: launches(urgent)[0].exited_within_grace is not None, "the cancelled job's stop", workers, 15)
    assert launches(urgent)[0].exited_within_grace is True and launches(urgent)[0].returncode == -signal.SIGTERM
    must(lambda: status(other) == JobStatus.COMPLETED, "the other job to complete", workers)
    assert not Allocation.objects.filter(job__pool__cluster=cluster, active=True).exists()


IGNORES = """
    import os, pathlib, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
    while True:
        time.sleep(0.05)
"""


def test_job_ignoring_sigterm_is_killed_after_its_grace_period(workers, site):
    _, _, submit = site
    workers.ensure(*NODES)
    ready = workers.root / "ignores.pid"
    job = submit("stubborn", 1, f"{program(workers, 'ignores', IGNORES)} {ready}", grace_period_s=2)
    must(lambda: ready.exists() and status(job) == JobStatus.RUNNING, "the stubborn job to run", workers)
    pid = int(ready.read_text())
    began = time.monotonic()
    actions.cancel_job(job, actor="test")
    must(lambda: launches(job)[0].exited_within_grace is False, "the stop to report the kill", workers, 20)
    assert time.monotonic() - began >= 2.0
    stop = launches(job)[0]
    assert (stop.state, stop.returncode, stop.stop_why) == ("stopped", -signal.SIGKILL, "cancel")
    assert not copies(str(workers.root / "ignores.py")) and gone(pid)
    assert JobEvent.objects.filter(job=job, reason__contains="still running after its 2 s grace period").exists()


LONG = """
    import os, pathlib, sys, time
    with open(sys.argv[1], "a") as f:
        print(os.getpid(), file=f)
    time.sleep(float(sys.argv[2]))
"""


def test_agent_killed_mid_job_and_restarted_leaves_exactly_one_copy(workers, site):
    _, _, submit = site
    workers.ensure(*NODES)
    pids = workers.root / "long.pids"
    script = program(workers, "long", LONG)
    job = submit("long", 1, f"{script} {pids} 7")
    must(lambda: status(job) == JobStatus.RUNNING and pids.exists(), "the job to run", workers)
    host = launches(job)[0].hostname
    (pid,) = copies(script.split()[1])

    workers.stop(host, kill=True)  # SIGKILL: the agent dies, the job (its own session) does not
    assert copies(script.split()[1]) == [pid]
    workers.ensure(host)  # the new agent says hello: the job is adopted, not started again, not killed
    must(lambda: f"agent {host} is back: {{'keep': 1, 'kill': 0," in workers.said("central"), "the hello", workers)
    time.sleep(1.0)
    assert copies(script.split()[1]) == [pid] and pids.read_text().split() == [str(pid)]
    state = json.loads((workers.run_dir(host) / f"job-{job.pk}.json").read_text())
    assert (state["pid"], state["generation"]) != (0, 0) and status(job) == JobStatus.RUNNING

    must(lambda: status(job) == JobStatus.COMPLETED, "the adopted job's exit to be reported", workers)
    assert [(la.state, la.returncode) for la in launches(job)] == [("exited", 0)]
    assert pids.read_text().split() == [str(pid)] and os.path.exists(workers.run_dir(host))
