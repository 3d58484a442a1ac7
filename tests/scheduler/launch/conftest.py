"""Fixtures for the launcher tests: small real Python programs written to tmp_path, and their specs."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from scheduler.launch.process import LaunchSpec


@pytest.fixture
def program(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(name: str, code: str) -> Path:
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(code))
        return path

    return write


@pytest.fixture
def spec(tmp_path: Path) -> Callable[..., LaunchSpec]:
    workdir = tmp_path / "work"
    workdir.mkdir()

    def make(job_id: int, script: Path, *args: str, generation: int = 1, env=None, **kw) -> LaunchSpec:
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CLUSTERCTL_JOB_ID": str(job_id)}
        return LaunchSpec(
            job_id, generation, [sys.executable, str(script), *args], {**base, **(env or {})}, str(workdir), **kw
        )

    return make
