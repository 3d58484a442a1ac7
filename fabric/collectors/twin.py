"""Collector over the digital twin (`twin_model.TwinModel`): same interface and samples as the real ones.

Given a model, it samples that model (pure, tests). Without one it samples the twin of the stored cluster the
node belongs to (`fabric.stored_twin`: built from the database, driven by the scheduler's placements, held in
process memory). That needs the database, so the twin runs centrally: it is a stand-in for every node's
hardware at once, never what a real node agent runs.

Options (COLLECTOR_OPTIONS["twin"]): `cluster` (id or name; default: the cluster that has the node, or the
switches), `seed` and `fault_rate` (faults per simulated hour; defaults TWIN_SEED, TWIN_FAULT_RATE).
"""

from __future__ import annotations

import time

from fabric.collectors.samples import NodeSample
from fabric.collectors.twin_model import TwinModel


class TwinCollector:
    name = "twin"
    # It reads every node from wherever it runs (registry.reads_centrally): with node queues off, a round of polls is
    # a few central tasks of many nodes each (fabric.tasks.poll_nodes), not a task per node.
    central = True

    def __init__(
        self,
        model: TwinModel | None = None,
        cluster: int | str | None = None,
        seed: int | None = None,
        fault_rate: float | None = None,
    ) -> None:
        self.model = model
        self.cluster = cluster
        self.seed = seed
        self.fault_rate = fault_rate

    def collect(self, node: str) -> NodeSample:
        """Sample `node` now. Never raises: problems land in the sample's `errors`."""
        now = time.time()
        try:
            if self.model is not None:
                return self.model.sample(node, now)
            # Here, not at the top: stored_twin reads the database, and the collectors package is loaded by node
            # agents that have none (only the central twin, with no model given, reaches this line).
            from fabric import stored_twin

            return stored_twin.sample_node(node, cluster=self.cluster, seed=self.seed, fault_rate=self.fault_rate)
        except Exception as exc:  # a collector reports, it does not crash the poll loop
            return NodeSample(node=node, collected_at=now, collector="twin", errors=[f"twin: {exc}"])

    def collect_switches(self, node: str, guids: list[str]) -> NodeSample:
        """The ports of switches `guids` as the fabric agent `node` reads them over the fabric (the perfquery
        collector's API): device "0x<GUID>", port = switch port number. Never raises."""
        now = time.time()
        try:
            if self.model is not None:
                return self.model.switch_sample(node, guids, now)
            # Here, not at the top: stored_twin reads the database, and the collectors package is loaded by node
            # agents that have none (only the central twin, with no model given, reaches this line).
            from fabric import stored_twin

            return stored_twin.sample_switches(
                node, guids, cluster=self.cluster, seed=self.seed, fault_rate=self.fault_rate
            )
        except Exception as exc:
            return NodeSample(node=node, collected_at=now, collector="twin", errors=[f"twin: {exc}"])
