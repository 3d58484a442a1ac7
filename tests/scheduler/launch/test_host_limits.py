"""A job's host CPU and memory reach the node: the launch payload carries them (Job.host_cpu_milli / host_memory_mib),
the container launcher passes them to the engine (--cpus, --memory, --memory-swap), checked first; the process
launcher runs the job without them (docs/running-jobs.md)."""

from __future__ import annotations

import sys

import pytest

from scheduler.launch.agent import AgentConfig, NodeAgent
from scheduler.launch.container import ContainerLauncher
from scheduler.launch.env import LaunchSettings
from scheduler.launch.run_dir import LaunchError
from tests.scheduler.launch.test_agent import GPUS, payload
from tests.scheduler.launch.test_container import IMAGE, FakeEngine, job_spec
from tests.scheduler.launch.test_lifecycle import placed, sent, site  # noqa: F401 (fixtures)


def test_docker_argv_with_cpus_and_memory(tmp_path):
    argv = ContainerLauncher(tmp_path).run_argv(job_spec(cpu_milli=12500, memory_mib=65536))
    dash = argv.index("--")
    assert argv[dash - 5 : dash + 2] == [
        "--workdir", "/workspace", "--cpus=12.5", "--memory=65536m", "--memory-swap=65536m", "--", IMAGE,
    ]  # fmt: skip


@pytest.mark.parametrize(("milli", "arg"), [(500, "--cpus=0.5"), (12345, "--cpus=12.345"), (64000, "--cpus=64")])
def test_cpus_in_the_engines_decimal(tmp_path, milli, arg):
    argv = ContainerLauncher(tmp_path, engine="podman").run_argv(job_spec(cpu_milli=milli))
    assert arg in argv and not any(a.startswith("--memory") for a in argv)


def test_no_limits_without_an_ask(tmp_path):
    argv = ContainerLauncher(tmp_path).run_argv(job_spec())
    assert not any(a.startswith(("--cpus", "--memory")) for a in argv)


def test_memory_below_the_engines_minimum_is_raised_to_it(tmp_path):
    argv = ContainerLauncher(tmp_path).run_argv(job_spec(memory_mib=4))
    assert "--memory=6m" in argv and "--memory-swap=6m" in argv


@pytest.mark.parametrize(
    ("limits", "problem"),
    [
        ({"cpu_milli": -1}, "the CPU limit (milli-CPUs) must be a whole number from 0 to 2147483647, not -1"),
        ({"cpu_milli": "1; rm -rf /"}, "the CPU limit (milli-CPUs) must be a whole number from 0 to 2147483647, "
                                       "not '1; rm -rf /'"),
        ({"memory_mib": True}, "the memory limit (MiB) must be a whole number from 0 to 2147483647, not True"),
        ({"memory_mib": 1.5}, "the memory limit (MiB) must be a whole number from 0 to 2147483647, not 1.5"),
    ],
)  # fmt: skip
def test_a_limit_that_is_not_a_whole_number_is_refused(tmp_path, limits, problem):
    with pytest.raises(LaunchError) as refused:
        ContainerLauncher(tmp_path).run_argv(job_spec(**limits))
    assert str(refused.value) == f"job 7: refused, its CPU or memory limit is unsafe: {problem}"


def container_agent(tmp_path) -> tuple[NodeAgent, FakeEngine]:
    config = AgentConfig(
        "gpu07", str(tmp_path / "run"), str(tmp_path / "logs"), launcher="container", gpus=GPUS,
        settings=LaunchSettings(checkpoint_root=str(tmp_path / "ckpt")),
    )  # fmt: skip
    agent = NodeAgent(config, inventory=lambda: None, engine_check=lambda binary: True)
    engine = FakeEngine()
    agent.launcher.runner = engine
    return agent, engine


def test_the_container_agent_runs_the_job_with_its_limits(tmp_path):
    agent, engine = container_agent(tmp_path)
    message = payload(1, "", image="busybox", limits={"cpu_milli": 2000, "memory_mib": 8192})
    assert agent.prepare(message)["ok"]
    assert agent.start(message)["ok"]
    [run] = [c for c in engine.calls if c[1] == "run"]
    assert run[run.index("--") - 3 : run.index("--")] == ["--cpus=2", "--memory=8192m", "--memory-swap=8192m"]


def test_the_container_agent_refuses_a_bad_limit_at_prepare(tmp_path):
    agent, engine = container_agent(tmp_path)
    answer = agent.prepare(payload(1, "", image="busybox", limits={"cpu_milli": "lots"}))
    assert answer["ok"] is False
    assert answer["reason"] == (
        "job 1: refused, its CPU or memory limit is unsafe: the CPU limit (milli-CPUs) must be a whole number from 0 "
        "to 2147483647, not 'lots'"
    )
    assert engine.calls == []


def test_a_payload_without_limits_runs_unlimited(tmp_path):
    agent, engine = container_agent(tmp_path)
    assert agent.start(payload(1, "", image="busybox"))["ok"]  # a control plane of an older version
    [run] = [c for c in engine.calls if c[1] == "run"]
    assert not any(a.startswith(("--cpus", "--memory")) for a in run)


def test_the_process_launcher_runs_the_job_without_enforcing_them(tmp_path):
    config = AgentConfig(
        "gpu07", str(tmp_path / "run"), str(tmp_path / "logs"), gpus=GPUS,
        settings=LaunchSettings(checkpoint_root=str(tmp_path / "ckpt")),
    )  # fmt: skip
    agent = NodeAgent(config, inventory=lambda: None)
    started = agent.start(payload(1, f"{sys.executable} -c pass", limits={"cpu_milli": 500, "memory_mib": 64}))
    assert started["ok"], started


@pytest.mark.django_db
def test_the_launch_payload_carries_the_jobs_host_asks(site, sent, django_capture_on_commit_callbacks):  # noqa: F811
    placed(site, sent, django_capture_on_commit_callbacks, gpus=2, host_cpu_milli=12500, host_memory_mib=65536)
    assert [args[0]["limits"] for name, _, args in sent if name == "node_prepare"] == [
        {"cpu_milli": 12500, "memory_mib": 65536}
    ]


@pytest.mark.django_db
def test_a_job_that_asked_none_sends_zero_limits(site, sent, django_capture_on_commit_callbacks):  # noqa: F811
    placed(site, sent, django_capture_on_commit_callbacks, gpus=2)
    assert [args[0]["limits"] for name, _, args in sent if name == "node_prepare"] == [
        {"cpu_milli": 0, "memory_mib": 0}
    ]
