"""scheduler/core is PURE (DESIGN.md): no Django, DRF, Celery or Channels import, and no I/O."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORE = sorted((ROOT / "scheduler" / "core").glob("*.py"))
FORBIDDEN = {"django", "rest_framework", "celery", "channels", "kombu", "redis", "psycopg"}
IO_MODULES = {"os", "io", "pathlib", "shutil", "socket", "subprocess", "tempfile", "urllib", "requests", "logging"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_core_has_modules():
    assert {p.name for p in CORE} >= {"types.py", "mig.py", "engine.py", "placement.py", "costmodel.py"}


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_no_framework_import(path: Path):
    assert not {m for m in imported(path) if m.split(".")[0] in FORBIDDEN}


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_no_io(path: Path):
    assert not {m for m in imported(path) if m.split(".")[0] in IO_MODULES}
    calls = {
        n.func.id
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert not calls & {"open", "print", "input"}


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_imports_only_pure_project_modules(path: Path):
    project = {m for m in imported(path) if m.split(".")[0] in {"scheduler", "fabric", "clusterctl"}}
    allowed = ("scheduler.core", "fabric.topology", "fabric.importers.fattree", "fabric.importers.types")
    assert all(m.startswith(allowed) for m in project), project


def test_importing_core_loads_no_django():
    code = (
        "import sys, scheduler.core, scheduler.core.synthetic; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in %r))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code % (FORBIDDEN,)], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
