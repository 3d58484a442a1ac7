"""The node-side guard: a node refuses GPUs it does not have, or that another job on it holds.

The database already makes double allocation impossible to store; this is the second guard, for what the
database cannot see: a stale launch message, an inventory that no longer matches the hardware, a job that
kept running through an agent restart. Holders are read from the run directory's state files, counting
only processes that still run (`state.holds_gpus`), so a crashed job frees its GPUs here at once.

The sharing rules mirror scheduler.models.GpuLedger: one sharing kind per GPU at a time; a whole GPU has
one holder; MPS shares add up to at most 100 %; a MIG instance has one holder; time-slice replicas share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from .env import GpuShare
from .run_dir import LaunchRefused, RunState, holds_gpus, read_states


class NodeLedger:
    def __init__(
        self,
        hostname: str,
        gpus: Iterable[str],
        run_dir: Path,
        mig_devices: Mapping[str, str] | None = None,
    ) -> None:
        """`gpus`: the node's GPU UUIDs (from NVML or the agent's configuration); `mig_devices`: MIG UUID ->
        UUID of its parent GPU, for the MIG instances that exist on the node now."""
        self.hostname = hostname
        self.gpus = tuple(gpus)
        self.run_dir = Path(run_dir)
        self.mig_devices = dict(mig_devices or {})

    def holders(self, exclude_job: int | None = None) -> list[RunState]:
        """States of the jobs on this node that hold GPUs now."""
        return [s for s in read_states(self.run_dir) if s.job_id != exclude_job and holds_gpus(s)]

    def check(self, job_id: int, shares: Iterable[GpuShare]) -> None:
        """Raise LaunchRefused naming the GPU (and its holder) when the launch may not take these shares."""
        shares = list(shares)
        for share in shares:
            self._check_exists(job_id, share)
        held = [(holder, h) for holder in self.holders(exclude_job=job_id) for h in holder.gpus]
        for share in shares:
            mps_pct = share.compute_pct if share.kind == "mps" else 0
            for holder, theirs in held:
                if theirs.uuid != share.uuid:
                    continue
                if share.kind == "mps" and theirs.kind == "mps":
                    mps_pct += theirs.compute_pct
                    continue
                if _conflict(share, theirs):
                    raise LaunchRefused(
                        f"{self.hostname}: job {job_id} cannot take GPU {share.device}: "
                        f"{_holder(holder)} holds {_what(theirs)}"
                    )
            if mps_pct > 100:
                holders = ", ".join(
                    f"job {h.job_id} ({t.compute_pct} %)" for h, t in held if t.uuid == share.uuid and t.kind == "mps"
                )
                raise LaunchRefused(
                    f"{self.hostname}: job {job_id} cannot take {share.compute_pct} % of GPU {share.uuid}: "
                    f"MPS shares would reach {mps_pct} % (held by {holders})"
                )

    def _check_exists(self, job_id: int, share: GpuShare) -> None:
        who = f"{self.hostname}: job {job_id}"
        if share.uuid not in self.gpus:
            have = ", ".join(self.gpus) or "none"
            raise LaunchRefused(f"{who} asks for GPU {share.uuid}, which this node does not have (it has: {have})")
        if share.kind == "mig":
            parent = self.mig_devices.get(share.mig_uuid)
            if parent is None:
                raise LaunchRefused(f"{who} asks for MIG device {share.mig_uuid!r}, which does not exist on this node")
            if parent != share.uuid:
                raise LaunchRefused(f"{who}: MIG device {share.mig_uuid} belongs to GPU {parent}, not {share.uuid}")


def _conflict(mine: GpuShare, theirs: GpuShare) -> bool:
    if "whole" in (mine.kind, theirs.kind) or mine.kind != theirs.kind:
        return True
    if mine.kind == "mig":
        return mine.mig_uuid == theirs.mig_uuid
    return False  # time-slice replicas share by design


def _holder(state: RunState) -> str:
    return f"job {state.job_id} (generation {state.generation}, {state.kind} pid {state.pid})"


def _what(share: GpuShare) -> str:
    return {
        "whole": "it whole",
        "mps": f"an MPS share of it ({share.compute_pct} %)",
        "mig": f"its MIG device {share.mig_uuid}",
        "timeslice": "a time-slice replica of it",
    }.get(share.kind, f"a {share.kind} share of it")
