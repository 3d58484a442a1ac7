"""Several collectors as one: what lets one node agent report everything its host has.

`TELEMETRY_COLLECTOR=nvml,sysfs-ib` polls each node with both collectors, one after the other in that order, and
sends one NodeSample per node per poll: nvml's GPUs, sysfs-ib's ports and the HCA GUIDs ingest attaches unnamed
HCAs with (fabric.actions.claim_hcas). `auto` is nvml,sysfs-ib, each only where the host has its hardware, so one
setting serves GPU servers, storage servers and hosts with GPUs and no InfiniBand alike (AutoCollector below).

Merging (merge_samples):
  * gpus, ports and hcas are the parts' lists, in the order the parts are named. An entry a later part reports
    again (the same GPU index, the same device and port, the same HCA node GUID) is dropped: the first part's
    stays, and the sample says so ("warning: prometheus: GPU 0 also read by nvml, nvml's kept").
  * errors are the parts' errors, each once (two parts may report the same trouble, e.g. an unreadable
    /proc/meminfo). A part that raises loses only its own part: its error is "<part>: <exception>" and the other
    parts' data stay. The collectors' own errors already name what failed (a sysfs path, an NVML call).
  * collected_at is the time of the part that read the ports (port rates are computed from it); without ports,
    the earliest part's time.
  * collector is the parts that ran, joined by ",".
  * any other field (one added to NodeSample later) is taken from the first part that sets it; a list is joined.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from .samples import NodeSample

# List fields whose entries two parts may both report, how each entry is named and keyed.
_KEYED: dict[str, tuple[str, Callable[[Any], object]]] = {
    "gpus": ("GPU", lambda g: g.index),
    "ports": ("port", lambda p: f"{p.device}/{p.port}"),
    "hcas": ("HCA", lambda h: h.node_guid),
}
_OWN = ("node", "collected_at", "collector", "errors")

PCI_DEVICES = "/sys/bus/pci/devices"
NVIDIA_PROC_GPUS = "/proc/driver/nvidia/gpus"  # one directory per GPU the loaded driver knows
INFINIBAND = "/sys/class/infiniband"
NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASS = "0x03"  # PCI base class 03: display controller (VGA 0300, 3D 0302: data-centre GPUs)
INFINIBAND_CLASS = "0x0207"  # PCI class 0207: InfiniBand controller (a ConnectX port in IB mode)


def failure(name: str, exc: BaseException) -> str:
    """ "nvml: RuntimeError: driver exploded"; "nvml: SoftTimeLimitExceeded" when the exception says no more."""
    text = str(exc).strip()
    return f"{name}: {type(exc).__name__}" + (f": {text}" if text else "")


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def merge_samples(node: str, parts: Sequence[tuple[str, NodeSample]], *, at: float | None = None) -> NodeSample:
    """One sample of `node` out of its parts' samples, (part name, sample) in the order the parts are named."""
    errors: list[str] = []
    for _, sample in parts:
        errors += [e for e in sample.errors if e not in errors]
    with_ports = [s.collected_at for _, s in parts if s.ports]
    times = with_ports[:1] or [s.collected_at for _, s in parts] or [time.time() if at is None else at]
    merged = NodeSample(
        node=node, collected_at=min(times), collector=",".join(name for name, _ in parts), errors=errors
    )
    for f in dataclasses.fields(NodeSample):
        if f.name in _OWN:
            continue
        default = _default(f)
        if f.name in _KEYED:
            label, key = _KEYED[f.name]
            owner: dict[object, str] = {}
            kept = []
            for name, sample in parts:
                for entry in getattr(sample, f.name):
                    k = key(entry)
                    if k in owner:
                        errors.append(f"warning: {name}: {label} {k} also read by {owner[k]}, {owner[k]}'s kept")
                        continue
                    owner[k] = name
                    kept.append(entry)
            setattr(merged, f.name, kept)
        elif isinstance(default, list):
            setattr(merged, f.name, [entry for _, sample in parts for entry in getattr(sample, f.name)])
        else:
            values = [getattr(s, f.name) for _, s in parts if getattr(s, f.name) != default]
            if values:
                setattr(merged, f.name, values[0])
    return merged


class CombinedCollector:
    """Run the named collectors one after the other and merge their samples. `parts`: (name, factory) pairs; each
    collector is made on its first poll and kept (NVML's event set, the prometheus collector's last XIDs live
    there); one whose construction fails is an error of that part in each sample, and is tried again next poll."""

    def __init__(self, parts: Sequence[tuple[str, Callable[[], Any]]]) -> None:
        if not parts:
            raise ValueError("a combined collector needs at least one collector")
        self.parts = [name for name, _ in parts]
        self.name = ",".join(self.parts)
        self._factories = dict(parts)
        self._instances: dict[str, Any] = {}

    def part(self, name: str) -> Any:
        if name not in self._instances:
            self._instances[name] = self._factories[name]()
        return self._instances[name]

    def active_parts(self, node: str) -> tuple[list[str], list[str]]:
        """The parts this poll runs, and errors about the choice (none here: every part runs)."""
        return list(self.parts), []

    def collect(self, node: str) -> NodeSample:
        started = time.time()
        names, errors = self.active_parts(node)
        samples: list[tuple[str, NodeSample]] = []
        for name in names:
            try:
                sample = self.part(name).collect(node)
            except Exception as exc:  # one part's trouble (a binding's surprise, the poll's soft time limit)
                sample = NodeSample(node=node, collected_at=started, collector=name, errors=[failure(name, exc)])
            samples.append((name, sample))
        merged = merge_samples(node, samples, at=started)
        merged.errors = errors + merged.errors
        merged.collector = merged.collector or self.name
        return merged


class AutoCollector(CombinedCollector):
    """`auto`: nvml where the host has an NVIDIA GPU, sysfs-ib where it has an RDMA device; a part whose hardware
    the host lacks is left out without an error (a storage server has no GPU to complain about).

    * An NVIDIA GPU: a directory under /proc/driver/nvidia/gpus (the driver is loaded), or a PCI function of vendor
      0x10de and class 03xx (display controller) under /sys/bus/pci/devices. A GPU whose driver is not loaded is
      found on the bus, so NVML's error says why nothing is read.
    * An RDMA device: sysfs-ib's root (/sys/class/infiniband) exists, or a PCI function of class 0207 (InfiniBand
      controller) does: a ConnectX in InfiniBand mode without its driver gets sysfs-ib's "no such directory".
    A part found once keeps running for the life of the collector (the agent's process): a GPU that falls off the
    bus is NVML's error, not silence. A host with neither reports one error saying what was looked for."""

    def __init__(
        self,
        parts: Sequence[tuple[str, Callable[[], Any]]],
        pci_root: str = PCI_DEVICES,
        nvidia_proc: str = NVIDIA_PROC_GPUS,
    ) -> None:
        super().__init__(parts)
        self.name = "auto"
        self.pci_root = pci_root
        self.nvidia_proc = nvidia_proc
        self._found: set[str] = set()

    def _pci_functions(self) -> list[tuple[str, str]]:
        """(vendor, class) of every PCI function, as the kernel prints them ("0x10de", "0x030200")."""
        out = []
        try:
            addresses = os.listdir(self.pci_root)
        except OSError:
            return out
        for address in addresses:
            values = []
            for name in ("vendor", "class"):
                try:
                    with open(os.path.join(self.pci_root, address, name), encoding="ascii", errors="replace") as fh:
                        values.append(fh.read().strip().lower())
                except OSError:
                    values.append("")
            out.append((values[0], values[1]))
        return out

    def _present(self, name: str, pci: Callable[[], list[tuple[str, str]]]) -> bool:
        if name == "nvml":
            try:
                if os.listdir(self.nvidia_proc):
                    return True
            except OSError:
                pass
            return any(v == NVIDIA_VENDOR and c.startswith(DISPLAY_CLASS) for v, c in pci())
        if name == "sysfs-ib":
            return os.path.isdir(self._ib_root()) or any(c.startswith(INFINIBAND_CLASS) for _, c in pci())
        return True  # a part auto knows nothing about always runs

    def _ib_root(self) -> str:
        """sysfs-ib's root as configured (its `root` option, --root), where auto looks for RDMA devices."""
        try:
            return getattr(self.part("sysfs-ib"), "root", INFINIBAND)
        except Exception:  # not constructible: its own poll says why
            return INFINIBAND

    def active_parts(self, node: str) -> tuple[list[str], list[str]]:
        scanned: list[list[tuple[str, str]]] = []

        def pci() -> list[tuple[str, str]]:  # read the bus at most once a poll, and only when needed
            if not scanned:
                scanned.append(self._pci_functions())
            return scanned[0]

        for name in self.parts:
            if name not in self._found and self._present(name, pci):
                self._found.add(name)
        active = [name for name in self.parts if name in self._found]
        if active:
            return active, []
        return [], [
            f"auto: no NVIDIA GPU ({self.nvidia_proc}, or vendor {NVIDIA_VENDOR} class 03xx under {self.pci_root}) "
            f"and no RDMA device ({self._ib_root()}, or class 0207 under {self.pci_root}) on this host"
        ]
