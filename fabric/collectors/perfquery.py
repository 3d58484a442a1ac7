"""perfquery collector: IB port counters read over the fabric (switch ports have no sysfs).

Parses the text `perfquery` prints, e.g. `perfquery -l -x` (extended counters, one block per port)::

    # Port extended counters: Lid 1719 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)
    PortSelect:......................1
    CounterSelect:...................0x0000
    PortXmitData:....................36298026860928
    ...
    PortXmitWait:....................22730501

and `perfquery -E` (receive error details, `# PortRcvErrorDetails counters: Lid 1719 port 1`). Blocks for the same
LID and port (say -x then -E output concatenated) merge into one PortSample.

Counter names are mapped to the sysfs names where the two correspond (PortXmitData -> port_xmit_data,
SymbolErrorCounter -> symbol_error, ...; see PERFQUERY_TO_SYSFS), so rates and health checks read both sources the
same way; any other name is kept in snake_case (QP1Dropped -> qp1_dropped, PortLocalPhysicalErrors ->
port_local_physical_errors). Data counters stay in 4-octet units, as in sysfs. PortSelect/CounterSelect* are
request echoes, not counters, and are dropped.

Widths (`counter_bits`): PortXmitWait is the 32-bit field of PortCounters even in `-x` output; in a plain
"# Port counters:" block (no -x) the data and packet counters are 32-bit too. Both saturate at 2**32-1.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

from .samples import NodeSample, PortSample

PERFQUERY_TO_SYSFS: dict[str, str] = {
    "PortXmitData": "port_xmit_data",
    "PortRcvData": "port_rcv_data",
    "PortXmitPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets",
    "PortUnicastXmitPkts": "unicast_xmit_packets",
    "PortUnicastRcvPkts": "unicast_rcv_packets",
    "PortMulticastXmitPkts": "multicast_xmit_packets",
    "PortMulticastRcvPkts": "multicast_rcv_packets",
    "SymbolErrorCounter": "symbol_error",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors",
    "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "VL15_dropped",
    "PortXmitWait": "port_xmit_wait",
    # older perfquery spellings
    "XmtData": "port_xmit_data",
    "RcvData": "port_rcv_data",
    "XmtPkts": "port_xmit_packets",
    "RcvPkts": "port_rcv_packets",
    "XmtWait": "port_xmit_wait",
    "XmtDiscards": "port_xmit_discards",
    "RcvErrors": "port_rcv_errors",
    "RcvRemotePhysErrors": "port_rcv_remote_physical_errors",
    "RcvSwRelayErrors": "port_rcv_switch_relay_errors",
    "XmtConstraintErrors": "port_xmit_constraint_errors",
    "RcvConstraintErrors": "port_rcv_constraint_errors",
}
# Echoes of the request, not counters.
NOT_COUNTERS = frozenset({"PortSelect", "CounterSelect", "CounterSelect2"})
# 32-bit in a plain (non-extended) "# Port counters:" block.
LEGACY_32BIT = ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets")
ALWAYS_32BIT = ("port_xmit_wait",)

_HEADER_RE = re.compile(r"^#\s*(?P<title>.*?)\s*counters:\s*Lid\s+(?P<lid>\d+)\s+port\s+(?P<port>\d+)\b", re.IGNORECASE)
_FIELD_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_]*):\.*\s*(?P<value>\S+)\s*$")
_GUID_RE = re.compile(r"^0x[0-9a-fA-F]{16}$")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def counter_name(perfquery_name: str) -> str:
    """The sysfs name for a perfquery field where one corresponds, else the field in snake_case."""
    mapped = PERFQUERY_TO_SYSFS.get(perfquery_name)
    return mapped if mapped is not None else _CAMEL_RE.sub("_", perfquery_name).lower()


def parse_perfquery(text: str, source: str = "") -> list[PortSample]:
    """Ports in `perfquery` output, in the order they first appear.

    `source` names what was queried (a switch GUID like "0x7cfe9003009ce5b0", or a host name): it becomes each
    port's `device` (and `guid` when it is a GUID); without it the device is "lid:<LID>".
    Raises ValueError naming the line (1-based) for anything it does not understand.
    """
    where = f"{source}: " if source else ""
    guid = source if _GUID_RE.match(source) else ""
    ports: dict[tuple[int, int], PortSample] = {}
    current: PortSample | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = _HEADER_RE.match(line)
            if not m:
                raise ValueError(f"{where}line {lineno}: unrecognised header {line[:80]!r}")
            lid, port = int(m.group("lid")), int(m.group("port"))
            current = ports.get((lid, port))
            if current is None:
                current = PortSample(device=source or f"lid:{lid}", port=port, guid=guid, lid=lid)
                ports[(lid, port)] = current
            if m.group("title").lower() == "port":  # "# Port counters:", not "# Port extended counters:"
                for c in LEGACY_32BIT:
                    current.counter_bits[c] = 32
            continue
        m = _FIELD_RE.match(line)
        if not m:
            raise ValueError(f"{where}line {lineno}: expected 'Name:....value', got {line[:80]!r}")
        if current is None:
            raise ValueError(f"{where}line {lineno}: counter before any '# ... counters: Lid N port N' header")
        name, value_text = m.group("name"), m.group("value")
        try:
            value = int(value_text, 16) if value_text.lower().startswith("0x") else int(value_text)
        except ValueError:
            raise ValueError(f"{where}line {lineno}: {name} is not an integer: {value_text[:40]!r}") from None
        if name in NOT_COUNTERS:
            if name == "PortSelect" and value != current.port:
                raise ValueError(f"{where}line {lineno}: PortSelect {value} in the block of port {current.port}")
            continue
        key = counter_name(name)
        current.counters[key] = value
        if key in ALWAYS_32BIT:
            current.counter_bits[key] = 32
    # A 32-bit mark from a plain block does not apply to a counter a later extended block did not set; keep only
    # marks for counters read.
    for ps in ports.values():
        ps.counter_bits = {k: v for k, v in ps.counter_bits.items() if k in ps.counters}
    return list(ports.values())


DEFAULT_COMMAND = ("perfquery", "-l", "-x")


class PerfqueryCollector:
    """Reads perfquery text from `file`, or runs `command` (e.g. ["perfquery", "-l", "-x", "-G", guid]; without
    either, DEFAULT_COMMAND: the local port's extended counters). `timeout` bounds the command, in seconds."""

    name = "perfquery"

    def __init__(self, file: str | None = None, command: list[str] | None = None, timeout: float = 10.0) -> None:
        if file is not None and command is not None:
            raise ValueError("PerfqueryCollector takes file= or command=, not both")
        self.file = file
        self.command = None if file is not None else list(command or DEFAULT_COMMAND)
        self.timeout = timeout

    def _read(self) -> str:
        """The perfquery text; raises RuntimeError with a one-line reason."""
        if self.file is not None:
            try:
                with open(self.file, encoding="utf-8", errors="replace") as fh:
                    return fh.read()
            except OSError as e:
                raise RuntimeError(f"{self.file}: {e.strerror or e}") from None
        assert self.command is not None
        cmd = " ".join(self.command)
        try:
            proc = subprocess.run(self.command, capture_output=True, text=True, timeout=self.timeout, check=False)
        except FileNotFoundError:
            raise RuntimeError(f"{self.command[0]}: command not found") from None
        except PermissionError:
            raise RuntimeError(f"{self.command[0]}: permission denied") from None
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{cmd}: timed out after {self.timeout:g} s") from None
        except OSError as e:
            raise RuntimeError(f"{cmd}: {e.strerror or e}") from None
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise RuntimeError(f"{cmd}: exit status {proc.returncode}" + (f": {tail[-1][:200]}" if tail else ""))
        return proc.stdout

    def collect(self, node: str) -> NodeSample:
        sample = NodeSample(node=node, collected_at=time.time(), collector=self.name)
        try:
            text = self._read()
        except RuntimeError as e:
            sample.errors.append(str(e))
            return sample
        try:
            sample.ports = parse_perfquery(text, source=node)
        except ValueError as e:
            label = self.file and os.path.basename(self.file)
            sample.errors.append(f"{label}: {e}" if label else str(e))
        return sample
