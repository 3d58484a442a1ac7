"""NodeLedger: a node refuses GPUs it does not have or that another job on it holds."""

from __future__ import annotations

import os
import time

import pytest

from scheduler.launch.env import GpuShare
from scheduler.launch.ledger import NodeLedger
from scheduler.launch.process import ProcessLauncher
from scheduler.launch.run_dir import LaunchError, LaunchRefused, RunState, boot_id, create_time, write_state
from tests.scheduler.launch.helpers import wait_for

GPUS = ("GPU-aaaa", "GPU-bbbb", "GPU-cccc")
MIG = {"MIG-1111": "GPU-cccc", "MIG-2222": "GPU-cccc"}


def hold(run_dir, job: int, *shares: GpuShare, running: bool = True, kind: str = "process") -> None:
    """A state file for a job that holds shares: this test process stands in for the job's process."""
    pid = os.getpid()
    started = create_time(pid) if running else create_time(pid) - 1  # a different start time: not running
    write_state(run_dir, RunState(job, 2, kind, pid, started, boot_id(), time.time(), list(shares)))


@pytest.fixture
def ledger(tmp_path):
    return NodeLedger("gpu07", GPUS, tmp_path, mig_devices=MIG)


def test_a_gpu_the_node_does_not_have(ledger):
    with pytest.raises(LaunchRefused) as info:
        ledger.check(5, [GpuShare("GPU-aaaa", 0), GpuShare("GPU-zzzz", 3)])
    assert str(info.value) == (
        "gpu07: job 5 asks for GPU GPU-zzzz, which this node does not have (it has: GPU-aaaa, GPU-bbbb, GPU-cccc)"
    )


def test_a_gpu_held_whole_by_another_job(ledger, tmp_path):
    hold(tmp_path, 1, GpuShare("GPU-bbbb", 1))
    ledger.check(5, [GpuShare("GPU-aaaa", 0)])  # another GPU: fine
    with pytest.raises(LaunchRefused) as info:
        ledger.check(5, [GpuShare("GPU-aaaa", 0), GpuShare("GPU-bbbb", 1)])
    assert str(info.value) == (
        f"gpu07: job 5 cannot take GPU GPU-bbbb: job 1 (generation 2, process pid {os.getpid()}) holds it whole"
    )
    ledger.check(1, [GpuShare("GPU-bbbb", 1)])  # a job never conflicts with itself (a relaunch on the same GPU)


def test_a_holder_that_no_longer_runs_holds_nothing(ledger, tmp_path):
    hold(tmp_path, 1, GpuShare("GPU-bbbb", 1), running=False)  # its pid now belongs to someone else
    ledger.check(5, [GpuShare("GPU-bbbb", 1)])
    assert ledger.holders() == []


def test_mps_shares_add_up_to_100(ledger, tmp_path):
    hold(tmp_path, 1, GpuShare("GPU-aaaa", 0, "mps", compute_pct=60))
    hold(tmp_path, 2, GpuShare("GPU-aaaa", 0, "mps", compute_pct=30))
    ledger.check(5, [GpuShare("GPU-aaaa", 0, "mps", compute_pct=10)])
    with pytest.raises(LaunchRefused, match=r"cannot take 20 % of GPU GPU-aaaa: MPS shares would reach 110 %"):
        ledger.check(5, [GpuShare("GPU-aaaa", 0, "mps", compute_pct=20)])
    with pytest.raises(LaunchRefused, match=r"GPU GPU-aaaa: job 1 .* holds an MPS share of it \(60 %\)"):
        ledger.check(5, [GpuShare("GPU-aaaa", 0)])  # a whole GPU next to MPS clients


def test_mig_instances(ledger, tmp_path):
    hold(tmp_path, 1, GpuShare("GPU-cccc", 2, "mig", mig_uuid="MIG-1111"))
    ledger.check(5, [GpuShare("GPU-cccc", 2, "mig", mig_uuid="MIG-2222")])  # another instance of the same GPU
    with pytest.raises(LaunchRefused, match=r"cannot take GPU MIG-1111: job 1 .* holds its MIG device MIG-1111"):
        ledger.check(5, [GpuShare("GPU-cccc", 2, "mig", mig_uuid="MIG-1111")])
    with pytest.raises(LaunchRefused, match="MIG device 'MIG-9999', which does not exist on this node"):
        ledger.check(5, [GpuShare("GPU-cccc", 2, "mig", mig_uuid="MIG-9999")])
    with pytest.raises(LaunchRefused, match="MIG device MIG-2222 belongs to GPU GPU-cccc, not GPU-aaaa"):
        ledger.check(5, [GpuShare("GPU-aaaa", 0, "mig", mig_uuid="MIG-2222")])
    with pytest.raises(LaunchRefused, match="holds its MIG device"):
        ledger.check(5, [GpuShare("GPU-cccc", 2)])  # the whole GPU under a MIG instance


def test_time_slices_share_but_not_with_other_kinds(ledger, tmp_path):
    hold(tmp_path, 1, GpuShare("GPU-aaaa", 0, "timeslice"))
    ledger.check(5, [GpuShare("GPU-aaaa", 0, "timeslice")])
    with pytest.raises(LaunchRefused, match="holds a time-slice replica of it"):
        ledger.check(5, [GpuShare("GPU-aaaa", 0, "mps", compute_pct=10)])


def test_a_container_whose_pid_is_unknown_holds_its_gpus(ledger, tmp_path):
    write_state(tmp_path, RunState(3, 1, "container", 0, 0, boot_id(), time.time(), [GpuShare("GPU-aaaa", 0)]))
    with pytest.raises(LaunchRefused, match=r"job 3 .*container pid 0"):
        ledger.check(5, [GpuShare("GPU-aaaa", 0)])


def test_an_unreadable_state_file_is_an_error_not_a_free_gpu(ledger, tmp_path):
    (tmp_path / "job-4.json").write_text("{not json")
    with pytest.raises(LaunchError, match=r"state file .*job-4.json is unreadable"):
        ledger.check(5, [GpuShare("GPU-aaaa", 0)])


def test_the_launcher_consults_the_ledger(tmp_path, program, spec):
    run_dir = tmp_path / "run"
    launcher = ProcessLauncher(run_dir, ledger=NodeLedger("gpu07", GPUS, run_dir))
    sleeper = program("sleep", "import time\ntime.sleep(30)\n")
    launcher.start(spec(1, sleeper, gpus=(GpuShare("GPU-aaaa", 0),)))
    try:
        with pytest.raises(LaunchRefused, match="cannot take GPU GPU-aaaa: job 1 "):
            launcher.start(spec(2, sleeper, gpus=(GpuShare("GPU-bbbb", 1), GpuShare("GPU-aaaa", 0))))
        assert launcher.status(2) is None  # refused: nothing started, no state written
    finally:
        launcher.stop(1, grace_s=1)
    launcher.start(spec(2, sleeper, gpus=(GpuShare("GPU-aaaa", 0),)))  # free once job 1 has stopped
    assert wait_for(lambda: launcher.status(2).state == "running")
    launcher.stop(2, grace_s=0)
