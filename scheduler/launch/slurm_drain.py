"""Health flows back to Slurm (issue 17, part 4): drain the nodes clusterctl took out of service, resume only those.

No Django here. The caller says which nodes should be out of service and why (a health alert that took the node or
one of its GPUs or HCA ports away); Slurm says what it has (`sinfo -N -h -o '%N|%T|%E'`: node, state, reason).
`plan_drains` compares the two:

- a node we want out and Slurm runs: `scontrol update NodeName=X State=DRAIN Reason="clusterctl: <why>"`. Slurm lets
  the node's running jobs finish and gives it no new ones; nothing is killed.
- a node Slurm already drains or holds down for a reason of its own or an operator's: left alone (its reason stays;
  clusterctl never writes over a human's note);
- a node drained with our prefix that we no longer want out (the alert cleared): `State=RESUME`. A node an operator
  drained by hand never carries the prefix, so it is never resumed by us.

The reason is what Slurm shows in `sinfo -R` and `scontrol show node`: the prefix marks it as ours, and a reason is
cut to what fits on one line without characters Slurm would read as the end of a field.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from scheduler.launch.slurm import SLURM_NAME, SlurmError

PREFIX = "clusterctl: "
MODES = ("off", "dry-run", "on")
REASON_MAX = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;/()+#@%=\-]")


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    state: str  # sinfo %T: idle, mixed, allocated, drained, draining, down, with flags such as "*" (not responding)
    reason: str = ""

    @property
    def drained(self) -> bool:
        """Out of service in Slurm, by a drain (draining, drained) or down: no new job lands there."""
        base = self.state.rstrip("*~#!%$@^-").lower()
        return "drain" in base or base.startswith(("down", "fail"))

    @property
    def ours(self) -> bool:
        return self.reason.startswith(PREFIX)


@dataclass(frozen=True, slots=True)
class DrainPlan:
    drain: tuple[tuple[str, str], ...] = ()  # (node, reason as Slurm will show it)
    resume: tuple[str, ...] = ()
    left: tuple[tuple[str, str], ...] = ()  # (node, why nothing is done)

    def as_dict(self) -> dict[str, list]:
        return {
            "drain": [{"node": n, "reason": r} for n, r in self.drain],
            "resume": list(self.resume),
            "left": [{"node": n, "why": w} for n, w in self.left],
        }


@dataclass(slots=True)
class DrainResult:
    plan: DrainPlan
    mode: str
    done: list[str] = field(default_factory=list)  # "drain gpu2", "resume gpu3" as they were applied
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, **self.plan.as_dict(), "done": self.done, "errors": self.errors}


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"SLURM_DRAIN must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def slurm_reason(why: str) -> str:
    """The reason as Slurm stores it: our prefix, one line, no quotes or field separators, at most REASON_MAX."""
    text = _UNSAFE.sub(" ", " ".join(why.split())).strip() or "out of service"
    return (PREFIX + text)[:REASON_MAX].rstrip()


def parse_sinfo(text: str) -> dict[str, SlurmNode]:
    """`sinfo -N -h -o '%N|%T|%E'`: one line per node and partition (a node in two partitions comes twice)."""
    nodes: dict[str, SlurmNode] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|", 2)
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise SlurmError(f"sinfo line {number}: expected NODE|STATE|REASON, got {line!r}")
        name, state, reason = (p.strip() for p in parts)
        nodes[name] = SlurmNode(name, state, "" if reason == "none" else reason)
    return nodes


def plan_drains(
    wanted: Mapping[str, str], slurm: Mapping[str, SlurmNode], hosts: Collection[str] | None = None
) -> DrainPlan:
    """What to tell Slurm, sorted by node name: `wanted` maps a node that should be out of service to why. `hosts`:
    the cluster's own nodes (None: every node Slurm lists); only those are resumed, so a pass over one cluster never
    resumes what clusterctl drained for another cluster under the same Slurm."""
    drain, resume, left = [], [], []
    for name in sorted(wanted):
        node = slurm.get(name)
        if node is None:
            left.append((name, "Slurm does not know this node"))
        elif not SLURM_NAME.match(name):
            left.append((name, "not a name that can go to scontrol"))
        elif node.drained and not node.ours:
            left.append((name, f"already out of service in Slurm ({node.state}: {node.reason or 'no reason'})"))
        elif not node.drained:
            drain.append((name, slurm_reason(wanted[name])))
    for name in sorted(slurm):
        node = slurm[name]
        mine = hosts is None or name in hosts
        if mine and name not in wanted and node.drained and node.ours and SLURM_NAME.match(name):
            resume.append(name)
    return DrainPlan(tuple(drain), tuple(resume), tuple(left))


def drain_argv(node: str, reason: str, scontrol: str = "scontrol") -> list[str]:
    return [scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]


def resume_argv(node: str, scontrol: str = "scontrol") -> list[str]:
    return [scontrol, "update", f"NodeName={node}", "State=RESUME"]


def sinfo_argv(sinfo: str = "sinfo") -> list[str]:
    """One line per node: name, state, reason (parse_sinfo)."""
    return [sinfo, "-N", "-h", "-o", "%N|%T|%E"]
