"""The process launcher: runs a job's command as a process group on this node, watches it, stops it.

Each job runs under a small shim (`_shim.py`) that leads a new session (so one signal reaches the whole
job and the job survives the agent), writes the exit status to a file when the job ends, and clears what
the job left behind. The launcher keeps one state file per job in its run directory (`state.py`): a new
launcher on the same directory, e.g. after the agent restarted, finds and adopts what still runs.

The job gets exactly the environment it is given (plus a default PATH): never the agent's own, which holds
the broker URL and the agent's secret key. It runs as the agent's user, or, where its tenant has a run_as and
the agent runs as root, as that uid:gid with no supplementary groups: the shim (root) starts it with those ids
and stays root to record its exit.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .checks import command_problem, parse_run_as, workdir_problem
from .env import GpuShare, environment_problem
from .ledger import NodeLedger
from .run_dir import (
    LaunchError,
    RunState,
    boot_id,
    create_time,
    earlier_launch,
    is_running,
    read_exit,
    read_state,
    read_states,
    remove_state,
    run_dir_lock,
    write_json_atomic,
    write_state,
)

SHIM = Path(__file__).with_name("_shim.py")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
KILL_WAIT_S = 10.0  # after SIGKILL, how long to wait for the kernel to tear the group down


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    job_id: int
    generation: int
    command: str | Sequence[str]  # a string runs under /bin/sh -c; a sequence is the argv
    env: Mapping[str, str]  # the complete environment (scheduler.launch.env.job_environment)
    workdir: str
    gpus: tuple[GpuShare, ...] = ()
    hostfile: str = ""  # written beside the state file; its path is given as CLUSTERCTL_HOSTFILE
    user: str = ""  # "uid:gid" to run as (the agent must be root); "" the agent's own user


@dataclass(frozen=True, slots=True)
class ProcessStatus:
    job_id: int
    generation: int
    pid: int
    state: str  # "running", "exited", or "lost" (gone without an exit status: killed with its shim, reboot)
    returncode: int | None  # negative: killed by that signal
    log_path: str


@dataclass(frozen=True, slots=True)
class StopResult:
    job_id: int
    generation: int
    exited_within_grace: bool  # False: it was still running at the end of the grace period and got SIGKILL
    returncode: int | None
    waited_s: float
    already_exited: bool = False


# Outside quotes, any of these makes a command line need a shell (lists, pipes, redirections, expansions, globs).
_SHELL_SYNTAX = frozenset(";&|<>()$`*?[]{}~!#\n")
# A shell that runs the job's command line must outlive the stop signal: the signal reaches the whole group, and
# a shell killed by it would end the job's process group (the shim clears it) before the job's own handler, the
# checkpoint, is done. A trap (not an ignore: children get default dispositions back) keeps it until the
# command it waits for has ended; the job still gets the signal with its default effect.
SHELL_TRAP = "trap : TERM INT HUP\n"


def split_simple(command: str) -> list[str] | None:
    """The argv of a simple command line (words, quotes, no shell syntax), or None where it needs a shell.

    A simple command runs without a shell, so the stop signal reaches the job itself (also where only the
    direct child is signalled: an init process in a container)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=False)
        lexer.whitespace_split = True
        lexer.commenters = ""
        words = list(lexer)
    except ValueError:  # unbalanced quotes: let the shell say what is wrong
        return None
    if not words or "=" in words[0].split("/")[0]:  # VAR=value prefixes are shell syntax
        return None
    unquoted = _unquoted(command)
    if any(c in _SHELL_SYNTAX for c in unquoted):
        return None
    return words


def _unquoted(command: str) -> str:
    """The characters of a command line outside quotes and backslash escapes (plus $ and ` inside double quotes)."""
    out, quote, escaped = [], "", False
    for c in command:
        if escaped:
            escaped = False
        elif c == "\\" and quote != "'":
            escaped = True
        elif quote:
            if c == quote:
                quote = ""
            elif quote == '"' and c in "$`":  # expansions still happen inside double quotes
                out.append(c)
        elif c in "'\"":
            quote = c
        else:
            out.append(c)
    return "".join(out)


def argv_of(command: str | Sequence[str]) -> list[str]:
    """What the shim runs: a sequence as the argv; a command line split into words when it is simple, else
    under /bin/sh -c (with SHELL_TRAP)."""
    if isinstance(command, str):
        if not command.strip():
            raise LaunchError("the job has no command")
        return split_simple(command) or ["/bin/sh", "-c", SHELL_TRAP + command]
    if not command:
        raise LaunchError("the job has no command")
    return [str(a) for a in command]


def tail_lines(path: str | Path, lines: int = 100, *, max_bytes: int = 1 << 20) -> list[str]:
    """The last `lines` lines of a file, read backwards in blocks from its end (never the whole file).

    Reads at most `max_bytes`: a log with a huge last line gives the end of that line, not a memory spike.
    """
    if lines <= 0:
        return []
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return []
    with handle:
        end = pos = handle.seek(0, os.SEEK_END)
        data = b""
        while pos > 0 and data.count(b"\n") <= lines and end - pos < max_bytes:
            step = min(8192, pos, max_bytes - (end - pos))
            pos -= step
            handle.seek(pos)
            data = handle.read(step) + data
    return [line.decode("utf-8", "replace") for line in data.splitlines()[-lines:]]


class RunDirLauncher:
    """What every launcher shares: its jobs are the state files of its run directory, read back as statuses."""

    kind: str
    run_dir: Path

    def status(self, job_id: int) -> ProcessStatus | None:
        """What became of the job's latest launch here; None when nothing was launched (or it was forgotten)."""
        state = read_state(self.run_dir, job_id)
        return None if state is None else self._status(state)

    def poll(self, job_id: int) -> int | None:
        """The exit code once the job has ended, None while it runs (or when the code is lost)."""
        status = self.status(job_id)
        return None if status is None else status.returncode

    def adopt(self) -> list[ProcessStatus]:
        """After a restart: every job in the run directory, running (this instance can stop it) or ended.

        A state whose pid now belongs to another process (different start time or boot) reads as "lost",
        never running: that process is not ours and is never signalled.
        """
        return [self._status(s) for s in read_states(self.run_dir) if s.kind == self.kind]

    def _status(self, state: RunState) -> ProcessStatus:
        raise NotImplementedError

    @staticmethod
    def _ended(state: RunState) -> ProcessStatus:
        """A job that no longer runs: exited with the code its exit file holds, or lost without one."""
        recorded = read_exit(state.exit_path)
        code = None if recorded is None else int(recorded["returncode"])
        return ProcessStatus(
            state.job_id, state.generation, state.pid, "lost" if recorded is None else "exited", code, state.log_path
        )


class ProcessLauncher(RunDirLauncher):
    kind = "process"

    def __init__(
        self,
        run_dir: str | Path,
        *,
        log_dir: str | Path | None = None,
        ledger: NodeLedger | None = None,
        hostname: str = "",
        python: str = sys.executable,
        poll_interval_s: float = 0.05,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.log_dir = Path(log_dir) if log_dir else self.run_dir / "logs"
        self.ledger = ledger
        self.hostname = hostname or os.uname().nodename
        self.python = python
        self.poll_interval_s = poll_interval_s
        self._children: dict[tuple[int, int], subprocess.Popen] = {}  # what this instance started (to reap)

    # -- launch ------------------------------------------------------------------------------------------

    def check(self, spec: LaunchSpec) -> tuple[int, int] | None:
        """LaunchError unless the spec can be run safely here (checks.py); the (uid, gid) to switch to, if any."""
        problems = {
            "command": command_problem(spec.command) if isinstance(spec.command, str) else None,
            "working directory": workdir_problem(spec.workdir),
            "environment": environment_problem(spec.env),
        }
        if not isinstance(spec.command, str) and any("\0" in str(a) for a in spec.command):
            problems["command"] = "an argument holds a NUL byte"
        try:
            ids = parse_run_as(spec.user)
        except ValueError as exc:
            problems["user"], ids = str(exc), None
        what, problem = next(((k, v) for k, v in problems.items() if v), ("", None))
        if problem:
            raise LaunchError(f"job {spec.job_id}: refused, its {what} is unsafe: {problem}")
        if ids is None or ids == (os.geteuid(), os.getegid()):
            return None
        if os.geteuid() != 0:
            raise LaunchError(
                f"job {spec.job_id}: its tenant runs jobs as {spec.user}, and this agent (uid {os.geteuid()}) is not "
                "root, so it cannot switch to that user: run the agent as root, or clear the tenant's run_as"
            )
        return ids

    def start(self, spec: LaunchSpec) -> RunState:
        """Start the job, or return its state when this generation was already started here (idempotent)."""
        ids = self.check(spec)
        argv = argv_of(spec.command)
        workdir = Path(spec.workdir)
        if not workdir.is_dir():
            raise LaunchError(f"job {spec.job_id}: working directory {workdir} does not exist on {self.hostname}")
        with run_dir_lock(self.run_dir):
            existing = earlier_launch(
                self.run_dir, self.hostname, spec.job_id, spec.generation, is_running, "pid {s.pid}"
            )
            if existing is not None:
                return existing
            if self.ledger is not None:
                self.ledger.check(spec.job_id, spec.gpus)
            return self._spawn(spec, argv, workdir, ids)

    def shim_argv(self, exit_path: Path, argv: list[str], ids: tuple[int, int] | None = None) -> list[str]:
        """The shim's command line: `--` ends its own arguments, so nothing of the job's is read as one."""
        user = [f"{ids[0]}:{ids[1]}"] if ids else []
        return [self.python, "-I", str(SHIM), str(exit_path), *user, "--", *argv]

    def _spawn(self, spec: LaunchSpec, argv: list[str], workdir: Path, ids: tuple[int, int] | None) -> RunState:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"job-{spec.job_id}.log"
        exit_path = self.run_dir / f"job-{spec.job_id}-{spec.generation}.exit"
        exit_path.unlink(missing_ok=True)
        env = {"PATH": DEFAULT_PATH, **spec.env}
        if spec.hostfile:
            hostfile = self.run_dir / f"job-{spec.job_id}.hosts"
            hostfile.write_text(spec.hostfile)
            env["CLUSTERCTL_HOSTFILE"] = str(hostfile)
        with open(log_path, "ab") as log:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            header = f"--- clusterctl: job {spec.job_id} generation {spec.generation} on {self.hostname} at {stamp} ---"
            log.write(f"{header}\n".encode())
            log.flush()
            child = subprocess.Popen(
                self.shim_argv(exit_path, argv, ids),
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: one killpg reaches the whole job
                close_fds=True,
            )
        # The child exists once Popen returns (fork happened), so its /proc entry is there to read.
        started = create_time(child.pid)
        if started is None:
            child.wait()
            raise LaunchError(f"job {spec.job_id}: the launched process {child.pid} vanished at once")
        state = RunState(
            job_id=spec.job_id,
            generation=spec.generation,
            kind=self.kind,
            pid=child.pid,
            create_time=started,
            boot_id=boot_id(),
            started_at=time.time(),
            gpus=list(spec.gpus),
            log_path=str(log_path),
            exit_path=str(exit_path),
        )
        write_state(self.run_dir, state)
        self._children[(spec.job_id, spec.generation)] = child
        return state

    # -- watch -------------------------------------------------------------------------------------------

    def tail(self, job_id: int, lines: int = 100) -> list[str]:
        state = read_state(self.run_dir, job_id)
        return [] if state is None else tail_lines(state.log_path, lines)

    def forget(self, job_id: int) -> None:
        """Drop a finished job's files (state, exit status, hostfile) once its end has been reported."""
        with run_dir_lock(self.run_dir):
            state = read_state(self.run_dir, job_id)
            if state is None:
                return
            if self._alive(state):
                raise LaunchError(f"job {job_id} still runs (pid {state.pid}): stop it before forgetting it")
            Path(state.exit_path).unlink(missing_ok=True)
            (self.run_dir / f"job-{job_id}.hosts").unlink(missing_ok=True)
            remove_state(self.run_dir, job_id)
            self._children.pop((job_id, state.generation), None)

    # -- stop --------------------------------------------------------------------------------------------

    def stop(self, job_id: int, grace_s: float) -> StopResult | None:
        """SIGTERM to the job's group, up to `grace_s` to exit, then SIGKILL. None when nothing is here."""
        state = read_state(self.run_dir, job_id)
        if state is None:
            return None
        if not self._alive(state):
            status = self._status(state)
            return StopResult(job_id, state.generation, True, status.returncode, 0.0, already_exited=True)
        began = time.monotonic()
        self._signal(state, signal.SIGTERM)
        in_grace = self._wait_gone(state, began + grace_s)
        if not in_grace:
            self._signal(state, signal.SIGKILL)
            if not self._wait_gone(state, time.monotonic() + KILL_WAIT_S):
                raise LaunchError(f"job {job_id}: process group {state.pid} survived SIGKILL for {KILL_WAIT_S} s")
        if read_exit(state.exit_path) is None:
            # The shim died with the job (SIGKILL, or a SIGTERM before it could install its handler, right after
            # the start), so it wrote nothing: record the signal ourselves.
            signum = signal.SIGTERM if in_grace else signal.SIGKILL
            write_json_atomic(Path(state.exit_path), {"returncode": -signum, "finished_at": time.time()})
        status = self._status(state)
        return StopResult(job_id, state.generation, in_grace, status.returncode, time.monotonic() - began)

    def _signal(self, state: RunState, signum: int) -> None:
        # Checked right before signalling: a pid reused by someone else is never signalled.
        if not self._alive(state):
            return
        try:
            os.killpg(state.pid, signum)
        except ProcessLookupError:
            pass

    def _wait_gone(self, state: RunState, deadline: float) -> bool:
        while self._alive(state):
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.poll_interval_s)
        return True

    # -- helpers -----------------------------------------------------------------------------------------

    def _alive(self, state: RunState) -> bool:
        child = self._children.get((state.job_id, state.generation))
        if child is not None:
            return child.poll() is None  # also reaps it, so it does not linger as a zombie
        return is_running(state)

    def _status(self, state: RunState) -> ProcessStatus:
        if self._alive(state):
            return ProcessStatus(state.job_id, state.generation, state.pid, "running", None, state.log_path)
        return self._ended(state)
