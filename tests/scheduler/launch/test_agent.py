"""The node agent's side of the lifecycle, without Celery or a database: prepare checks everything and starts
nothing, start/stop/forget per generation, a generation never runs twice, the watcher's hello and exit reports."""

from __future__ import annotations

import signal
import sys
import textwrap
from pathlib import Path

import pytest

from scheduler.launch.agent import AgentConfig, FoundJob, NodeAgent, NodeInventory, Watcher
from scheduler.launch.env import LaunchSettings
from scheduler.launch.process import SHELL_TRAP, argv_of, split_simple
from tests.scheduler.launch.helpers import wait_for

GPUS = ("GPU-aaaa", "GPU-bbbb")


def payload(job_id: int, command: str, *, generation: int = 1, gpus=("GPU-aaaa",), host="gpu07", **extra) -> dict:
    shares = [{"uuid": u, "index": i, "kind": "whole", "compute_pct": 100, "memory_mib": 0,
               "mig_uuid": ""} for i, u in enumerate(gpus)]  # fmt: skip
    return {
        "job_id": job_id,
        "generation": generation,
        "host": host,
        "allocation": {"job_id": job_id, "generation": generation, "env": {"MY_VAR": "x"},
                       "nodes": [{"hostname": host, "address": "", "gpus": shares}]},
        "mig": {},
        "command": command,
        "image": "",
        "workdir": "",
        "grace_s": 5,
        "affinity": None,
        **extra,
    }  # fmt: skip


@pytest.fixture
def agent(tmp_path):
    config = AgentConfig(
        hostname="gpu07",
        run_dir=str(tmp_path / "run"),
        log_dir=str(tmp_path / "logs"),
        gpus=GPUS,
        settings=LaunchSettings(checkpoint_root=str(tmp_path / "ckpt")),
    )
    agent = NodeAgent(config, inventory=lambda: None)
    yield agent
    for found in agent.found():
        if found["state"] == "running":
            agent.launcher.stop(found["job_id"], 0)


def script(tmp_path: Path, code: str) -> str:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(code))
    return f"{sys.executable} {path}"


def test_prepare_checks_and_starts_nothing(agent, tmp_path):
    command = script(tmp_path, "import time; time.sleep(30)")
    assert agent.prepare(payload(1, command)) == {"job_id": 1, "generation": 1, "host": "gpu07", "ok": True,
                                                  "reason": ""}  # fmt: skip
    assert agent.found() == []
    bad = [
        (payload(2, ""), "gpu07: job 2 has no command, and this node runs jobs as processes"),
        (payload(3, command, workdir="/nonexistent/x"), "working directory /nonexistent/x of job 3 does not exist"),
        (payload(4, command, gpus=("GPU-zzzz",)), "asks for GPU GPU-zzzz, which this node does not have"),
        (payload(5, command, host="gpu08"), "job 5 has no allocation on gpu07"),
    ]
    bad[3][0]["host"] = "gpu07"  # a message for this node whose allocation names another
    for message, reason in bad:
        answer = agent.prepare(message)
        assert answer["ok"] is False and reason in answer["reason"], answer


def test_prepare_refuses_gpus_another_job_holds(agent, tmp_path):
    command = script(tmp_path, "import time; time.sleep(30)")
    assert agent.start(payload(1, command))["ok"]
    answer = agent.prepare(payload(2, command))
    assert answer["ok"] is False and "cannot take GPU GPU-aaaa: job 1 (generation 1" in answer["reason"]
    assert agent.prepare(payload(2, command, gpus=("GPU-bbbb",)))["ok"]
    # The same job's next generation waits for this one to stop.
    answer = agent.prepare(payload(1, command, generation=2))
    assert answer["ok"] is False and "generation 1 still runs here" in answer["reason"]


def test_start_stop_forget_and_never_twice(agent, tmp_path):
    command = script(tmp_path, """
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, lambda s, f: sys.exit(7))
        print("env", os.environ["MY_VAR"], os.environ["CLUSTERCTL_GENERATION"], os.getcwd(), flush=True)
        time.sleep(30)
    """)  # fmt: skip
    first = agent.start(payload(9, command))
    assert first["ok"] and first["pid"] > 0
    assert agent.start(payload(9, command)) == first  # the same generation again: the same process
    assert wait_for(lambda: len(agent.tail(9, 5)["lines"]) >= 2)
    ckpt = tmp_path / "ckpt" / "job-9"
    assert agent.tail(9, 5)["lines"][1] == f"env x 1 {ckpt}"  # default working directory: its checkpoint dir
    assert agent.stop(9, 2, 5)["found"] is False  # another generation is not touched
    stopped = agent.stop(9, 1, 5)
    assert (stopped["found"], stopped["exited_within_grace"], stopped["returncode"]) == (True, True, 7)
    assert agent.found() == [{"job_id": 9, "generation": 1, "pid": first["pid"], "state": "exited",
                              "returncode": 7}]  # fmt: skip
    assert agent.forget(9, 1)["ok"] and agent.found() == []
    again = agent.start(payload(9, command))  # a late duplicate of a generation that ran: refused
    assert again["ok"] is False and "generation 1 already ran here and ended" in again["reason"]
    assert agent.prepare(payload(9, command))["ok"] is False
    assert agent.tail(9, 100)["lines"][-1] == "--- clusterctl: job exited with code 7 ---"  # the log stays


def test_stop_reports_a_kill_after_the_grace_period(agent, tmp_path):
    command = script(tmp_path, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(30)
    """)  # fmt: skip
    assert agent.start(payload(3, command))["ok"]
    assert wait_for(lambda: "ready" in agent.tail(3, 5)["lines"])
    stopped = agent.stop(3, 1, 0.3)
    assert (stopped["exited_within_grace"], stopped["returncode"]) == (False, -signal.SIGKILL)


def test_simple_commands_run_without_a_shell_and_shells_outlive_sigterm(agent, tmp_path):
    assert split_simple("python train.py --lr '1e-3 x'") == ["python", "train.py", "--lr", "1e-3 x"]
    for needs_shell in ("a && b", "a | b", "FOO=1 a", "echo $HOME", 'echo "$HOME"', "a > log", "a; b", "a #c"):
        assert split_simple(needs_shell) is None, needs_shell
    assert argv_of("a && b") == ["/bin/sh", "-c", SHELL_TRAP + "a && b"]
    # Under a shell, the job's SIGTERM handler finishes (its checkpoint) before anything kills the group.
    out = tmp_path / "ckpt.txt"
    command = script(tmp_path, f"""
        import signal, sys, time
        def on_term(s, f):
            time.sleep(0.3)
            open({str(out)!r}, "w").write("saved")
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_term)
        print("ready", flush=True)
        time.sleep(30)
    """)  # fmt: skip
    assert agent.start(payload(4, f"cd / && {command}"))["ok"]
    assert wait_for(lambda: "ready" in agent.tail(4, 5)["lines"])
    stopped = agent.stop(4, 1, 5)
    assert (stopped["exited_within_grace"], stopped["returncode"], out.read_text()) == (True, 0, "saved")


def test_mig_shares_resolve_through_the_inventory(tmp_path):
    inventory = NodeInventory(GPUS, {"MIG-1111": "GPU-aaaa"}, {("GPU-aaaa", "1g.10gb", 2): "MIG-1111"})
    config = AgentConfig("gpu07", str(tmp_path / "run"), str(tmp_path / "logs"),
                         settings=LaunchSettings(checkpoint_root=str(tmp_path / "ckpt")))  # fmt: skip
    agent = NodeAgent(config, inventory=lambda: inventory)
    message = payload(6, "true", mig={"0": {"profile": "1g.10gb", "start": 2}})
    message["allocation"]["nodes"][0]["gpus"][0]["kind"] = "mig"
    assert agent.prepare(message)["ok"]
    message["mig"]["0"]["start"] = 4
    answer = agent.prepare(message)
    assert answer["ok"] is False and "no MIG instance 1g.10gb at slot 4 on GPU GPU-aaaa" in answer["reason"]


def test_container_nodes_need_an_image_and_an_engine(tmp_path):
    config = AgentConfig("gpu07", str(tmp_path / "run"), str(tmp_path / "logs"), launcher="container", gpus=GPUS)
    agent = NodeAgent(config, inventory=lambda: None, engine_check=lambda binary: False)
    assert "has no image, and this node runs jobs in containers" in agent.prepare(payload(1, "true"))["reason"]
    answer = agent.prepare(payload(1, "true", image="busybox"))
    assert answer["ok"] is False and answer["reason"] == "gpu07: the container engine docker does not answer"
    with pytest.raises(ValueError, match="process or container, not 'twin'"):
        NodeAgent(AgentConfig("gpu07", str(tmp_path), str(tmp_path), launcher="twin"))


def test_watcher_says_hello_once_and_reports_ends_until_forgotten(agent, tmp_path):
    hellos, exits = [], []
    watcher = Watcher(agent, hello=hellos.append, exited=exits.append, resend_s=10)
    assert agent.start(payload(1, f"{sys.executable} -c 'raise SystemExit(3)'"))["ok"]
    assert wait_for(lambda: agent.found()[0]["state"] == "exited")
    watcher.run_once(100.0)
    watcher.run_once(101.0)  # not again before resend_s
    assert len(hellos) == 1 and hellos[0][0]["returncode"] == 3
    assert exits == [{"job_id": 1, "generation": 1, "pid": exits[0]["pid"], "state": "exited", "returncode": 3,
                      "host": "gpu07"}]  # fmt: skip
    watcher.run_once(111.0)  # the report was lost? it is sent again
    assert len(exits) == 2
    agent.forget(1, 1)
    watcher.run_once(200.0)
    assert len(exits) == 2 and watcher.sent == {} and len(hellos) == 1
    assert FoundJob.from_dict(hellos[0][0]).returncode == 3
