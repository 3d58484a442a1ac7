"""A collector for tests: every poll of a node returns a slightly later sample with more traffic."""

from __future__ import annotations

import itertools
import time

from fabric.collectors.samples import GpuSample, NodeSample, PortSample

_clock = itertools.count(1)
_last = [0.0]


def _now(tick: int) -> float:
    """The wall clock, strictly increasing per poll: liveness judges samples against the real clock."""
    _last[0] = max(time.time(), _last[0] + 0.001)
    return _last[0]


class StaticCollector:
    def __init__(self, device: str = "mlx5_0") -> None:
        self.device = device

    def collect(self, node: str) -> NodeSample:
        tick = next(_clock)
        port = PortSample(
            device=self.device,
            port=1,
            state="ACTIVE",
            counters={"port_xmit_data": tick * 1_000_000, "port_rcv_data": tick * 1_000_000},
        )
        gpu = GpuSample(index=0, utilisation_gpu_pct=40.0)
        return NodeSample(node=node, collected_at=_now(tick), collector="static", gpus=[gpu], ports=[port])

    def collect_switches(self, node: str, guids: list[str]) -> NodeSample:
        """Port 1 of every switch asked for, with growing traffic, as the fabric agent reads them."""
        tick = next(_clock)
        ports = [
            PortSample(device=g, port=1, guid=g, state="ACTIVE",
                       counters={"port_xmit_data": tick * 2_000_000, "port_rcv_data": tick * 1_000_000})
            for g in guids
        ]  # fmt: skip
        return NodeSample(node=node, collected_at=_now(tick), collector="static", ports=ports)


class XidCollector(StaticCollector):
    """GPU 0 reports XID 79 (fallen off the bus): a critical finding that takes it out of service."""

    def collect(self, node: str) -> NodeSample:
        sample = super().collect(node)
        sample.gpus[0].xid_events = [79]
        return sample
