"""scheduler/sim is pure Python: no Django, DRF, Celery or Channels import (the `replay` command is the adapter)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SIM = sorted((ROOT / "scheduler" / "sim").rglob("*.py"))
FORBIDDEN = {"django", "rest_framework", "celery", "channels", "kombu", "redis", "psycopg"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", SIM, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_framework_import(path: Path):
    assert not {m for m in imported(path) if m.split(".")[0] in FORBIDDEN}


@pytest.mark.parametrize("path", SIM, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_pure_project_modules(path: Path):
    project = {m for m in imported(path) if m.split(".")[0] in {"scheduler", "fabric", "clusterctl", "dashboard"}}
    allowed = ("scheduler.core", "scheduler.sim", "fabric.topology", "fabric.importers")
    assert all(m.startswith(allowed) for m in project), project


def test_importing_sim_loads_no_django():
    code = (
        "import sys, scheduler.sim, scheduler.sim.plots; print(sorted(m for m in sys.modules if m.split('.')[0] in %r))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code % (FORBIDDEN,)], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
