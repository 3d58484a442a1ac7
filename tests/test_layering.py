"""Imports point down (docs/architecture.md, issue 15): fabric/ (the ground floor) <- scheduler/ <- dashboard/.
Every import is read from the source, at module level and inside functions alike: a lower app that imports a
higher one fails here, naming the file and line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# app -> the apps above it, which it must not import
ABOVE = {"fabric": ("scheduler", "dashboard"), "scheduler": ("dashboard",)}


def imports_of(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from scheduler import tasks` names the module scheduler.tasks
            out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
    return out


def offenders(app: str, root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / app).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for line, module in imports_of(path):
            top = module.split(".")[0]
            if top in ABOVE[app]:
                found.append(f"{path.relative_to(root)}:{line} imports {module}")
    return found


@pytest.mark.parametrize("app", sorted(ABOVE))
def test_no_app_imports_one_above_it(app):
    assert offenders(app) == []


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    pkg = tmp_path / "fabric"
    pkg.mkdir()
    (pkg / "bad.py").write_text("def f():\n    from scheduler.models import Job\n    return Job\n")
    assert offenders("fabric", tmp_path) == ["fabric/bad.py:2 imports scheduler.models.Job"]


def test_actions_never_import_tasks():
    # Tasks import the actions; the actions send tasks by name (scheduler.enqueue), so the two never form a cycle.
    found = []
    for path in sorted(
        [*ROOT.glob("scheduler/actions/*.py"), *ROOT.glob("fabric/actions*.py"), *ROOT.glob("fabric/actions/*.py")]
    ):
        for line, module in imports_of(path):
            if "tasks" in module.split(".")[1:2] or module.split(".")[-1] == "tasks":
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert found == []


# Model writes through a manager (create, update, delete...) are the actions' business; these callers run, read and
# hand over, but write nothing themselves. The auth user (get_user_model()) is Django's, not the domain's.
WRITES = {"create", "bulk_create", "bulk_update", "update", "delete", "get_or_create", "update_or_create"}
CALLERS = (
    "*/management/commands/*.py",
    "*/tasks.py",
    "scheduler/policy_lab.py",
    "scheduler/rounds.py",
    "dashboard/*.py",
    "*/api/*.py",
)


def manager_writes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES:
            receiver = ast.unparse(node.func.value)
            if ".objects" in receiver and not receiver.startswith("get_user_model()"):
                found.append(f"{path.name}:{node.lineno} {receiver}.{node.func.attr}")
    return found


def test_commands_tasks_rounds_and_views_write_only_through_actions():
    found = []
    for pattern in CALLERS:
        for path in sorted(ROOT.glob(pattern)):
            found.extend(f"{path.relative_to(ROOT).parent}/{w}" for w in manager_writes(path))
    assert found == []


def test_the_write_check_sees_a_manager_write(tmp_path):
    bad = tmp_path / "rounds.py"
    bad.write_text("def f(pk):\n    Job.objects.filter(pk=pk).update(status='x')\n    User.objects.create()\n")
    assert manager_writes(bad) == ["rounds.py:2 Job.objects.filter(pk=pk).update", "rounds.py:3 User.objects.create"]


def test_only_ingest_writes_the_latest_state_cache():
    # fabric/latest.py: ingest writes it (store), the pages, the rounds and the metrics read it.
    found = []
    for app in ("fabric", "scheduler", "dashboard", "clusterctl"):
        for path in sorted((ROOT / app).rglob("*.py")):
            if path.name == "latest.py" or "migrations" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            if "latest.store(" in text or ("import store" in text and "fabric.latest" in text):
                found.append(str(path.relative_to(ROOT)))
    assert found == ["fabric/ingest.py"]


# An import inside a function hides a dependency from the module's head; it is allowed only with its reason
# written beside it (a cycle it breaks, an optional or heavy library, the app registry not ready yet).
APPS = ("clusterctl", "fabric", "scheduler", "dashboard")


def unexplained_local_imports(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []
    for fn in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            # The reason may stand on the import's line, or above the block of imports it belongs to.
            i = node.lineno - 1
            explained = "#" in lines[i]
            while not explained and i > 0:
                above = lines[i - 1].strip()
                explained = above.startswith("#") or ("#" in above and above.startswith(("import ", "from ")))
                if not above.startswith(("import ", "from ")):
                    break
                i -= 1
            if not explained:
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_every_import_inside_a_function_says_why():
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                found += [f"{path.parent.relative_to(ROOT)}/{f}" for f in unexplained_local_imports(path)]
    assert found == []


def test_the_local_import_check_sees_one_without_a_reason(tmp_path):
    bare = "def f():\n    import json\n    return json\n"
    explained = "def g():\n    # optional: heavy to import\n    import csv\n    return csv\n"
    (tmp_path / "mod.py").write_text(bare + "\n\n" + explained)
    assert unexplained_local_imports(tmp_path / "mod.py") == ["mod.py:2"]
