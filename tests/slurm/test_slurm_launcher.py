"""The Slurm launcher against a real Slurm (tests/slurm/emu.py: 4 emulated nodes x 8 GPUs): a job submitted for
clusterctl's chosen nodes runs there and nowhere else, each node with its own ranks; a redelivered submit finds the
job instead of submitting it twice; a stop is SIGTERM then the kill; a node Slurm does not know is refused with
sbatch's message. Skipped, saying so, where the Slurm binaries are missing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from scheduler.launch.env import GpuShare, JobAllocation, NodeAllocation
from scheduler.launch.slurm import SlurmError, SlurmLauncher, expand_nodes, spec_from_allocation
from tests.slurm.emu import MISSING, PATHS, SKIP_REASON, SlurmEmu

pytestmark = pytest.mark.skipif(bool(MISSING), reason=SKIP_REASON)


@pytest.fixture(scope="module")
def slurm():
    emu = SlurmEmu(nodes=4, gpus=8).start()
    try:
        yield emu
    finally:
        emu.stop()


def _launcher(slurm) -> SlurmLauncher:
    return SlurmLauncher("cctest", slurm_conf=str(slurm.conf), bindir=str(Path(PATHS["sbatch"]).parent))


def _spec(slurm, job_id, hosts, gpus, command, generation=1, grace_s=5.0):
    nodes = tuple(NodeAllocation(h, tuple(GpuShare(uuid=f"GPU-{h}-{i}", index=i) for i in range(gpus))) for h in hosts)
    alloc = JobAllocation(job_id=job_id, nodes=nodes, generation=generation, master_port=29500 + job_id)
    return spec_from_allocation(alloc, command=command, workdir=str(slurm.run / "out"), exclusive=gpus == 8,
                                grace_s=grace_s, output=str(slurm.run / "out" / f"job-{job_id}.out"))  # fmt: skip


def _wait(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    return predicate()


def test_runs_on_exactly_the_chosen_nodes_with_each_nodes_ranks(slurm):
    launcher = _launcher(slurm)
    out = slurm.run / "out"
    spec = _spec(
        slurm,
        7,
        ["gpu2", "gpu4"],
        3,
        f"echo $SLURMD_NODENAME $NODE_RANK $RANK $WORLD_SIZE > {out}/r7-$NODE_RANK; sleep 30",
    )
    sid, again = launcher.submit(spec)
    assert again is False
    running = _wait(lambda: (j := launcher.status(sid)) and j.state == "RUNNING" and j)
    assert expand_nodes(running.nodes) == ["gpu2", "gpu4"]
    squeue = slurm.cmd("squeue", "-h", "-j", str(sid), "-o", "%N").stdout.strip()
    assert squeue == "gpu[2,4]"
    assert _wait(lambda: (out / "r7-0").exists() and (out / "r7-1").exists())
    assert (out / "r7-0").read_text().split() == ["gpu2", "0", "0", "6"]
    assert (out / "r7-1").read_text().split() == ["gpu4", "1", "3", "6"]
    # A submit delivered twice (the worker died before its answer) finds the job: one Slurm job, not two.
    assert launcher.submit(spec) == (sid, True)
    assert [key for key, _ in launcher.ours()] == [(7, 1)]
    # Slurm may not requeue it behind clusterctl's back (--no-requeue).
    assert "disabled" in slurm.cmd("scontrol", "requeue", str(sid)).stderr
    stopped = launcher.stop(sid, grace_s=1.0)
    assert stopped["found"] is True
    assert _wait(lambda: launcher.status(sid).ended)


def test_a_job_that_ignores_sigterm_is_killed_after_its_grace(slurm):
    launcher = _launcher(slurm)
    sid, _ = launcher.submit(_spec(slurm, 8, ["gpu1"], 8, "trap '' TERM; sleep 60 & wait; sleep 60", grace_s=2.0))
    assert _wait(lambda: launcher.status(sid).state == "RUNNING")
    time.sleep(1)
    stopped = launcher.stop(sid, grace_s=2.0)
    assert stopped["exited_within_grace"] is False and stopped["waited_s"] >= 2.0
    assert _wait(lambda: launcher.status(sid).ended)


def test_a_node_slurm_does_not_know_is_refused_with_sbatchs_reason(slurm):
    with pytest.raises(SlurmError, match="Invalid node name specified"):
        _launcher(slurm).submit(_spec(slurm, 9, ["gpu9"], 1, "true"))


def test_a_command_that_fails_ends_failed_with_its_code(slurm):
    launcher = _launcher(slurm)
    sid, _ = launcher.submit(_spec(slurm, 10, ["gpu3"], 2, "exit 3"))
    job = _wait(lambda: (j := launcher.status(sid)) and j.ended and j)
    assert (job.state, job.exit_code) == ("FAILED", 3)
