"""What every collector returns: plain samples, the same shape whoever read them (NVML, sysfs, perfquery,
a Prometheus scrape, the twin). No database here: the ingest task stores them.

Counters are cumulative, as the hardware keeps them; IB data counters stay in their native 4-octet units
(`*_data` fields) and `*_bytes` properties convert. Rates come later, from two samples and their timestamps.
A field a device did not report (N/A, not supported, an NVML error) is None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

# The node name of a sample of switch ports read over the fabric by the fabric agent (perfquery or the twin);
# its ports' `device` is the switch GUID.
FABRIC_SOURCE = "@fabric"


@dataclass(slots=True)
class MigInstance:
    gpu_instance_id: int
    compute_instance_id: int | None = None
    profile: str = ""  # "1g.10gb"
    uuid: str = ""  # "MIG-..."
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None


@dataclass(slots=True)
class GpuProcess:
    pid: int
    used_memory_mib: float | None = None


@dataclass(slots=True)
class NvLinkSample:
    link: int
    active: bool | None = None
    tx_bytes: int | None = None  # cumulative
    rx_bytes: int | None = None


@dataclass(slots=True)
class GpuSample:
    index: int
    uuid: str = ""
    name: str = ""
    utilisation_gpu_pct: float | None = None
    utilisation_memory_pct: float | None = None
    memory_used_mib: float | None = None
    memory_free_mib: float | None = None
    memory_total_mib: float | None = None
    temperature_c: float | None = None
    temperature_limit_c: float | None = None  # slowdown threshold
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    ecc_uncorrected: int | None = None  # volatile totals
    ecc_corrected: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    xid_events: list[int] = field(default_factory=list)  # XIDs seen since the last poll
    nvlinks: list[NvLinkSample] = field(default_factory=list)
    mig_enabled: bool | None = None
    mig_instances: list[MigInstance] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # field -> why it is missing (NVML error name)


@dataclass(slots=True)
class PortSample:
    """One IB port: of an HCA (`device` like mlx5_0) or of a switch (`device` = switch GUID)."""

    device: str
    port: int
    guid: str = ""  # node GUID when known (switch ports from perfquery)
    state: str | None = None  # "ACTIVE", "DOWN", ...
    phys_state: str | None = None  # "LinkUp", "Polling", "Disabled", ...
    rate_gbps: float | None = None  # signalling rate as sysfs prints it ("100 Gb/sec (4X EDR)")
    rate_text: str = ""
    lid: int | None = None
    counters: dict[str, int] = field(default_factory=dict)  # every counter read, by its sysfs/perfquery name
    counter_bits: dict[str, int] = field(default_factory=dict)  # width of counters known to be 32-bit (may saturate)

    @property
    def xmit_bytes(self) -> int | None:
        v = self.counters.get("port_xmit_data")
        return None if v is None else v * 4

    @property
    def rcv_bytes(self) -> int | None:
        v = self.counters.get("port_rcv_data")
        return None if v is None else v * 4


@dataclass(slots=True)
class HcaSample:
    """One RDMA device of the node as its kernel names it (/sys/class/infiniband/<device>): what lets ingest put an
    HCA of the imported fabric that had no host name on this node (fabric.actions.claim_hcas)."""

    device: str  # "mlx5_0"
    node_guid: str  # 16 lowercase hex digits ("0002:c903:0008:0e84" in sysfs)
    system_guid: str = ""  # system image GUID, shared by the HCAs (functions) of one system
    node_type: str = ""  # "CA", "RNIC", ... (sysfs node_type without its number)


@dataclass(slots=True)
class HostSample:
    """The host's own CPUs and memory, as its node agent reads them (fabric.collectors.host); None: not read."""

    cpu_milli: int | None = None  # CPUs the agent may run on x 1000 (sched_getaffinity)
    memory_mib: int | None = None  # MemTotal of /proc/meminfo, MiB


@dataclass(slots=True)
class NodeSample:
    node: str  # hostname
    collected_at: float  # epoch seconds, when the collector read the hardware
    collector: str  # "nvml", "sysfs-ib", "perfquery", "prometheus", "twin"
    gpus: list[GpuSample] = field(default_factory=list)
    ports: list[PortSample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # problems that lost a whole part of the sample
    hcas: list[HcaSample] = field(default_factory=list)  # the node's own RDMA devices (sysfs-ib reads them)
    host: HostSample | None = None  # the host's CPUs and memory (collectors that run on the node read them)


_ATOMIC = (str, int, float, bool, type(None))
_FIELDS: dict[type, tuple[str, ...]] = {}  # sample class -> its field names, in order (filled below)


def _plain(value):
    names = _FIELDS.get(type(value))
    if names is not None:
        return {n: v if isinstance(v := getattr(value, n), _ATOMIC) else _plain(v) for n in names}
    if isinstance(value, _ATOMIC):
        return value
    if isinstance(value, list):
        return [v if isinstance(v, _ATOMIC) else _plain(v) for v in value]
    if isinstance(value, dict):
        return {k: v if isinstance(v, _ATOMIC) else _plain(v) for k, v in value.items()}
    return value


def sample_to_dict(sample: NodeSample) -> dict:
    """What dataclasses.asdict(sample) gives (a plain dict of fresh lists and dicts), without its deep copies of plain
    values: a central poll turns thousands of samples a round into JSON (asdict was a fifth of a 2,000-node poll;
    this takes 0.75-0.85 of its time on 2,000 samples of 8 GPUs and 8 ports)."""
    return _plain(sample)


def sample_from_dict(data: dict) -> NodeSample:
    """The inverse of dataclasses.asdict(NodeSample): samples cross the broker as JSON."""
    gpus = [
        GpuSample(
            **{
                **g,
                "nvlinks": [NvLinkSample(**n) for n in g.get("nvlinks", [])],
                "mig_instances": [MigInstance(**m) for m in g.get("mig_instances", [])],
                "processes": [GpuProcess(**p) for p in g.get("processes", [])],
            }
        )
        for g in data.get("gpus", [])
    ]
    ports = [PortSample(**p) for p in data.get("ports", [])]
    return NodeSample(
        node=data["node"],
        collected_at=data["collected_at"],
        collector=data["collector"],
        gpus=gpus,
        ports=ports,
        errors=list(data.get("errors", [])),
        hcas=[HcaSample(**h) for h in data.get("hcas", [])],  # an agent of an older version sends none
        host=HostSample(**data["host"]) if data.get("host") else None,  # nor this
    )


def _pickle_by_fields(cls: type) -> None:
    """Pickle as (class, field values): the dataclass default (a state tuple restored one setattr at a time) took
    twice as long to load and a third more bytes. (The latest-state cache, which pickled every node's sample at every
    poll, now keeps only what the next poll reads, fabric.latest.for_rates: no hot path pickles samples any more.)"""
    names = _FIELDS[cls] = tuple(f.name for f in fields(cls))

    def __reduce__(self):
        return cls, tuple([getattr(self, n) for n in names])

    cls.__reduce__ = __reduce__


for _cls in (MigInstance, GpuProcess, NvLinkSample, GpuSample, PortSample, HcaSample, HostSample, NodeSample):
    _pickle_by_fields(_cls)
