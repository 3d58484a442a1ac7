"""Health rules over collector samples and port rates: pure functions returning `Finding`s.

Severity "critical" means the object should not take new work; `removes_capacity` tells the scheduler to take the
GPU or link out of (or, for a degrading link, down-weight it in) placement. `HoldDown` keeps a finding raised until
it has been absent for a while, so a flapping condition does not raise and clear on every poll.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Literal

from fabric.collectors.samples import GpuSample, PortSample

from .rates import PortRates, counter_delta

Severity = Literal["critical", "warning", "info"]
ObjectKind = Literal["gpu", "port", "node", "cluster"]  # "cluster": the telemetry pipeline, the beat

# XIDs that mean the GPU cannot be trusted with work until someone acts (reset, drain, RMA).
CRITICAL_XIDS: frozenset[int] = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})
XID_MEANINGS: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup after a previous error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "row remapping (ECC page retirement) recorded",
    64: "row remapping (ECC page retirement) failure",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP error (RPC timeout)",
    120: "GSP error",
}

ACTIVE_STATES = frozenset({"ACTIVE", "ACTIVE_DEFER"})


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    object_kind: ObjectKind
    object_key: str
    message: str
    removes_capacity: bool = False


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Per-interval growth of an error counter at or above which a link counts as sick (None disables one)."""

    symbol_error: int | None = 10
    link_downed: int | None = 1
    port_rcv_errors: int | None = 10
    link_error_recovery: int | None = 1
    port_rcv_remote_physical_errors: int | None = 10
    port_xmit_discards: int | None = 100
    local_link_integrity_errors: int | None = 1
    excessive_buffer_overrun_errors: int | None = 1
    # Congestion: share of the interval the port spent waiting to send (PortXmitWait ticks x tick length).
    xmit_wait_fraction: float = 0.05
    # Length of one PortXmitWait tick. Implementation-defined in the IB spec; an assumption, set it per fabric.
    xmit_wait_tick_s: float = 1e-9

    def error_limits(self) -> dict[str, int]:
        return dict(_error_limits(self))


@lru_cache(maxsize=64)
def _error_limits(th: Thresholds) -> tuple[tuple[str, int], ...]:
    """(counter, limit) of the enabled error rules: once per thresholds, not once per port (20,000 a poll)."""
    skip = {"xmit_wait_fraction", "xmit_wait_tick_s"}
    return tuple(
        (f.name, getattr(th, f.name)) for f in fields(th) if f.name not in skip and getattr(th, f.name) is not None
    )


DEFAULT_THRESHOLDS = Thresholds()


def gpu_key(gpu: GpuSample) -> str:
    return gpu.uuid or f"gpu{gpu.index}"


def port_key(port: PortSample) -> str:
    return f"{port.device}/{port.port}"


def evaluate_gpu(
    prev: GpuSample | None, cur: GpuSample, key: str | None = None, node: str | None = None
) -> list[Finding]:
    """Findings for one GPU from its current sample (and the previous one, for counters that must grow). `key`
    names the GPU in findings, else `node/uuid` (`uuid` without `node`)."""
    out: list[Finding] = []
    t, limit = cur.temperature_c, cur.temperature_limit_c
    hot = t is not None and limit is not None and t >= limit
    if not (
        cur.xid_events
        or cur.remapped_rows_failure
        or cur.remapped_rows_pending
        or hot
        or (prev is not None and prev.ecc_uncorrected != cur.ecc_uncorrected)
    ):
        return out  # the common case, decided without a name for the GPU
    k = key or (f"{node}/{gpu_key(cur)}" if node else gpu_key(cur))

    for xid in sorted(set(cur.xid_events)):
        meaning = XID_MEANINGS.get(xid, "see the NVIDIA XID catalogue")
        if xid in CRITICAL_XIDS:
            out.append(Finding("gpu_xid_critical", "critical", "gpu", k, f"XID {xid}: {meaning}", True))
        else:
            out.append(Finding("gpu_xid", "warning", "gpu", k, f"XID {xid}: {meaning}", False))

    if prev is not None:
        d = counter_delta(prev.ecc_uncorrected, cur.ecc_uncorrected)
        if d.value:
            out.append(
                Finding(
                    "gpu_ecc_uncorrected",
                    "critical",
                    "gpu",
                    k,
                    f"{d.value} new uncorrectable ECC error(s) since the last poll",
                    True,
                )
            )

    if cur.remapped_rows_failure:
        out.append(
            Finding(
                "gpu_row_remap_failure", "critical", "gpu", k, "row remapping failed: memory cannot be repaired", True
            )
        )
    elif cur.remapped_rows_pending:
        out.append(
            Finding(
                "gpu_row_remap_pending",
                "warning",
                "gpu",
                k,
                "row remapping pending: the GPU needs a reset to apply it",
                False,
            )
        )

    if hot:
        out.append(
            Finding("gpu_hot", "warning", "gpu", k, f"temperature {t:g} C at or above its slowdown limit {limit:g} C")
        )
    return out


def _active(state: str | None) -> bool | None:
    if state is None:
        return None
    return state in ACTIVE_STATES or state.strip().upper() in ACTIVE_STATES


def _port_finding_key(key: str | None, node: str | None, cur: PortSample) -> str:
    if key:
        return key
    return f"{node}/{port_key(cur)}" if node else port_key(cur)


def evaluate_port(
    prev: PortSample | None,
    cur: PortSample,
    rates: PortRates | None,
    thresholds: Thresholds | None = None,
    key: str | None = None,
    cabled: bool = False,
    node: str | None = None,
) -> list[Finding]:
    """Findings for one IB port: link down, error counters climbing, congestion.

    A port is down when it was active and no longer is, or, when `cabled` (the inventory has a link on it), for
    as long as it stays down: the finding repeats every poll so its alert stays open until the link is back.
    An uncabled port that never came up is no finding. `key` names the port in findings, else `node/device/port`
    (`device/port` without `node`), spelled only when there is a finding: most ports of a poll have none.
    """
    th = thresholds or DEFAULT_THRESHOLDS
    out: list[Finding] = []

    if _active(cur.state) is False and (cabled or (prev is not None and _active(prev.state))):
        phys = f", physical state {cur.phys_state}" if cur.phys_state else ""
        k = _port_finding_key(key, node, cur)
        out.append(Finding("port_down", "critical", "port", k, f"link went down (state {cur.state}{phys})", True))

    if rates is None or rates.interval_s is None:
        return out

    deltas = rates.error_deltas
    over: dict[str, int] = {}
    if deltas:
        for name, limit in _error_limits(th):
            n = deltas.get(name)
            if n is not None and n >= limit:
                over[name] = n
    if over:
        k = _port_finding_key(key, node, cur)
        detail = ", ".join(f"{name} +{n}" for name, n in over.items())
        out.append(
            Finding(
                "port_errors",
                "warning",
                "port",
                k,
                f"link errors climbing over {rates.interval_s:g} s: {detail}",
                True,
            )
        )

    if rates.xmit_wait_per_s is not None:
        frac = rates.xmit_wait_per_s * th.xmit_wait_tick_s
        if frac >= th.xmit_wait_fraction:
            out.append(
                Finding(
                    "port_congestion",
                    "warning",
                    "port",
                    _port_finding_key(key, node, cur),
                    f"congestion: waiting to send {frac:.0%} of the time",
                    False,
                )
            )
    return out


HoldState = Literal["raised", "active", "cleared", "none"]


@dataclass
class HoldDown:
    """Debounce findings: a finding clears only after it has been absent for `clear_after` seconds.

    update() returns "raised" when a finding first appears, "active" while it is present or absent for less than
    `clear_after`, "cleared" once it has been absent that long (counted from the first poll that missed it), and
    "none" for a key that is neither present nor held.
    """

    clear_after: float
    _raised: dict[object, float | None] = field(default_factory=dict)  # key -> absent since (None while present)

    def update(self, key: object, present: bool, now: float) -> HoldState:
        if key not in self._raised:
            if present:
                self._raised[key] = None
                return "raised"
            return "none"
        if present:
            self._raised[key] = None
            return "active"
        since = self._raised[key]
        if since is None:
            since = self._raised[key] = now
        if now - since >= self.clear_after:
            del self._raised[key]
            return "cleared"
        return "active"

    def active_keys(self) -> list[object]:
        return list(self._raised)
