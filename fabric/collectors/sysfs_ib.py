"""sysfs-ib collector: HCA ports as the kernel shows them under /sys/class/infiniband.

Layout read (root configurable, so tests point it at a fixture tree)::

    <root>/<device>/ports/<n>/state          "4: ACTIVE"           -> state "ACTIVE"
    <root>/<device>/ports/<n>/phys_state     "5: LinkUp"           -> phys_state "LinkUp"
    <root>/<device>/ports/<n>/rate           "40 Gb/sec (4X QDR)"  -> rate_gbps 40.0, rate_text
    <root>/<device>/ports/<n>/lid            "0x1a"                -> lid 26
    <root>/<device>/ports/<n>/counters/*     integers, by file name
    <root>/<device>/ports/<n>/counters_ext/*  (mlx4, when present) integers, by file name (port_xmit_data_64, ...)
    <root>/<device>/ports/<n>/hw_counters/*  (mlx5, irdma, ... when present) integers, by file name
    <root>/<device>/node_guid        "0002:c903:0008:0e84" -> HcaSample.node_guid "0002c90300080e84"
    <root>/<device>/sys_image_guid   "0002:c903:0008:0e87" -> HcaSample.system_guid
    <root>/<device>/node_type        "1: CA"               -> HcaSample.node_type "CA"

The GUIDs say which HCAs of the imported fabric are this node's: ingest attaches an HCA the fabric named no host for
(a firmware-default node description) to the node whose agent reports its GUID (fabric.actions.claim_hcas).
The sample also carries the host's CPUs and MemTotal (NodeSample.host, fabric.collectors.host), as nvml's does.

Every device with a `ports/` directory is read the same way, IB or not (iWARP/RoCE devices such as i40iw0 have
ports too). Counters stay in their native units: `port_xmit_data`/`port_rcv_data` count 4-octet words and
`PortSample.xmit_bytes`/`rcv_bytes` convert; the `_64` data counters of `counters_ext/` are 4-octet words as well.

What is not an error:
  * "N/A (no PMA)" (a device without a performance management agent, e.g. i40iw0): the counter is not reported,
    so it is left out of `counters` (never 0), as node_exporter does. Same for a missing optional file (lid, ...).
What is an error (recorded in NodeSample.errors with the path, the rest of the sample is kept):
  * a counter or attribute file that cannot be read or does not parse; a device or port directory that cannot be
    listed; a missing root directory (an empty sample with one error, never an exception).

Counter widths (`PortSample.counter_bits`, only counters known to be 32-bit, which saturate at 2**32-1):
  * `port_xmit_wait` in `counters/`: the kernel always reads it from the 32-bit PortXmitWait of PortCounters (the
    node_exporter fixture shows it pinned at 4294967295 on mlx4_0 port 1).
  * `port_xmit_data`, `port_rcv_data`, `port_xmit_packets`, `port_rcv_packets` in `counters/` on an mlx4 device
    whose port has no `counters_ext/`: these are the legacy 32-bit PortCounters there. With `counters_ext/` present
    the `*_64` files carry the full-width values.
  The narrower IB error counters (8/16-bit) saturate too but are not listed: the field records 32-bit ones only.

Name collisions: `counters/` names win; a later directory's counter with the same name is kept as
"<dir>/<name>" (e.g. "hw_counters/link_downed") so nothing read is lost.
"""

from __future__ import annotations

import os
import re
import time

from fabric.importers.types import normalise_guid

from .host import MEMINFO, read_host
from .samples import HcaSample, NodeSample, PortSample

COUNTER_DIRS = ("counters", "counters_ext", "hw_counters")
MLX4_32BIT_COUNTERS = ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets")
ALWAYS_32BIT_COUNTERS = ("port_xmit_wait",)

_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([GM])b/sec", re.IGNORECASE)
_NOT_AVAILABLE_PREFIX = "N/A"


def _read_text(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as fh:
        return fh.read().strip()


def parse_state(text: str) -> str:
    """ "4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp"; a bare word is returned as is."""
    _, sep, name = text.partition(":")
    name = name.strip() if sep else text.strip()
    if not name:
        raise ValueError(f"empty state {text!r}")
    return name


def parse_rate(text: str) -> float:
    """ "40 Gb/sec (4X QDR)" -> 40.0 (Gb/s); "2.5 Gb/sec (1X SDR)" -> 2.5."""
    m = _RATE_RE.match(text)
    if not m:
        raise ValueError(f"unrecognised rate {text!r}")
    value = float(m.group(1))
    return value / 1000.0 if m.group(2).upper() == "M" else value


def parse_lid(text: str) -> int:
    """ "0x1a" -> 26 (sysfs prints LIDs in hex); a plain decimal is accepted too."""
    t = text.strip()
    return int(t, 16) if t.lower().startswith("0x") else int(t)


def parse_guid(text: str) -> str:
    """ "0002:c903:0008:0e84" (sysfs prints GUIDs as four colon-separated groups) -> "0002c90300080e84"."""
    groups = text.strip().split(":")
    if len(groups) != 4 or any(len(g) != 4 for g in groups):
        raise ValueError(f"not a sysfs GUID (four groups of four hex digits): {text[:40]!r}")
    return normalise_guid("".join(groups))


def _port_sort_key(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)


class SysfsIbCollector:
    name = "sysfs-ib"

    def __init__(self, root: str = "/sys/class/infiniband", meminfo: str = MEMINFO) -> None:
        self.root = root
        self.meminfo = meminfo  # the host's memory (fabric.collectors.host): a host path where the agent is contained

    def collect(self, node: str) -> NodeSample:
        sample = NodeSample(node=node, collected_at=time.time(), collector=self.name)
        sample.host, host_errors = read_host(self.meminfo)
        sample.errors += host_errors
        if not os.path.isdir(self.root):
            sample.errors.append(f"{self.root}: no such directory (no InfiniBand devices?)")
            return sample
        try:
            devices = sorted(os.listdir(self.root))
        except OSError as e:
            sample.errors.append(f"{self.root}: cannot list: {e.strerror or e}")
            return sample
        for device in devices:
            hca = self._read_hca(device, sample.errors)
            if hca is not None:
                sample.hcas.append(hca)
            ports_dir = os.path.join(self.root, device, "ports")
            if not os.path.isdir(ports_dir):
                continue
            try:
                ports = sorted(os.listdir(ports_dir), key=_port_sort_key)
            except OSError as e:
                sample.errors.append(f"{ports_dir}: cannot list: {e.strerror or e}")
                continue
            for port in ports:
                if not port.isdigit():
                    continue
                sample.ports.append(self._read_port(device, int(port), os.path.join(ports_dir, port), sample.errors))
        return sample

    def _read_hca(self, device: str, errors: list[str]) -> HcaSample | None:
        """The device's GUIDs; None when it has no readable node_guid (the error says why, unless the file is
        absent: then the entry is no RDMA device)."""
        path = os.path.join(self.root, device)
        values: dict[str, str] = {}
        for name, parse in (("node_guid", parse_guid), ("sys_image_guid", parse_guid), ("node_type", parse_state)):
            p = os.path.join(path, name)
            if not os.path.exists(p):
                continue
            try:
                values[name] = parse(_read_text(p))
            except (OSError, ValueError) as e:
                errors.append(f"{p}: {getattr(e, 'strerror', None) or e}")
        if "node_guid" not in values:
            return None
        return HcaSample(
            device=device,
            node_guid=values["node_guid"],
            system_guid=values.get("sys_image_guid", ""),
            node_type=values.get("node_type", ""),
        )

    def _read_port(self, device: str, port: int, path: str, errors: list[str]) -> PortSample:
        ps = PortSample(device=device, port=port)

        def attr(name: str, parse):
            p = os.path.join(path, name)
            if not os.path.exists(p):
                return None
            try:
                text = _read_text(p)
                if text.startswith(_NOT_AVAILABLE_PREFIX):
                    return None
                return parse(text)
            except (OSError, ValueError) as e:
                errors.append(f"{p}: {getattr(e, 'strerror', None) or e}")
                return None

        ps.state = attr("state", parse_state)
        ps.phys_state = attr("phys_state", parse_state)
        rate_text = attr("rate", str)
        if rate_text is not None:
            ps.rate_text = rate_text
            try:
                ps.rate_gbps = parse_rate(rate_text)
            except ValueError as e:
                errors.append(f"{os.path.join(path, 'rate')}: {e}")
        ps.lid = attr("lid", parse_lid)

        present_dirs = []
        for dirname in COUNTER_DIRS:
            cdir = os.path.join(path, dirname)
            if not os.path.isdir(cdir):
                continue
            present_dirs.append(dirname)
            try:
                names = sorted(os.listdir(cdir))
            except OSError as e:
                errors.append(f"{cdir}: cannot list: {e.strerror or e}")
                continue
            for fname in names:
                fpath = os.path.join(cdir, fname)
                if not os.path.isfile(fpath):
                    continue
                try:
                    text = _read_text(fpath)
                except OSError as e:
                    errors.append(f"{fpath}: {e.strerror or e}")
                    continue
                if text.startswith(_NOT_AVAILABLE_PREFIX):  # "N/A (no PMA)": not reported, not zero
                    continue
                try:
                    value = int(text, 0) if text.lower().startswith("0x") else int(text)
                except ValueError:
                    errors.append(f"{fpath}: not an integer: {text[:40]!r}")
                    continue
                key = fname if fname not in ps.counters else f"{dirname}/{fname}"
                ps.counters[key] = value

        if "counters" in present_dirs:
            for c in ALWAYS_32BIT_COUNTERS:
                if c in ps.counters:
                    ps.counter_bits[c] = 32
            if device.startswith("mlx4") and "counters_ext" not in present_dirs:
                for c in MLX4_32BIT_COUNTERS:
                    if c in ps.counters:
                        ps.counter_bits[c] = 32
        return ps
