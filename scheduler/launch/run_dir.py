"""The run directory of a node agent: one JSON state file per job it launched, and process identity.

A state file lets a restarted agent find what it launched (adopt) and lets the node ledger see which GPUs
are held, without a database. A pid alone does not identify a process: pids are reused. So each state
records the start time of its process (field 22 of /proc/<pid>/stat, clock ticks since boot) and the
kernel's boot id; a process is "ours" only while all three match.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .env import GpuShare

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class LaunchError(RuntimeError):
    """A launch or stop could not be carried out (bad working directory, unreadable state, engine error)."""


class LaunchRefused(LaunchError):
    """The node refuses the launch: GPUs it does not have, or held by another job, or a job still running."""


@dataclass(slots=True)
class RunState:
    job_id: int
    generation: int
    kind: str  # "process" or "container"
    pid: int  # process: the group leader (= process group id); container: its init process on the host, 0 unknown
    create_time: int  # /proc/<pid>/stat starttime of that pid when launched
    boot_id: str
    started_at: float  # wall clock, for people
    gpus: list[GpuShare] = field(default_factory=list)
    log_path: str = ""
    exit_path: str = ""  # process: the file the shim writes the exit status to
    name: str = ""  # container: its name

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        data = dict(data)
        data["gpus"] = [GpuShare(**g) for g in data.get("gpus", [])]
        return cls(**data)


def state_path(run_dir: Path, job_id: int) -> Path:
    return Path(run_dir) / f"job-{job_id}.json"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write then rename: a reader (or a crash) never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def write_state(run_dir: Path, state: RunState) -> None:
    write_json_atomic(state_path(run_dir, state.job_id), state.to_json())


def read_state(run_dir: Path, job_id: int) -> RunState | None:
    return _load(state_path(run_dir, job_id))


def read_states(run_dir: Path) -> list[RunState]:
    """Every job's state, by job id. An unreadable file is an error, not skipped: it may hold GPUs."""
    return [s for p in sorted(Path(run_dir).glob("job-*.json")) if (s := _load(p)) is not None]


def remove_state(run_dir: Path, job_id: int) -> None:
    state_path(run_dir, job_id).unlink(missing_ok=True)


def _load(path: Path) -> RunState | None:
    try:
        return RunState.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise LaunchError(
            f"state file {path} is unreadable ({exc}); remove it once no process of that job runs"
        ) from exc


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """One launch at a time per node: the ledger check and the state write must not interleave."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(run_dir) / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in ticks) of a process, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def create_time(pid: int) -> int | None:
    stat = proc_stat(pid)
    return stat[1] if stat else None


def is_running(state: RunState) -> bool:
    """The recorded process still runs: same boot, same pid, same start time, and not a zombie."""
    if state.pid <= 0 or state.boot_id != boot_id():
        return False
    stat = proc_stat(state.pid)
    return stat is not None and stat[0] != "Z" and stat[1] == state.create_time


def holds_gpus(state: RunState) -> bool:
    """Whether a state's GPUs count as taken. A container whose host pid is not known yet holds them."""
    if state.kind == "container" and state.pid <= 0:
        return True
    return is_running(state)


def read_exit(path: str) -> dict[str, Any] | None:
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, ValueError):
        return None


def earlier_launch(
    run_dir: Path, hostname: str, job_id: int, generation: int, still_runs: Callable[[RunState], bool], what: str
) -> RunState | None:
    """Idempotent starts, for every launcher: the state of this very (job, generation) when it was started here
    already; None when nothing of the job is here or only an ended generation; LaunchRefused while an earlier
    generation still holds the GPUs (`what` names its process or container). Call under run_dir_lock."""
    existing = read_state(run_dir, job_id)
    if existing is None:
        return None
    if existing.generation == generation:
        return existing
    if still_runs(existing):
        raise LaunchRefused(
            f"{hostname}: job {job_id} generation {existing.generation} still runs ({what.format(s=existing)}); "
            f"stop it before launching generation {generation}"
        )
    return None
