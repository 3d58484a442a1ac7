"""The node agent's drop-in for running jobs: jobs survive an agent restart, and the directories the agent's
settings default to are the ones systemd creates for it."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[3]
SYSTEMD = ROOT / "deploy" / "systemd"
DROPIN = SYSTEMD / "jobs.conf"


def _service(path: Path) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    section = ""
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        if section == "Service":
            values.setdefault(key, []).append(value)
    return values


def test_jobs_dropin_keeps_jobs_alive_and_makes_their_directories():
    s = _service(DROPIN)
    assert s["KillMode"] == ["process"]  # the unit's "mixed" would SIGKILL the jobs left in the cgroup
    assert (s["StateDirectory"], s["LogsDirectory"]) == (["clusterctl"], ["clusterctl"])
    assert settings.LAUNCH_RUN_DIR.startswith("/var/lib/clusterctl/")
    assert settings.LAUNCH_LOG_DIR.startswith("/var/log/clusterctl/")
    assert "char-infiniband_verbs rw" in s["DeviceAllow"] and s["SystemCallFilter"] == [""]
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string((SYSTEMD / "clusterctl-node-agent.service").read_text())
    assert unit["Service"]["KillMode"] == "mixed"  # what the drop-in overrides
    for doc in ("README.md", "docs/node-agent.md", "docs/running-jobs.md"):
        assert "deploy/systemd/jobs.conf" in (ROOT / doc).read_text(), doc


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_unit_with_the_jobs_dropin_verifies(tmp_path):
    # The drop-in's [Service] appended to the unit: what systemd merges, in a file verify reads on its own.
    unit = tmp_path / "clusterctl-node-agent.service"
    unit.write_text((SYSTEMD / unit.name).read_text() + "\n" + DROPIN.read_text())
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    complaints = [line for line in (out.stdout + out.stderr).splitlines() if "jobs.conf" in line or unit.name in line]
    assert out.returncode == 0 and complaints == [], out.stderr
