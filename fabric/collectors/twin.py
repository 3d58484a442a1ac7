"""Collector over the digital twin (`twin_model.TwinModel`): same interface and samples as the real ones."""

from __future__ import annotations

import time

from fabric.collectors.samples import NodeSample
from fabric.collectors.twin_model import TwinModel


class TwinCollector:
    name = "twin"

    def __init__(self, model: TwinModel | None = None) -> None:
        self.model = model

    def collect(self, node: str) -> NodeSample:
        """Sample `node` now. Never raises: problems land in the sample's `errors`."""
        now = time.time()
        if self.model is None:
            return NodeSample(node=node, collected_at=now, collector="twin", errors=["no twin model configured"])
        try:
            return self.model.sample(node, now)
        except Exception as exc:  # a collector reports, it does not crash the poll loop
            return NodeSample(node=node, collected_at=now, collector="twin", errors=[f"twin: {exc}"])
