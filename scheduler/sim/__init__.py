"""Policy lab: replay real GPU-cluster traces through the real engine and the published baselines. PURE
(no Django; the `replay` management command is the adapter). docs/policy-lab.md explains it.

    from scheduler.sim import build_cluster, load_trace, make_policy, parse_cluster_spec, replay
    trace = load_trace("tiresias", "../shared/data/traces/tiresias_60_job.csv")
    cluster = build_cluster(parse_cluster_spec("2x4"))
    results = replay(trace, cluster, ["fifo", "tiresias-l", "default"], network=False)

Modules: traces (loaders), cluster (spec -> nodes, GPUs, leaves), runtime (the communication-aware
runtime model and its constants), simulator (the event loop), baselines (Tiresias' fifo, fjf, shortest,
dlas-gpu, dlas-gpu-gittins), engine_policy (ours: scheduler.core.schedule), metrics, report (tables,
JSON), plots (matplotlib). `fractional` replays the Alibaba 2023 trace for fragmentation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scheduler.sim.cluster import ClusterSpec, SimCluster, build_cluster, parse_cluster_spec
from scheduler.sim.metrics import ReplayResult
from scheduler.sim.policies import POLICY_NAMES, make_policy, parse_policies
from scheduler.sim.runtime import RuntimeParams
from scheduler.sim.simulator import Simulator
from scheduler.sim.traces import Trace, TraceError, load_trace


def replay(
    trace: Trace,
    cluster: SimCluster,
    policies: Iterable[str],
    network: bool = False,
    round_s: float = 10.0,
    seed: int = 0,
    params: RuntimeParams | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[ReplayResult]:
    """One replay per policy name, each on an empty copy of the cluster."""
    out = []
    for name in policies:
        policy = make_policy(name, round_s=round_s, seed=seed)
        cb = (lambda d, n, _p=policy.name: progress(_p, d, n)) if progress else None
        out.append(Simulator(trace, cluster, policy, network=network, params=params, progress=cb).run())
    return out


__all__ = [
    "POLICY_NAMES",
    "ClusterSpec",
    "ReplayResult",
    "RuntimeParams",
    "SimCluster",
    "Simulator",
    "Trace",
    "TraceError",
    "build_cluster",
    "load_trace",
    "make_policy",
    "parse_cluster_spec",
    "parse_policies",
    "replay",
]
