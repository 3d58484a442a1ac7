"""Rates from two cumulative samples and their timestamps.

IB data counters (`port_xmit_data`, `port_rcv_data`) count 4-octet units; rates here are in bytes/s. A counter
that goes backwards was reset (driver reload, `perfquery -R`, a port bounce): the traffic since the reset is the
current value, never a negative number. A counter known to be 32-bit (`PortSample.counter_bits`) that reads
2**32-1 has saturated and stopped counting: its delta is only a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabric.collectors.samples import PortSample

# Error counters whose growth marks a sick link (sysfs names; the collectors map perfquery names onto them).
ERROR_COUNTERS: tuple[str, ...] = (
    "symbol_error",
    "link_downed",
    "port_rcv_errors",
    "link_error_recovery",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
)

DATA_UNIT_BYTES = 4  # port_xmit_data / port_rcv_data count 4-octet words

_RATE_COUNTERS = frozenset(("port_xmit_data", "port_rcv_data", "port_xmit_wait", *ERROR_COUNTERS))


@dataclass(frozen=True, slots=True)
class Delta:
    value: int | None  # None when either reading is missing
    reset: bool = False  # the counter went backwards; value is the traffic since the reset
    saturated: bool = False  # the current reading is pinned at the counter's maximum; value is a lower bound


def counter_delta(prev: int | None, cur: int | None, bits: int | None = None) -> Delta:
    """Growth of a cumulative counter between two readings, never negative."""
    saturated = cur is not None and bits is not None and cur >= 2**bits - 1
    if prev is None or cur is None or prev < 0 or cur < 0:
        return Delta(None, saturated=saturated)
    if cur < prev:
        return Delta(cur, reset=True, saturated=saturated)
    return Delta(cur - prev, saturated=saturated)


@dataclass(slots=True)
class PortRates:
    interval_s: float | None = None
    tx_bytes_per_s: float | None = None
    rx_bytes_per_s: float | None = None
    xmit_wait_per_s: float | None = None  # PortXmitWait ticks per second
    error_deltas: dict[str, int] = field(default_factory=dict)  # error counter -> growth over the interval
    resets: list[str] = field(default_factory=list)  # counters that went backwards
    saturated: list[str] = field(default_factory=list)  # counters pinned at their maximum (rates are lower bounds)
    reason: str = ""  # why the rates are None, when they are


def port_rates(prev: PortSample, prev_t: float | None, cur: PortSample, cur_t: float | None) -> PortRates:
    """Rates of one port between two samples taken at prev_t and cur_t (epoch seconds)."""
    if prev_t is None or cur_t is None:
        return PortRates(reason="missing timestamp")
    interval = cur_t - prev_t
    if interval <= 0:
        return PortRates(reason=f"non-positive interval ({interval:g} s)")

    out = PortRates(interval_s=interval)
    # Hot path (20,000 ports a poll): plain arithmetic in one loop, the same rules as counter_delta.
    before, now, bits = prev.counters, cur.counters, cur.counter_bits
    got: dict[str, int] = {}
    for name, c in now.items():
        if c is None or name not in _RATE_COUNTERS:
            continue
        if bits and name in bits and c >= 2 ** bits[name] - 1:
            out.saturated.append(name)
        p = before.get(name)
        if p is None or p < 0 or c < 0:
            continue
        if c < p:
            out.resets.append(name)
            got[name] = c
        else:
            got[name] = c - p
    tx, rx, wait = got.pop("port_xmit_data", None), got.pop("port_rcv_data", None), got.pop("port_xmit_wait", None)
    out.tx_bytes_per_s = None if tx is None else tx * DATA_UNIT_BYTES / interval
    out.rx_bytes_per_s = None if rx is None else rx * DATA_UNIT_BYTES / interval
    out.xmit_wait_per_s = None if wait is None else wait / interval
    out.error_deltas = got
    return out


def link_utilisation(rates_a: PortRates | None, rates_b: PortRates | None, capacity_gbps: float) -> float | None:
    """Busiest direction of a link seen from either end, as a fraction of its capacity, clamped to [0, 1].

    None when the capacity is unknown or neither end has a rate.
    """
    if not capacity_gbps or capacity_gbps <= 0:
        return None
    values = [
        v for r in (rates_a, rates_b) if r is not None for v in (r.tx_bytes_per_s, r.rx_bytes_per_s) if v is not None
    ]
    if not values:
        return None
    frac = max(values) * 8 / (capacity_gbps * 1e9)
    return min(1.0, max(0.0, frac))


class Ewma:
    """Exponentially weighted moving average per key (smoothed link load for placement).

    The first value for a key is taken as is; after that s = alpha * value + (1 - alpha) * s.
    """

    def __init__(self, alpha: float) -> None:
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self._state: dict[object, float] = {}

    def update(self, key: object, value: float) -> float:
        prev = self._state.get(key)
        s = value if prev is None else self.alpha * value + (1 - self.alpha) * prev
        self._state[key] = s
        return s

    def get(self, key: object) -> float | None:
        return self._state.get(key)

    def forget(self, key: object) -> None:
        self._state.pop(key, None)
