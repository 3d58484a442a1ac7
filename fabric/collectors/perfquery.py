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

Switch ports carry no sysfs: `PerfqueryCollector.collect_switches(node, guids)` runs perfquery per switch from a
"fabric agent" (any node agent with an HCA on the fabric and infiniband-diags), a bounded number at once; the ports
come back with device = guid = the switch GUID. `parse_ibswitches` reads `ibswitches` output, for discovery.

Widths (`counter_bits`): PortXmitWait is the 32-bit field of PortCounters even in `-x` output; in a plain
"# Port counters:" block (no -x) the data and packet counters are 32-bit too. Both saturate at 2**32-1.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from fabric.importers._common import is_diagnostic

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


def parse_perfquery(text: str, source: str = "", warnings: list[str] | None = None) -> list[PortSample]:
    """Ports in `perfquery` output, in the order they first appear.

    `source` names what was queried (a switch GUID like "0x7cfe9003009ce5b0", or a host name): it becomes each
    port's `device` (and `guid` when it is a GUID); without it the device is "lid:<LID>".
    A line the tools print on stderr (`ibwarn: [1234] mad_rpc: ...`, `perfquery: iberror: ...`; captured with 2>&1)
    is skipped and, when `warnings` is given, reported there with its line; the ports around it are read.
    Raises ValueError naming the line (1-based) for anything else it does not understand.
    """
    where = f"{source}: " if source else ""
    guid = source if _GUID_RE.match(source) else ""
    ports: dict[tuple[int, int], PortSample] = {}
    current: PortSample | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if is_diagnostic(line):
            if warnings is not None:
                warnings.append(f"{where}line {lineno}: diagnostic output of perfquery, skipped: {line[:80]!r}")
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

# Switch ports (the "fabric agent": any host with an HCA on the fabric and infiniband-diags). Per switch, as
# treydock/infiniband_exporter's switch collector does it, but for every port without knowing the port list:
#   perfquery -x -l -a -G <guid>          extended counters of every port, one block each
#   perfquery -E -G <guid> <port>         PortRcvErrorDetails of one port (optional: -E reads one port per call)
# -a selects all ports and -l prints them one by one rather than summed; with -a perfquery also loops by itself when
# the switch's PMA lacks AllPortSelect (plain "-l <guid> 255" exits "AllPortSelect not supported" there, and "-l"
# with no port reads port 0 only). Counters are only ever read: -r/-R reset them for every reader on the fabric, and
# a positional argument after the port is a reset mask, so neither is ever passed (_check_read_only refuses
# a configured command that would).
SWITCH_ARGS = ("-x", "-l", "-a")
RCV_ERROR_ARGS = ("-E",)
RESET_OPTIONS = frozenset({"-r", "-R", "--reset_after_read", "--Reset_only"})
DEFAULT_MAX_WORKERS = 8
# ibswitches walks the whole fabric (ibnetdiscover): give it longer than one perfquery.
MIN_DISCOVERY_TIMEOUT = 60.0

_SWITCH_GUID_RE = re.compile(r"^(?:0x)?([0-9a-f]{16})$")
_IBSWITCHES_RE = re.compile(r"^Switch\s*:\s*(?P<guid>0x[0-9a-fA-F]{16})\s+ports\s+\d+\b")
_GUID_FILE_RE = re.compile(r"^(0x[0-9a-f]{16})\.out$")


def switch_guid(text: str) -> str:
    """A switch node GUID as the collector reports it: "0x" and 16 lowercase hex digits.

    Takes "0x7CFE9003009CE5B0" as well as "7cfe9003009ce5b0" (the database's form, fabric.models.Switch.guid);
    raises ValueError for anything else.
    """
    m = _SWITCH_GUID_RE.match(text.strip().lower()) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"not a switch node GUID (0x and 16 hex digits): {text!r}")
    return "0x" + m.group(1)


def parse_ibswitches(text: str) -> list[str]:
    """Switch node GUIDs ("0x" + 16 lowercase hex) in `ibswitches` output, in order, without repeats.

    One line per switch, as infiniband-diags prints it::

        Switch  : 0xe41d2d03003bfb80 ports 36 "MF0;node231:SX6036/U1" enhanced port 0 lid 12 lmc 0
        Switch  : 0x001777fffe2b5b65 ports 2 "Obsidian Longbow C400 - LBC4xxxxx" base port 0 lid 11 lmc 0

    Only the GUID is used (the description may hold anything). Blank lines are skipped; any other line raises
    ValueError naming it (ibswitches prints its warnings on stderr; "Switch" is followed by a tab).
    """
    guids: dict[str, None] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        m = _IBSWITCHES_RE.match(line)
        if not m:
            raise ValueError(f"ibswitches line {lineno}: expected 'Switch : 0x<16 hex> ports N ...', got {line[:80]!r}")
        guids[m.group("guid").lower()] = None
    return list(guids)


def _command(value: str | list[str] | tuple[str, ...] | None, default: tuple[str, ...], what: str) -> list[str]:
    if value is None:
        return list(default)
    cmd = shlex.split(value) if isinstance(value, str) else [str(v) for v in value]
    if not cmd:
        raise ValueError(f"{what} is empty")
    return cmd


def _check_read_only(cmd: list[str], what: str) -> None:
    """Refuse a perfquery command that would reset counters (-r, -R, or bundled like -xr)."""
    for arg in cmd:
        bundled = arg.startswith("-") and not arg.startswith("--") and bool({"r", "R"} & set(arg[1:]))
        if arg in RESET_OPTIONS or bundled:
            raise ValueError(f"{what} must not reset counters: {arg!r} in {' '.join(cmd)!r}")


class PerfqueryCollector:
    """perfquery counters, of the local port or of every port of a list of switches.

    Local port (the default): reads perfquery text from `file`, or runs `command` (e.g. ["perfquery", "-l", "-x"];
    without either, DEFAULT_COMMAND: the local port's extended counters). `timeout` bounds each command, in seconds.

    Switch ports: with `switches` (a list of switch node GUIDs, or "all" to discover them with `ibswitches`) or
    `directory`, `collect` reads switch ports (see `collect_switches`). `perfquery_command` is the program (and any
    options, e.g. ["perfquery", "-C", "mlx5_0", "-P", "1"]) run per switch, `ibswitches_command` the discovery
    program; `max_workers` switches are read at once; `rcv_error_details` also reads PortRcvErrorDetails (-E, one
    more call per port); `budget` (seconds) stops starting new reads once a `collect_switches` call has run that
    long, so a poll fits a task time limit (a read already started may still take up to `timeout`).

    Without live tools: `directory` holds `<guid>.out` per switch (the `-x -l -a` text, and `<guid>-<port>.out`
    for -E) and, to discover from, `ibswitches.out` (else its `<guid>.out` names); or `file` with exactly one GUID
    in `switches` holds that switch's text.
    """

    name = "perfquery"

    def __init__(
        self,
        file: str | None = None,
        command: list[str] | None = None,
        timeout: float = 10.0,
        *,
        switches: list[str] | tuple[str, ...] | str | None = None,
        directory: str | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
        rcv_error_details: bool = False,
        perfquery_command: list[str] | str | None = None,
        ibswitches_command: list[str] | str | None = None,
        budget: float | None = None,
    ) -> None:
        if file is not None and command is not None:
            raise ValueError("PerfqueryCollector takes file= or command=, not both")
        if directory is not None and (file is not None or command is not None):
            raise ValueError("PerfqueryCollector takes directory= or file=/command=, not both")
        if not (isinstance(max_workers, int) and max_workers >= 1):
            raise ValueError(f"max_workers must be a whole number >= 1, not {max_workers!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
        if budget is not None and not budget > 0:
            raise ValueError(f"budget must be > 0 seconds, not {budget!r}")
        self.file = file
        self.command = None if file is not None or directory is not None else list(command or DEFAULT_COMMAND)
        self.timeout = float(timeout)
        self.directory = directory
        self.max_workers = max_workers
        self.rcv_error_details = bool(rcv_error_details)
        self.budget = None if budget is None else float(budget)
        self.perfquery_command = _command(perfquery_command, ("perfquery",), "perfquery_command")
        _check_read_only(self.perfquery_command, "perfquery_command")
        _check_read_only(self.command or [], "command")
        self.ibswitches_command = _command(ibswitches_command, ("ibswitches",), "ibswitches_command")
        # None: the local port; "all": discover; else the GUIDs, normalised.
        self.switches: list[str] | str | None
        if switches is None or switches == "all":
            self.switches = switches
        elif isinstance(switches, str):
            raise ValueError(f"switches= takes a list of switch GUIDs or 'all', not the string {switches!r}")
        else:
            self.switches = list(dict.fromkeys(switch_guid(g) for g in switches))
            if not self.switches:
                raise ValueError("switches=[] polls nothing: give switch GUIDs, or 'all' to discover them")
        if self.switches is not None and command is not None:
            raise ValueError("command= is the local-port command; for switches give perfquery_command=")
        if file is not None and self.switches is not None and (self.switches == "all" or len(self.switches) != 1):
            raise ValueError("file= holds one switch's perfquery output: give exactly one switch GUID with it")

    # -- running and reading ------------------------------------------------------------------------------------

    def _run(self, cmd: list[str], timeout: float | None = None) -> str:
        """stdout of `cmd`; raises RuntimeError with a one-line reason."""
        timeout = self.timeout if timeout is None else timeout
        text = " ".join(cmd)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except FileNotFoundError:
            raise RuntimeError(f"{cmd[0]}: command not found") from None
        except PermissionError:
            raise RuntimeError(f"{cmd[0]}: permission denied") from None
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{text}: timed out after {timeout:g} s") from None
        except OSError as e:
            raise RuntimeError(f"{text}: {e.strerror or e}") from None
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise RuntimeError(f"{text}: exit status {proc.returncode}" + (f": {tail[-1][:200]}" if tail else ""))
        return proc.stdout

    @staticmethod
    def _read_file(path: str) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError as e:
            raise RuntimeError(f"{path}: {e.strerror or e}") from None

    def _read(self) -> str:
        """The local port's perfquery text; raises RuntimeError with a one-line reason."""
        if self.file is not None:
            return self._read_file(self.file)
        assert self.command is not None
        return self._run(self.command)

    def _switch_text(self, guid: str, port: int | None = None) -> str:
        """`-x -l -a` text of a switch (port None), or its `-E` text for one port."""
        if self.directory is not None:
            name = f"{guid}.out" if port is None else f"{guid}-{port}.out"
            return self._read_file(os.path.join(self.directory, name))
        if self.file is not None:
            if port is not None:
                raise RuntimeError("-E details are read with the switch's text from file=, not per port")
            return self._read_file(self.file)
        if port is None:
            return self._run([*self.perfquery_command, *SWITCH_ARGS, "-G", guid])
        return self._run([*self.perfquery_command, *RCV_ERROR_ARGS, "-G", guid, str(port)])

    def discover_switches(self) -> list[str]:
        """Switch GUIDs on the fabric: `ibswitches` (or directory=: its ibswitches.out, else its <guid>.out names).

        Raises RuntimeError with a one-line reason."""
        if self.directory is not None:
            listing = os.path.join(self.directory, "ibswitches.out")
            if not os.path.exists(listing):
                try:
                    names = sorted(os.listdir(self.directory))
                except OSError as e:
                    raise RuntimeError(f"{self.directory}: {e.strerror or e}") from None
                return [m.group(1) for n in names if (m := _GUID_FILE_RE.match(n))]
            text = self._read_file(listing)
        else:
            text = self._run(self.ibswitches_command, timeout=max(self.timeout, MIN_DISCOVERY_TIMEOUT))
        try:
            return parse_ibswitches(text)
        except ValueError as e:
            raise RuntimeError(str(e)) from None

    def _over_budget(self, deadline: float | None) -> bool:
        return deadline is not None and time.monotonic() >= deadline

    def _read_switch(self, guid: str, deadline: float | None = None) -> tuple[list[PortSample], list[str]]:
        """All ports of one switch, and what went wrong; never raises (one switch never fails the others)."""
        label = f"switch {guid}"
        if self._over_budget(deadline):
            return [], [f"{label}: not read, the poll's budget of {self.budget:g} s was spent"]
        warnings: list[str] = []
        try:
            ports = parse_perfquery(self._switch_text(guid), source=guid, warnings=warnings)
        except RuntimeError as e:
            return [], [f"{label}: {e}"]
        except ValueError as e:
            return [], [f"{label}: unparsable perfquery output: {str(e).removeprefix(guid + ': ')}"]
        except Exception as e:  # a bug must not lose the other switches
            return [], [f"{label}: {type(e).__name__}: {e}"]
        said = [w.removeprefix(guid + ": ") for w in warnings]
        if not ports:
            return [], [f"{label}: perfquery printed no port counters" + (f" ({'; '.join(said)})" if said else "")]
        errors = [f"{label}: warning: {w}" for w in said]
        if self.rcv_error_details and self.file is None:
            for ps in ports:
                if ps.port == 0:  # the switch's management port: no link, no receive errors
                    continue
                if self._over_budget(deadline):
                    errors.append(f"{label}: -E details of port {ps.port} and later not read, the poll's budget of "
                                  f"{self.budget:g} s was spent")  # fmt: skip
                    break
                try:
                    details = parse_perfquery(self._switch_text(guid, ps.port), source=guid)
                except RuntimeError as e:
                    errors.append(f"{label} port {ps.port}: {e}")
                    continue
                except ValueError as e:
                    errors.append(f"{label} port {ps.port}: unparsable perfquery -E output: "
                                  f"{str(e).removeprefix(guid + ': ')}")  # fmt: skip
                    continue
                for d in details:
                    if d.port != ps.port:
                        errors.append(f"{label} port {ps.port}: perfquery -E answered for port {d.port}")
                        continue
                    ps.counters.update(d.counters)
                    ps.counter_bits.update(d.counter_bits)
        return ports, errors

    # -- collecting ---------------------------------------------------------------------------------------------

    def collect_switches(self, node: str, guids: list[str] | None = None) -> NodeSample:
        """Every port of every switch in `guids` (None: discover them), read from this node (the fabric agent).

        Switches are read `max_workers` at a time, each command bounded by `timeout`; with `budget`, switches not
        started within it are reported unread. Each PortSample has
        device = guid = the switch GUID ("0x" + 16 lowercase hex; GUIDs are accepted with or without "0x").
        A switch that fails (bad GUID, timeout, exit status, unparsable output) adds one error naming it to
        `errors` and the others are still read; with `rcv_error_details`, a port whose -E read fails keeps its
        other counters and adds an error naming the switch and port.
        """
        sample = NodeSample(node=node, collected_at=time.time(), collector=self.name)
        deadline = None if self.budget is None else time.monotonic() + self.budget
        if guids is None:
            try:
                guids = self.discover_switches()
            except RuntimeError as e:
                sample.errors.append(f"switch discovery: {e}")
                return sample
            if not guids:
                sample.errors.append("switch discovery: no switches found")
                return sample
        valid: dict[str, None] = {}
        for g in guids:
            try:
                valid[switch_guid(g)] = None
            except ValueError as e:
                sample.errors.append(str(e))
        if not valid:
            return sample
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(valid)), thread_name_prefix="perfquery") as ex:
            results = list(ex.map(lambda g: self._read_switch(g, deadline), valid))
        for ports, errors in results:
            sample.ports.extend(ports)
            sample.errors.extend(errors)
        return sample

    def collect(self, node: str) -> NodeSample:
        if self.switches is not None or self.directory is not None:
            return self.collect_switches(node, None if self.switches in (None, "all") else list(self.switches))
        sample = NodeSample(node=node, collected_at=time.time(), collector=self.name)
        try:
            text = self._read()
        except RuntimeError as e:
            sample.errors.append(str(e))
            return sample
        label = self.file and os.path.basename(self.file)
        warnings: list[str] = []
        try:
            sample.ports = parse_perfquery(text, source=node, warnings=warnings)
        except ValueError as e:
            sample.errors.append(f"{label}: {e}" if label else str(e))
        # A stderr line among the counters: the ports were read, but say what the tool complained of.
        sample.errors.extend(f"{label}: warning: {w}" if label else f"warning: {w}" for w in warnings)
        return sample
