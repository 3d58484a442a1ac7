"""Mutable per-round view of the cluster, indexed for placement. PURE.

Built from a Snapshot (`ClusterState(snapshot, topology)`), or kept from the cluster's last round and brought to
the new snapshot (`advance`, the same index a build gives), then changed only through `hold()` / `release()`, which
keep every index in step:

* Partitions: GPUs are grouped by (pool, GPU model, memory), one `Partition` each. A job searches only
  the partitions of its pool that match its model and memory, so "no scan of all nodes".
* Exclusive capacity: per partition, nodes bucketed by how many whole GPUs they have free
  (`buckets[k]`, insertion-ordered dicts used as ordered sets), the same per leaf group
  (`gbuckets[group][k]`), and free GPU counts per group and per partition. A node's free GPUs are a bit
  mask over its GPUs; NVLink islands are masks too.
* Shared capacity: MPS GPUs bucketed by compute percentage left, MIG GPUs per profile bucketed by free
  memory slices, time-sliced GPUs by replicas used.
* Host resources: per node the CPU and memory left (`cpu_free`, `mem_free`) for jobs that ask for them;
  a job's amounts ride on one of its shares per node (`Share.host_cpu_milli`), so hold/release move them.
* Live network: per node the bandwidth its HCA links have left (GB/s), per leaf group and pod the
  effective oversubscription of their uplinks, hot/erroring flags (see costmodel).

`journal()` / `rollback()` let the engine try "what if these jobs were gone" (preemption, backfill
reservations) and undo it exactly.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import compress, groupby
from operator import attrgetter, is_not, itemgetter
from typing import Any

from scheduler.core import mig as miglib
from scheduler.core.costmodel import link_available, oversubscription
from scheduler.core.topology import (
    LEVEL_FABRIC,
    LEVEL_LEAF_GROUP,
    ROLE_GROUP_UPLINK,
    ROLE_HOST,
    ROLE_POD_UPLINK,
    Topology,
)
from scheduler.core.types import Config, PoolState, RunningJob, Share, Snapshot

HOST_UNTRACKED = 1 << 60  # CPU / memory left on a node that does not track it

# What a kept state takes as given about a node and its GPUs (ClusterState.advance): all but occupancy and load.
_node_shape = attrgetter(
    "hostname", "schedulable", "storage", "nvlink_islands", "hca_gbps", "up", "cpu_milli", "memory_mib"
)
_gpu_shape = attrgetter("id", "index", "model", "memory_mib", "healthy", "nvlink_gbps")
_FIRST = itemgetter(0)  # a journal entry's was-hold flag


def _plain(sh: Share) -> bool:
    """A whole GPU without host CPU or memory: holding and releasing it changes one count, which undoing restores
    exactly (ClusterState's journals)."""
    return sh.kind == "whole" and not (sh.host_cpu_milli or sh.host_memory_mib)


def _gpu_order(g: GpuSlot) -> tuple[int, int]:
    return (g.node.seq, g.pos)


class GpuSlot:
    __slots__ = (
        "bit",
        "excl",
        "healthy",
        "id",
        "index",
        "memory_mib",
        "mig_keys",
        "mig_mask",
        "mig_used",
        "model",
        "mps_key",
        "mps_mem",
        "mps_pct",
        "node",
        "nvlink",
        "pos",
        "profiles",
        "ts_key",
        "ts_reps",
        "ts_used",
        "util",
    )

    def __init__(self, gs, node: NodeSlot, pos: int) -> None:
        self.id = gs.id
        self.index = gs.index
        self.pos = pos
        self.bit = 1 << pos
        self.node = node
        self.model = gs.model
        self.memory_mib = gs.memory_mib
        self.healthy = gs.healthy
        self.nvlink = gs.nvlink_gbps
        self.occupy(gs)
        self.ts_reps: set[int] = set()
        self.mps_key: int | None = None
        self.mig_keys: dict[str, int] = {}
        self.ts_key: int | None = None

    def occupy(self, gs, profiles: dict | None = None) -> None:
        """Occupancy and load as the snapshot's GpuState has them. `profiles`: the MIG profiles a MIG partition gave
        the GPU (kept); without, those of its model where it has MIG instances."""
        self.util = gs.utilisation
        self.excl = 1 if gs.exclusive_job is not None else 0
        self.mps_pct = gs.mps_compute_pct_used
        self.mps_mem = gs.mps_memory_mib_used
        self.mig_used = list(gs.mig_used)
        if profiles is None:
            profiles = miglib.profiles_for(gs.model, gs.memory_mib) if gs.mig_used else {}
        self.profiles = profiles
        self.mig_mask = miglib.occupied_mask(profiles, self.mig_used) if self.mig_used else 0
        self.ts_used = gs.timeslice_used

    def is_empty(self) -> bool:
        return not (self.excl or self.mps_pct or self.mps_mem or self.mig_mask or self.ts_used)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<gpu {self.id} {self.node.name}:{self.index}>"


class NodeSlot:
    __slots__ = (
        "G",
        "all_mask",
        "cpu_cap",
        "cpu_free",
        "eligible",
        "err",
        "frag_sig",
        "free_mask",
        "gpus",
        "group",
        "hot",
        "islands",
        "mem_cap",
        "mem_free",
        "n_free",
        "name",
        "net_gbs",
        "nominal_gbs",
        "off_fabric",
        "part",
        "pod",
        "pool",
        "reachable",
        "schedulable",
        "seq",
        "storage",
        "up",
    )

    def __init__(self, ns) -> None:
        self.name = ns.hostname
        self.seq = 0  # its place in the snapshot's node order (ClusterState sets it)
        self.up = ns.up
        self.schedulable = ns.schedulable
        self.storage = ns.storage
        self.gpus: list[GpuSlot] = [GpuSlot(g, self, i) for i, g in enumerate(ns.gpus)]
        self.G = len(self.gpus)
        self.all_mask = (1 << self.G) - 1
        pos_of = {g.index: g.pos for g in self.gpus}
        islands: list[int] = []
        covered = 0
        for isl in ns.nvlink_islands:
            m = 0
            for idx in isl:
                p = pos_of.get(idx)
                if p is not None and not (covered >> p) & 1:
                    m |= 1 << p
            if m:
                islands.append(m)
                covered |= m
        for g in self.gpus:
            if not covered & g.bit:
                islands.append(g.bit)
        self.islands = islands
        self.free_mask = 0
        self.n_free = 0
        self.part: Partition | None = None
        self.pool: int | None = None
        self.eligible = False
        self.group = -1
        self.pod = -1
        self.net_gbs = 0.0
        self.nominal_gbs = 0.0
        self.hot = False
        self.err = False
        self.reachable = False
        self.off_fabric = False
        # Host CPU / memory left for jobs that ask for them; a node that does not track one never runs out.
        self.frag_sig: tuple | None = None  # the placer's cache of its state for the fragmentation term
        self.cpu_cap = self.cpu_free = ns.cpu_milli if ns.cpu_milli > 0 else HOST_UNTRACKED
        self.mem_cap = self.mem_free = ns.memory_mib if ns.memory_mib > 0 else HOST_UNTRACKED

    def host_fits(self, cpu_milli: int, memory_mib: int) -> bool:
        """The node has this much host CPU and memory left now."""
        return self.cpu_free >= cpu_milli and self.mem_free >= memory_mib

    def take_host(self, cpu_milli: int, memory_mib: int) -> None:
        """Hold (negative: give back) host CPU and memory; an untracked one stays untracked."""
        if self.cpu_cap < HOST_UNTRACKED:
            self.cpu_free -= cpu_milli
        if self.mem_cap < HOST_UNTRACKED:
            self.mem_free -= memory_mib

    def host_total_fits(self, cpu_milli: int, memory_mib: int) -> bool:
        """The node has this much host CPU and memory in all (it could ever run the job)."""
        return self.cpu_cap >= cpu_milli and self.mem_cap >= memory_mib

    def island_count(self, mask: int) -> int:
        return sum(1 for im in self.islands if im & mask)

    def gpus_of(self, mask: int) -> list[GpuSlot]:
        return [g for g in self.gpus if g.bit & mask]

    def __repr__(self) -> str:  # pragma: no cover
        return f"<node {self.name} free={self.n_free}/{self.G}>"


class Partition:
    """GPUs of one pool with one model and memory size."""

    __slots__ = (
        "G",
        "buckets",
        "cap_total",
        "domains",
        "free_total",
        "gbuckets",
        "gcap",
        "gfree",
        "key",
        "max_island",
        "memory_mib",
        "mig_b",
        "model",
        "mps_b",
        "nodes",
        "nominal_net",
        "nvlink_gbps",
        "pool",
        "pool_name",
        "profiles",
        "replicas",
        "sharing",
        "strength",
        "ts_b",
    )

    def __init__(self, key: tuple, pool: PoolState, model: str, memory_mib: int, strength: float) -> None:
        self.key = key
        self.pool = pool.id
        self.pool_name = pool.name
        self.sharing = pool.sharing
        self.replicas = max(1, pool.timeslice_replicas)
        self.model = model
        self.memory_mib = memory_mib
        self.strength = strength
        self.nvlink_gbps = 0.0
        self.G = 0
        self.max_island = 0
        self.nodes: list[NodeSlot] = []
        self.buckets: list[dict[NodeSlot, None]] = []
        self.gbuckets: dict[int, list[dict[NodeSlot, None]]] = {}
        self.gfree: dict[int, int] = {}
        self.gcap: dict[int, int] = {}
        self.free_total = 0
        self.cap_total = 0  # healthy GPUs on eligible nodes
        # The leaf groups a multi-node placement may span and the pods over them (placement.Placer._domains): fixed
        # while the index is kept (nodes, partitions and the fabric with it).
        self.domains: tuple | None = None
        self.nominal_net = 0.0
        self.profiles = miglib.profiles_for(model, memory_mib) if pool.sharing == "mig" else {}
        self.mps_b: list[dict[GpuSlot, None]] = [{} for _ in range(101)] if pool.sharing == "mps" else []
        self.mig_b: dict[str, list[dict[GpuSlot, None]]] = (
            {p: [{} for _ in range(9)] for p in self.profiles} if pool.sharing == "mig" else {}
        )
        self.ts_b: list[dict[GpuSlot, None]] = [{} for _ in range(self.replicas)] if pool.sharing == "timeslice" else []

    def nodes_with_at_least(self, group: int, k: int) -> int:
        lst = self.gbuckets.get(group)
        if not lst:
            return 0
        return sum(len(lst[j]) for j in range(k, len(lst)))

    def __repr__(self) -> str:  # pragma: no cover
        return f"<partition {self.pool_name} {self.model} free={self.free_total}>"


class ClusterState:
    def __init__(self, snapshot: Snapshot, topo: Topology) -> None:
        self.snapshot = snapshot
        self.topo = topo
        self.config: Config = snapshot.config
        self.params = snapshot.config.cost
        self.now = snapshot.now
        self.pools: dict[int, PoolState] = {p.id: p for p in snapshot.pools}
        self.nodes: dict[str, NodeSlot] = {}
        self.gpus: dict[int, GpuSlot] = {}
        self.partitions: dict[tuple, Partition] = {}
        self.pool_parts: dict[int, list[Partition]] = {p.id: [] for p in snapshot.pools}
        self.journal_log: list[tuple[bool, GpuSlot, Share]] | None = None
        self._journal_depth = 0
        self.warnings: list[str] = []
        self.group_oeff: dict[int, float] = {}
        self.group_hot: dict[int, bool] = {}
        self.pod_oeff: dict[int, float] = {}
        self.pod_hot: dict[int, bool] = {}
        self.running: dict[int, RunningJob] = {}
        self.job_gpus: dict[int, list[tuple[GpuSlot, Share]]] = {}
        self.jobs_on_node: dict[str, set[int]] = {}
        # GPU-equivalents each running job holds (share_equiv summed over job_gpus): quotas and fair share read it.
        self.job_equiv: dict[int, float] = {}
        # What each running job's held GPUs were read from: (its shares, its host CPU and memory); `advance` keeps
        # the GPUs of a job whose inputs are these same ones.
        self._held_from: dict[int, tuple] = {}
        # Running job -> what failures.broken_jobs found of it (None: nothing), for the jobs a kept index keeps: an
        # index is kept only while no GPU's health, node's state or the fabric changed, so a kept job's answer stands.
        self.broken_found: dict[int, str | None] = {}
        self.stopping: set[int] = set()
        # Nodes whose cached state (NodeSlot.frag_sig) was dropped since the placer last looked: None until a
        # placer keeps an index of node states (the host-aware fragmentation search).
        self.sig_dirty: list[NodeSlot] | None = None
        # Nodes whose GPUs a hold or release changed since the state was built or brought to a snapshot: what
        # `advance` reads again (with the nodes whose state the snapshot changed).
        self.touched: set[NodeSlot] = set()
        # While a journal is open, `touched` holds the nodes changed inside it and this the nodes changed before it:
        # a journal undone to its start, of whole GPUs only, leaves its nodes as they were, and they are not read again.
        self._touched_outside: set[NodeSlot] | None = None
        self._journal_plain = True  # no change in the open journal but holds and releases of whole GPUs
        # Running job -> (its job_gpus list, its GPUs per eligible node: ((id(partition), node, GPUs), ...)), for the
        # preemption index (preemption.VictimClasses). A kept index keeps a job's list while its GPUs are unchanged,
        # and nodes, partitions and eligibility while it is kept: the counts of the same list stand.
        self.held_nodes: dict[int, tuple[list, tuple]] = {}
        # Running job -> (its RunningJob, started + expected run, min(60 s, run / 4)): backfill._term,
        # worked out again for a job whose RunningJob changed (a build or a new config starts a new state).
        self.end_terms: dict[int, tuple] = {}
        # Per running job, while its held GPUs are the same list: the ring RingLoad counts (None: one node), and the
        # layout the rebalance pass reads (migration._layout).
        self.rings: dict[int, tuple] = {}
        self.layouts: dict[int, tuple] = {}
        # The running jobs of each set of partitions by expected end (backfill.EndsLine), by the partitions' ids: kept
        # from round to round and brought up to date by `running_changes`, the jobs that came, went or changed.
        self.ends_lines: dict[frozenset[int], Any] = {}
        # The running jobs a move may be asked for (migration.MoveWatch), kept and brought up to date alike.
        self.move_watch: Any = None
        self.running_epoch = 0  # snapshots this index was brought to (advance)
        self.dropped: list[int] = []  # running jobs this round dropped (drop_running): changes for the next one
        self._running_before: tuple | None = None  # (running, fresh jobs, dropped) before the last advance
        self._changes: set[int] | None = None
        self._build(snapshot)
        self._built_warnings = list(self.warnings)

    # ------------------------------------------------------------------ build

    def _build(self, snap: Snapshot) -> None:
        params = self.params
        pool_of: dict[str, int] = {}
        for p in sorted(snap.pools, key=lambda p: p.id):
            for h in p.hostnames:
                if h in pool_of:
                    self.warnings.append(f"node {h} is in pools {pool_of[h]} and {p.id}; using {pool_of[h]}")
                else:
                    pool_of[h] = p.id
        self._live_network(snap)
        for i, ns in enumerate(snap.nodes):
            node = NodeSlot(ns)
            node.seq = i
            self.nodes[node.name] = node
            for g in node.gpus:
                self.gpus[g.id] = g
            self._node_network(node, ns)
            pid = pool_of.get(node.name)
            node.pool = pid
            node.eligible = pid is not None and ns.up and ns.schedulable and node.G > 0
            if pid is None or node.G == 0:
                continue
            pool = self.pools[pid]
            model = node.gpus[0].model
            mem = min(g.memory_mib for g in node.gpus)
            key = (pid, model, mem)
            part = self.partitions.get(key)
            if part is None:
                strength = params.gpu_strength.get(model.upper(), params.unknown_strength)
                part = self.partitions[key] = Partition(key, pool, model, mem, strength)
                self.pool_parts[pid].append(part)
            node.part = part
            part.nodes.append(node)
            if part.sharing == "mig":
                for g in node.gpus:
                    g.profiles = part.profiles
                    g.mig_mask = miglib.occupied_mask(g.profiles, g.mig_used) if g.mig_used else 0
        for part in self.partitions.values():
            G = max(n.G for n in part.nodes)
            part.G = G
            part.buckets = [{} for _ in range(G + 1)]
            part.nvlink_gbps = max((g.nvlink for n in part.nodes for g in n.gpus), default=0.0)
            part.max_island = max((im.bit_count() for n in part.nodes for im in n.islands), default=1)
            part.nominal_net = max((n.nominal_gbs for n in part.nodes), default=0.0)
            for node in part.nodes:
                if node.eligible:
                    part.gbuckets.setdefault(node.group, [{} for _ in range(G + 1)])
                    part.gfree.setdefault(node.group, 0)
                    healthy = sum(1 for g in node.gpus if g.healthy)
                    part.gcap[node.group] = part.gcap.get(node.group, 0) + healthy
                    part.cap_total += healthy
        self._add_running(snap)
        for node in self.nodes.values():
            part = node.part
            if part is not None and part.sharing != "exclusive":
                for g in node.gpus:
                    self._refresh(g)
            elif node.eligible:
                mask = 0
                for g in node.gpus:
                    if g.healthy and not (g.excl or g.mps_pct or g.mps_mem or g.mig_mask or g.ts_used):
                        mask |= g.bit
                if mask:
                    self._set_node_free(node, mask)

    def _node_network(self, node: NodeSlot, ns) -> None:
        """The node's place in the fabric and the bandwidth it has left (from `_live_network`)."""
        topo = self.topo
        gid = topo.group_of.get(node.name)
        if gid is not None:
            node.group = gid
            node.pod = topo.groups[gid].pod
            node.reachable = True
        else:
            node.group = -1 - node.seq  # a group of its own, joined to others only at the fabric level
            # In the fabric with no live link: cut off. Absent from it: location unknown, assumed
            # reachable at its HCA rate and joined to others only at the fabric level.
            node.off_fabric = node.name in topo.graph.host_index
            node.reachable = not node.off_fabric
            if node.reachable:
                self._node_net.setdefault(node.name, ns.hca_gbps / 8.0)
                self._node_nominal.setdefault(node.name, ns.hca_gbps / 8.0)
        node.net_gbs = self._node_net.get(node.name, 0.0)
        node.nominal_gbs = self._node_nominal.get(node.name, 0.0)
        node.hot = node.name in self._node_hot
        node.err = node.name in self._node_err

    def _add_running(self, snap: Snapshot) -> None:
        """Running jobs: who holds what (occupancy itself comes from GpuState, see types.py), and the host CPU and
        memory they take."""
        for rj in snap.running:
            jid = rj.request.id
            self.running[jid] = rj
            self._hold_running(jid, rj)
            if rj.stopping:
                self.stopping.add(jid)

    def _hold_running(self, jid: int, rj: RunningJob) -> None:
        """One running job's held GPUs and their GPU-equivalents, the host part it takes, and its place on its
        nodes."""
        held: list[tuple[GpuSlot, Share]] = []
        req = rj.request
        hcpu, hmem = req.host_cpu_milli, req.host_memory_mib
        host_on: set[str] = set()
        eq = 0.0
        for sh in rj.shares:
            g = self.gpus.get(sh.gpu_id)
            if g is None:
                continue
            if (hcpu or hmem) and g.node.name not in host_on:
                # Occupancy comes from GpuState; the host part is counted here, once per node.
                host_on.add(g.node.name)
                sh = replace(sh, host_cpu_milli=hcpu, host_memory_mib=hmem)
                g.node.take_host(hcpu, hmem)
            held.append((g, sh))
            eq += 1.0 if sh.kind == "whole" else self.share_equiv(g, sh)
            self.jobs_on_node.setdefault(g.node.name, set()).add(jid)
            if sh.kind == "timeslice" and sh.replica is not None:
                g.ts_reps.add(sh.replica)
        self.job_gpus[jid] = held
        self.job_equiv[jid] = eq
        self._held_from[jid] = (rj.shares, hcpu, hmem)

    def _advance_running(self, snap: Snapshot, dirty: set[NodeSlot]) -> None:
        """`_add_running` for a kept index: a job whose shares and host part are those its held GPUs were read from
        keeps them (and its GPU-equivalents); the others are read again. Host CPU and memory, time-slice replicas
        and the jobs per node are counted again on the nodes in `dirty` (a hold or release there, or a new state)
        and on those a job left or joined, in the snapshot's order of jobs, as a build counts them."""
        old_gpus, old_equiv, old_from, old_found = self.job_gpus, self.job_equiv, self._held_from, self.broken_found
        old_running = self.running
        found: dict[int, str | None] = {}
        running: dict[int, RunningJob] = {}
        job_gpus: dict[int, list[tuple[GpuSlot, Share]]] = {}
        job_equiv: dict[int, float] = {}
        held_from: dict[int, tuple] = {}
        stopping: set[int] = set()
        fresh: list[int] = []  # jobs read again
        for rj in snap.running:
            req = rj.request
            jid = req.id
            running[jid] = rj
            held = old_gpus.get(jid)
            was = old_from.get(jid)
            if (
                held is not None
                and was[0] is rj.shares
                and was[1] == req.host_cpu_milli
                and was[2] == req.host_memory_mib
            ):
                job_gpus[jid] = held
                job_equiv[jid] = old_equiv[jid]
                held_from[jid] = was
                if jid in old_found:
                    found[jid] = old_found[jid]
            else:
                job_gpus[jid] = None  # type: ignore[assignment]  # its place in the order; read below
                job_equiv[jid] = 0.0
                fresh.append(jid)
            if rj.stopping:
                stopping.add(jid)
        # Nodes whose jobs changed: those a job left (gone, or read again) and those a job read again holds.
        for jid, held in old_gpus.items():
            if job_gpus.get(jid) is not held:
                for g, _ in held:
                    dirty.add(g.node)
        gpus = self.gpus
        for jid in fresh:
            for sh in running[jid].shares:
                g = gpus.get(sh.gpu_id)
                if g is not None:
                    dirty.add(g.node)
        # The dirty nodes' jobs before, kept, and those read again, in the snapshot's order.
        on_node = self.jobs_on_node
        order = {jid: i for i, jid in enumerate(running)}
        kept_on: set[int] = set()  # kept jobs on dirty nodes
        for node in dirty:
            node.cpu_free, node.mem_free = node.cpu_cap, node.mem_cap
            for g in node.gpus:
                if g.ts_reps:
                    g.ts_reps = set()
            had = on_node.pop(node.name, None)
            if had:
                kept_on.update(jid for jid in had if (h := job_gpus.get(jid)) is not None and h is old_gpus.get(jid))
        self.running, self.job_gpus, self.job_equiv = running, job_gpus, job_equiv
        self._held_from, self.stopping, self.broken_found = held_from, stopping, found
        self._running_before, self._changes = (old_running, fresh, self.dropped), None
        self.dropped = []
        self.running_epoch += 1
        # Jobs read again take their GPUs, host part and nodes as a build would; kept jobs on dirty nodes count
        # their host part and replicas there again. Together, in the snapshot's order (the order of each node's set).
        redo = sorted([*kept_on, *fresh], key=order.__getitem__)
        dirty_names = {node.name for node in dirty}
        for jid in redo:
            if job_gpus[jid] is None:
                self._hold_running(jid, running[jid])
                continue
            req = running[jid].request
            hcpu, hmem = req.host_cpu_milli, req.host_memory_mib
            host_on: set[str] = set()
            for g, sh in job_gpus[jid]:
                name = g.node.name
                if name not in dirty_names:
                    continue
                if (hcpu or hmem) and name not in host_on:
                    host_on.add(name)
                    g.node.take_host(hcpu, hmem)
                on_node.setdefault(name, set()).add(jid)
                if sh.kind == "timeslice" and sh.replica is not None:
                    g.ts_reps.add(sh.replica)

    # ------------------------------------------------------------------ kept between rounds

    def advance(self, snapshot: Snapshot, topo: Topology) -> bool:
        """Bring this state, built for an earlier snapshot of the same cluster and changed since by that round, to
        `snapshot`: afterwards it holds what `ClusterState(snapshot, topo)` would, in the same orders (placement
        breaks ties in the order of the buckets). Reads again only the nodes whose state the snapshot changed or
        whose GPUs the round held or released, and the running jobs. False, with nothing changed, when more than
        occupancy and load changed (nodes, their GPUs or health, pools, configuration, topology): build afresh.
        """
        prev = self.snapshot
        if topo is not self.topo or len(snapshot.nodes) != len(prev.nodes):
            return False
        if snapshot.config is not prev.config and snapshot.config != prev.config:
            return False
        if snapshot.pools is not prev.pools and list(snapshot.pools) != list(prev.pools):
            return False
        nodes = list(self.nodes.values())
        changed: list[NodeSlot] = []
        for node, ns, old in zip(nodes, snapshot.nodes, prev.nodes, strict=True):
            if ns is old:
                continue
            if (
                len(ns.gpus) != len(old.gpus)
                or _node_shape(ns) != _node_shape(old)
                or any(
                    gs is not og and _gpu_shape(gs) != _gpu_shape(og) for gs, og in zip(ns.gpus, old.gpus, strict=True)
                )
            ):
                return False
            changed.append(node)
        # Nothing refuses from here on.
        self.snapshot, self.config, self.now = snapshot, snapshot.config, snapshot.now
        self.params = snapshot.config.cost
        self.pools = {p.id: p for p in snapshot.pools}
        self.warnings = list(self._built_warnings)
        if self._touched_outside is not None:  # a journal left open by a round that failed: its nodes are read again
            self.touched |= self._touched_outside
            self._touched_outside = None
        self.journal_log, self._journal_depth, self.sig_dirty = None, 0, None
        if snapshot.link_utilisation != prev.link_utilisation or snapshot.link_errors != prev.link_errors:
            self._live_network(snapshot)
            for node, ns in zip(nodes, snapshot.nodes, strict=True):
                self._node_network(node, ns)
        for node in {*changed, *self.touched}:
            mig_part = node.part is not None and node.part.sharing == "mig"
            for g, gs in zip(node.gpus, snapshot.nodes[node.seq].gpus, strict=True):
                g.occupy(gs, g.profiles if mig_part else None)
                self._refresh(g)
        dirty = {*changed, *self.touched}
        self.touched = set()
        for node in nodes:
            node.frag_sig = None
        self._advance_running(snapshot, dirty)
        self._order_buckets()
        return True

    def _order_buckets(self) -> None:
        """Put every bucket in the order a build gives it: nodes in the snapshot's order, GPUs by node then index
        (holds and releases move a node or GPU to the end of its new bucket)."""
        node_key, gpu_key = attrgetter("seq"), _gpu_order
        for part in self.partitions.values():
            for buckets, key in (
                (part.buckets, node_key),
                *((gb, node_key) for gb in part.gbuckets.values()),
                (part.mps_b, gpu_key),
                *((mb, gpu_key) for mb in part.mig_b.values()),
                (part.ts_b, gpu_key),
            ):
                for k, bucket in enumerate(buckets):
                    if len(bucket) > 1:
                        buckets[k] = dict.fromkeys(sorted(bucket, key=key))

    def _live_network(self, snap: Snapshot) -> None:
        """Per node / group / pod bandwidth left after live utilisation and errors (delta from nominal)."""
        topo, params = self.topo, self.params
        hot_u = self.config.hot_link_utilisation
        self._node_nominal: dict[str, float] = {h: c / 8.0 for h, c in topo.host_nominal_gbps.items()}
        node_loss: dict[str, float] = {}
        group_loss: dict[int, float] = {}
        pod_loss: dict[int, float] = {}
        self._node_hot: set[str] = set()
        self._node_err: set[str] = set()
        group_hot: set[int] = set()
        pod_hot: set[int] = set()
        role = topo.link_role
        util, errs = snap.link_utilisation, snap.link_errors
        err_factor = params.error_factor
        get_role = role.get
        for key, u in util.items():
            if u <= 0:
                continue
            info = get_role(key)
            if info is None:
                continue
            e = bool(errs.get(key)) if errs else False
            a = link_available(u, e, params)
            r, owner, cap = info
            lost = cap * (1.0 - a)
            if r == ROLE_HOST:
                node_loss[owner] = node_loss.get(owner, 0.0) + lost  # type: ignore[index]
                if u >= hot_u:
                    self._node_hot.add(owner)  # type: ignore[arg-type]
                if e:
                    self._node_err.add(owner)  # type: ignore[arg-type]
            elif r == ROLE_GROUP_UPLINK:
                group_loss[owner] = group_loss.get(owner, 0.0) + lost  # type: ignore[index]
                if u >= hot_u or e:
                    group_hot.add(owner)  # type: ignore[arg-type]
            elif r == ROLE_POD_UPLINK:
                pod_loss[owner] = pod_loss.get(owner, 0.0) + lost  # type: ignore[index]
                if u >= hot_u or e:
                    pod_hot.add(owner)  # type: ignore[arg-type]
        for key, e in (errs or {}).items():
            if not e or util.get(key, 0.0) > 0:
                continue  # counted above
            info = get_role(key)
            if info is None:
                continue
            r, owner, cap = info
            lost = cap * (1.0 - err_factor)
            if r == ROLE_HOST:
                node_loss[owner] = node_loss.get(owner, 0.0) + lost  # type: ignore[index]
                self._node_err.add(owner)  # type: ignore[arg-type]
            elif r == ROLE_GROUP_UPLINK:
                group_loss[owner] = group_loss.get(owner, 0.0) + lost  # type: ignore[index]
                group_hot.add(owner)  # type: ignore[arg-type]
            elif r == ROLE_POD_UPLINK:
                pod_loss[owner] = pod_loss.get(owner, 0.0) + lost  # type: ignore[index]
                pod_hot.add(owner)  # type: ignore[arg-type]
        self._node_net = {h: c - node_loss.get(h, 0.0) / 8.0 for h, c in self._node_nominal.items()}
        for g in topo.groups:
            self.group_oeff[g.id] = oversubscription(g.host_gbps, g.uplink_gbps - group_loss.get(g.id, 0.0))
            self.group_hot[g.id] = g.id in group_hot
        for p in topo.pods:
            self.pod_oeff[p.id] = (
                oversubscription(p.down_gbps, p.up_gbps - pod_loss.get(p.id, 0.0)) if p.up_gbps > 0 else 1.0
            )
            self.pod_hot[p.id] = p.id in pod_hot

    # ------------------------------------------------------------------ topology helpers

    def group_level(self, ga: int, gb: int) -> int:
        if ga == gb:
            return LEVEL_LEAF_GROUP
        if ga < 0 or gb < 0:
            return LEVEL_FABRIC
        return self.topo.group_level(ga, gb)

    def group_label(self, gid: int) -> str:
        if gid < 0:
            return "no leaf"
        return self.topo.groups[gid].label

    def oeff(self, gid: int) -> float:
        return self.group_oeff.get(gid, 1.0)

    # ------------------------------------------------------------------ occupancy

    def _set_node_free(self, node: NodeSlot, new_mask: int) -> None:
        old_k = node.n_free
        new_k = new_mask.bit_count()
        node.free_mask = new_mask
        if old_k == new_k:
            return
        node.n_free = new_k
        part = node.part
        if part is None or not node.eligible:
            return
        gb = part.gbuckets[node.group]
        if old_k:
            del part.buckets[old_k][node]
            del gb[old_k][node]
        if new_k:
            part.buckets[new_k][node] = None
            gb[new_k][node] = None
        part.gfree[node.group] += new_k - old_k
        part.free_total += new_k - old_k

    def _refresh(self, g: GpuSlot) -> None:
        node = g.node
        usable = g.healthy and node.eligible
        empty = not (g.excl or g.mps_pct or g.mps_mem or g.mig_mask or g.ts_used)
        mask = node.free_mask
        new = (mask | g.bit) if (usable and empty) else (mask & ~g.bit)
        if new != mask:
            self._set_node_free(node, new)
        part = node.part
        if part is None or part.sharing == "exclusive":
            return
        sharing = part.sharing
        if sharing == "mps":
            ok = usable and not (g.excl or g.mig_mask or g.ts_used)
            rem = 100 - g.mps_pct
            key = rem if ok and rem > 0 and g.memory_mib - g.mps_mem > 0 else None
            if key != g.mps_key:
                if g.mps_key is not None:
                    del part.mps_b[g.mps_key][g]
                if key is not None:
                    part.mps_b[key][g] = None
                g.mps_key = key
        elif sharing == "mig":
            ok = usable and not (g.excl or g.mps_pct or g.mps_mem or g.ts_used)
            for name, prof in part.profiles.items():
                free_slots = prof.total_slots - (g.mig_mask & ((1 << prof.total_slots) - 1)).bit_count()
                key = None
                if ok and miglib.free_starts(prof, g.mig_mask):
                    key = min(8, max(0, free_slots))
                old = g.mig_keys.get(name)
                if key != old:
                    if old is not None:
                        del part.mig_b[name][old][g]
                    if key is not None:
                        part.mig_b[name][key][g] = None
                        g.mig_keys[name] = key
                    else:
                        g.mig_keys.pop(name, None)
        elif sharing == "timeslice":
            ok = usable and not (g.excl or g.mps_pct or g.mps_mem or g.mig_mask)
            key = g.ts_used if ok and g.ts_used < part.replicas else None
            if key != g.ts_key:
                if g.ts_key is not None:
                    del part.ts_b[g.ts_key][g]
                if key is not None:
                    part.ts_b[key][g] = None
                g.ts_key = key

    def _changed(self, node: NodeSlot) -> None:
        """Drop the node's cached state and tell the placer's index (`sig_dirty`), once per change of it."""
        self.touched.add(node)
        if node.frag_sig is not None:
            node.frag_sig = None
            if self.sig_dirty is not None:
                self.sig_dirty.append(node)

    def hold(self, g: GpuSlot, sh: Share) -> None:
        self._changed(g.node)
        if sh.host_cpu_milli or sh.host_memory_mib:
            g.node.take_host(sh.host_cpu_milli, sh.host_memory_mib)
        kind = sh.kind
        if kind == "whole":
            g.excl += 1
        elif kind == "mps":
            g.mps_pct += sh.compute_pct
            g.mps_mem += sh.memory_mib
        elif kind == "mig":
            g.mig_used.append((sh.mig_profile, sh.mig_start))
            prof = (g.profiles or miglib.profiles_for(g.model, g.memory_mib)).get(sh.mig_profile or "")
            g.mig_mask |= prof.mask(sh.mig_start or 0) if prof else 0xFF
        elif kind == "timeslice":
            g.ts_used += 1
            if sh.replica is not None:
                g.ts_reps.add(sh.replica)
        if self.journal_log is not None:
            self.journal_log.append((True, g, sh))
            if not _plain(sh):
                self._journal_plain = False
        self._refresh(g)

    def release(self, g: GpuSlot, sh: Share) -> None:
        self._changed(g.node)
        if sh.host_cpu_milli or sh.host_memory_mib:
            g.node.take_host(-sh.host_cpu_milli, -sh.host_memory_mib)
        kind = sh.kind
        if kind == "whole":
            g.excl = max(0, g.excl - 1)
        elif kind == "mps":
            g.mps_pct = max(0, g.mps_pct - sh.compute_pct)
            g.mps_mem = max(0, g.mps_mem - sh.memory_mib)
        elif kind == "mig":
            entry = (sh.mig_profile, sh.mig_start)
            if entry in g.mig_used:
                g.mig_used.remove(entry)
            profiles = g.profiles or miglib.profiles_for(g.model, g.memory_mib)
            g.mig_mask = miglib.occupied_mask(profiles, g.mig_used) if g.mig_used else 0
        elif kind == "timeslice":
            g.ts_used = max(0, g.ts_used - 1)
            if sh.replica is not None:
                g.ts_reps.discard(sh.replica)
        if self.journal_log is not None:
            self.journal_log.append((False, g, sh))
            if not _plain(sh):
                self._journal_plain = False
        self._refresh(g)

    def release_many(self, pairs: list[tuple[GpuSlot, Share]]) -> None:
        """release() of each (GPU, share) in order: the same state, indexes and the order within them included, and
        the same journal. A run of whole GPUs of exclusive partitions moves each node between the free-GPU buckets
        once, not once per GPU (a reservation plan past its probe limit releases thousands)."""
        self._apply_in_bulk(pairs, hold=False)

    def _apply_in_bulk(self, pairs, hold: bool) -> None:
        """hold() or release() of each (GPU, share) in order (`_bulk_run` for the runs that allow it)."""
        run: list[tuple[GpuSlot, Share]] = []
        one = self.hold if hold else self.release
        for pair in pairs:
            g, sh = pair
            part = g.node.part
            if _plain(sh) and (part is None or part.sharing == "exclusive"):
                run.append(pair)
                continue
            if run:
                self._bulk_run(run, hold)
                run = []
            one(g, sh)
        if run:
            self._bulk_run(run, hold)

    def _bulk_run(self, pairs: list[tuple[GpuSlot, Share]], hold: bool) -> None:
        """hold() or release() of whole GPUs without host resources, on exclusive partitions (or none), in order. Each
        GPU's count and its node's free mask change as one at a time would change them; the node's buckets (whose
        dicts keep the order nodes came in) are moved once, in the order of each node's last change of its free count,
        which is where the GPU-at-a-time moves leave each node."""
        changed = self._changed
        for node in dict.fromkeys([g.node for g, _ in pairs]):  # each node once, as first changed
            changed(node)
        if self.journal_log is not None:
            self.journal_log += [(hold, g, sh) for g, sh in pairs]
        masks: dict[NodeSlot, int] = {}
        last: dict[NodeSlot, int] = {}
        for i, (g, _) in enumerate(pairs):
            node = g.node
            if hold:
                g.excl += 1
            elif g.excl:
                g.excl -= 1
            mask = masks.get(node, node.free_mask)
            if g.healthy and node.eligible and not (g.excl or g.mps_pct or g.mps_mem or g.mig_mask or g.ts_used):
                new = mask | g.bit
            else:
                new = mask & ~g.bit
            if new != mask:
                masks[node] = new
                last[node] = i
        # A run only holds or only releases: a node's count moves one way, so each node whose mask changed is in
        # `last`, and moves once.
        set_free = self._set_node_free
        for node in sorted(last, key=last.__getitem__):
            set_free(node, masks[node])

    def hold_host(self, hostname: str, cpu_milli: int, memory_mib: int) -> None:
        """Host CPU and memory taken on a node by work that holds no GPU (a replay's CPU-only pods): not
        journaled, not released by any job."""
        node = self.nodes[hostname]
        self._changed(node)
        self._journal_plain = False  # not journaled: not undone
        node.take_host(cpu_milli, memory_mib)

    def share_fits(self, g: GpuSlot, sh: Share) -> bool:
        """True when exactly this share could be held on g now (health, mode, room, MIG slices)."""
        if not g.healthy or not g.node.eligible or g.excl:
            return False
        kind = sh.kind
        if kind == "whole":
            return g.is_empty()
        if kind == "mps":
            return (
                not (g.mig_mask or g.ts_used)
                and g.mps_pct + sh.compute_pct <= 100
                and g.mps_mem + sh.memory_mib <= g.memory_mib
            )
        if kind == "mig":
            prof = g.profiles.get(sh.mig_profile or "")
            return (
                prof is not None
                and not (g.mps_pct or g.mps_mem or g.ts_used)
                and not prof.mask(sh.mig_start or 0) & g.mig_mask
            )
        part = g.node.part
        return not (g.mps_pct or g.mps_mem or g.mig_mask) and g.ts_used < (part.replicas if part else 1)

    def running_changes(self) -> set[int]:
        """The running jobs that may not be what they were at the last snapshot: gone, new, their GPUs read again, a
        new RunningJob, or dropped by the last round (`drop_running`). What a structure kept over the running jobs
        from that snapshot (backfill.EndsLine) takes out and reads again; empty for an index built afresh."""
        if self._changes is None:
            if self._running_before is None:
                self._changes = set()
            else:
                before, fresh, dropped = self._running_before
                now = self.running
                ids = list(now)
                changed = set(compress(ids, map(is_not, map(before.get, ids), now.values())))
                changed.update(before.keys() - now.keys())
                changed.update(fresh)
                changed.update(dropped)
                self._changes = changed
        return self._changes

    def changes_since(self, epoch: int, size: int, share: int) -> set[int] | None:
        """For a structure kept over the running jobs, last brought up to date at `epoch` and holding `size` of them:
        the jobs it must read again (none while it is up to date), or None where building it afresh is the better
        way (it is more than one snapshot behind, or more than 1 / `share` of its size changed)."""
        if epoch == self.running_epoch:
            return set()
        changes = self.running_changes()
        if epoch != self.running_epoch - 1 or len(changes) * share > size:
            return None
        return changes

    def drop_running(self, jid: int) -> None:
        """Take a running job out of the index for the rest of the round (a failed or requeued job, its GPUs
        released): it holds nothing and runs on no node."""
        for g, _ in self.job_gpus.pop(jid, ()):
            s = self.jobs_on_node.get(g.node.name)
            if s is not None:
                s.discard(jid)
        self.running.pop(jid, None)
        self.stopping.discard(jid)
        self.dropped.append(jid)

    def release_job(self, job_id: int) -> None:
        for g, sh in self.job_gpus.get(job_id, ()):
            self.release(g, sh)

    def hold_job(self, job_id: int) -> None:
        for g, sh in self.job_gpus.get(job_id, ()):
            self.hold(g, sh)

    def per_job(self, name: str) -> dict[int, tuple]:
        """One of the per-job memos kept with the index (`end_terms`, `rings`, `layouts`): each holds, by job id, what
        was worked out from one object of the job (its RunningJob, its held GPUs) beside that object, and is read only
        where the job still has it. Jobs gone are not taken out one by one: the memo starts again once it could hold
        more of them than running jobs."""
        kept = getattr(self, name)
        if len(kept) > 2 * len(self.running) + 1024:
            kept = {}
            setattr(self, name, kept)
        return kept

    def journal(self) -> int:
        """Start (or nest) recording changes; returns a mark for rollback() / keep()."""
        if self.journal_log is None:
            self.journal_log = []
            self._journal_depth = 0
            self._touched_outside, self.touched = self.touched, set()
            self._journal_plain = True
        self._journal_depth += 1
        return len(self.journal_log)

    def rollback(self, mark: int) -> None:
        """Undo every change since `mark` (exactly: indexes included) and close that journal level."""
        log = self.journal_log
        assert log is not None
        entries = log[mark:]
        del log[mark:]
        self.journal_log = None
        for was_hold, run in groupby(reversed(entries), key=_FIRST):
            self._apply_in_bulk([(g, sh) for _, g, sh in run], hold=not was_hold)
        self._close_journal(log, undone=mark == 0)

    def keep(self, mark: int) -> None:
        """Close the journal level opened at `mark`, keeping its changes (an outer level can still undo them)."""
        self._close_journal(self.journal_log, undone=False)

    def _close_journal(self, log: list | None, undone: bool) -> None:
        """`undone`: every change since the journal's start was undone (only the outermost level's start counts)."""
        self._journal_depth -= 1
        if self._journal_depth > 0:
            self.journal_log = log
            return
        self.journal_log = None
        inside, self.touched = self.touched, self._touched_outside
        self._touched_outside = None
        if not (undone and self._journal_plain):
            self.touched |= inside

    # ------------------------------------------------------------------ accounting helpers

    def share_equiv(self, g: GpuSlot, sh: Share) -> float:
        """GPU-equivalents of one share (quotas, fair share)."""
        kind = sh.kind
        if kind == "whole":
            return 1.0
        if kind == "mps":
            return sh.compute_pct / 100.0
        if kind == "mig":
            prof = (g.profiles or miglib.profiles_for(g.model, g.memory_mib)).get(sh.mig_profile or "")
            return prof.compute_fraction if prof else 1.0
        part = g.node.part
        return 1.0 / part.replicas if part else 1.0

    def stats(self) -> dict[str, Any]:
        return {
            "partitions": len(self.partitions),
            "free_gpus": sum(p.free_total for p in self.partitions.values()),
            "capacity_gpus": sum(p.cap_total for p in self.partitions.values()),
        }
