"""The container launcher: runs a job's image through the docker or podman CLI, watches it, stops it.

The command lines are built by pure methods (`run_argv`, `stop_argv`, ...) and tested exactly; the rest
runs them. Choices, each for a reason:

- GPUs: docker's `--gpus "device=<uuid,...>"` (the NVIDIA runtime hook), or CDI `--device
  nvidia.com/gpu=<uuid>` (podman always; docker 25+ with CDI enabled). Docker parses the --gpus value as
  CSV, so a list of devices must be one quoted field: the double quotes are part of the argument.
- `--init`: the job is not PID 1, so SIGTERM has its default effect even without a handler.
- NCCL over InfiniBand: `--network host`, `--device /dev/infiniband`, `--cap-add IPC_LOCK` and
  `--ulimit memlock=-1` (RDMA registers pinned memory); `--ipc=host` (or `--shm-size`) because NCCL's
  shared-memory transport outgrows docker's 64 MB /dev/shm.
- The checkpoint directory is mounted at the same path, so CLUSTERCTL_CHECKPOINT_DIR means the same inside.
- Labels `clusterctl.job` / `clusterctl.generation` let a restarted agent list what is its own.
- Nothing of the job's is read as an engine option: the image must be an image reference (never starting with
  "-", checks.image_problem) and `--` ends the engine's options before it (docker and podman parse their flags
  with pflag, which takes "--" as the end of the options); what follows the image is the container's command.
- `--user uid:gid` where the job's tenant has a run_as: its processes are not root inside the container, and
  with rootless podman not root on the host either (docs/running-jobs.md).
- `--cpus` / `--memory` (and `--memory-swap`, the same) from the host CPU and memory the job asked for on each node
  and was placed by; none when it asked none.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import cpus_arg, image_problem, limits_problem, parse_run_as, workdir_problem
from .env import GpuShare, environment_problem
from .ledger import NodeLedger
from .process import ProcessStatus, RunDirLauncher, StopResult, split_simple
from .run_dir import (
    LaunchError,
    RunState,
    boot_id,
    create_time,
    earlier_launch,
    holds_gpus,
    read_state,
    remove_state,
    run_dir_lock,
    write_json_atomic,
    write_state,
)

ENGINES = ("docker", "podman")
ENGINE_MEMORY_MIN_MIB = 6  # docker refuses a smaller --memory ("Minimum memory limit allowed is 6MB")
SIGKILL_EXIT = 137  # 128 + 9: how an engine reports a container killed by SIGKILL


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    job_id: int
    generation: int
    image: str
    env: Mapping[str, str]
    gpus: tuple[GpuShare, ...] = ()
    command: str | Sequence[str] | None = None  # None: the image's own command; a string runs under sh -c
    workdir: str = ""
    checkpoint_dir: str = ""  # host path, mounted at the same path
    shm_size: str = ""  # "" shares the host's IPC namespace instead
    infiniband: bool = True
    user: str = ""  # "uid:gid" the container's processes run as; "" the image's own user
    # The job's host CPU and memory on this node (Job.host_cpu_milli / host_memory_mib, what the round placed it by):
    # --cpus (a CFS quota) and --memory with --memory-swap the same (no swap beyond it). 0: no limit.
    cpu_milli: int = 0
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class EngineResult:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[list[str]], EngineResult]


def run_engine(argv: list[str], timeout_s: float = 120.0) -> EngineResult:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        return EngineResult(127, "", f"{argv[0]}: not found")
    return EngineResult(done.returncode, done.stdout, done.stderr)


def container_name(job_id: int, generation: int) -> str:
    return f"clusterctl-job-{job_id}-{generation}"


def engine_answers(binary: str, runner: Runner = run_engine) -> bool:
    """Whether a container engine runs here (`docker info` / `podman info` succeeds)."""
    return runner([binary, "info"]).returncode == 0


class ContainerLauncher(RunDirLauncher):
    kind = "container"

    def __init__(
        self,
        run_dir: str | Path,
        *,
        engine: str = "docker",
        cdi: bool | None = None,
        binary: str = "",
        env_file: bool = False,
        ledger: NodeLedger | None = None,
        hostname: str = "",
        runner: Runner = run_engine,
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"container engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        self.run_dir = Path(run_dir)
        self.engine = engine
        self.cdi = engine == "podman" if cdi is None else cdi  # podman has no NVIDIA --gpus hook
        self.binary = binary or engine
        self.env_file = env_file  # keeps values out of `ps` and the engine's command line
        self.ledger = ledger
        self.hostname = hostname or os.uname().nodename
        self.runner = runner

    # -- command lines (pure) ----------------------------------------------------------------------------

    def check(self, spec: ContainerSpec) -> None:
        """LaunchError unless every value of the spec is safe on the engine's command line (checks.py)."""
        if not spec.image:
            raise LaunchError(f"job {spec.job_id}: no image to run")
        problems = {
            "image": image_problem(spec.image),
            "workdir": workdir_problem(spec.workdir),
            "checkpoint directory": workdir_problem(spec.checkpoint_dir),
            "environment": environment_problem(spec.env),
            "CPU or memory limit": limits_problem(spec.cpu_milli, spec.memory_mib),
        }
        try:
            parse_run_as(spec.user)
        except ValueError as exc:
            problems["user"] = str(exc)
        what, problem = next(((k, v) for k, v in problems.items() if v), ("", None))
        if problem:
            raise LaunchError(f"job {spec.job_id}: refused, its {what} is unsafe: {problem}")

    def run_argv(self, spec: ContainerSpec, env_file: str = "") -> list[str]:
        self.check(spec)
        argv = [self.binary, "run", "--detach", "--name", container_name(spec.job_id, spec.generation)]
        argv += ["--label", f"clusterctl.job={spec.job_id}", "--label", f"clusterctl.generation={spec.generation}"]
        argv += self.gpu_args(spec.gpus)
        if env_file:
            argv += ["--env-file", env_file]
        else:
            for key, value in spec.env.items():
                argv += ["--env", f"{key}={value}"]
        argv += ["--init", f"--shm-size={spec.shm_size}" if spec.shm_size else "--ipc=host", "--network", "host"]
        if spec.infiniband:
            argv += ["--device", "/dev/infiniband", "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1"]
        if spec.checkpoint_dir:
            argv += ["--volume", f"{spec.checkpoint_dir}:{spec.checkpoint_dir}"]
        if spec.workdir:
            argv += ["--workdir", spec.workdir]
        if spec.user:
            argv += ["--user", spec.user]
        argv += self.limit_args(spec.cpu_milli, spec.memory_mib)
        argv += ["--", spec.image]
        if isinstance(spec.command, str):
            # A simple command line runs as the container's command itself, so --init's SIGTERM reaches it; a
            # shell (lists, pipes, expansions) gets the signal instead: such a command should `exec` its job.
            argv += split_simple(spec.command) or ["/bin/sh", "-c", spec.command]
        elif spec.command:
            argv += [str(a) for a in spec.command]
        return argv

    def gpu_args(self, gpus: Sequence[GpuShare]) -> list[str]:
        if not gpus:
            return []
        if self.cdi:
            return [a for g in gpus for a in ("--device", f"nvidia.com/gpu={g.device}")]
        return ["--gpus", '"device=' + ",".join(g.device for g in gpus) + '"']

    @staticmethod
    def limit_args(cpu_milli: int, memory_mib: int) -> list[str]:
        """docker's and podman's own flags: --cpus takes decimals, "m" is MiB to both; --memory-swap equal to
        --memory leaves the container no swap beyond its memory (as Kubernetes runs pods)."""
        argv = [f"--cpus={cpus_arg(cpu_milli)}"] if cpu_milli else []
        if memory_mib:
            mib = max(memory_mib, ENGINE_MEMORY_MIN_MIB)  # at least what it asked for: engines refuse less than 6
            argv += [f"--memory={mib}m", f"--memory-swap={mib}m"]
        return argv

    def stop_argv(self, name: str, grace_s: float) -> list[str]:
        return [self.binary, "stop", "--time", str(max(0, math.ceil(grace_s))), name]

    def rm_argv(self, name: str) -> list[str]:
        return [self.binary, "rm", name]

    def inspect_argv(self, name: str) -> list[str]:
        return [self.binary, "inspect", "--format", "{{json .State}}", name]

    def logs_argv(self, name: str, lines: int) -> list[str]:
        return [self.binary, "logs", "--tail", str(lines), name]

    # -- launch ------------------------------------------------------------------------------------------

    def start(self, spec: ContainerSpec) -> RunState:
        """Start the container, or return its state when this generation already started here (idempotent)."""
        self.check(spec)  # before anything of the spec is written (its env file) or run
        name = container_name(spec.job_id, spec.generation)
        with run_dir_lock(self.run_dir):
            existing = earlier_launch(
                self.run_dir, self.hostname, spec.job_id, spec.generation, holds_gpus, "container {s.name}"
            )
            if existing is not None:
                return existing
            if self.ledger is not None:
                self.ledger.check(spec.job_id, spec.gpus)
            # A container of this name without a state file: an earlier start died between the two. Adopt it.
            if self._inspect(name) is None:
                env_path = self._write_env_file(spec) if self.env_file else ""
                self._check(self.runner(self.run_argv(spec, env_path)), f"start job {spec.job_id}")
            state = self._record(spec, name)
            write_state(self.run_dir, state)
            return state

    def _write_env_file(self, spec: ContainerSpec) -> str:
        lines = []
        for key, value in spec.env.items():
            if "\n" in value:
                raise LaunchError(f"job {spec.job_id}: {key} holds a newline, which an --env-file cannot carry")
            lines.append(f"{key}={value}\n")
        path = self.run_dir / f"job-{spec.job_id}.env"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the job's secrets, if any
        with os.fdopen(fd, "w") as handle:
            handle.write("".join(lines))
        return str(path)

    def _record(self, spec: ContainerSpec, name: str) -> RunState:
        state = self._inspect(name) or {}
        pid = int(state.get("Pid") or 0)
        started = create_time(pid) if pid else None
        return RunState(
            job_id=spec.job_id,
            generation=spec.generation,
            kind=self.kind,
            pid=pid if started is not None else 0,
            create_time=started or 0,
            boot_id=boot_id(),
            started_at=time.time(),
            gpus=list(spec.gpus),
            exit_path=str(self.run_dir / f"job-{spec.job_id}-{spec.generation}.exit"),
            name=name,
        )

    # -- watch -------------------------------------------------------------------------------------------

    def tail(self, job_id: int, lines: int = 100) -> list[str]:
        state = read_state(self.run_dir, job_id)
        if state is None:
            return []
        result = self.runner(self.logs_argv(state.name, lines))
        # The engine replays the container's stdout and stderr on its own stdout and stderr.
        return (result.stdout + result.stderr).splitlines()[-lines:] if result.returncode == 0 else []

    def forget(self, job_id: int) -> None:
        """Remove a finished job's container and files once its end has been reported."""
        with run_dir_lock(self.run_dir):
            state = read_state(self.run_dir, job_id)
            if state is None:
                return
            found = self._inspect(state.name)
            if found is not None and found.get("Running"):
                raise LaunchError(f"job {job_id} still runs (container {state.name}): stop it before forgetting it")
            if found is not None:
                self._check(self.runner(self.rm_argv(state.name)), f"remove {state.name}")
            Path(state.exit_path).unlink(missing_ok=True)
            (self.run_dir / f"job-{job_id}.env").unlink(missing_ok=True)
            remove_state(self.run_dir, job_id)

    # -- stop --------------------------------------------------------------------------------------------

    def stop(self, job_id: int, grace_s: float) -> StopResult | None:
        """`stop --time <grace>` (SIGTERM, then SIGKILL at the deadline), record the exit, then `rm`."""
        state = read_state(self.run_dir, job_id)
        if state is None:
            return None
        found = self._inspect(state.name)
        if found is None or not found.get("Running"):
            status = self._status(state)
            self._remove(state)
            return StopResult(job_id, state.generation, True, status.returncode, 0.0, already_exited=True)
        began = time.monotonic()
        self._check(self.runner(self.stop_argv(state.name, grace_s)), f"stop {state.name}")
        waited = time.monotonic() - began
        code = int((self._inspect(state.name) or {}).get("ExitCode", -1))
        # The engine does not say whether it had to SIGKILL; it did when the deadline passed and the
        # container died of SIGKILL.
        in_grace = not (waited >= grace_s and code == SIGKILL_EXIT)
        write_json_atomic(Path(state.exit_path), {"returncode": code, "finished_at": time.time()})
        self._remove(state)
        return StopResult(job_id, state.generation, in_grace, code, waited)

    # -- helpers -----------------------------------------------------------------------------------------

    def _remove(self, state: RunState) -> None:
        if self._inspect(state.name) is not None:
            self._check(self.runner(self.rm_argv(state.name)), f"remove {state.name}")

    def _inspect(self, name: str) -> dict[str, Any] | None:
        result = self.runner(self.inspect_argv(name))
        if result.returncode != 0:
            return None  # no such container
        try:
            return json.loads(result.stdout)
        except ValueError as exc:
            raise LaunchError(f"{self.binary} inspect {name}: unreadable output {result.stdout[:200]!r}") from exc

    def _status(self, state: RunState) -> ProcessStatus:
        found = self._inspect(state.name)
        if found is not None:
            if found.get("Running"):
                return ProcessStatus(state.job_id, state.generation, state.pid, "running", None, "")
            code = int(found.get("ExitCode", -1))
            return ProcessStatus(state.job_id, state.generation, state.pid, "exited", code, "")
        return self._ended(state)

    def _check(self, result: EngineResult, what: str) -> EngineResult:
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip()[:500]
            raise LaunchError(f"{self.binary}: could not {what} (exit {result.returncode}): {detail}")
        return result
