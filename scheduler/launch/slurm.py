"""Slurm as the executor (issue 17, part 2): submit a placed job pinned to its nodes, watch it, stop it, adopt it.

No Django here: the launcher runs where the Slurm client commands and munge are (a submit host), takes the same
allocation description as the node agents (scheduler.launch.env.JobAllocation) and returns plain values.

- `SlurmJobSpec`: what clusterctl decided (job, generation, node -> GPU count, exclusive or shared, the job's
  environment per node, command, working directory). `check_spec` refuses anything that could reach a command line
  wrongly: host names, partition and account are Slurm names (no hostlist or option characters), the job's own
  variables may not be Slurm's (`SLURM_*`, `SBATCH_*`, `SRUN_*`, `SALLOC_*`: sbatch would read them as options).
- `sbatch_argv` / `batch_script`: the exact argument list (never a shell) and the fixed batch script. The command
  and every value reach the job through the environment of sbatch (`--export=ALL`), never through the argv or the
  script text. The script runs one task per node with srun; each task picks its node's own ranks
  (`CLUSTERCTL_SLURM_NODES`: `host NAME=value` lines, values of our own making, checked) by SLURMD_NODENAME, then runs
  the command with /bin/sh (the job's shell script is its own business, as with the process launcher).
- Identity: the job name `cc-<job>-g<generation>` and the comment `clusterctl:<tag>:<job>:<generation>`, so a
  restarted worker finds (adopts) the Slurm jobs that belong to it, and a submit redelivered after a crash finds the
  job it already submitted instead of submitting it twice.
- `parse_squeue`, `parse_scontrol_job`: the outputs of `squeue -o` and `scontrol show job -o` (sacct needs slurmdbd,
  which many test and small sites lack: `scontrol show job` answers for MinJobAge seconds after the end).
- `spec_from_payloads`: the spec of one generation from the launch payloads the lifecycle stored for its nodes
  (scheduler.actions.lifecycle.launch_job; the submit host's side is scheduler/slurm_launches.py).
- `SlurmLauncher`: submit (idempotent), ours (every Slurm job of this tag), status, cancel, stop (`scancel
  --signal=TERM --full`, the grace period, then `scancel --signal=KILL --full`).
- `outcome`: what Slurm's state of one of our jobs means to the lifecycle (running, completed, failed, requeue,
  unstartable, wait); `plan_watch`: one watcher pass over `ours()` against the database's open generations (adopt a
  submit whose answer was lost, cancel stale or duplicate submits, notice what Slurm no longer lists).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.launch.env import GpuShare, HcaAffinity, JobAllocation, NodeAllocation, job_environment

from .env import LaunchEnvError, check_job_env

# A Slurm node, partition or account name: no hostlist characters ([ ] ,), no '=', no whitespace, no leading '-'.
SLURM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,62}$")
RUN_AS = re.compile(r"^[1-9][0-9]{0,9}:[1-9][0-9]{0,9}$")
TAG = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
SLURM_ENV_PREFIXES = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SLURMD_", "PMI_", "PMIX_")
# Per-node values are ours (ranks, counts, HCA names, GPU ids); the batch script exports them as NAME=value.
NODE_VALUE = re.compile(r"^[A-Za-z0-9_=,.:\-]{0,4096}$")
PER_NODE = ("NODE_RANK", "RANK", "LOCAL_WORLD_SIZE", "NCCL_IB_HCA", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CLUSTERCTL_HOSTFILE")  # fmt: skip
# Slurm chooses the device indices of a --gres request itself and sets CUDA_VISIBLE_DEVICES to them (and confines the
# job to them where ConstrainDevices is on): ours would name GPUs the job may not open.
LEFT_TO_SLURM = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")

BATCH_SCRIPT = """#!/bin/sh
# clusterctl: one task per node; each takes its own ranks from CLUSTERCTL_SLURM_NODES, then runs the job's command.
exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 --export=ALL /bin/sh -c '
while read -r host kv; do
    [ "$host" = "$SLURMD_NODENAME" ] && export "$kv"
done <<CLUSTERCTL_EOF
$CLUSTERCTL_SLURM_NODES
CLUSTERCTL_EOF
unset CLUSTERCTL_SLURM_NODES
cd "$CLUSTERCTL_WORKDIR" || exit 111
exec /bin/sh -c "$CLUSTERCTL_COMMAND"
'
"""


class SlurmError(Exception):
    """A Slurm command failed (its own message), or a value cannot go to Slurm (naming the field)."""


@dataclass(frozen=True, slots=True)
class SlurmJobSpec:
    job_id: int
    generation: int
    gpus: Mapping[str, int]  # host -> GPUs there (Slurm nodes, in clusterctl's node order)
    envs: Mapping[str, Mapping[str, str]]  # host -> that node's job environment (scheduler.launch.env)
    command: str
    workdir: str
    exclusive: bool = True  # every GPU of every node is the job's: --exclusive; else shared nodes
    grace_s: float = 30.0
    partition: str = ""
    account: str = ""
    output: str = ""  # --output; empty: Slurm's default (slurm-<id>.out in the working directory)
    job_env: Mapping[str, str] = field(default_factory=dict)  # the job's own variables (checked again here)
    run_as: str = ""  # "uid:gid" (the tenant's run_as): sbatch --uid/--gid, which only root may use; "" the submitter


def job_name(job_id: int, generation: int) -> str:
    return f"cc-{int(job_id)}-g{int(generation)}"


def comment(tag: str, job_id: int, generation: int) -> str:
    return f"clusterctl:{tag}:{int(job_id)}:{int(generation)}"


_COMMENT = re.compile(r"^clusterctl:([a-z0-9-]+):(\d+):(\d+)$")


def parse_comment(text: str, tag: str) -> tuple[int, int] | None:
    """(job, generation) of one of our comments with this tag; None for any other Slurm job."""
    m = _COMMENT.match(text.strip())
    if not m or m.group(1) != tag:
        return None
    return int(m.group(2)), int(m.group(3))


def check_name(value: str, what: str) -> str:
    if not SLURM_NAME.match(value or ""):
        raise SlurmError(
            f"{what} {value!r} is not a Slurm name: letters, digits, '_', '.', '-', not starting with '-' or '.', "
            "at most 63 (no hostlist or option characters)"
        )
    return value


def check_tag(tag: str) -> str:
    if not TAG.match(tag or ""):
        raise SlurmError(f"SLURM_TAG {tag!r}: lower-case letters, digits and '-', at most 32, starting alphanumeric")
    return tag


def check_spec(spec: SlurmJobSpec) -> None:
    """Raise SlurmError naming the field for anything that may not reach sbatch."""
    if not spec.gpus:
        raise SlurmError(f"job {spec.job_id}: no nodes to submit to")
    for host, count in spec.gpus.items():
        check_name(host, "node")
        if not isinstance(count, int) or count < 0 or count > 1024:
            raise SlurmError(f"job {spec.job_id}: GPU count {count!r} on {host}")
    if set(spec.envs) != set(spec.gpus):
        raise SlurmError(f"job {spec.job_id}: the environment names other nodes than the allocation")
    if spec.partition:
        check_name(spec.partition, "partition")
    if spec.account:
        check_name(spec.account, "account")
    if not spec.command or "\0" in spec.command or len(spec.command.encode()) > 65536:
        raise SlurmError(f"job {spec.job_id}: command missing, with NUL, or over 64 KiB")
    if not spec.workdir.startswith("/") or any(c in spec.workdir for c in "\0\n\r") or len(spec.workdir) > 1024:
        raise SlurmError(f"job {spec.job_id}: working directory {spec.workdir!r} must be absolute, one line")
    if spec.output and (not spec.output.startswith("/") or any(c in spec.output for c in "\0\n\r")):
        raise SlurmError(f"job {spec.job_id}: output {spec.output!r} must be an absolute path, one line")
    if spec.run_as and not RUN_AS.match(spec.run_as):
        raise SlurmError(f"job {spec.job_id}: run_as {spec.run_as!r} is not uid:gid")
    try:
        check_job_env(dict(spec.job_env))
    except LaunchEnvError as exc:
        raise SlurmError(str(exc)) from None
    theirs = sorted(k for k in spec.job_env if k.startswith(SLURM_ENV_PREFIXES))
    if theirs:
        raise SlurmError(f"the job's environment may not set {', '.join(theirs)}: Slurm reads those as its own options")
    for host, env in spec.envs.items():
        for name in PER_NODE:
            if name in env and not NODE_VALUE.match(str(env[name])):
                raise SlurmError(f"{host}: {name}={env[name]!r} is not a value clusterctl makes")


def split_env(envs: Mapping[str, Mapping[str, str]]) -> tuple[dict[str, str], list[str]]:
    """The environment every node shares, and the `host NAME=value` lines of what differs per node."""
    hosts = list(envs)
    names = set().union(*(set(e) for e in envs.values())) - set(LEFT_TO_SLURM)
    common, lines = {}, []
    for name in sorted(names):
        values = [envs[h].get(name) for h in hosts]
        if name not in PER_NODE and all(v == values[0] for v in values) and values[0] is not None:
            common[name] = str(values[0])
            continue
        if name not in PER_NODE:
            raise SlurmError(f"{name} differs between the nodes of the job, and is not a per-node variable")
        lines += [f"{h} {name}={v}" for h, v in zip(hosts, values, strict=True) if v is not None]
    return common, lines


def sbatch_argv(spec: SlurmJobSpec, tag: str, sbatch: str = "sbatch") -> list[str]:
    """The exact sbatch command line (the batch script comes on standard input)."""
    check_spec(spec)
    check_tag(tag)
    hosts = list(spec.gpus)
    counts = set(spec.gpus.values())
    argv = [
        sbatch,
        "--parsable",
        f"--job-name={job_name(spec.job_id, spec.generation)}",
        f"--comment={comment(tag, spec.job_id, spec.generation)}",
        f"--nodelist={','.join(hosts)}",
        f"--nodes={len(hosts)}",
        "--ntasks-per-node=1",
        "--no-requeue",  # clusterctl requeues (a new generation, placed again); Slurm must not run it again itself
        "--export=ALL",
        f"--chdir={spec.workdir}",
    ]
    if len(counts) != 1:
        # One --gres per job in Slurm 22.05: nodes must take the same number of GPUs (clusterctl's gangs do).
        raise SlurmError(f"job {spec.job_id}: different GPU counts per node ({dict(spec.gpus)}); Slurm takes one")
    (count,) = counts
    if count:
        argv.append(f"--gres=gpu:{count}")
    argv.append("--exclusive" if spec.exclusive else "--oversubscribe")
    if spec.partition:
        argv.append(f"--partition={spec.partition}")
    if spec.account:
        argv.append(f"--account={spec.account}")
    if spec.output:
        argv.append(f"--output={spec.output}")
    if spec.run_as:
        uid, gid = spec.run_as.split(":")
        argv += [f"--uid={uid}", f"--gid={gid}"]
    return argv


def sbatch_env(spec: SlurmJobSpec, slurm_conf: str = "", path: str = "/usr/local/bin:/usr/bin:/bin") -> dict[str, str]:
    """The environment sbatch runs with, and so (--export=ALL) the job's: never the worker's own (broker, keys)."""
    common, lines = split_env(spec.envs)
    env = {**common, "PATH": path, "CLUSTERCTL_COMMAND": spec.command, "CLUSTERCTL_WORKDIR": spec.workdir,
           "CLUSTERCTL_SLURM_NODES": "\n".join(lines)}  # fmt: skip
    if slurm_conf:
        env["SLURM_CONF"] = slurm_conf
    return env


# -- reading Slurm ---------------------------------------------------------------------------------------------

SQUEUE_FORMAT = "%i|%j|%k|%T|%N|%r|%b"  # id, name, comment, state, nodes, reason, gres per node


@dataclass(frozen=True, slots=True)
class SlurmJob:
    slurm_id: int
    name: str
    comment: str
    state: str  # PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, NODE_FAIL, TIMEOUT, OUT_OF_MEMORY, ...
    nodes: str  # Slurm's hostlist, e.g. gpu[2,4]
    reason: str = ""
    exit_code: int | None = None  # the batch script's exit code; None while it runs
    signal: int = 0
    restarts: int = 0

    @property
    def ended(self) -> bool:
        return self.state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
                                  "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT")  # fmt: skip


def parse_squeue(text: str) -> list[SlurmJob]:
    """`squeue -h -o '%i|%j|%k|%T|%N|%r|%b'` lines (the comment is %k; '|' cannot be in our names or comments)."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 7 or not parts[0].strip().isdigit():
            continue  # an array or het job's id (12_3, 12+1) is no job of ours
        sid, name, com, state, nodes, reason = (p.strip() for p in parts[:6])
        jobs.append(SlurmJob(int(sid), name, com, state, nodes, "" if reason == "None" else reason))
    return jobs


def parse_scontrol_job(text: str) -> SlurmJob | None:
    """One job of `scontrol show job -o ID` (one line of Key=Value words; Comment= is the last key we read)."""
    line = " ".join(text.split("\n")).strip()
    if not line.startswith("JobId="):
        return None
    fields = dict(re.findall(r"(\w+(?:/\w+)?)=(\S*)", line))
    com = ""
    m = re.search(r"\bComment=(\S*)", line)
    if m:
        com = m.group(1)
    code, _, sig = fields.get("ExitCode", "0:0").partition(":")
    state = fields.get("JobState", "")
    return SlurmJob(
        slurm_id=int(fields["JobId"]),
        name=fields.get("JobName", ""),
        comment=com,
        state=state,
        nodes="" if fields.get("NodeList") in (None, "(null)") else fields["NodeList"],
        reason="" if fields.get("Reason") in (None, "None") else fields["Reason"],
        exit_code=int(code) if state and SlurmJob(0, "", "", state, "").ended else None,
        signal=int(sig or 0),
        restarts=int(fields.get("Restarts", "0") or 0),
    )


def expand_nodes(hostlist: str) -> list[str]:
    """Slurm's hostlist (gpu[2,4-5],login1) as names."""
    from fabric.topology.hostlist import expand  # PURE, no Django

    return list(expand(hostlist))


# -- running the commands ----------------------------------------------------------------------------------------

Runner = Callable[..., subprocess.CompletedProcess]


class SlurmLauncher:
    """The submit host's side. Every command is an argument list (no shell), with SLURM_CONF where one is given."""

    def __init__(self, tag: str = "clusterctl", *, slurm_conf: str = "", bindir: str = "", timeout_s: float = 30.0,
                 run: Runner = subprocess.run) -> None:  # fmt: skip
        self.tag = check_tag(tag)
        self.slurm_conf = slurm_conf
        self.bindir = bindir.rstrip("/")
        self.timeout_s = timeout_s
        self._run = run

    def binary(self, name: str) -> str:
        """The path of a Slurm command (SLURM_BINDIR or PATH)."""
        return f"{self.bindir}/{name}" if self.bindir else name

    def _env(self) -> dict[str, str]:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, input: str | None = None):
        try:
            return self._run(list(argv), env=dict(env or self._env()), input=input, capture_output=True, text=True,
                             timeout=self.timeout_s)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"{argv[0]}: {exc}") from None

    def submit(self, spec: SlurmJobSpec) -> tuple[int, bool]:
        """Submit the generation once: (Slurm job id, whether it was already there). SlurmError with sbatch's own
        message when Slurm refuses (an unknown or drained node list, a partition that does not exist)."""
        argv = sbatch_argv(spec, self.tag, self.binary("sbatch"))
        existing = self.find(spec.job_id, spec.generation)
        if existing is not None:
            return existing.slurm_id, True
        env = sbatch_env(spec, self.slurm_conf)
        done = self.run(argv, env=env, input=BATCH_SCRIPT)
        if done.returncode != 0:
            raise SlurmError((done.stderr or done.stdout).strip().removeprefix("sbatch: error: ") or "sbatch failed")
        return int(done.stdout.strip().split(";")[0]), False

    def ours(self) -> list[tuple[tuple[int, int], SlurmJob]]:
        """Every Slurm job (pending or running) of this tag, with its (job, generation)."""
        done = self.run([self.binary("squeue"), "-h", "-a", "-t", "all", "-o", SQUEUE_FORMAT])
        if done.returncode != 0:
            raise SlurmError(done.stderr.strip() or "squeue failed")
        found = []
        for job in parse_squeue(done.stdout):
            key = parse_comment(job.comment, self.tag)
            if key is not None and job.name == job_name(*key):
                found.append((key, job))
        return found

    def find(self, job_id: int, generation: int) -> SlurmJob | None:
        want = (int(job_id), int(generation))
        live = [job for key, job in self.ours() if key == want and not job.ended]
        return min(live, key=lambda j: j.slurm_id) if live else None

    def status(self, slurm_id: int) -> SlurmJob | None:
        """The job as `scontrol show job` says it (state, exit code, restarts); None once Slurm forgot it."""
        done = self.run([self.binary("scontrol"), "show", "job", "-o", str(int(slurm_id))])
        if done.returncode != 0:
            if "Invalid job id" in done.stderr:
                return None
            raise SlurmError(done.stderr.strip() or "scontrol show job failed")
        return parse_scontrol_job(done.stdout)

    def cancel(self, slurm_id: int) -> None:
        """scancel: Slurm's own end of the job (SIGTERM, KillWait, SIGKILL); one that already ended is no error."""
        done = self.run([self.binary("scancel"), str(int(slurm_id))])
        if done.returncode != 0 and "already completing or completed" not in done.stderr:
            raise SlurmError(done.stderr.strip() or "scancel failed")

    def signal(self, slurm_id: int, sig: str) -> None:
        if sig not in ("TERM", "KILL", "INT", "USR1", "USR2"):
            raise SlurmError(f"signal {sig!r}")
        done = self.run([self.binary("scancel"), f"--signal={sig}", "--full", str(int(slurm_id))])
        if done.returncode != 0 and "already completing or completed" not in done.stderr:
            raise SlurmError(done.stderr.strip() or "scancel failed")

    def stop(
        self,
        slurm_id: int,
        grace_s: float,
        *,
        poll_s: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> dict:
        """SIGTERM to the batch script and every step, up to grace_s, then SIGKILL (and Slurm's own cancel).
        {found, exited_within_grace, returncode, waited_s, already_exited}."""
        job = self.status(slurm_id)
        if job is None or job.ended:
            return {"found": job is not None, "exited_within_grace": None,
                    "returncode": job.exit_code if job else None, "waited_s": 0.0, "already_exited": True}  # fmt: skip
        start = clock()
        if job.state == "PENDING":
            self.run([self.binary("scancel"), str(int(slurm_id))])
            return {"found": True, "exited_within_grace": True, "returncode": None, "waited_s": 0.0,
                    "already_exited": False}  # fmt: skip
        self.signal(slurm_id, "TERM")
        while clock() - start < grace_s:
            sleep(poll_s)
            job = self.status(slurm_id)
            if job is None or job.ended or job.state == "COMPLETING":  # its processes are gone; Slurm tidies up
                return {"found": True, "exited_within_grace": True, "returncode": job.exit_code if job else None,
                        "waited_s": clock() - start, "already_exited": False}  # fmt: skip
        self.signal(slurm_id, "KILL")
        self.run([self.binary("scancel"), str(int(slurm_id))])
        return {"found": True, "exited_within_grace": False, "returncode": None, "waited_s": clock() - start,
                "already_exited": False}  # fmt: skip


def spec_from_allocation(
    job,  # scheduler.launch.env.JobAllocation
    *,
    command: str,
    workdir: str,
    exclusive: bool,
    node_gpus: Mapping[str, int] | None = None,
    affinity: Mapping[str, object] | None = None,
    settings=None,
    grace_s: float = 30.0,
    partition: str = "",
    account: str = "",
    output: str = "",
    run_as: str = "",
) -> SlurmJobSpec:
    """The spec of a placed job from the allocation every node agent would get (the same environment per node)."""
    envs = {}
    for node in job.nodes:
        aff = (affinity or {}).get(node.hostname)
        envs[node.hostname] = job_environment(
            job, node.hostname,
            affinity=HcaAffinity.from_stored(aff["nics"], aff["nic_affinity"]) if aff else None,
            **({"settings": settings} if settings is not None else {}),
        )  # fmt: skip
    gpus = {n.hostname: len(n.gpus) for n in job.nodes}
    return SlurmJobSpec(job.job_id, job.generation, gpus, envs, command, workdir, exclusive=exclusive,
                        grace_s=grace_s, partition=partition, account=account, output=output,
                        job_env=dict(job.env), run_as=run_as)  # fmt: skip


def spec_from_payloads(
    payloads: Sequence[Mapping], *, partition: str = "", account: str = "", output_dir: str = "", settings=None
) -> SlurmJobSpec:
    """The spec of one generation from the launch payloads clusterctl stored for its nodes (one per node, the same
    allocation in each; scheduler.actions.lifecycle.launch_job). `node_gpus` in a payload is how many GPUs that node
    has: a job that takes all of every node's is --exclusive, any other shares its nodes (--oversubscribe).
    SlurmError naming the job for what Slurm cannot be asked to do: fractional shares (Slurm's --gres gives whole
    GPUs), or no command (the Slurm launcher runs commands, not images)."""
    if not payloads:
        raise SlurmError("no launch payloads to submit")
    first = payloads[0]
    alloc = first["allocation"]
    job_id = int(alloc["job_id"])
    kinds = sorted({str(g.get("kind", "whole")) for n in alloc["nodes"] for g in n["gpus"]} - {"whole"})
    if kinds:
        raise SlurmError(
            f"job {job_id}: {', '.join(kinds)} shares cannot run in Slurm, whose --gres gives whole GPUs "
            "(fractional jobs need the node agents: LAUNCHER=process or container)"
        )
    if not first.get("command"):
        raise SlurmError(
            f"job {job_id}: no command (the Slurm launcher runs commands; an image needs LAUNCHER=container)"
        )
    nodes = tuple(
        NodeAllocation(n["hostname"], tuple(GpuShare(**g) for g in n["gpus"]), n.get("address", ""))
        for n in alloc["nodes"]
    )
    job = JobAllocation(job_id=job_id, nodes=nodes, generation=int(alloc["generation"]),
                        env=dict(alloc.get("env") or {}), master_port=int(alloc.get("master_port") or 0))  # fmt: skip
    by_host = {p["host"]: p for p in payloads}
    held = {n.hostname: len(n.gpus) for n in nodes}
    exclusive = all(
        held.get(h, 0) >= int(p["node_gpus"]) if p.get("node_gpus") is not None else False for h, p in by_host.items()
    )
    name = job_name(job_id, job.generation)
    return spec_from_allocation(
        job,
        command=str(first["command"]),
        workdir=str(first.get("workdir") or "/tmp"),
        exclusive=exclusive,
        affinity={h: p.get("affinity") for h, p in by_host.items() if p.get("affinity")},
        settings=settings,
        grace_s=float(first.get("grace_s") or 30.0),
        partition=partition,
        account=account,
        output=f"{output_dir.rstrip('/')}/{name}-%j.out" if output_dir else "",
        run_as=str(first.get("run_as") or ""),
    )


# -- what a Slurm job's state means to clusterctl's lifecycle -------------------------------------------------------

# Pending reasons Slurm will not get over by itself (a node drained, down or unknown, a constraint or a partition that
# cannot be met): past LAUNCH_ACK_TIMEOUT_S the launch is rolled back and the job requeued with Slurm's reason. Any
# other reason (Priority, Resources, BeginTime, None) waits: Slurm starts it once what it waits for is free.
UNSATISFIABLE = ("ReqNodeNotAvail", "BadConstraints", "PartitionDown", "PartitionNodeLimit", "PartitionConfig",
                 "NodeDown", "InvalidAccount", "InvalidQOS", "JobHeldAdmin", "launch failed requeued held",
                 "Nodes required for job are DOWN")  # fmt: skip
FAILED_STATES = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "CANCELLED")
REQUEUE_STATES = ("NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the watcher does with one Slurm job of ours: wait, running, completed, failed, requeue or unstartable
    (rollback), with the reason that goes on the job."""

    kind: str
    reason: str = ""
    exit_code: int | None = None


def outcome(job: SlurmJob, *, was_running: bool, waiting_s: float, ack_timeout_s: float) -> Outcome:
    """Map Slurm's state of one of our jobs onto the lifecycle. `was_running`: clusterctl already recorded it as
    running (so PENDING again means Slurm requeued it); `waiting_s`: how long its launch has waited to start."""
    sid, state = job.slurm_id, job.state
    if state in REQUEUE_STATES or (not job.ended and job.restarts > 0) or (state == "PENDING" and was_running):
        return Outcome("requeue", f"Slurm job {sid} was requeued by Slurm ({state}"
                       f"{', ' + job.reason if job.reason else ''}): requeued here as the next generation")  # fmt: skip
    if state == "PENDING":
        if job.reason.startswith(UNSATISFIABLE) and waiting_s > ack_timeout_s:
            return Outcome("unstartable", f"Slurm could not start job {sid} within {ack_timeout_s:g} s: {job.reason}")
        return Outcome("wait", job.reason)
    if state == "COMPLETED" and (job.exit_code or 0) == 0:
        return Outcome("completed", f"Slurm job {sid} completed (exit 0)", 0)
    if state == "COMPLETED" or state in FAILED_STATES:
        code = job.exit_code
        what = f"exit {code}" + (f", signal {job.signal}" if job.signal else "") if code is not None else "no exit code"
        return Outcome("failed", f"Slurm job {sid} ended {state} ({what})", code)
    if state in ("RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "SIGNALING", "STAGE_OUT", "RESIZING"):
        return Outcome("running", f"running in Slurm as job {sid} on {job.nodes}")
    return Outcome("wait", state)


@dataclass(frozen=True, slots=True)
class SlurmPlan:
    """One watcher pass: `watch` (key -> the Slurm job that is that generation's), `adopt` (keys whose submit went
    through but was never recorded: the worker died between sbatch and its answer), `cancel` (Slurm ids of ours
    that no current generation owns: stale, or a second submit of one generation), `missing` (keys recorded as
    submitted that Slurm no longer lists: scontrol decides whether it ended or was forgotten)."""

    watch: dict[tuple[int, int], SlurmJob]
    adopt: list[tuple[int, int]]
    cancel: list[int]
    missing: list[tuple[int, int]]


def plan_watch(
    found: Iterable[tuple[tuple[int, int], SlurmJob]], expected: Mapping[tuple[int, int], int | None]
) -> SlurmPlan:
    """`found`: SlurmLauncher.ours(); `expected`: each open (job, generation) of the database -> its recorded Slurm
    id (None: submit sent, no answer yet). The recorded id wins; else the lowest live one (the first submit)."""
    by_key: dict[tuple[int, int], list[SlurmJob]] = {}
    for key, job in found:
        by_key.setdefault(key, []).append(job)
    watch, adopt, cancel, missing = {}, [], [], []
    for key, jobs in sorted(by_key.items()):
        live = sorted((j for j in jobs if not j.ended), key=lambda j: j.slurm_id)
        if key not in expected:
            cancel += [j.slurm_id for j in live]
            continue
        recorded = expected[key]
        if recorded is not None:  # the recorded id is the truth: any other live one is a second submit
            mine = next((j for j in jobs if j.slurm_id == recorded), None)
        else:
            mine = live[0] if live else min(jobs, key=lambda j: j.slurm_id)
        if mine is None:
            missing.append(key)
        else:
            watch[key] = mine
            if recorded is None:
                adopt.append(key)
        cancel += [j.slurm_id for j in live if mine is None or j.slurm_id != mine.slurm_id]
    missing += sorted(k for k, sid in expected.items() if k not in by_key and sid is not None)
    return SlurmPlan(watch, adopt, sorted(cancel), sorted(missing))


# Slurm could not be asked (its controller down or slow): the submit or the watcher pass is retried later. Anything
# else sbatch says is a refusal of this job (an unknown or drained node list, a partition or account that does not
# exist): the launch is rolled back with that message.
TRANSIENT_MESSAGES = ("Unable to contact slurm controller", "Socket timed out", "Slurm temporarily unable",
                      "Zero Bytes were transmitted or received", "timed out after")  # fmt: skip


def transient(message: str) -> bool:
    """Whether a Slurm command's error means "try again" rather than "this job cannot go to Slurm"."""
    return any(m in message for m in TRANSIENT_MESSAGES)
