"""Observing a real Slurm (tests/slurm/emu.py, Debian's 22.05; node names those of the stored cluster): jobs sbatch'd
straight to Slurm appear here read-only on the GPUs slurmd bound them to, a pending one with Slurm's reason, and
what Slurm ended ends here. Skipped, saying so, where the Slurm binaries are missing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from scheduler import actions, enqueue, slurm_mirror
from scheduler.choices import JobStatus
from scheduler.launch.slurm import SlurmLauncher
from scheduler.models import Allocation, Job
from tests.factories import fat_tree
from tests.slurm.emu import MISSING, PATHS, SKIP_REASON, SlurmEmu

pytestmark = [pytest.mark.skipif(bool(MISSING), reason=SKIP_REASON), pytest.mark.django_db]
HOSTS = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]


@pytest.fixture(scope="module")
def emu():
    cluster = SlurmEmu(names=HOSTS, gpus=8).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def sbatch(emu: SlurmEmu, *args: str) -> int:
    out = emu.run / "out"
    done = emu.cmd("sbatch", "--parsable", f"--chdir={out}", f"--output={out}/%j.out", *args, check=True)
    return int(done.stdout.strip().split(";")[0])


def test_slurms_own_jobs_appear_read_only_and_end_here_when_they_end_there(emu, monkeypatch):
    monkeypatch.setattr(enqueue, "request_round", lambda cluster_id, trigger, **kwargs: None)
    cluster = fat_tree("observed", nodes=4, gpus_per_node=8, leaf_ports=16)
    actions.ensure_scheduler(cluster)
    slurm = SlurmLauncher(slurm_conf=str(emu.conf), bindir=str(Path(PATHS["sbatch"]).parent))
    train = sbatch(emu, "--job-name=train", "--nodes=2", "--gres=gpu:8", "--exclusive", "--wrap=sleep 60")
    short = sbatch(emu, "--job-name=short", "--nodelist=gpu0003", "--gres=gpu:3", "--wrap=sleep 3")
    wide = sbatch(emu, "--job-name=wide", "--nodes=4", "--gres=gpu:8", "--exclusive", "--wrap=true")
    deadline = time.monotonic() + 20
    while "RUNNING" not in emu.cmd("squeue", "-h", "-j", str(short), "-o", "%T").stdout and time.monotonic() < deadline:
        time.sleep(0.2)
    slurm_mirror.observe(["observed"], slurm=slurm)
    mirrored = {j.observed_slurm_id: j for j in Job.objects.filter(pool__cluster=cluster)}
    assert mirrored[train].status == JobStatus.RUNNING and mirrored[train].tenant.name == "slurm"
    train_gpus = Allocation.objects.filter(job=mirrored[train], active=True).values_list(
        "gpu__node__hostname", flat=True
    )
    assert len(train_gpus) == 16 and len(set(train_gpus)) == 2
    short_gpus = Allocation.objects.filter(job=mirrored[short], active=True)
    assert sorted(short_gpus.values_list("gpu__node__hostname", "gpu__index")) == [("gpu0003", i) for i in range(3)]
    assert (mirrored[wide].status, mirrored[wide].pending_reason) == (JobStatus.PENDING, "Slurm: Resources")
    deadline = time.monotonic() + 20
    while "COMPLETED" not in emu.cmd("scontrol", "show", "job", str(short)).stdout and time.monotonic() < deadline:
        time.sleep(0.3)
    emu.cmd("scancel", str(train), check=True)
    deadline = time.monotonic() + 20
    while (
        "JobState=CANCELLED" not in emu.cmd("scontrol", "show", "job", str(train)).stdout
        and time.monotonic() < deadline
    ):
        time.sleep(0.3)
    slurm_mirror.observe(["observed"], slurm=slurm)
    assert Job.objects.get(observed_slurm_id=short).status == JobStatus.COMPLETED
    assert Job.objects.get(observed_slurm_id=train).status == JobStatus.CANCELLED
    assert not Allocation.objects.filter(job__observed_slurm_id__in=[train, short], active=True).exists()
    emu.cmd("scancel", "--partition=gpu")
