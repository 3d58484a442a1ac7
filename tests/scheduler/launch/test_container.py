"""The container launcher: exact docker / podman / CDI command lines; its logic on a fake engine; a real run
where an engine answers."""

from __future__ import annotations

import json
import os
import shutil
import stat
import uuid

import pytest

from scheduler.launch.container import ContainerLauncher, ContainerSpec, EngineResult, engine_answers, run_engine
from scheduler.launch.env import GpuShare
from scheduler.launch.run_dir import LaunchError, LaunchRefused
from tests.scheduler.launch.helpers import wait_for

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
GPUS = (GpuShare("GPU-aaaa", 0), GpuShare("GPU-bbbb", 1))


def job_spec(**overrides) -> ContainerSpec:
    values = {
        "job_id": 7,
        "generation": 2,
        "image": IMAGE,
        "env": {"CUDA_VISIBLE_DEVICES": "GPU-aaaa,GPU-bbbb", "WORLD_SIZE": "2"},
        "gpus": GPUS,
        "command": ["torchrun", "--nproc_per_node=2", "train.py"],
        "workdir": "/workspace",
        "checkpoint_dir": "/shared/ckpt/job-7",
    }
    return ContainerSpec(**{**values, **overrides})


COMMON_TAIL = [
    "--env", "CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb", "--env", "WORLD_SIZE=2",
    "--init", "--ipc=host", "--network", "host",
    "--device", "/dev/infiniband", "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1",
    "--volume", "/shared/ckpt/job-7:/shared/ckpt/job-7", "--workdir", "/workspace",
    "--", IMAGE, "torchrun", "--nproc_per_node=2", "train.py",
]  # fmt: skip
HEAD = [
    "run",
    "--detach",
    "--name",
    "clusterctl-job-7-2",
    "--label",
    "clusterctl.job=7",
    "--label",
    "clusterctl.generation=2",
]


def test_docker_argv(tmp_path):
    argv = ContainerLauncher(tmp_path, engine="docker").run_argv(job_spec())
    # One argument '"device=GPU-aaaa,GPU-bbbb"', quotes included: docker reads --gpus as CSV.
    assert argv == ["docker", *HEAD, "--gpus", '"device=GPU-aaaa,GPU-bbbb"', *COMMON_TAIL]


def test_podman_argv_uses_cdi(tmp_path):
    argv = ContainerLauncher(tmp_path, engine="podman").run_argv(job_spec())
    cdi = ["--device", "nvidia.com/gpu=GPU-aaaa", "--device", "nvidia.com/gpu=GPU-bbbb"]
    assert argv == ["podman", *HEAD, *cdi, *COMMON_TAIL]


def test_docker_with_cdi_and_mig_devices(tmp_path):
    mig = (GpuShare("GPU-aaaa", 0, "mig", mig_uuid="MIG-1111"), GpuShare("GPU-aaaa", 0, "mig", mig_uuid="MIG-2222"))
    with_cdi = ContainerLauncher(tmp_path, engine="docker", cdi=True, binary="/usr/bin/docker")
    argv = with_cdi.run_argv(job_spec(gpus=mig))
    assert argv[:1] == ["/usr/bin/docker"]
    assert argv[9:13] == ["--device", "nvidia.com/gpu=MIG-1111", "--device", "nvidia.com/gpu=MIG-2222"]
    assert ContainerLauncher(tmp_path).gpu_args(mig) == ["--gpus", '"device=MIG-1111,MIG-2222"']
    assert ContainerLauncher(tmp_path).gpu_args(()) == []


def test_argv_options(tmp_path):
    launcher = ContainerLauncher(tmp_path)
    argv = launcher.run_argv(
        job_spec(shm_size="16g", infiniband=False, checkpoint_dir="", workdir="", command="python train.py --resume"),
        env_file="/run/clusterctl/job-7.env",
    )
    assert argv[9:] == [
        "--gpus", '"device=GPU-aaaa,GPU-bbbb"', "--env-file", "/run/clusterctl/job-7.env",
        "--init", "--shm-size=16g", "--network", "host", "--", IMAGE, "python", "train.py", "--resume",
    ]  # fmt: skip
    # A simple command line runs as the container's command (--init signals it); shell syntax needs a shell.
    piped = launcher.run_argv(job_spec(command="python train.py | tee log"))
    assert piped[-5:] == ["--", IMAGE, "/bin/sh", "-c", "python train.py | tee log"]
    assert launcher.run_argv(job_spec(command=None))[-2:] == ["--", IMAGE]  # the image's own command
    with pytest.raises(LaunchError, match="job 7: no image to run"):
        launcher.run_argv(job_spec(image=""))
    with pytest.raises(ValueError, match="docker, podman, not 'lxc'"):
        ContainerLauncher(tmp_path, engine="lxc")


def test_stop_inspect_logs_rm_argv(tmp_path):
    docker, podman = ContainerLauncher(tmp_path), ContainerLauncher(tmp_path, engine="podman")
    assert docker.stop_argv("clusterctl-job-7-2", 30) == ["docker", "stop", "--time", "30", "clusterctl-job-7-2"]
    assert podman.stop_argv("c", 2.5) == ["podman", "stop", "--time", "3", "c"]  # whole seconds, rounded up
    assert docker.rm_argv("c") == ["docker", "rm", "c"]
    assert docker.inspect_argv("c") == ["docker", "inspect", "--format", "{{json .State}}", "c"]
    assert podman.logs_argv("c", 50) == ["podman", "logs", "--tail", "50", "c"]


# -- the launcher's logic on a fake engine -----------------------------------------------------------------


class FakeEngine:
    """Answers the CLI calls the launcher makes, like docker would; records them."""

    def __init__(self, stop_exit: int = 0):
        self.calls: list[list[str]] = []
        self.containers: dict[str, dict] = {}
        self.stop_exit = stop_exit

    def __call__(self, argv: list[str]) -> EngineResult:
        self.calls.append(argv)
        verb, name = argv[1], argv[-1]
        if verb == "run":
            name = argv[argv.index("--name") + 1]
            if name in self.containers:
                return EngineResult(125, "", f'Conflict. The container name "/{name}" is already in use')
            self.containers[name] = {"Running": True, "Pid": os.getpid(), "ExitCode": 0}
            return EngineResult(0, "f00d\n", "")
        found = self.containers.get(name)
        if found is None:
            return EngineResult(1, "", f"Error: No such object: {name}")
        if verb == "inspect":
            return EngineResult(0, json.dumps(found), "")
        if verb == "stop":
            found.update(Running=False, ExitCode=self.stop_exit)
        elif verb == "rm":
            del self.containers[name]
        elif verb == "logs":
            return EngineResult(0, "step 1\nstep 2\n", "warning: slow\n")
        return EngineResult(0, name, "")

    def verbs(self) -> list[str]:
        return [c[1] for c in self.calls]


def test_start_is_idempotent_and_records_the_container(tmp_path):
    engine = FakeEngine()
    launcher = ContainerLauncher(tmp_path, runner=engine)
    state = launcher.start(job_spec())
    assert (state.kind, state.name, state.pid) == ("container", "clusterctl-job-7-2", os.getpid())
    assert launcher.start(job_spec()).name == state.name  # retried: nothing new
    assert engine.verbs().count("run") == 1
    assert launcher.status(7).state == "running"
    assert launcher.tail(7, 2) == ["step 2", "warning: slow"]
    with pytest.raises(LaunchRefused, match="job 7 generation 2 still runs"):
        launcher.start(job_spec(generation=3))


def test_a_container_started_before_a_crash_is_adopted_not_started_twice(tmp_path):
    engine = FakeEngine()
    engine.containers["clusterctl-job-7-2"] = {"Running": True, "Pid": os.getpid(), "ExitCode": 0}
    state = ContainerLauncher(tmp_path, runner=engine).start(job_spec())
    assert "run" not in engine.verbs() and state.pid == os.getpid()


def test_env_file_mode(tmp_path):
    engine = FakeEngine()
    ContainerLauncher(tmp_path, runner=engine, env_file=True).start(job_spec())
    env_file = tmp_path / "job-7.env"
    assert env_file.read_text() == "CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb\nWORLD_SIZE=2\n"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    run = next(c for c in engine.calls if c[1] == "run")
    assert run[run.index("--env-file") + 1] == str(env_file) and "--env" not in run
    with pytest.raises(LaunchError, match="A holds a newline"):
        ContainerLauncher(tmp_path, runner=FakeEngine(), env_file=True).start(job_spec(job_id=8, env={"A": "x\ny"}))


def test_stop_in_grace_records_exit_and_removes(tmp_path):
    engine = FakeEngine(stop_exit=0)
    launcher = ContainerLauncher(tmp_path, runner=engine)
    launcher.start(job_spec())
    result = launcher.stop(7, grace_s=30)
    assert result.exited_within_grace and result.returncode == 0
    assert engine.verbs()[-4:] == ["stop", "inspect", "inspect", "rm"]
    assert engine.containers == {}
    assert (launcher.status(7).state, launcher.poll(7)) == ("exited", 0)  # from the recorded exit, after rm
    launcher.forget(7)
    assert launcher.status(7) is None


def test_stop_past_grace_reports_the_kill(tmp_path):
    launcher = ContainerLauncher(tmp_path, runner=FakeEngine(stop_exit=137))
    launcher.start(job_spec())
    result = launcher.stop(7, grace_s=0)
    assert not result.exited_within_grace and result.returncode == 137


def test_engine_errors_are_clear(tmp_path):
    def broken(argv):
        if argv[1] == "inspect":
            return EngineResult(1, "", "no such object")
        return EngineResult(125, "", "docker: Error response from daemon: could not select device driver nvidia.")

    with pytest.raises(LaunchError, match=r"docker: could not start job 7 .exit 125.: .*could not select device"):
        ContainerLauncher(tmp_path, runner=broken).start(job_spec())
    assert ContainerLauncher(tmp_path, runner=broken).status(7) is None


def test_engine_answers_and_missing_binary():
    assert run_engine(["no-such-engine-binary", "info"]).returncode == 127
    assert not engine_answers("no-such-engine-binary")


# -- for real, where a container engine runs ---------------------------------------------------------------


@pytest.fixture(scope="module")
def engine() -> str:
    for binary in ("docker", "podman"):
        if shutil.which(binary) and engine_answers(binary):
            return binary
    pytest.skip("no container engine runs here (`docker info` and `podman info` fail): real container run skipped")


def test_real_container_run_and_stop(engine, tmp_path):
    image = os.environ.get("CLUSTERCTL_TEST_IMAGE", "busybox")
    if run_engine([engine, "image", "inspect", image]).returncode != 0:
        pytest.skip(f"image {image!r} is not present for {engine} (set CLUSTERCTL_TEST_IMAGE to a local image)")
    job = 900_000 + uuid.uuid4().int % 99_999
    launcher = ContainerLauncher(tmp_path / "run", engine=engine)
    script = "trap 'echo checkpoint > $CLUSTERCTL_CHECKPOINT_DIR/ckpt; exit 0' TERM; echo started; "
    script += "while true; do sleep 0.1; done"
    spec = ContainerSpec(
        job, 1, image, {"CLUSTERCTL_CHECKPOINT_DIR": str(tmp_path)}, command=script,
        checkpoint_dir=str(tmp_path), infiniband=False,
    )  # fmt: skip
    launcher.start(spec)
    try:
        assert wait_for(lambda: "started" in launcher.tail(job, 5), timeout=30)
        assert launcher.status(job).state == "running"
        result = launcher.stop(job, grace_s=10)
        assert result.exited_within_grace and result.returncode == 0
        assert (tmp_path / "ckpt").read_text() == "checkpoint\n"
    finally:
        run_engine([engine, "rm", "--force", f"clusterctl-job-{job}-1"])
    launcher.forget(job)
