"""The node agent's systemd unit (deploy/systemd/), checked by parsing it and running what it would run.

ExecStart must start the clusterctl Celery app on the node's own queue, node.<short host name>, as beat addresses
it; the env file it names (shipped as deploy/systemd/node-agent.env) holds broker settings only, no database, and
is enough for the app and its tasks to import. No systemd needed (systemd-analyze verify runs where installed).
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEMD = ROOT / "deploy" / "systemd"
UNIT = SYSTEMD / "clusterctl-node-agent.service"
FABRIC_DROPIN = SYSTEMD / "fabric-agent.conf"
UMAD_RULES = SYSTEMD / "90-clusterctl-umad.rules"
SETTINGS = ROOT / "clusterctl" / "settings.py"
NODE_AGENT_MD = ROOT / "docs" / "node-agent.md"
CELERY = "/opt/clusterctl/.venv/bin/celery"  # where docs/node-agent.md installs it
# Read by the unit's ExecStart shell, not by settings.py.
UNIT_VARIABLES = {"CLUSTERCTL_NODE_NAME", "LOG_LEVEL"}


def _unit(path: Path) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",), comment_prefixes=("#", ";"))
    cp.optionxform = str  # keys are case-sensitive
    cp.read_string(path.read_text())
    return cp


def _exec_start() -> list[str]:
    """ExecStart as systemd would run it here: %H and %% resolved, $$ unescaped, split into argv."""
    value = _unit(UNIT)["Service"]["ExecStart"]
    value = value.replace("%H", socket.gethostname()).replace("%%", "%").replace("$$", "$")
    return shlex.split(value)


def _unit_environment() -> dict[str, str]:
    return dict(item.split("=", 1) for item in shlex.split(_unit(UNIT)["Service"]["Environment"]))


def _env_file() -> tuple[Path, dict[str, str]]:
    target = _unit(UNIT)["Service"]["EnvironmentFile"].lstrip("-")
    shipped = SYSTEMD / Path(target).name
    values = {}
    for line in shipped.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, f"{shipped.name}: not NAME=value: {line!r}"
            values[name.strip()] = value.strip()
    return shipped, values


def _run_exec_start(extra_env: dict[str, str]) -> list[str]:
    """The ExecStart shell script, with celery replaced by a program that prints its arguments one per line."""
    argv = _exec_start()
    assert argv[:2] == ["/bin/sh", "-c"] and len(argv) == 3
    script = argv[2]
    assert script.startswith(f"exec {CELERY} ")
    script = script.replace(f"exec {CELERY} ", "exec printf '%s\\n' ", 1)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra_env}
    out = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=20, check=True)
    return out.stdout.splitlines()


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_exec_start_runs_the_clusterctl_worker_on_the_node_queue():
    argv = _exec_start()
    script = shlex.split(argv[2])
    assert script[:6] == ["exec", CELERY, "-A", "clusterctl", "worker", "--queues"]
    # the queue is node.<host name>, built by the shell (systemd has none), $$ escaped in the unit
    assert script[6] == "node.${CLUSTERCTL_NODE_NAME:-$(hostname -s)}"
    assert "%l" not in _unit(UNIT)["Service"]["ExecStart"]  # systemd >= 254 only


def test_exec_start_as_run_by_the_shell():
    short = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    args = _run_exec_start({"LOG_LEVEL": "INFO"})
    assert args[:4] == ["-A", "clusterctl", "worker", "--queues"]
    assert _option(args, "--queues") == f"node.{short}"
    assert _option(args, "--hostname") == f"node-agent@{socket.gethostname()}"
    assert _option(args, "--concurrency") == "1"
    assert {"--without-heartbeat", "--without-gossip", "--without-mingle"} <= set(args)
    assert _option(args, "--loglevel") == "INFO"
    # where the inventory knows the node by another name
    args = _run_exec_start({"CLUSTERCTL_NODE_NAME": "gpu017"})
    assert _option(args, "--queues") == "node.gpu017" and _option(args, "--loglevel") == "INFO"


def test_every_worker_option_exists_in_this_celery():
    args = _run_exec_start({})
    options = {a for a in args if a.startswith("--")}
    help_text = subprocess.run(
        [sys.executable, "-m", "celery", "worker", "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    for option in options:
        assert re.search(rf"(^|[\s,]){re.escape(option)}\b", help_text), f"celery worker has no {option}"


def test_env_file_has_the_broker_and_no_database():
    shipped, values = _env_file()
    assert _unit(UNIT)["Service"]["EnvironmentFile"] == "/etc/clusterctl/node-agent.env"
    text = shipped.read_text()
    assert "DATABASE_URL" not in text and "POSTGRES" not in text
    assert not [name for name in values if "DATABASE" in name or name.startswith("DB_")]
    assert values["REDIS_URL"].startswith("redis")
    assert values["CELERY_TASK_ALWAYS_EAGER"] == "0"  # the ingest callback must go through the broker
    assert values["SECRET_KEY"]  # settings.py refuses to import without one when DEBUG is off
    assert "DEBUG" not in values
    # every variable set or offered there is one settings.py reads, or one the unit's shell reads
    settings_vars = set(re.findall(r"""\benv(?:\.\w+)?\(\s*["']([A-Z][A-Z0-9_]*)["']""", SETTINGS.read_text()))
    offered = set(re.findall(r"^#?([A-Z][A-Z0-9_]*)=", text, re.MULTILINE))
    assert offered - settings_vars - UNIT_VARIABLES == set()


def test_env_file_is_enough_to_load_the_app_and_its_tasks_without_a_database(tmp_path):
    """What the agent does at start-up (Celery's Django fixup: django.setup(), task modules), with exactly the
    unit's and the env file's variables: no DATABASE_URL, no .env. No database connection may be opened: with the
    settings' SQLite default, that would try to create a file on the agent's read-only file system."""
    _, values = _env_file()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    env.update(_unit_environment())
    env.update(values)
    env["REDIS_URL"] = "redis://127.0.0.1:9/0"  # never contacted: loading the app opens no connection
    code = (
        "import environ; environ.Env.read_env = classmethod(lambda cls, *a, **k: None)\n"
        "from clusterctl.celery import app\n"
        "app.loader.import_default_modules()\n"
        "from django.conf import settings\n"
        "from django.db import connections\n"
        "import fabric.tasks, fabric.collectors.perfquery\n"
        "assert 'fabric.tasks.poll_node' in app.tasks and 'fabric.tasks.poll_switches' in app.tasks\n"
        "assert app.conf.task_always_eager is False, app.conf.task_always_eager\n"
        "assert app.conf.broker_url.startswith('redis://127.0.0.1:9/')\n"
        "assert connections['default'].connection is None\n"
        "print('ok', settings.DATABASES['default']['ENGINE'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ok ")


def test_service_hardening_and_restart():
    s = _unit(UNIT)["Service"]
    assert _unit_environment()["DJANGO_SETTINGS_MODULE"] == "clusterctl.settings"
    assert _unit_environment()["CELERY_SKIP_CHECKS"] == "1"  # Django's checks would open the database
    assert s["Type"] in ("exec", "simple")
    assert s["User"] == "clusterctl" and s["Restart"] == "on-failure"
    assert s["NoNewPrivileges"] == "yes" and s["ProtectSystem"] == "strict"
    assert s["CapabilityBoundingSet"] == ""
    assert "/sys/class/infiniband" in s["ReadOnlyPaths"]
    assert s["DevicePolicy"] == "closed" and s["DeviceAllow"] == "char-nvidia* rw"
    assert "SupplementaryGroups" not in s  # only the fabric agent gets umad, through its drop-in
    assert _unit(UNIT)["Install"]["WantedBy"] == "multi-user.target"


def test_fabric_agent_dropin_and_udev_rule():
    d = _unit(FABRIC_DROPIN)["Service"]
    assert d["SupplementaryGroups"] == "rdma" and d["DeviceAllow"] == "char-infiniband_mad rw"
    rules = [line for line in UMAD_RULES.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert rules == ['SUBSYSTEM=="infiniband_mad", KERNEL=="umad*", GROUP="rdma", MODE="0660"']


def test_docs_name_the_shipped_files():
    text = NODE_AGENT_MD.read_text()
    for path in (UNIT, FABRIC_DROPIN, UMAD_RULES, _env_file()[0]):
        assert str(path.relative_to(ROOT)) in text
    assert "/etc/clusterctl/node-agent.env" in text
    assert "docs/node-agent.md" in (ROOT / "README.md").read_text()


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_analyze_verify(tmp_path):
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text())
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    complaints = [line for line in (out.stdout + out.stderr).splitlines() if UNIT.name in line]
    assert out.returncode == 0 and complaints == [], out.stderr
