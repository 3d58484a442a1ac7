"""The node agent's part of the job lifecycle: prepare, start, stop, forget, tail, and the watcher.

No Django and no database here: the Celery tasks of scheduler/tasks.py hand over plain JSON (the payload the
central side built from the allocation) and send back plain dicts, which the central tasks ingest. Every
answer names (job, generation, host), so the central side recognises a stale one.

- `prepare(payload)`: everything a start needs is checked (the job environment, the node ledger, command or
  image, working directory), nothing is started. A multi-node job starts only once every node prepared.
- `start(payload)`: the launcher starts the job (idempotent per generation).
- `stop(job, generation, grace)`: SIGTERM, the grace period, SIGKILL; says whether it exited within grace.
- `forget(job, generation)`: once the central side recorded the end, the run directory forgets it; the
  generation is remembered (`job-<id>.done`), so a late duplicate start of it is refused, never run again.
- `Watcher`: a thread of the agent process. At start it sends what it finds (hello: the central side
  reconciles, adopting or killing), then it reports every ended job until the central side says forget.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import parse_run_as
from .container import ContainerLauncher, ContainerSpec, engine_answers
from .env import (
    GpuShare,
    HcaAffinity,
    JobAllocation,
    LaunchEnvError,
    LaunchSettings,
    NodeAllocation,
    hostfile,
    job_environment,
)
from .ledger import NodeLedger
from .process import LaunchSpec, ProcessLauncher, argv_of, tail_lines
from .run_dir import LaunchError, LaunchRefused, read_state, run_dir_lock

log = logging.getLogger(__name__)
LAUNCHERS = ("process", "container")
_MIG_PROFILE = re.compile(r"\b(\d+g\.\d+gb(?:\+\w+)*)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    hostname: str
    run_dir: str
    log_dir: str
    launcher: str = "process"  # "process" or "container"
    engine: str = "docker"  # container engine: docker or podman
    cdi: bool | None = None  # None: CDI for podman, --gpus for docker
    gpus: tuple[str, ...] = ()  # this node's GPU UUIDs; empty: from NVML, else the allocation's own
    settings: LaunchSettings = field(default_factory=LaunchSettings)


@dataclass(frozen=True, slots=True)
class NodeInventory:
    """What the node has: GPU UUIDs, MIG devices (UUID -> parent GPU) and (GPU, profile, start) -> MIG UUID."""

    gpus: tuple[str, ...] = ()
    mig_devices: Mapping[str, str] = field(default_factory=dict)
    mig_by_slot: Mapping[tuple[str, str, int], str] = field(default_factory=dict)


def nvml_inventory(nvml: Any = None) -> NodeInventory | None:
    """The node's GPUs and MIG instances from NVML; None where NVML is not there (no driver, no GPU)."""
    try:
        if nvml is None:
            import pynvml as nvml  # on first use: a node without nvidia-ml-py has no GPUs (None below)
        nvml.nvmlInit()
    except Exception:  # ImportError, NVMLError (no driver), OSError (no library)
        return None
    try:
        gpus, mig_devices, mig_by_slot = [], {}, {}
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            gpus.append(uuid)
            try:
                if nvml.nvmlDeviceGetMigMode(handle)[0] != nvml.NVML_DEVICE_MIG_ENABLE:
                    continue
                count = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
            except nvml.NVMLError:
                continue
            for m in range(count):
                try:
                    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, m)
                except nvml.NVMLError:
                    continue
                mig_uuid = _text(nvml.nvmlDeviceGetUUID(mig))
                mig_devices[mig_uuid] = uuid
                try:
                    gi = nvml.nvmlDeviceGetGpuInstanceById(handle, nvml.nvmlDeviceGetGpuInstanceId(mig))
                    start = nvml.nvmlGpuInstanceGetInfo(gi).placement.start
                    match = _MIG_PROFILE.search(_text(nvml.nvmlDeviceGetName(mig)))
                except nvml.NVMLError:
                    continue
                if match:
                    mig_by_slot[(uuid, match.group(1).lower(), int(start))] = mig_uuid
        return NodeInventory(tuple(gpus), mig_devices, mig_by_slot)
    except Exception as exc:
        log.warning("NVML inventory failed: %s", exc)
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _answer(payload_or_ids: Mapping[str, Any], host: str, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": int(payload_or_ids["job_id"]),
        "generation": int(payload_or_ids["generation"]),
        "host": host,
        **fields,
    }


class NodeAgent:
    def __init__(
        self,
        config: AgentConfig,
        *,
        inventory: Callable[[], NodeInventory | None] = nvml_inventory,
        engine_check: Callable[[str], bool] = engine_answers,
    ) -> None:
        if config.launcher not in LAUNCHERS:
            raise ValueError(f"a node agent launches with {' or '.join(LAUNCHERS)}, not {config.launcher!r}")
        self.config = config
        self.host = config.hostname
        self.run_dir = Path(config.run_dir)
        self._inventory_fn = inventory
        self._inventory: NodeInventory | None = None
        self._engine_check = engine_check
        if config.launcher == "process":
            self.launcher: ProcessLauncher | ContainerLauncher = ProcessLauncher(
                self.run_dir, log_dir=config.log_dir, hostname=self.host
            )
        else:
            self.launcher = ContainerLauncher(self.run_dir, engine=config.engine, cdi=config.cdi, hostname=self.host)

    # -- what the node has ---------------------------------------------------------------------------------

    def inventory(self) -> NodeInventory:
        if self._inventory is None:
            found = None if self.config.gpus else self._inventory_fn()
            self._inventory = found or NodeInventory(gpus=tuple(self.config.gpus))
        return self._inventory

    def _ledger(self, shares: Sequence[GpuShare]) -> NodeLedger:
        inv = self.inventory()
        # No configured list and no NVML (a test machine, a node without the driver): trust the allocation for
        # what exists, and still refuse GPUs another job here holds.
        gpus = inv.gpus or tuple(s.uuid for s in shares)
        mig = dict(inv.mig_devices) or {s.mig_uuid: s.uuid for s in shares if s.kind == "mig" and s.mig_uuid}
        return NodeLedger(self.host, gpus, self.run_dir, mig)

    # -- the launch ----------------------------------------------------------------------------------------

    def _allocation(self, payload: Mapping[str, Any]) -> JobAllocation:
        alloc = payload["allocation"]
        mig = {int(k): v for k, v in (payload.get("mig") or {}).items()}
        nodes = []
        for node in alloc["nodes"]:
            shares = []
            for g in node["gpus"]:
                share = GpuShare(**g)
                if node["hostname"] == self.host and share.kind == "mig" and not share.mig_uuid:
                    share = dataclasses.replace(share, mig_uuid=self._resolve_mig(share, mig.get(share.index)))
                shares.append(share)
            nodes.append(NodeAllocation(node["hostname"], tuple(shares), node.get("address", "")))
        return JobAllocation(
            job_id=int(alloc["job_id"]),
            nodes=tuple(nodes),
            generation=int(alloc["generation"]),
            env=dict(alloc.get("env") or {}),
            master_port=int(alloc.get("master_port") or 0),
        )

    def _resolve_mig(self, share: GpuShare, slot: Mapping[str, Any] | None) -> str:
        if not slot:
            raise LaunchError(f"{self.host}: the MIG share on {share.uuid} does not say its profile and start slot")
        key = (share.uuid, str(slot["profile"]).lower(), int(slot["start"]))
        found = self.inventory().mig_by_slot.get(key)
        if not found:
            raise LaunchRefused(
                f"{self.host}: no MIG instance {slot['profile']} at slot {slot['start']} on GPU {share.uuid} "
                "(create it with nvidia-smi mig, or NVML is not readable here)"
            )
        return found

    def _spec(self, payload: Mapping[str, Any]) -> LaunchSpec | ContainerSpec:
        job = self._allocation(payload)
        affinity = payload.get("affinity")
        env = job_environment(
            job,
            self.host,
            affinity=HcaAffinity.from_stored(affinity["nics"], affinity["nic_affinity"]) if affinity else None,
            settings=self.config.settings,
        )
        shares = next(n.gpus for n in job.nodes if n.hostname == self.host)
        checkpoint = env["CLUSTERCTL_CHECKPOINT_DIR"]
        command, image = payload.get("command") or "", payload.get("image") or ""
        workdir, user = payload.get("workdir") or "", payload.get("run_as") or ""
        if workdir and not Path(workdir).is_dir():
            raise LaunchRefused(f"{self.host}: working directory {workdir} of job {job.job_id} does not exist here")
        if self.config.launcher == "process":
            if not command:
                raise LaunchRefused(
                    f"{self.host}: job {job.job_id} has no command, and this node runs jobs as processes"
                    + (f" (it gives only the image {image}; run it on container nodes)" if image else "")
                )
            argv_of(command)
            # The payload's host CPU and memory limits are not enforced here: they decided the placement; the
            # processes share the host (docs/running-jobs.md). The container launcher passes them to the engine.
            return LaunchSpec(
                job.job_id,
                job.generation,
                command,
                env,
                workdir or checkpoint,  # no working directory given: the job's own checkpoint directory
                gpus=shares,
                hostfile=hostfile(job) if len(job.nodes) > 1 else "",
                user=user,
            )
        if not image:
            raise LaunchRefused(f"{self.host}: job {job.job_id} has no image, and this node runs jobs in containers")
        limits = payload.get("limits") or {}  # a control plane of an older version sends none
        return ContainerSpec(
            job.job_id,
            job.generation,
            image,
            env,
            shares,
            command=command or None,
            workdir=workdir,
            checkpoint_dir=checkpoint,
            user=user,
            cpu_milli=limits.get("cpu_milli", 0),
            memory_mib=limits.get("memory_mib", 0),
        )

    def _done_generation(self, job_id: int) -> int:
        try:
            return int((self.run_dir / f"job-{job_id}.done").read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _check_not_done(self, job_id: int, generation: int) -> None:
        done = self._done_generation(job_id)
        if generation <= done:
            raise LaunchRefused(
                f"{self.host}: job {job_id} generation {generation} already ran here and ended (up to generation "
                f"{done}); a launch is never run twice"
            )

    def prepare(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Check everything a start needs, start nothing. {ok, reason} for the central launch_ack."""
        try:
            job_id, generation = int(payload["job_id"]), int(payload["generation"])
            self._check_not_done(job_id, generation)
            spec = self._spec(payload)
            self.launcher.check(spec)  # every value that reaches a command line (scheduler/launch/checks.py)
            if isinstance(spec, ContainerSpec) and not self._engine_check(self.launcher.binary):
                raise LaunchRefused(f"{self.host}: the container engine {self.launcher.binary} does not answer")
            with run_dir_lock(self.run_dir):
                existing = read_state(self.run_dir, job_id)
                if existing is not None and existing.generation != generation and self._runs(existing.job_id):
                    raise LaunchRefused(
                        f"{self.host}: job {job_id} generation {existing.generation} still runs here (pid "
                        f"{existing.pid}); it must stop before generation {generation} starts"
                    )
                self._ledger(spec.gpus).check(job_id, spec.gpus)
        except (LaunchError, LaunchEnvError, OSError, KeyError, TypeError, ValueError) as exc:
            return _answer(payload, self.host, ok=False, reason=str(exc))
        return _answer(payload, self.host, ok=True, reason="")

    def start(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Start the job (the same generation twice returns the running one). {ok, pid, reason}."""
        try:
            job_id, generation = int(payload["job_id"]), int(payload["generation"])
            self._check_not_done(job_id, generation)
            spec = self._spec(payload)
            self.launcher.check(spec)
            checkpoint = Path(spec.env["CLUSTERCTL_CHECKPOINT_DIR"])
            checkpoint.mkdir(parents=True, exist_ok=True)
            if spec.user and os.geteuid() == 0:
                # The job's own user writes its checkpoints there (a container's bind mount included).
                uid, gid = parse_run_as(spec.user)
                os.chown(checkpoint, uid, gid)
            self.launcher.ledger = self._ledger(spec.gpus)
            state = self.launcher.start(spec)
        except (LaunchError, LaunchEnvError, OSError, KeyError, TypeError, ValueError) as exc:
            return _answer(payload, self.host, ok=False, pid=None, reason=str(exc))
        return _answer(payload, self.host, ok=True, pid=state.pid, reason="")

    def _runs(self, job_id: int) -> bool:
        status = self.launcher.status(job_id)
        return status is not None and status.state == "running"

    def stop(self, job_id: int, generation: int, grace_s: float) -> dict[str, Any]:
        """SIGTERM, up to grace_s, SIGKILL, for this generation only (another one here is not touched)."""
        ids = {"job_id": job_id, "generation": generation}
        state = read_state(self.run_dir, job_id)
        if state is None or state.generation != generation:
            # Never started here (a rollback of a prepared launch), or already forgotten.
            return _answer(ids, self.host, ok=True, found=False, exited_within_grace=None, returncode=None,
                           waited_s=0.0, already_exited=True)  # fmt: skip
        try:
            result = self.launcher.stop(job_id, grace_s)
        except (LaunchError, OSError) as exc:
            return _answer(ids, self.host, ok=False, found=True, reason=str(exc))
        if result is None:
            return _answer(ids, self.host, ok=True, found=False, exited_within_grace=None, returncode=None,
                           waited_s=0.0, already_exited=True)  # fmt: skip
        return _answer(ids, self.host, ok=True, found=True, exited_within_grace=result.exited_within_grace,
                       returncode=result.returncode, waited_s=round(result.waited_s, 3),
                       already_exited=result.already_exited)  # fmt: skip

    def forget(self, job_id: int, generation: int) -> dict[str, Any]:
        """Drop an ended generation's files once the central side recorded its end; remember it ended."""
        ids = {"job_id": job_id, "generation": generation}
        state = read_state(self.run_dir, job_id)
        if state is not None and state.generation == generation:
            try:
                self.launcher.forget(job_id)
            except LaunchError as exc:  # it still runs: a forget never kills
                return _answer(ids, self.host, ok=False, reason=str(exc))
        with run_dir_lock(self.run_dir):
            if generation > self._done_generation(job_id):
                tmp = self.run_dir / f".job-{job_id}.done.tmp"
                tmp.write_text(str(generation))
                os.replace(tmp, self.run_dir / f"job-{job_id}.done")
        return _answer(ids, self.host, ok=True, reason="")

    def tail(self, job_id: int, lines: int) -> dict[str, Any]:
        """The last lines of the job's log on this node (every generation's, newest last)."""
        lines = max(0, min(int(lines), 10_000))
        if isinstance(self.launcher, ProcessLauncher):
            text = tail_lines(Path(self.config.log_dir) / f"job-{job_id}.log", lines)
        else:
            text = self.launcher.tail(job_id, lines)
        return {"job_id": job_id, "host": self.host, "lines": text}

    def found(self) -> list[dict[str, Any]]:
        """Every job of the run directory: running, exited (with its code) or lost."""
        return [
            {"job_id": s.job_id, "generation": s.generation, "pid": s.pid, "state": s.state,
             "returncode": s.returncode}
            for s in self.launcher.adopt()
        ]  # fmt: skip


@dataclass(slots=True)
class FoundJob:
    """A found job as reconcile.plan_reconcile reads it (from the dicts of NodeAgent.found)."""

    job_id: int
    generation: int
    state: str
    returncode: int | None = None
    pid: int = 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FoundJob:
        return cls(int(data["job_id"]), int(data["generation"]), str(data["state"]), data.get("returncode"),
                   int(data.get("pid") or 0))  # fmt: skip


class Watcher:
    """The agent's background thread: hello once (retried until the broker takes it), then ended jobs.

    `hello(found)` and `exited(item)` send to the central side (Celery tasks, injected). An ended job is sent
    again every `resend_s` until the central side answers with a forget (which removes its files), so a lost
    message only delays its report.
    """

    def __init__(
        self,
        agent: NodeAgent,
        *,
        hello: Callable[[list[dict[str, Any]]], None],
        exited: Callable[[dict[str, Any]], None],
        interval_s: float = 1.0,
        resend_s: float = 15.0,
    ) -> None:
        self.agent = agent
        self.hello = hello
        self.exited = exited
        self.interval_s = interval_s
        self.resend_s = resend_s
        self.said_hello = False
        self.sent: dict[tuple[int, int], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Watcher:
        self._thread = threading.Thread(target=self._run, name=f"clusterctl-watch-{self.agent.host}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once(time.monotonic())
            except Exception:  # a broker hiccup or an unreadable state file: say so, try again next tick
                log.exception("%s: job watcher", self.agent.host)
            self._stop.wait(self.interval_s)

    def run_once(self, now: float) -> None:
        found = self.agent.found()
        if not self.said_hello:
            self.hello(found)
            self.said_hello = True
        ended = {(f["job_id"], f["generation"]): f for f in found if f["state"] != "running"}
        for key in list(self.sent):
            if key not in ended:
                del self.sent[key]  # forgotten (or started again): nothing more to say
        for key, item in ended.items():
            if now - self.sent.get(key, float("-inf")) >= self.resend_s:
                self.exited({**item, "host": self.agent.host})
                self.sent[key] = now
