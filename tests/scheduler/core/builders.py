"""Terse builders for small scheduler snapshots with known best answers.

    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1", "n2"], spines={"S1": 2})       # hosts n1, n2 (8 x H100, one NVLink island each)
    b.pool(1, "train")                                 # every node so far
    b.job(10, gpus=8)                                  # pending
    b.run(20, {"n1": [0, 1]})                          # running, holds GPUs 0 and 1 of n1
    snap = b.snapshot()

Link keys: host links "n1-L1" (".2", ".3" ... for more HCAs), uplinks "L1-S1" (".2" ... when several).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fabric.topology.types import Fabric, THost, TLink, TSwitch
from scheduler.core.types import (
    Config,
    GpuState,
    JobRequest,
    NodeState,
    PoolState,
    Quota,
    RunningJob,
    Share,
    Snapshot,
    TenantState,
)

NVLINK = {"H100": 900.0, "H200": 900.0, "A100": 600.0, "B200": 1800.0, "V100": 300.0}
MEMORY = {"H100": 81920, "H200": 144384, "A100": 81920, "B200": 184320, "V100": 32768, "L4": 24576}


class SnapBuilder:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        self.fabric = Fabric()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.gpus: dict[tuple[str, int], dict[str, Any]] = {}
        self.pools: list[PoolState] = []
        self.tenants: dict[str, TenantState] = {}
        self.pending: list[JobRequest] = []
        self.running: list[RunningJob] = []
        self.util: dict[str, float] = {}
        self.errors: dict[str, bool] = {}
        self._gpu_id = 0
        self._seq = 0

    # ------------------------------------------------------------------ fabric

    def spine(self, name: str, role: str = "spine") -> str:
        self.fabric.switches.append(TSwitch(key=f"guid-{name}", name=name, role=role))
        return name

    def core(self, name: str) -> str:
        return self.spine(name, role="core")

    def uplink(self, a: str, b: str, gbps: float = 400.0, count: int = 1) -> list[str]:
        keys = []
        for i in range(count):
            key = f"{a}-{b}" if i == 0 else f"{a}-{b}.{i + 1}"
            self.fabric.links.append(TLink(key, f"guid-{a}", f"guid-{b}", gbps))
            keys.append(key)
        return keys

    def leaf(
        self,
        name: str,
        hosts: list[str],
        spines: dict[str, int] | None = None,
        *,
        host_gbps: float = 400.0,
        uplink_gbps: float = 400.0,
        gpus: int = 8,
        model: str = "H100",
        islands: str | list[tuple[int, ...]] = "all",
        storage: bool = False,
        rails: int = 1,
    ) -> str:
        """`rails` > 1: each host has that many HCA links of host_gbps / rails (rail-optimised, as a DGX's)."""
        self.fabric.switches.append(TSwitch(key=f"guid-{name}", name=name, role="leaf"))
        for h in hosts:
            if h not in self.nodes:
                self.node(h, gpus=0 if storage else gpus, model=model, islands=islands, storage=storage)
            for r in range(rails):
                key = f"{h}-{name}" if r == 0 else f"{h}-{name}.{r + 1}"
                self.fabric.links.append(TLink(key, h, f"guid-{name}", host_gbps / rails))
        for sp, count in (spines or {}).items():
            self.uplink(name, sp, uplink_gbps, count)
        return name

    def node(
        self,
        name: str,
        gpus: int = 8,
        model: str = "H100",
        islands: str | list[tuple[int, ...]] = "all",
        storage: bool = False,
        **kw: Any,
    ) -> str:
        if all(h.key != name for h in self.fabric.hosts):
            self.fabric.hosts.append(THost(key=name, role="storage" if storage else "compute"))
        if islands == "all":
            isl = [tuple(range(gpus))] if gpus else []
        elif islands == "none":
            isl = [(i,) for i in range(gpus)]
        else:
            isl = list(islands)  # type: ignore[arg-type]
        self.nodes[name] = {"hostname": name, "storage": storage, "nvlink_islands": isl, "hca_gbps": 400.0, **kw}
        for i in range(gpus):
            self._gpu_id += 1
            self.gpus[(name, i)] = {
                "id": self._gpu_id,
                "index": i,
                "model": model,
                "memory_mib": MEMORY.get(model, 81920),
                "nvlink_gbps": NVLINK.get(model, 0.0) if islands != "none" else 0.0,
            }
        return name

    def gpu_id(self, node: str, index: int) -> int:
        return self.gpus[(node, index)]["id"]

    def set_gpu(self, node: str, index: int, **kw: Any) -> None:
        self.gpus[(node, index)].update(kw)

    def set_node(self, node: str, **kw: Any) -> None:
        self.nodes[node].update(kw)

    # ------------------------------------------------------------------ scheduling objects

    def pool(self, pid: int, name: str, hosts: list[str] | None = None, sharing: str = "exclusive", replicas: int = 1):
        hs = hosts if hosts is not None else [h for h, n in self.nodes.items() if not n["storage"]]
        self.pools.append(PoolState(pid, name, sharing, replicas, frozenset(hs)))  # type: ignore[arg-type]

    def tenant(self, name: str, quotas: dict[int, tuple[float, float]] | None = None, **kw: Any) -> None:
        qs = {p: Quota(g, b) for p, (g, b) in (quotas or {}).items()}
        self.tenants[name] = TenantState(name, qs, **kw)

    def job(self, jid: int, gpus: int = 1, **kw: Any) -> JobRequest:
        self._seq += 1
        kw.setdefault("tenant", "t")
        kw.setdefault("pool", self.pools[0].id if self.pools else 1)
        kw.setdefault("queue_seq", self._seq)
        kw.setdefault("submitted_at", self.now - 100 + self._seq)
        req = JobRequest(id=jid, gpus=gpus, **kw)
        self.pending.append(req)
        return req

    def run(
        self,
        jid: int,
        on: dict[str, list[int]],
        *,
        started_at: float | None = None,
        borrowed: bool = False,
        stopping: bool = False,
        last_migrated_at: float | None = None,
        shares: list[Share] | None = None,
        serving_since: tuple[float, ...] = (),
        **kw: Any,
    ) -> RunningJob:
        """A running job holding GPUs `on` {node: [indices]} (whole GPUs unless `shares` is given)."""
        n = sum(len(v) for v in on.values()) or len({sh.gpu_id for sh in shares or ()})
        kw.setdefault("tenant", "t")
        kw.setdefault("pool", self.pools[0].id if self.pools else 1)
        self._seq += 1
        kw.setdefault("queue_seq", self._seq)
        req = JobRequest(id=jid, gpus=kw.pop("gpus", n), **kw)
        if shares is None:
            shares = [Share(self.gpu_id(h, i), "whole", 100, 0) for h, idx in on.items() for i in idx]
        by_id = {g["id"]: g for g in self.gpus.values()}
        for sh in shares:
            g = by_id[sh.gpu_id]
            if sh.kind == "whole":
                g["exclusive_job"] = jid
            elif sh.kind == "mps":
                g["mps_compute_pct_used"] = g.get("mps_compute_pct_used", 0) + sh.compute_pct
                g["mps_memory_mib_used"] = g.get("mps_memory_mib_used", 0) + sh.memory_mib
            elif sh.kind == "mig":
                g["mig_used"] = (*g.get("mig_used", ()), (sh.mig_profile, sh.mig_start))
            elif sh.kind == "timeslice":
                g["timeslice_used"] = g.get("timeslice_used", 0) + 1
        rj = RunningJob(
            req,
            tuple(shares),
            started_at if started_at is not None else self.now - 600,
            last_migrated_at,
            borrowed,
            stopping,
            serving_since,
        )
        self.running.append(rj)
        return rj

    def snapshot(self, config: Config | None = None, **kw: Any) -> Snapshot:
        nodes = []
        for name, nd in self.nodes.items():
            gs = [GpuState(**g) for (h, _), g in self.gpus.items() if h == name]
            nodes.append(NodeState(gpus=tuple(gs), **nd))
        for name in {j.tenant for j in [*self.pending, *(r.request for r in self.running)]}:
            self.tenants.setdefault(name, TenantState(name))
        return Snapshot(
            now=self.now,
            fabric=self.fabric,
            nodes=nodes,
            pools=list(self.pools),
            tenants=list(self.tenants.values()),
            pending=list(self.pending),
            running=list(self.running),
            link_utilisation=dict(self.util),
            link_errors=dict(self.errors),
            config=config or Config(),
            **kw,
        )


def two_leaves(gpus: int = 8, hosts_per_leaf: int = 2, **leaf_kw: Any) -> SnapBuilder:
    """Two leaves L1 (n1, n2, ...) and L2 under one spine S1 (non-blocking), pool 1 'train' over all."""
    b = SnapBuilder()
    b.spine("S1")
    names1 = [f"n{i + 1}" for i in range(hosts_per_leaf)]
    names2 = [f"n{i + 1 + hosts_per_leaf}" for i in range(hosts_per_leaf)]
    b.leaf("L1", names1, {"S1": hosts_per_leaf}, gpus=gpus, **leaf_kw)
    b.leaf("L2", names2, {"S1": hosts_per_leaf}, gpus=gpus, **leaf_kw)
    return b


def dataset_beside_n2() -> SnapBuilder:
    """Leaves L1 (n1) and L2 (n2 and the storage host stor1) under spine S1; pool 1 'train' over n1 and n2."""
    b = SnapBuilder()
    b.spine("S1")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.leaf("L2", ["n2", "stor1"], {"S1": 1})
    b.set_node("stor1", storage=True)
    b.pool(1, "train", hosts=["n1", "n2"])
    return b


def two_pods() -> SnapBuilder:
    """Core C1 over spines S1 (leaves L1: n1, L2: n2; pod 0) and S2 (leaf L3: n3; pod 1), every cable one
    400 Gb/s link; groups 0, 1, 2 in leaf order; pool 1 'p' over all."""
    b = SnapBuilder()
    b.core("C1")
    b.spine("S1")
    b.spine("S2")
    b.leaf("L1", ["n1"], {"S1": 1})
    b.leaf("L2", ["n2"], {"S1": 1})
    b.leaf("L3", ["n3"], {"S2": 1})
    b.uplink("S1", "C1")
    b.uplink("S2", "C1")
    b.pool(1, "p")
    return b


def config(**kw: Any) -> Config:
    return replace(Config(), **kw)
