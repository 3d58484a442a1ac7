"""The environment of one node's part of a job, from its allocation (PURE: dataclasses in, dict out).

Every node of a job calls `job_environment` with the same `JobAllocation` and its own hostname, so the
values that must agree across nodes (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, rank ranges) are derived only
from that description, never from the local machine: nodes are ordered by a natural sort of their
hostnames, and the port is the one the central side chose for the job on its master node (the allocation's
`master_port`: no two open launches on one master hold the same, a database constraint says so), or, in a
description without one, a function of the job id.

Device selection uses UUIDs, never indices: an index changes meaning under CUDA_VISIBLE_DEVICES, inside a
container and under MPS (NVIDIA's MPS guide recommends UUIDs for that reason).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SHARE_KINDS = ("whole", "mps", "mig", "timeslice")  # the values of scheduler.choices.ShareKind

# NIC distance tiers, closest first. PIX and PXB are one tier: both reach the GPU without crossing the
# CPU's host bridge, which is what GPUDirect RDMA needs; the rest only differ in how far they detour.
HCA_TIERS: tuple[tuple[str, ...], ...] = (("PIX", "PXB"), ("PHB",), ("NODE",), ("SYS",))

# Every variable this module may set, whatever the job's mode, plus the ones that pick devices in a
# container: a job's own environment may not set them (it would escape its share or break the ranks).
RESERVED: frozenset[str] = frozenset({
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
    "NCCL_IB_HCA",
    "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NODE_RANK", "RANK", "LOCAL_WORLD_SIZE", "NNODES",
})  # fmt: skip
RESERVED_PREFIX = "CLUSTERCTL_"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}", re.ASCII)
# A job's own variables: each becomes one `--env NAME=value` argument (or env-file line) on the node, so their
# number and size stay well inside what one command line may carry.
ENV_MAX_VARIABLES = 256
ENV_VALUE_MAX = 4096
_NATURAL = re.compile(r"(\d+)")


class LaunchEnvError(ValueError):
    """The allocation or the job's own environment cannot make a valid job environment."""


@dataclass(frozen=True, slots=True)
class GpuShare:
    """One GPU (or MIG instance) a node's part of the job holds, as the allocation says.

    `index` is the NVML index on the node (it keys the topology); `uuid` the GPU's "GPU-..." UUID;
    `mig_uuid` the "MIG-..." UUID of the instance for kind "mig" (resolved on the node from NVML).
    """

    uuid: str
    index: int
    kind: str = "whole"
    compute_pct: int = 100
    memory_mib: int = 0
    mig_uuid: str = ""

    @property
    def device(self) -> str:
        """What CUDA_VISIBLE_DEVICES (and the container engine) names for this share."""
        return self.mig_uuid if self.kind == "mig" else self.uuid


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    hostname: str
    gpus: tuple[GpuShare, ...]
    address: str = ""  # what other nodes connect to (IPoIB address); the hostname when empty

    @property
    def connect_to(self) -> str:
        return self.address or self.hostname


@dataclass(frozen=True, slots=True)
class JobAllocation:
    """What every node of a job is told: the job, its allocation generation, all its nodes, its own env."""

    job_id: int
    nodes: tuple[NodeAllocation, ...]
    generation: int = 0  # bumped on every (re)launch, so a stale launch or stop is recognisable
    env: Mapping[str, str] = field(default_factory=dict)
    master_port: int = 0  # chosen centrally per master node (free_master_port); 0: the job id's (master_port)


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    checkpoint_root: str = "/var/lib/clusterctl/checkpoints"
    mps_pipe_directory: str = "/tmp/nvidia-mps"  # nvidia-cuda-mps-control's defaults
    mps_log_directory: str = "/var/log/nvidia-mps"
    master_port_min: int = 29500
    master_port_max: int = 29999


@dataclass(frozen=True, slots=True)
class HcaAffinity:
    """GPU -> NIC distance codes of one node (`nvidia-smi topo -m`), NICs in topology order."""

    nics: tuple[str, ...]
    codes: Mapping[int, Mapping[str, str]]  # gpu index -> nic -> "PIX" / "PXB" / ... / "SYS"

    @classmethod
    def from_parsed(cls, topo: Any) -> HcaAffinity:
        """From a fabric.importers ParsedNodeTopology (duck-typed: this module imports no parser)."""
        codes: dict[int, dict[str, str]] = {}
        for (gpu, nic), code in topo.nic_affinity.items():
            codes.setdefault(gpu, {})[nic] = code
        return cls(tuple(topo.nics), codes)

    @classmethod
    def from_stored(cls, nics: Sequence[str], nic_affinity: Mapping[str, Mapping[str, str]]) -> HcaAffinity:
        """From fabric.models.NodeTopology's JSON fields (`nics`, `nic_affinity` keyed by str(gpu))."""
        return cls(tuple(nics), {int(gpu): dict(codes) for gpu, codes in nic_affinity.items()})


def _natural(hostname: str) -> list:
    return [int(p) if p.isdigit() else p for p in _NATURAL.split(hostname)]


def ordered_nodes(job: JobAllocation) -> list[NodeAllocation]:
    """The job's nodes in the order every node agrees on: natural order of hostnames (gpu2 < gpu10)."""
    names = [n.hostname for n in job.nodes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise LaunchEnvError(f"job {job.job_id}: node {duplicates[0]} appears twice in the allocation")
    if not job.nodes:
        raise LaunchEnvError(f"job {job.job_id}: the allocation has no nodes")
    return sorted(job.nodes, key=lambda n: _natural(n.hostname))


def master_hostname(hostnames: Iterable[str]) -> str:
    """The node that runs rank 0 and listens on MASTER_PORT: the first in natural order (as ordered_nodes)."""
    return min(hostnames, key=_natural)


def parse_port_range(text: str) -> tuple[int, int]:
    """ "29500-29999" (or one port) -> (29500, 29999); ValueError naming the problem."""
    low, _, high = text.strip().partition("-")
    try:
        ports = int(low), int(high or low)
    except ValueError:
        raise ValueError(f"master port range {text!r} is not LOW-HIGH") from None
    if not 0 < ports[0] <= ports[1] < 65536:
        raise ValueError(f"master port range {text!r} is not within 1-65535, low first")
    return ports


def master_port(job_id: int, settings: LaunchSettings = LaunchSettings()) -> int:
    """A port in the configured range, a pure function of the job id (same on every node, every relaunch)."""
    low, high = settings.master_port_min, settings.master_port_max
    if not 0 < low <= high < 65536:
        raise LaunchEnvError(f"master port range {low}-{high} is not within 1-65535")
    return low + job_id % (high - low + 1)


def free_master_port(job_id: int, taken: Iterable[int], low: int, high: int) -> int | None:
    """The job's port on its master node: the job id's own (as master_port) when no open launch on that node
    holds it, else the next free one in [low, high], wrapping; None when every port of the range is held."""
    span, held = high - low + 1, set(taken)
    start = job_id % span
    for step in range(span):
        port = low + (start + step) % span
        if port not in held:
            return port
    return None


def job_master_port(job: JobAllocation, settings: LaunchSettings = LaunchSettings()) -> int:
    """MASTER_PORT of this job: the one its allocation names (checked against this node's range), else the
    job id's."""
    if not job.master_port:
        return master_port(job.job_id, settings)
    if not settings.master_port_min <= job.master_port <= settings.master_port_max:
        raise LaunchEnvError(
            f"job {job.job_id}: master port {job.master_port} is outside this node's range "
            f"{settings.master_port_min}-{settings.master_port_max} (CLUSTERCTL_MASTER_PORTS differs from the "
            "control plane's)"
        )
    return job.master_port


def checkpoint_dir(job_id: int, settings: LaunchSettings = LaunchSettings()) -> str:
    """The job's checkpoint directory: keyed by the job only, so a relaunch finds what it wrote."""
    return posixpath.join(settings.checkpoint_root, f"job-{job_id}")


def nccl_ib_hca(gpu_indices: Iterable[int], affinity: HcaAffinity) -> str:
    """NCCL_IB_HCA for ranks on these GPUs: the NICs of the closest tier any of them has, deduplicated.

    Ordered by the job's GPUs, then topology order. The "=" prefix makes NCCL match names exactly: without
    it "mlx5_1" is a prefix and also selects mlx5_10 and mlx5_11. Empty when no GPU has a known NIC
    (a GPU missing from a stale topology is skipped: NCCL then picks for itself).
    """
    gpus = list(dict.fromkeys(gpu_indices))
    for tier in HCA_TIERS:
        picked = [nic for g in gpus for nic in affinity.nics if affinity.codes.get(g, {}).get(nic) in tier]
        if picked:
            return "=" + ",".join(dict.fromkeys(picked))
    return ""


def environment_problem(env: Mapping[str, Any]) -> str | None:
    """Why `env` cannot be given to a process or a container engine, or None: every name a shell name (no '=',
    no leading digit), every value a string without NUL (an exec'd environment cannot carry one)."""
    bad_names = [k for k in env if not isinstance(k, str) or not _ENV_NAME.fullmatch(k)]
    if bad_names:
        return f"environment variable name {str(bad_names[0])[:80]!r} is not valid (letters, digits, _)"
    for key, value in env.items():
        if not isinstance(value, str):
            return f"environment variable {key}: value must be a string, not {type(value).__name__}"
        if "\0" in value:
            return f"environment variable {key}: value contains a NUL byte"
    return None


def check_job_env(env: Mapping[str, Any]) -> dict[str, str]:
    """The job's own variables, validated: names are shell names, values strings, none of ours, within bounds."""
    if len(env) > ENV_MAX_VARIABLES:
        raise LaunchEnvError(f"{len(env)} environment variables; a job may set at most {ENV_MAX_VARIABLES}")
    bad_names = [k for k in env if not isinstance(k, str) or not _ENV_NAME.fullmatch(k)]
    if bad_names:
        raise LaunchEnvError(f"environment variable name {str(bad_names[0])[:80]!r} is not valid (letters, digits, _)")
    ours = sorted(k for k in env if k in RESERVED or k.startswith(RESERVED_PREFIX))
    if ours:
        raise LaunchEnvError(
            f"the job's environment may not set {', '.join(ours)}: clusterctl sets "
            f"{'it' if len(ours) == 1 else 'them'} from the allocation"
        )
    problem = environment_problem(env)
    if problem:
        raise LaunchEnvError(problem)
    too_long = next((k for k, v in env.items() if len(v) > ENV_VALUE_MAX), None)
    if too_long is not None:
        raise LaunchEnvError(f"environment variable {too_long}: value is over {ENV_VALUE_MAX} characters")
    return dict(env)


def job_environment(
    job: JobAllocation,
    hostname: str,
    *,
    affinity: HcaAffinity | None = None,
    settings: LaunchSettings = LaunchSettings(),
) -> dict[str, str]:
    """The full environment of the job's processes on `hostname`: the job's own variables, then ours."""
    env = check_job_env(job.env)
    nodes = ordered_nodes(job)
    node_rank = _node_rank(job, nodes, hostname)
    node = nodes[node_rank]
    shares = _check_shares(job, node)
    world = sum(len(n.gpus) for n in nodes)
    env.update({
        "CUDA_VISIBLE_DEVICES": ",".join(s.device for s in shares),
        "CLUSTERCTL_JOB_ID": str(job.job_id),
        "CLUSTERCTL_GENERATION": str(job.generation),
        "CLUSTERCTL_CHECKPOINT_DIR": checkpoint_dir(job.job_id, settings),
        "MASTER_ADDR": nodes[0].connect_to,
        "MASTER_PORT": str(job_master_port(job, settings)),
        "WORLD_SIZE": str(world),
        "NNODES": str(len(nodes)),
        "NODE_RANK": str(node_rank),
        "RANK": str(sum(len(n.gpus) for n in nodes[:node_rank])),
        "LOCAL_WORLD_SIZE": str(len(shares)),
    })  # fmt: skip
    if shares[0].kind == "mps":
        env.update(_mps_env(shares, settings))
    if affinity is not None and (hcas := nccl_ib_hca((s.index for s in shares), affinity)):
        env["NCCL_IB_HCA"] = hcas
    return env


def hostfile(job: JobAllocation) -> str:
    """An mpirun hostfile (Open MPI syntax, `host slots=N`), one process slot per GPU, in rank order."""
    return "".join(f"{n.hostname} slots={len(n.gpus)}\n" for n in ordered_nodes(job))


def torchrun_args(job: JobAllocation, hostname: str, settings: LaunchSettings = LaunchSettings()) -> list[str]:
    """torchrun's arguments for this node (static rendezvous at MASTER_ADDR:MASTER_PORT)."""
    nodes = ordered_nodes(job)
    rank = _node_rank(job, nodes, hostname)
    return [
        f"--nnodes={len(nodes)}",
        f"--nproc_per_node={len(nodes[rank].gpus)}",
        f"--node_rank={rank}",
        f"--master_addr={nodes[0].connect_to}",
        f"--master_port={job_master_port(job, settings)}",
    ]


def _node_rank(job: JobAllocation, nodes: list[NodeAllocation], hostname: str) -> int:
    for rank, node in enumerate(nodes):
        if node.hostname == hostname:
            return rank
    names = ", ".join(n.hostname for n in nodes)
    raise LaunchEnvError(f"job {job.job_id} has no allocation on {hostname} (its nodes: {names})")


def _check_shares(job: JobAllocation, node: NodeAllocation) -> tuple[GpuShare, ...]:
    where = f"job {job.job_id} on {node.hostname}"
    if not node.gpus:
        raise LaunchEnvError(f"{where}: no GPUs allocated")
    kinds = {s.kind for n in job.nodes for s in n.gpus}
    if not kinds <= set(SHARE_KINDS):
        raise LaunchEnvError(f"{where}: unknown share kind {sorted(kinds - set(SHARE_KINDS))[0]!r}")
    if len(kinds) > 1:
        raise LaunchEnvError(f"job {job.job_id}: one sharing mode per job, got {', '.join(sorted(kinds))}")
    for share in node.gpus:
        if not share.uuid:
            raise LaunchEnvError(f"{where}: GPU {share.index} has no UUID")
        if share.kind == "mig" and not share.mig_uuid.startswith("MIG-"):
            raise LaunchEnvError(f"{where}: the MIG share on {share.uuid} has no MIG UUID (got {share.mig_uuid!r})")
        if share.kind == "mps" and not 1 <= share.compute_pct <= 100:
            raise LaunchEnvError(f"{where}: MPS compute share {share.compute_pct} % on {share.uuid} is not 1-100")
    devices = [s.device for s in node.gpus]
    if len(set(devices)) != len(devices):
        raise LaunchEnvError(f"{where}: a GPU is listed twice")
    return node.gpus


def _mps_env(shares: tuple[GpuShare, ...], settings: LaunchSettings) -> dict[str, str]:
    # The thread percentage is one value per client process, for every device it sees: take the smallest
    # share, so no GPU gets more than the ledger granted. The pinned memory limit is per device ordinal,
    # numbered as the client enumerates them, i.e. in CUDA_VISIBLE_DEVICES order.
    env = {
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(min(s.compute_pct for s in shares)),
        "CUDA_MPS_PIPE_DIRECTORY": settings.mps_pipe_directory,
        "CUDA_MPS_LOG_DIRECTORY": settings.mps_log_directory,
    }
    limits = [f"{ordinal}={s.memory_mib}M" for ordinal, s in enumerate(shares) if s.memory_mib > 0]
    if limits:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(limits)
    return env
