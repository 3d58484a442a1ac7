"""Every value of a job that reaches a node's command line, with hostile values: refused by the checks the API and
the node agent share (scheduler/launch/checks.py), and where a value is fine, the exact command line built from it.

The exploit of issue 11.9: image="--privileged", command="-v=/:/host ubuntu chroot /host" built
`docker run ... --privileged -v=/:/host ubuntu chroot /host`, root on the node (the agent holds the docker group).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scheduler.launch import checks
from scheduler.launch.agent import AgentConfig, NodeAgent
from scheduler.launch.container import ContainerLauncher, ContainerSpec, EngineResult
from scheduler.launch.env import LaunchEnvError, LaunchSettings, check_job_env, environment_problem
from scheduler.launch.process import SHIM, LaunchSpec, ProcessLauncher
from scheduler.launch.run_dir import LaunchError
from tests.scheduler.launch.helpers import wait_for

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
DIGEST = "sha256:" + "a" * 64


class NoEngine:
    """A runner that records what it is asked to run: a refused spec must run nothing."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> EngineResult:
        self.calls.append(argv)
        return EngineResult(1, "", "no such container")


def container_spec(**overrides) -> ContainerSpec:
    values = {"job_id": 7, "generation": 1, "image": IMAGE, "env": {"WORLD_SIZE": "1"}, "infiniband": False}
    return ContainerSpec(**{**values, **overrides})


#
# The image reference grammar
#


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu",
        "ubuntu:22.04",
        "library/ubuntu",
        IMAGE,
        "localhost:5000/team/train:v1.2_rc-3",
        "registry.example.com:443/a/b/c",
        "[::1]:5000/img:latest",
        f"ubuntu@{DIGEST}",
        f"ghcr.io/org/img:1.0@{DIGEST}",
        "a__b.c-d---e/f",
        "Registry.Example.COM/team/img",  # a domain may hold capitals; a path may not
    ],
)
def test_image_references_of_the_grammar_are_accepted(image):
    assert checks.image_problem(image) is None


@pytest.mark.parametrize(
    ("image", "words"),
    [
        ("--privileged", "starts with '-'"),
        ("-v=/:/host", "starts with '-'"),
        ("ubuntu --privileged", "not an image reference"),
        ("ubuntu\n--privileged", "not an image reference"),
        ("ubuntu\x00", "not an image reference"),
        ("ubuntu;id", "not an image reference"),
        ("$(id)", "not an image reference"),
        ("Ubuntu", "not an image reference"),  # path components are lowercase
        ("team/Train:1", "not an image reference"),
        ("ubuntu:", "not an image reference"),
        (":latest", "not an image reference"),
        ("ubuntu:-tag", "not an image reference"),  # a tag starts with a word character
        ("ubuntu:" + "t" * 129, "not an image reference"),  # a tag is at most 128
        ("ubuntu@sha256:abc", "not an image reference"),  # a digest is at least 32 hex digits
        ("a//b", "not an image reference"),
        ("a/" * 128 + "b", "an image name is at most 255"),
        ("a" * 513, "at most 512 characters"),
        ("", "give an image reference"),
    ],
)
def test_hostile_image_values_are_refused(image, words):
    assert words in checks.image_problem(image)


#
# Working directory, command, user, environment
#


@pytest.mark.parametrize(
    ("workdir", "words"),
    [
        ("relative/dir", "is not an absolute path"),
        ("-C/", "is not an absolute path"),
        ("/data/../etc", "'..' component"),
        ("/data/./run", "'.' or '..' component"),
        ("/data\n/run", "control character"),
        ("/data\x00", "control character"),
        ("/" + "d" * 1024, "at most 1024 characters"),
    ],
)
def test_hostile_working_directories_are_refused(workdir, words):
    assert words in checks.workdir_problem(workdir)


def test_an_absolute_working_directory_or_none_is_accepted():
    assert checks.workdir_problem("/data/run-1") is None and checks.workdir_problem("") is None


def test_a_command_with_nul_or_over_64_kib_is_refused():
    assert "NUL" in checks.command_problem("python train.py\x00 --evil")
    assert checks.command_problem("é" * 32_769) == "the command is 65,538 bytes; at most 65,536"
    # Newlines, quotes and shell syntax are a shell script's own business (it runs as the job's user).
    assert checks.command_problem("set -e\necho 'a;b' | tee $HOME/x && -v=/:/host") is None


@pytest.mark.parametrize(
    ("run_as", "words"),
    [
        ("0:0", "never runs as root"),
        ("1000:0", "never runs as root"),
        ("root", "is not uid:gid"),
        ("1000", "is not uid:gid"),
        ("1000:1000:1", "is not uid:gid"),
        ("-1:1000", "is not uid:gid"),
        ("4294967295:1000", "at most 4294967294"),
    ],
)
def test_hostile_run_as_values_are_refused(run_as, words):
    assert words in checks.run_as_problem(run_as)


def test_run_as_parses_to_ids():
    assert checks.parse_run_as("2001:3001") == (2001, 3001) and checks.parse_run_as("") is None


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"A=B": "x"}, "'A=B' is not valid"),
        ({"A\n": "x"}, "is not valid"),  # `$` of the old pattern matched before a trailing newline
        ({"1A": "x"}, "is not valid"),
        ({"-e": "x"}, "is not valid"),
        ({"A": "x\x00y"}, "NUL byte"),
        ({"A": "x" * 4097}, "over 4096 characters"),
        ({f"V{i}": "x" for i in range(257)}, "at most 256"),
    ],
)
def test_hostile_job_environments_are_refused(env, words):
    with pytest.raises(LaunchEnvError, match=words):
        check_job_env(env)


#
# The container launcher's command line
#


def test_the_issue_exploit_runs_nothing(tmp_path):
    engine = NoEngine()
    launcher = ContainerLauncher(tmp_path, runner=engine)
    spec = container_spec(image="--privileged", command="-v=/:/host ubuntu chroot /host")
    with pytest.raises(LaunchError, match="job 7: refused, its image is unsafe: '--privileged' starts with '-'"):
        launcher.start(spec)
    assert engine.calls == []


def test_options_end_before_the_image_and_the_command_follows_it(tmp_path):
    argv = ContainerLauncher(tmp_path).run_argv(container_spec(command="-v=/:/host ubuntu chroot /host"))
    # What follows `--` is the image, then the container's own command (here under a shell: a first word with '='
    # reads as a variable assignment): the engine reads none of it as an option.
    assert argv[-7:] == ["--network", "host", "--", IMAGE, "/bin/sh", "-c", "-v=/:/host ubuntu chroot /host"]
    simple = ContainerLauncher(tmp_path).run_argv(container_spec(command="--privileged -v /:/host"))
    assert simple[-5:] == ["--", IMAGE, "--privileged", "-v", "/:/host"]


def test_the_tenants_user_is_given_to_the_engine(tmp_path):
    argv = ContainerLauncher(tmp_path, engine="podman").run_argv(container_spec(user="2001:2001", workdir="/w"))
    assert argv[-6:] == ["--workdir", "/w", "--user", "2001:2001", "--", IMAGE]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"image": "ubuntu --privileged"}, "image"),
        ({"workdir": "work"}, "workdir"),
        ({"workdir": "/w/../etc"}, "workdir"),
        ({"checkpoint_dir": "/ckpt\n--privileged"}, "checkpoint directory"),
        ({"env": {"A=B": "x"}}, "environment"),
        ({"env": {"A": "x\x00"}}, "environment"),
        ({"user": "0:0"}, "user"),
        ({"user": "1000:1000 --privileged"}, "user"),
    ],
)
def test_the_container_launcher_refuses_an_unsafe_spec(tmp_path, overrides, field):
    with pytest.raises(LaunchError, match=f"its {field} is unsafe"):
        ContainerLauncher(tmp_path).run_argv(container_spec(**overrides))


def test_an_env_file_is_never_written_for_an_unsafe_spec(tmp_path):
    engine = NoEngine()
    launcher = ContainerLauncher(tmp_path, runner=engine, env_file=True)
    with pytest.raises(LaunchError, match="environment"):
        launcher.start(container_spec(env={"A\nPRIVILEGED": "1"}))
    assert not list(tmp_path.glob("*.env")) and engine.calls == []


def test_environment_names_and_values_may_hold_what_a_command_line_carries():
    assert environment_problem({"CUDA_VISIBLE_DEVICES": "GPU-a", "NOTE": "-v=/:/host; $(id)\nnext line"}) is None


#
# The process launcher's command line and user
#


def test_the_shims_own_arguments_end_before_the_jobs(tmp_path):
    launcher = ProcessLauncher(tmp_path, python="/usr/bin/python3")
    exit_path = tmp_path / "job-7-1.exit"
    assert launcher.shim_argv(exit_path, ["-rf", "/"]) == ["/usr/bin/python3", "-I", str(SHIM), str(exit_path), "--",
                                                           "-rf", "/"]  # fmt: skip
    assert launcher.shim_argv(exit_path, ["id"], (2001, 3001)) == [
        "/usr/bin/python3", "-I", str(SHIM), str(exit_path), "2001:3001", "--", "id"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"command": "python x.py\x00"}, "command"),
        ({"command": ["python", "a\x00b"]}, "command"),
        ({"workdir": "relative"}, "working directory"),
        ({"workdir": "/tmp/../etc"}, "working directory"),
        ({"env": {"PATH=/evil:": "x"}}, "environment"),
        ({"user": "0:0"}, "user"),
    ],
)
def test_the_process_launcher_refuses_an_unsafe_spec(tmp_path, overrides, field):
    values = {"job_id": 7, "generation": 1, "command": "python x.py", "env": {}, "workdir": str(tmp_path)}
    with pytest.raises(LaunchError, match=f"its {field} is unsafe"):
        ProcessLauncher(tmp_path / "run").start(LaunchSpec(**{**values, **overrides}))
    assert not (tmp_path / "run" / "job-7.json").exists()


def test_an_agent_that_is_not_root_refuses_to_run_a_job_as_another_user(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getegid", lambda: 1000)
    spec = LaunchSpec(7, 1, "id", {}, str(tmp_path), user="2001:2001")
    with pytest.raises(LaunchError, match=r"agent \(uid 1000\) is not root, so it cannot switch to that user"):
        ProcessLauncher(tmp_path / "run").start(spec)
    # Its own ids need no switch.
    assert ProcessLauncher(tmp_path / "run").check(LaunchSpec(7, 1, "id", {}, str(tmp_path), user="1000:1000")) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs a root agent")
def test_a_root_agent_runs_the_job_as_the_tenants_user_and_still_records_its_exit(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    os.chmod(tmp_path, 0o755)
    launcher = ProcessLauncher(tmp_path / "run")
    # /bin/sh and id, not this test's Python: the job's user cannot read root's home, where that may live.
    command = ["/bin/sh", "-c", 'echo "ids $(id -u):$(id -g) groups $(id -G)"']
    launcher.start(LaunchSpec(7, 1, command, {"PATH": "/usr/bin:/bin"}, str(work), user="65534:65534"))
    assert wait_for(lambda: launcher.status(7).state == "exited")
    assert launcher.status(7).returncode == 0  # the exit file was written: the shim stayed root
    assert "ids 65534:65534 groups 65534\n" in Path(launcher.status(7).log_path).read_text()


#
# The node agent refuses such a launch in prepare, before anything starts
#


def _payload(**extra) -> dict:
    shares = [{"uuid": "GPU-aaaa", "index": 0, "kind": "whole", "compute_pct": 100, "memory_mib": 0, "mig_uuid": ""}]
    return {
        "job_id": 7, "generation": 1, "host": "gpu07", "mig": {}, "command": "", "image": IMAGE, "workdir": "",
        "grace_s": 5, "affinity": None,
        "allocation": {"job_id": 7, "generation": 1, "env": {}, "nodes": [{"hostname": "gpu07", "gpus": shares}]},
        **extra,
    }  # fmt: skip


@pytest.fixture
def container_agent(tmp_path):
    config = AgentConfig(
        hostname="gpu07", run_dir=str(tmp_path / "run"), log_dir=str(tmp_path / "logs"), launcher="container",
        gpus=("GPU-aaaa",), settings=LaunchSettings(checkpoint_root=str(tmp_path / "ckpt")),
    )  # fmt: skip
    return NodeAgent(config, inventory=lambda: None, engine_check=lambda binary: True)


def test_the_agent_refuses_the_issue_exploit_in_prepare(container_agent):
    answer = container_agent.prepare(_payload(image="--privileged", command="-v=/:/host ubuntu chroot /host"))
    assert (answer["ok"], answer["reason"]) == (
        False,
        "job 7: refused, its image is unsafe: '--privileged' starts with '-': an image reference never does (it "
        "would be read as an option)",
    )


def test_the_agent_refuses_a_root_run_as_in_prepare(container_agent):
    answer = container_agent.prepare(_payload(run_as="0:0"))
    assert answer["ok"] is False and "its user is unsafe: a job never runs as root" in answer["reason"]


def test_the_agent_passes_the_tenants_user_to_the_container(container_agent):
    spec = container_agent._spec(_payload(run_as="2001:2001"))
    assert spec.user == "2001:2001"
    assert container_agent.prepare(_payload(run_as="2001:2001"))["ok"] is True


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a directory to another user needs a root agent")
def test_a_root_agent_hands_the_checkpoint_directory_to_the_tenants_user(tmp_path):
    config = AgentConfig(
        hostname="gpu07", run_dir=str(tmp_path / "run"), log_dir=str(tmp_path / "logs"), gpus=("GPU-aaaa",),
        settings=LaunchSettings(checkpoint_root=str(tmp_path / "ckpt")),
    )  # fmt: skip
    agent = NodeAgent(config, inventory=lambda: None)
    answer = agent.start(_payload(image="", command="/bin/true", run_as="65534:65534"))
    assert answer["ok"] is True, answer
    stat = (tmp_path / "ckpt" / "job-7").stat()
    assert (stat.st_uid, stat.st_gid) == (65534, 65534)
    assert wait_for(lambda: agent.launcher.status(7).state == "exited")
