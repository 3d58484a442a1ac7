"""scripts/demo.sh and scripts/test.sh install what each runs (issue 14: the demo installed the test extras).

Each script runs in a copy of the checkout's scripts and pyproject.toml whose .venv holds stand-ins: a `python` and
a `ruff` that record their arguments and succeed, so what the scripts would install and run is read back without
installing anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDER = """#!/bin/sh
echo "$(basename "$0") $*" >> "$(dirname "$0")/../../calls.log"
"""


@pytest.fixture
def checkout(tmp_path) -> Path:
    (tmp_path / "scripts").mkdir()
    for name in ("_venv.sh", "demo.sh", "test.sh"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    for tool in ("python", "ruff"):
        (tmp_path / ".venv" / "bin" / tool).write_text(RECORDER)
        (tmp_path / ".venv" / "bin" / tool).chmod(0o755)
    return tmp_path


def run_script(checkout: Path, name: str, *args: str) -> list[str]:
    """The commands the script ran (python and ruff calls), in order."""
    log = checkout / "calls.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "CHROMIUM_PATH": "/bin/true"}  # test.sh: no apt-get for a browser here
    proc = subprocess.run(
        ["bash", str(checkout / "scripts" / name), *args], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log.read_text().splitlines()


def installs(calls: list[str]) -> list[str]:
    return [c.split(" -e ", 1)[1] for c in calls if c.startswith("python -m pip install") and " -e " in c]


def test_the_demo_installs_the_project_without_extras(checkout):
    calls = run_script(checkout, "demo.sh", "--no-serve")
    assert installs(calls) == ["."]
    assert calls[-1] == "python manage.py demo --no-serve"


def test_the_tests_install_the_test_extras(checkout):
    assert installs(run_script(checkout, "test.sh", "-x")) == [".[test]"]


def test_the_demo_reuses_a_venv_the_tests_installed_and_the_tests_add_their_extras_to_the_demos(checkout):
    run_script(checkout, "test.sh")
    assert installs(run_script(checkout, "demo.sh")) == []  # the test extras include everything the demo needs
    assert installs(run_script(checkout, "test.sh")) == []
    for stamp in (checkout / ".venv").glob(".installed-*"):
        stamp.unlink()  # as new
    assert installs(run_script(checkout, "demo.sh")) == ["."]
    assert installs(run_script(checkout, "test.sh")) == [".[test]"]


def test_a_changed_pyproject_installs_again(checkout):
    run_script(checkout, "demo.sh")
    with (checkout / "pyproject.toml").open("a") as f:
        f.write("\n# changed\n")
    assert installs(run_script(checkout, "demo.sh")) == ["."]


def test_the_demo_runs_on_the_base_dependencies_alone():
    """Every module-level import of the app resolves to the standard library, the project, or a base dependency
    (or one of theirs): none needs an extra the demo no longer installs."""
    import ast
    import importlib.metadata as md
    import re
    import sys

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    closure: set[str] = set()
    while wanted:
        req = wanted.pop()
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if (req.marker and not req.marker.evaluate({"extra": ""})) or name in closure:
            continue
        closure.add(name)
        wanted += [Requirement(r) for r in md.requires(req.name) or []]
    dists = {mod: {re.sub(r"[-_.]+", "-", d).lower() for d in ds} for mod, ds in md.packages_distributions().items()}
    first_party = {"clusterctl", "fabric", "scheduler", "dashboard"}
    outside, checked = [], set()
    for package in first_party:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.parse(path.read_text()).body:  # module level only; lazy imports are optional features
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for top in {n.split(".")[0] for n in names}:
                    if top in sys.stdlib_module_names or top in first_party or top == "__future__":
                        continue
                    checked.add(top)
                    if not dists.get(top, set()) & closure:
                        outside.append(f"{path.relative_to(ROOT)}: {top} ({sorted(dists.get(top, ['?']))})")
    assert {"django", "celery", "rest_framework", "yaml", "channels"} <= checked, checked  # the scan sees them
    assert not outside, outside
