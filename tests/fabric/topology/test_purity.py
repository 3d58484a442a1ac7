"""fabric/topology and fabric/importers are PURE (DESIGN.md): no Django, and the analyses do no I/O."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PURE_DIRS = [ROOT / "fabric" / "topology", ROOT / "fabric" / "importers"]
NO_IO = [*sorted((ROOT / "fabric" / "topology").glob("*.py")), ROOT / "fabric" / "importers" / "fattree.py"]
IO_MODULES = {"os", "io", "pathlib", "shutil", "socket", "subprocess", "tempfile", "urllib", "requests"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", [p for d in PURE_DIRS for p in sorted(d.glob("*.py"))], ids=lambda p: p.name)
def test_no_django_import(path: Path):
    assert not {m for m in imported_modules(path) if m.split(".")[0] in {"django", "rest_framework", "channels"}}


@pytest.mark.parametrize("path", NO_IO, ids=lambda p: p.name)
def test_analysis_modules_do_no_io(path: Path):
    assert not {m for m in imported_modules(path) if m.split(".")[0] in IO_MODULES}
    calls = {
        n.func.id
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert "open" not in calls
    assert "print" not in calls
