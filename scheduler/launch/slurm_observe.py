"""Observe a Slurm cluster that clusterctl does not schedule (issue 17, part 3). PURE.

`scontrol show job -d -o` (one line per job, every job Slurm still knows) is parsed into `ObservedJob`s: Slurm's id,
name, user, partition, state and reason, and for a job that holds nodes the GPUs it holds there, from the detail
groups `Nodes=<hostlist> CPU_IDs=... Mem=... GRES=gpu:8(IDX:0-7)` (the device indexes slurmd bound the job to).
scheduler.actions.slurm_observed mirrors them onto the inventory, read-only, so Slurm's jobs appear on the heat maps,
the job pages and the queue (with Slurm's own reason) beside clusterctl's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabric.topology.hostlist import expand

# A detail group of a job holding nodes; GRES lists every generic resource, e.g. gpu:a100:2(IDX:0-1),nic:1(IDX:0).
_GROUP = re.compile(r"(?:^|\s)Nodes=(\S+) CPU_IDs=\S* Mem=\S* GRES=(\S*)")
_GPU_GRES = re.compile(r"gpu(?::[^:(,\s]+)?:(\d+)\(IDX:([0-9,\-]*)\)")
_FIELD = re.compile(r"(?:^|\s)(JobId|JobName|UserId|Account|Partition|JobState|Reason|ExitCode|NumNodes|"
                    r"TresPerNode|SubmitTime|StartTime|NodeList)=(\S*)")  # fmt: skip
ACTIVE = ("RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "SIGNALING", "STAGE_OUT", "RESIZING")
WAITING = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED")


class ObserveError(ValueError):
    """A line that is not what `scontrol show job -d -o` prints (naming it)."""


@dataclass(frozen=True, slots=True)
class ObservedJob:
    slurm_id: int
    name: str
    user: str
    partition: str
    state: str
    reason: str  # Slurm's pending reason ("" for None)
    gpus: tuple[tuple[str, int], ...] = ()  # (host, device index) the job holds, while it holds nodes
    gpus_requested: int = 0  # what it asked for: per-node GPUs x nodes (pending jobs hold none yet)
    nodes: str = ""  # Slurm's hostlist of the nodes it holds
    exit_code: int | None = None
    submitted: str = ""  # as Slurm prints it (local time, no zone)
    started: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def waiting(self) -> bool:
        return self.state in WAITING


def _indexes(text: str) -> list[int]:
    out = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def parse_job_line(line: str, number: int = 0) -> ObservedJob:
    fields: dict[str, str] = {}
    for key, value in _FIELD.findall(line):
        fields.setdefault(key, value)  # the first: detail groups repeat no key of these
    if "JobId" not in fields or not fields["JobId"].isdigit() or "JobState" not in fields:
        raise ObserveError(
            f"scontrol line {number}: no JobId=<number> and JobState= (is it `scontrol show job -d -o`?)"
        )
    gpus: list[tuple[str, int]] = []
    for hostlist, gres in _GROUP.findall(line):
        hosts = list(expand(hostlist))
        for _count, idx in _GPU_GRES.findall(gres):
            gpus.extend((h, i) for h in hosts for i in _indexes(idx))
    per_node = re.search(r"gpu(?::[^:,\s]+)?:(\d+)$", fields.get("TresPerNode", "").split(",")[0] or "")
    nodes = int((fields.get("NumNodes") or "1").split("-")[0] or 1)
    user = fields.get("UserId", "").split("(")[0]
    code, _, _sig = fields.get("ExitCode", "").partition(":")
    state = fields["JobState"]
    return ObservedJob(
        slurm_id=int(fields["JobId"]),
        name=fields.get("JobName", "")[:128],
        user=user,
        partition=fields.get("Partition", ""),
        state=state,
        reason="" if fields.get("Reason") in (None, "None", "(null)") else fields["Reason"],
        gpus=tuple(sorted(set(gpus))),
        gpus_requested=int(per_node.group(1)) * nodes if per_node else len(set(gpus)),
        nodes="" if fields.get("NodeList") in (None, "(null)") else fields["NodeList"],
        exit_code=int(code) if code.isdigit() and state not in ACTIVE + WAITING else None,
        submitted=fields.get("SubmitTime", ""),
        started="" if fields.get("StartTime") in (None, "Unknown") else fields["StartTime"],
    )


def parse_scontrol_jobs(text: str) -> list[ObservedJob]:
    """Every job of `scontrol show job -d -o` ("No jobs in the system" is none)."""
    jobs = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("No jobs in the system"):
            continue
        jobs.append(parse_job_line(line, number))
    return sorted(jobs, key=lambda j: j.slurm_id)


def scontrol_argv(binary: str = "scontrol") -> list[str]:
    return [binary, "show", "job", "-d", "-o"]
