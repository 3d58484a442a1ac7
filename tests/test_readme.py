"""The README's shell lines run as written (issue 14: after the demo, every `manage.py` line failed).

Every line of the README's ```sh blocks is either run here or listed in NOT_RUN with the reason. The run is what a
new user does: scripts/dev_env.py writes the development .env the demo writes, the demo's set-up runs
(`manage.py demo --no-serve`, a small cluster), then each `.venv/bin/python manage.py ...` line runs with bash,
exactly as printed, in the README's order. The database is a SQLite file of this test's own, named in that .env
(no settings variable comes from the test run's environment), and the working directory is a temporary one that
holds the files the lines name (`fabric.topo`, `ports.out`, ... : real captures from tests/fixtures), `manage.py`
(a link to the real one) and `.venv/bin/python` (this interpreter), so nothing is written into the checkout's
tree. Lines that read hardware this machine may not have (NVML, /sys/class/infiniband, perfquery, a live
exporter) must then either work or say in one line what is missing, never with a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FIXTURES = ROOT / "tests" / "fixtures"
SETTINGS = ROOT / "clusterctl" / "settings.py"

# The files the README's lines name, as the real captures they stand for.
FILES = {
    "fabric.topo": FIXTURES / "ibnetdiscover_sx6036_8switch.topo",
    "ports.out": FIXTURES / "ibnetdiscover_ports_test.out",
    "topo.txt": FIXTURES / "nvidia_smi_topo_m_dgx_a100.txt",
    "perfquery.out": FIXTURES / "perfquery_lx_switch_0x7cfe9003009ce5b0.out",
    "docs/examples/small-cluster.yaml": ROOT / "docs" / "examples" / "small-cluster.yaml",
}

# Lines not run here, by how they start, and why.
NOT_RUN = {
    "scripts/demo.sh": "serves until stopped; its set-up (manage.py demo --no-serve) runs first here",
    "scripts/test.sh": "the test suite itself",
    "curl ": "needs the demo serving and a tenant's token (the API's tests make these requests)",
    "cp .env.example .env": "production with docker compose (tests/deploy/test_compose.py)",
    "docker compose": "production with docker compose (tests/deploy/test_compose.py)",
    "install -D": "a node agent's systemd set-up (tests/deploy/test_systemd_unit.py)",
    "editor ": "a node agent's systemd set-up",
    "systemctl ": "a node agent's systemd set-up",
    "nvidia-smi ": "an MPS node's set-up: needs NVIDIA GPUs",
    "export CUDA_MPS_": "an MPS node's set-up: needs NVIDIA GPUs",
    "nvidia-cuda-mps-control": "an MPS node's set-up: needs NVIDIA GPUs",
    ".venv/bin/python bench/": "benchmarks, minutes each: not tests (tests/bench/ runs the chaos smoke)",
    ".venv/bin/python manage.py bench_scheduler": "a benchmark (10,000 GPUs, 50,000 jobs): its arguments are checked",
}

# Lines that ask on the terminal: run on a pseudo-terminal of their own, given these answers to the prompts.
TERMINAL = {"tenant_user --tenant acme --user alice --password ": ["correct horse battery 42"] * 2}

# Lines that read hardware or a live source: they work where it exists, else they say what is missing.
HARDWARE = (
    "--collector sysfs-ib",
    "--collector nvml",
    "--collector prometheus --url",
    "--collector perfquery --node ib-agent-1 --switch",
)


def sh_lines(text: str) -> list[str]:
    """The commands of the ```sh blocks: continuation lines joined, comment lines dropped, in order."""
    lines: list[str] = []
    for block in re.findall(r"^ *```sh\n(.*?)^ *```", text, re.M | re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        lines += [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]
    return lines


def not_run_reason(line: str) -> str | None:
    return next((why for start, why in NOT_RUN.items() if line.startswith(start)), None)


def settings_variables() -> set[str]:
    """Every variable clusterctl/settings.py reads: none of them may reach the commands from this test run."""
    pattern = r"""(?:\benv(?:\.\w+)?\(|os\.environ(?:\.get)?[\[(])\s*["']([A-Z][A-Z0-9_]*)["']"""
    return set(re.findall(pattern, SETTINGS.read_text()))


def test_the_parser_reads_joined_lines_without_comments():
    text = "x\n```sh\n# a comment\na --b \\\n    --c   # tail\n\nd\n```\n```yaml\ne: 1\n```\n  ```sh\n  f\n  ```\n"
    assert sh_lines(text) == ["a --b --c   # tail", "d", "f"]


def test_every_readme_line_is_run_or_says_why_not():
    unknown = [
        line
        for line in sh_lines(README.read_text())
        if not line.startswith(".venv/bin/python manage.py ") and not_run_reason(line) is None
    ]
    assert not unknown, f"README lines neither run by this test nor in NOT_RUN: {unknown}"


def test_the_lines_not_run_name_what_exists():
    from django.core.management import get_commands, load_command_class

    for line in sh_lines(README.read_text()):
        if line.startswith(".venv/bin/python bench/"):
            assert (ROOT / shlex.split(line, comments=True)[1]).is_file(), line
        elif line.startswith(".venv/bin/python manage.py") and not_run_reason(line):
            name, *args = shlex.split(line, comments=True)[2:]
            command = load_command_class(get_commands()[name], name)
            command.create_parser("manage.py", name).parse_args(args)  # exits (fails the test) on a bad option


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A user's working directory after the demo's set-up, and the environment its commands run in."""
    work = tmp_path_factory.mktemp("readme")
    for name, source in FILES.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, work / name)
    (work / "manage.py").symlink_to(ROOT / "manage.py")
    python = work / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    # The .env the demo writes (DEBUG=1, a generated key), plus this test's own database.
    env_file = work / "dev.env"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "dev_env.py"), str(env_file)], check=True, timeout=60)
    with env_file.open("a") as f:
        f.write(f"DATABASE_URL=sqlite:///{work / 'readme.sqlite3'}\n")
    return work


def readme_env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in settings_variables() and not k.startswith("DJANGO_")}
    env.update(CLUSTERCTL_ENV_FILE=str(work / "dev.env"), PYTHONDONTWRITEBYTECODE="1")
    return env


def run(line: str, work: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=work, env=readme_env(work), capture_output=True, text=True, timeout=timeout
    )


def env_values(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and line[0] != "#")


def run_on_terminal(line: str, work: Path, answers: list[str], timeout: float = 120) -> tuple[int, str]:
    """Run `line` with a pseudo-terminal of its own as standard input and controlling terminal (a session of its own,
    so no prompt reaches the terminal of whoever runs the tests); each answer is typed once a prompt (a line ending
    in ": ") shows on that terminal. Returns the exit status and what the terminal and standard output showed."""
    import pty
    import select
    import time

    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        ["bash", "-c", line], cwd=work, env=readme_env(work), stdin=terminal, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    os.close(terminal)
    shown, out, pending, answered = b"", b"", list(answers), 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout, controller], [], [], 0.2)
            if controller in ready:
                try:
                    shown += os.read(controller, 4096)
                except OSError:  # the terminal's last user has gone
                    pass
                if pending and shown[answered:].rstrip(b" ").endswith(b":"):  # a new prompt, waiting on its line
                    os.write(controller, pending.pop(0).encode() + b"\n")
                    answered = len(shown)
            if proc.stdout in ready:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                out += chunk
        status = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        return status, (shown + out).decode(errors="replace")
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()


def test_the_dev_env_file_holds_debug_and_a_new_key(workdir):
    values = env_values(workdir / "dev.env")
    assert values["DEBUG"] == "1"
    assert re.fullmatch(r"[A-Za-z0-9_-]{60,}", values["SECRET_KEY"]), values["SECRET_KEY"]
    assert (workdir / "dev.env").stat().st_mode & 0o077 == 0  # the owner's only


def test_an_existing_env_file_is_left_as_it_is(tmp_path):
    mine = tmp_path / ".env"
    mine.write_text("DEBUG=0\nSECRET_KEY=mine\n")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev_env.py"), str(mine)], timeout=60)
    assert proc.returncode == 0
    assert mine.read_text() == "DEBUG=0\nSECRET_KEY=mine\n"


def test_production_still_refuses_to_start_without_a_key(workdir, tmp_path):
    """.env.example as shipped (DEBUG=0, SECRET_KEY empty) is what production starts from: it must not start."""
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    env = {**readme_env(workdir), "CLUSTERCTL_ENV_FILE": str(tmp_path / ".env")}
    proc = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].endswith("SECRET_KEY must be set when DEBUG is off (set DEBUG=1 for "
                                                          "local development)"), proc.stderr  # fmt: skip


def test_readme_manage_py_lines_run_as_written(workdir):
    setup = run(".venv/bin/python manage.py demo --no-serve --nodes 4", workdir)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    ran = []
    for line in sh_lines(README.read_text()):
        if not line.startswith(".venv/bin/python manage.py ") or not_run_reason(line):
            continue
        answers = next((a for start, a in TERMINAL.items() if start in line), None)
        if answers is not None:
            status, output = run_on_terminal(line, workdir, answers)
            assert status == 0, f"{line}\n{output}"
            assert "password set" in output, output
            ran.append(line)
            continue
        proc = run(line, workdir)
        output = proc.stdout + proc.stderr
        assert "Traceback" not in output, f"{line}\n{output}"
        if "manage.py tenant_user" in line:  # quiet: what it did, and the token
            assert not re.search(r"^(Task |AXES: )", output, re.M), output
        if any(what in line for what in HARDWARE) and proc.returncode != 0:
            # Here without that hardware or source: one line that says what is missing.
            assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith(
                "CommandError: nothing read: "
            ), f"{line}\n{output}"
        else:
            assert proc.returncode == 0, f"{line}\n{output}"
        if "--json" in line and "--collector" not in line:
            json.loads(proc.stdout[proc.stdout.index("{") :])
        ran.append(line)
    assert len(ran) >= 13, ran  # the README's import, generate, report, tenant and collect lines
