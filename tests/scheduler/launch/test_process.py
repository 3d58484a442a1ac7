"""The process launcher with real Python programs: start, exit codes, logs, stop with grace, adoption."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.launch.env import GpuShare
from scheduler.launch.process import ProcessLauncher, tail_lines
from scheduler.launch.run_dir import LaunchError, LaunchRefused, RunState, boot_id, create_time, write_state
from tests.scheduler.launch.helpers import gone, wait_for

ROOT = Path(__file__).resolve().parents[3]

CHECKPOINTS_ON_SIGTERM = """
    import os, pathlib, signal, sys, time
    ckpt = pathlib.Path(os.environ["CKPT"])
    def on_term(signum, frame):
        ckpt.write_text("step 41")
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    pathlib.Path(os.environ["READY"]).write_text("ready")
    while True:
        time.sleep(0.05)
"""

IGNORES_SIGTERM = """
    import os, pathlib, signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pathlib.Path(os.environ["READY"]).write_text("ready")
    while True:
        time.sleep(0.05)
"""


@pytest.fixture
def launcher(tmp_path):
    launcher = ProcessLauncher(tmp_path / "run", hostname="node-a")
    yield launcher
    for found in launcher.adopt():  # a failed test leaves no process behind
        if found.state == "running":
            launcher.stop(found.job_id, grace_s=0)


def test_start_exit_code_and_log_tail(launcher, program, spec):
    script = program("count", "import sys\nfor i in range(200): print('line', i)\nsys.exit(3)\n")
    state = launcher.start(spec(1, script))
    assert state.pid > 0 and state.kind == "process"
    assert wait_for(lambda: launcher.poll(1) is not None)
    status = launcher.status(1)
    assert (status.state, status.returncode) == ("exited", 3)
    assert launcher.tail(1, 3) == ["line 198", "line 199", "--- clusterctl: job exited with code 3 ---"]
    first = Path(state.log_path).read_text().splitlines()[0]
    assert first.startswith("--- clusterctl: job 1 generation 1 on node-a at ")


def test_environment_and_workdir_are_exactly_the_jobs(launcher, program, spec, monkeypatch):
    # The agent's own secrets never reach a job.
    monkeypatch.setenv("REDIS_URL", "redis://agent-secret@broker/0")
    script = program("env", "import json, os\nprint(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))\n")
    launcher.start(spec(2, script, env={"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"}, hostfile="gpu1 slots=2\n"))
    assert wait_for(lambda: launcher.poll(2) == 0)
    seen = json.loads(launcher.tail(2, 2)[0])
    assert "REDIS_URL" not in seen["env"]
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-b"
    assert Path(seen["env"]["CLUSTERCTL_HOSTFILE"]).read_text() == "gpu1 slots=2\n"
    assert seen["cwd"].endswith("/work")


def test_log_is_appended_across_generations(launcher, program, spec):
    script = program("hello", "print('hello')\n")
    launcher.start(spec(3, script, generation=1))
    assert wait_for(lambda: launcher.poll(3) == 0)
    launcher.start(spec(3, script, generation=2))
    assert wait_for(lambda: launcher.poll(3) == 0)
    text = Path(launcher.status(3).log_path).read_text()
    assert text.count("hello\n") == 2
    assert "generation 1" in text and "generation 2" in text


def test_state_file_records_identity(launcher, program, spec, tmp_path):
    script = program("sleep", "import time\ntime.sleep(30)\n")
    gpus = (GpuShare("GPU-x", 0),)
    state = launcher.start(spec(4, script, generation=6, gpus=gpus))
    saved = json.loads((tmp_path / "run" / "job-4.json").read_text())
    assert saved["job_id"] == 4 and saved["generation"] == 6 and saved["pid"] == state.pid
    assert saved["create_time"] == create_time(state.pid) and saved["boot_id"] == boot_id()
    assert saved["gpus"] == [
        {"uuid": "GPU-x", "index": 0, "kind": "whole", "compute_pct": 100, "memory_mib": 0, "mig_uuid": ""}
    ]
    assert os.getpgid(state.pid) == state.pid  # it leads its own process group
    launcher.stop(4, 1)


def test_start_is_idempotent_per_generation_and_refuses_a_second_generation(launcher, program, spec):
    script = program("sleep", "import time\ntime.sleep(30)\n")
    first = launcher.start(spec(5, script))
    assert launcher.start(spec(5, script)).pid == first.pid  # a retried launch task starts nothing new
    with pytest.raises(LaunchRefused, match=r"job 5 generation 1 still runs .*stop it before launching generation 2"):
        launcher.start(spec(5, script, generation=2))
    launcher.stop(5, 1)


def test_sigterm_handled_within_grace(launcher, program, spec, tmp_path):
    ckpt, ready = tmp_path / "ckpt", tmp_path / "ready"
    launcher.start(spec(6, program("ckpt", CHECKPOINTS_ON_SIGTERM), env={"CKPT": str(ckpt), "READY": str(ready)}))
    assert wait_for(ready.exists)
    result = launcher.stop(6, grace_s=5)
    assert result.exited_within_grace is True
    assert result.returncode == 0 and result.waited_s < 5
    assert ckpt.read_text() == "step 41"
    assert launcher.status(6).state == "exited"


def test_sigterm_ignored_is_killed_after_grace(launcher, program, spec, tmp_path):
    ready = tmp_path / "ready"
    state = launcher.start(spec(7, program("stubborn", IGNORES_SIGTERM), env={"READY": str(ready)}))
    assert wait_for(ready.exists)
    began = time.monotonic()
    result = launcher.stop(7, grace_s=0.5)
    assert result.exited_within_grace is False
    assert result.returncode == -9
    assert 0.5 <= result.waited_s and time.monotonic() - began < 5
    assert (launcher.status(7).state, launcher.poll(7)) == ("exited", -9)
    assert gone(state.pid)


def test_stop_reaches_the_whole_group(launcher, program, spec, tmp_path):
    # The job's own children (a data loader, a shell pipeline) stop with it.
    code = """
        import os, pathlib, subprocess, time
        child = subprocess.Popen(["sleep", "60"])
        pathlib.Path(os.environ["READY"]).write_text(str(child.pid))
        time.sleep(60)
    """
    ready = tmp_path / "ready"
    launcher.start(spec(8, program("parent", code), env={"READY": str(ready)}))
    assert wait_for(lambda: ready.exists() and ready.read_text())
    grandchild = int(ready.read_text())
    result = launcher.stop(8, grace_s=5)
    assert result.exited_within_grace and result.returncode == -15  # default SIGTERM action: killed by 15
    assert wait_for(lambda: gone(grandchild))


def test_stop_after_exit_and_of_nothing(launcher, program, spec):
    launcher.start(spec(9, program("quick", "raise SystemExit(4)\n")))
    assert wait_for(lambda: launcher.poll(9) == 4)
    result = launcher.stop(9, grace_s=5)
    assert result.already_exited and result.returncode == 4
    assert launcher.stop(999, grace_s=5) is None


def test_bad_workdir_and_missing_command(launcher, program, spec):
    script = program("x", "pass\n")
    good = spec(10, script)
    with pytest.raises(LaunchError, match="working directory /nonexistent/dir does not exist on node-a"):
        launcher.start(type(good)(10, 1, good.command, good.env, "/nonexistent/dir"))
    with pytest.raises(LaunchError, match="no command"):
        launcher.start(type(good)(10, 1, "  ", good.env, good.workdir))
    launcher.start(type(good)(11, 1, ["no-such-program-here"], good.env, good.workdir))
    assert wait_for(lambda: launcher.poll(11) == 127)
    assert "cannot start 'no-such-program-here'" in "\n".join(launcher.tail(11))


def test_shell_command_string(launcher, spec, program):
    good = spec(12, program("x", "pass\n"))
    launcher.start(type(good)(12, 1, "echo one && echo two; exit 5", good.env, good.workdir))
    assert wait_for(lambda: launcher.poll(12) == 5)
    assert launcher.tail(12, 3)[:2] == ["one", "two"]


def test_forget(launcher, program, spec, tmp_path):
    launcher.start(spec(13, program("sleep", "import time\ntime.sleep(30)\n"), hostfile="a slots=1\n"))
    with pytest.raises(LaunchError, match="still runs"):
        launcher.forget(13)
    launcher.stop(13, 1)
    launcher.forget(13)
    assert launcher.status(13) is None
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".lock", "logs"]


# -- a restarted agent ------------------------------------------------------------------------------------

AGENT = """
import sys
from scheduler.launch.process import LaunchSpec, ProcessLauncher
run_dir, job, script, workdir, env = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
state = ProcessLauncher(run_dir).start(LaunchSpec(job, 1, [sys.executable, script], {"READY": env}, workdir))
print(state.pid)
"""


def launch_from_another_agent(run_dir: Path, job: int, script: Path, workdir: Path, ready: Path) -> int:
    """Start a job from a separate agent process that then exits, as a killed or restarted agent would."""
    out = subprocess.run(
        [sys.executable, "-c", AGENT, str(run_dir), str(job), str(script), str(workdir), str(ready)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return int(out.stdout)


def test_a_new_agent_adopts_a_running_job_and_stops_it(program, tmp_path):
    run_dir, workdir, ready, ckpt = tmp_path / "run", tmp_path, tmp_path / "ready", tmp_path / "ckpt"
    code = CHECKPOINTS_ON_SIGTERM.replace('os.environ["CKPT"]', repr(str(ckpt)))
    pid = launch_from_another_agent(run_dir, 20, program("ckpt", code), workdir, ready)
    assert wait_for(ready.exists)

    restarted = ProcessLauncher(run_dir)
    [found] = restarted.adopt()
    assert (found.job_id, found.pid, found.state) == (20, pid, "running")
    result = restarted.stop(20, grace_s=5)
    assert result.exited_within_grace and result.returncode == 0  # the code comes from the shim's file
    assert ckpt.read_text() == "step 41"
    assert restarted.status(20).state == "exited"


def test_an_exit_while_no_agent_watched_is_not_lost(program, tmp_path):
    run_dir, ready = tmp_path / "run", tmp_path / "ready"
    code = "import os, pathlib\npathlib.Path(os.environ['READY']).write_text('x')\nraise SystemExit(6)\n"
    launch_from_another_agent(run_dir, 21, program("quick", code), tmp_path, ready)
    restarted = ProcessLauncher(run_dir)
    assert wait_for(lambda: restarted.poll(21) == 6)
    assert [(s.job_id, s.state, s.returncode) for s in restarted.adopt()] == [(21, "exited", 6)]


def test_an_agent_killed_with_its_job_reads_as_lost(launcher, program, spec, tmp_path):
    state = launcher.start(spec(22, program("sleep", "import time\ntime.sleep(30)\n")))
    os.killpg(state.pid, 9)  # the shim dies too, so nothing records the exit
    assert wait_for(lambda: gone(state.pid) or launcher.status(22).state != "running")
    restarted = ProcessLauncher(tmp_path / "run")
    assert [(s.job_id, s.state, s.returncode) for s in restarted.adopt()] == [(22, "lost", None)]


def test_a_reused_pid_is_not_adopted_nor_signalled(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        real = create_time(stranger.pid)
        # Our job once had this pid, but started at another time (or before a reboot): not ours.
        for job, started, boot in ((30, real - 1, boot_id()), (31, real, "another-boot")):
            write_state(run_dir, RunState(job, 1, "process", stranger.pid, started, boot, time.time(), [], "", ""))
        launcher = ProcessLauncher(run_dir)
        assert sorted((s.job_id, s.state) for s in launcher.adopt()) == [(30, "lost"), (31, "lost")]
        assert launcher.stop(30, grace_s=0.2).already_exited
        assert stranger.poll() is None  # never signalled
    finally:
        stranger.kill()
        stranger.wait()


# -- tail_lines -------------------------------------------------------------------------------------------


def test_tail_lines_reads_from_the_end(tmp_path):
    # A 4 GB sparse log: reading it whole would take seconds and gigabytes; the tail reads a few blocks.
    big = tmp_path / "big.log"
    with big.open("wb") as handle:
        handle.truncate(4 << 30)
        handle.seek(0, os.SEEK_END)
        handle.write(b"".join(f"line {i}\n".encode() for i in range(5000)))
    began = time.perf_counter()
    assert tail_lines(big, 2) == ["line 4998", "line 4999"]
    assert len(tail_lines(big, 1000)) == 1000
    assert time.perf_counter() - began < 1.0


def test_tail_lines_edges(tmp_path):
    path = tmp_path / "x.log"
    assert tail_lines(path, 5) == []  # no file yet
    path.write_bytes(b"a\nb\nno newline at end")
    assert tail_lines(path, 2) == ["b", "no newline at end"]
    assert tail_lines(path, 10) == ["a", "b", "no newline at end"]
    assert tail_lines(path, 0) == []
    path.write_bytes(b"first\n" + b"y" * 5000 + b"\n\xff\xfe broken utf-8\n")
    assert tail_lines(path, 1) == ["\ufffd\ufffd broken utf-8"]
    # At most max_bytes are read: the long line comes back cut, from where the reading stopped.
    cut = 100 - len(b"\n\xff\xfe broken utf-8\n")
    assert tail_lines(path, 5, max_bytes=100) == ["y" * cut, "\ufffd\ufffd broken utf-8"]
