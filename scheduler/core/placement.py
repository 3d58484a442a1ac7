"""Placement: find and score candidate GPU sets for one job on the ClusterState. PURE.

    placer = Placer(state)
    ctx, error = placer.context(job)          # validated, with the job's ideal step time
    cand = placer.find(ctx)                   # best Candidate or None; nothing is changed
    placement = placer.commit(job, ctx, cand) # hold its shares in the state, return a Placement
    placer.fail_reason(ctx)                   # why nothing fitted, in plain words

Search (never a scan of all nodes per job):
* Only the job's partitions (pool x GPU model x memory) with enough free GPUs are looked at.
* Single node (gang of one node, or any job that fits one node): nodes come from the free-count buckets
  in best-fit order (a node with exactly the GPUs needed first); inside a node the job takes the
  NVLink island that fits it most tightly, the least loaded GPUs first; only if no island fits (and
  the job does not require one) does it span islands. The first candidate that matches the ideal
  step time wins; otherwise up to `Config.max_candidates` are scored.
* Several nodes: domains from small to large. Leaf groups that can hold the gang (per-group bucket
  counts, no node scan) in best-fit order, or nearest the dataset first for data-intensive jobs; up
  to `Config.domain_candidates` of them are scored. Only when no leaf can hold it (or the best leaf
  placement sits on hot or erroring links) are pods, then the whole fabric, tried. Nodes with hot or
  erroring HCA links are taken last. A job with a free shape gets a balanced split (8+8 rather than
  8+7+1: the ring's bandwidth grows with the GPUs per node) and a packed one, both scored.
* Shared GPUs: MPS shares go where the pool's expected fragmentation against its request mix grows least
  (FGD, `fragmentation`): one GPU per bucket of compute left and one node per count of empty GPUs (the
  bucket's oldest member) is scored, across the job's partitions, equal scores to the hostname that
  sorts first; with no mix, the bucket with the least compute left that still fits (packing keeps whole
  GPUs free). MIG GPUs from the fullest
  that has a free slot for the profile (start slice chosen to keep the largest profile placeable),
  time-sliced GPUs from the least used (spreading).
Scores come from `costmodel` (see its docstring and docs/scheduler.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import compress
from typing import Any

from scheduler.core import reasons
from scheduler.core.costmodel import (
    compute_s,
    fragmentation,
    hca_reach,
    intra_node_gbs,
    io_s,
    network_gbs,
    ring_allreduce_s,
    ring_latency_s,
)
from scheduler.core.fragmentation import MpsFragmentation, mix_from_jobs, mps_classes
from scheduler.core.mig import best_start, validate_profile
from scheduler.core.state import HOST_UNTRACKED, ClusterState, GpuSlot, NodeSlot, Partition
from scheduler.core.topology import (
    LEVEL_FABRIC,
    LEVEL_ISLAND,
    LEVEL_LEAF_GROUP,
    LEVEL_NAMES,
    LEVEL_NODE,
    LEVEL_POD_GROUP,
)
from scheduler.core.types import JobRequest, Placement, Share

INF = float("inf")
_EPS = 1e-9
_GOOD_ENOUGH = 1.005  # a single-node candidate within 0.5 % of the ideal step ends the search


class JobCtx:
    """A job's demand, validated and priced once (shared by every job of the same shape)."""

    __slots__ = (
        "C",
        "D",
        "N",
        "S",
        "ds_group",
        "ds_name",
        "ds_net",
        "flex",
        "hcpu",
        "hmem",
        "host",
        "ideal",
        "interference",
        "k",
        "max_G",
        "mig_profile",
        "mps_mem",
        "mps_pct",
        "n",
        "parts",
        "pool_name",
        "require",
        "sharing",
        "single",
    )

    def __init__(self) -> None:
        self.ds_name: str | None = None
        self.ds_group: int | None = None
        self.ds_net = 0.0


@dataclass(slots=True)
class Candidate:
    score: float
    slowdown: float
    part: Partition
    picks: list[tuple[NodeSlot, int]]  # exclusive: (node, GPU mask)
    shares: list[tuple[GpuSlot, Share]] | None  # shared modes
    level: int
    comm: float
    comp: float
    io: float
    bw: float
    frag: float
    flagged: bool  # sits on a hot or erroring link


class Placer:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.params = state.params
        self.config = state.config
        self.evaluations = 0
        self._frag: dict[int, MpsFragmentation | None] | None = None  # pool -> its mix (built on first use)
        self._rank: dict[NodeSlot, int] = {}  # node -> its place by hostname (ties of the fragmentation term)
        self._states: dict[Partition, dict[tuple, dict[NodeSlot, None]]] = {}  # see _state_index
        self._state_of: dict[NodeSlot, tuple] = {}
        self._cands: dict[tuple, tuple] = {}  # (node state, %, MiB) -> its GPUs, and those that take the share

    def use_request_mix(self, mix) -> None:
        """Score MPS shares against this mix from now on (a replay that keeps one Placer across arrivals;
        a round builds its Placer from the snapshot, whose `request_mix` it reads)."""
        self._frag = self._build_frag(list(mix), fallback=False)

    def _build_frag(self, mix: list, fallback: bool) -> dict[int, MpsFragmentation | None]:
        st, cfg = self.state, self.config
        out: dict[int, MpsFragmentation | None] = {}
        mps_pools = [pid for pid, p in st.pools.items() if p.sharing == "mps"]
        jobs_mix: list | None = None
        for pid in mps_pools:
            classes = mps_classes(
                mix, pid, cfg.fragmentation_coverage, cfg.fragmentation_max_classes, cfg.fragmentation_prior_whole
            )
            if not classes and fallback:
                if jobs_mix is None:  # one pass over the snapshot's jobs, only when some pool needs it
                    snap = st.snapshot
                    jobs_mix = mix_from_jobs([*snap.pending, *(r.request for r in snap.running)])
                classes = mps_classes(
                    jobs_mix,
                    pid,
                    cfg.fragmentation_coverage,
                    cfg.fragmentation_max_classes,
                    cfg.fragmentation_prior_whole,
                )
            out[pid] = MpsFragmentation(classes) if classes else None
        if not self._rank:
            self._rank = {st.nodes[h]: i for i, h in enumerate(sorted(st.nodes))}
        return out

    def _frag_for(self, pool: int) -> MpsFragmentation | None:
        if self._frag is None:
            self._frag = self._build_frag(list(self.state.snapshot.request_mix), fallback=True)
        return self._frag.get(pool)

    # ------------------------------------------------------------------ context

    def context(self, job: JobRequest) -> tuple[JobCtx | None, str | None]:
        st, P = self.state, self.params
        pool = st.pools.get(job.pool)
        if pool is None:
            return None, reasons.unknown_pool(job.pool)
        if job.sharing != pool.sharing:
            return None, reasons.sharing_mismatch(pool.name, pool.sharing, job.sharing)
        n = job.gpus
        if n < 1:
            return None, reasons.no_gpus_asked()
        N, k = job.nodes, job.gpus_per_node
        if N is not None and k is not None and N * k != n:
            return None, reasons.bad_shape(n, N, k)
        if N is not None and k is None:
            if N < 1 or n % N:
                return None, reasons.bad_shape(n, N, None)
            k = n // N
        elif k is not None and N is None:
            if k < 1 or n % k:
                return None, reasons.bad_shape(n, None, k)
            N = n // k
        model = job.gpu_model.strip().upper() if job.gpu_model else None
        parts = [
            p
            for p in st.pool_parts.get(job.pool, ())
            if (model is None or p.model.upper() == model)
            and (job.gpu_memory_mib is None or p.memory_mib >= job.gpu_memory_mib)
        ]
        if not parts:
            return None, reasons.no_matching_gpus(pool.name, job.gpu_model, job.gpu_memory_mib)
        ctx = JobCtx()
        ctx.n = n
        ctx.N = N
        ctx.k = k
        ctx.flex = N is None
        ctx.require = job.require
        ctx.sharing = job.sharing
        ctx.pool_name = pool.name
        ctx.max_G = max(p.G for p in parts)
        ctx.mps_pct = job.mps_compute_pct or 0
        ctx.mps_mem = job.mps_memory_mib or 0
        ctx.mig_profile = job.mig_profile
        ctx.interference = P.interference.get(job.sharing, 1.0)
        ctx.hcpu = max(0, job.host_cpu_milli)
        ctx.hmem = max(0, job.host_memory_mib)
        ctx.host = bool(ctx.hcpu or ctx.hmem)
        if ctx.host:
            parts = [p for p in parts if any(nd.host_total_fits(ctx.hcpu, ctx.hmem) for nd in p.nodes)]
            if not parts:
                return None, reasons.host_never_fits(ctx.hcpu, ctx.hmem, pool.name)
        capacity = sum(p.cap_total for p in parts)
        if job.sharing != "exclusive":
            if (N or 1) > 1 or n > ctx.max_G:
                return None, reasons.shared_one_node(job.sharing, ctx.max_G)
            if job.sharing == "mps":
                mem_cap = max(p.memory_mib for p in parts)
                if not (1 <= ctx.mps_pct <= 100) or not (0 < ctx.mps_mem <= mem_cap):
                    return None, reasons.mps_bad_request(mem_cap)
            elif job.sharing == "mig":
                if not job.mig_profile:
                    return None, reasons.mig_missing_profile()
                parts = [p for p in parts if job.mig_profile in p.profiles]
                if not parts:
                    first = st.pool_parts[job.pool][0]
                    return None, validate_profile(first.model, first.memory_mib, job.mig_profile) or (
                        reasons.mig_full(job.mig_profile, pool.name)
                    )
            ctx.single = True
        else:
            if job.require == "island":
                largest = max(p.max_island for p in parts)
                if (N or 1) > 1 or n > largest:
                    return None, reasons.island_too_small(n, pool.name, largest)
            per_node = k if k is not None else (n if job.require in ("island", "node") else None)
            if per_node is not None and per_node > ctx.max_G:
                return None, reasons.node_too_small(per_node, pool.name, ctx.max_G)
            if n > capacity:
                return None, reasons.never_fits(n, pool.name, capacity)
            ctx.single = N == 1 or (N is None and n <= ctx.max_G)
        ctx.parts = parts
        self._price(ctx, job)
        return ctx, None

    def reprice(self, ctx: JobCtx, job: JobRequest) -> JobCtx:
        """A copy of a validated context with `job`'s cost inputs (workload, dataset, step sizes): jobs
        that differ only in those share validation and feasibility, not scores."""
        c = JobCtx()
        for name in JobCtx.__slots__:
            if hasattr(ctx, name):
                setattr(c, name, getattr(ctx, name))
        c.ds_name, c.ds_group, c.ds_net = None, None, 0.0
        self._price(c, job)
        return c

    def _price(self, ctx: JobCtx, job: JobRequest) -> None:
        """The job's demand for the cost model: compute, all-reduce and dataset bytes per step, ideal step."""
        P, st = self.params, self.state
        C = job.step_compute_s
        ctx.C = C if C is not None else P.default_step_compute_s.get(job.workload, 0.1)
        S = job.allreduce_bytes
        if S is None:
            S = P.default_allreduce_bytes.get(job.workload, float(1 << 30))
        ctx.S = S if ctx.n > 1 else 0.0
        ctx.D = 0.0
        if job.dataset_node and (job.workload == "data-intensive" or job.io_bytes_per_step):
            ds_group = st.topo.group_of.get(job.dataset_node)
            if ds_group is not None:
                ctx.ds_name = job.dataset_node
                ctx.ds_group = ds_group
                ctx.ds_net = st._node_net.get(job.dataset_node, 0.0)
                ctx.D = job.io_bytes_per_step if job.io_bytes_per_step is not None else P.default_io_bytes_per_step
        ctx.ideal = self._ideal_step(ctx)

    def _ideal_step(self, ctx: JobCtx) -> float:
        P = self.params
        best = max(ctx.parts, key=lambda p: p.strength)
        comp = ctx.C / max(best.strength, 1e-6)
        n = ctx.n
        comm = 0.0
        nodes = 1
        if n > 1:
            island = max(p.max_island for p in ctx.parts)
            nv = max(p.nvlink_gbps for p in ctx.parts)
            if n <= island and (ctx.N or 1) == 1:
                comm = ring_allreduce_s(n, ctx.S, intra_node_gbs(n, True, nv, P)) + ring_latency_s(n, LEVEL_ISLAND, P)
            elif (ctx.N or 1) == 1 and n <= ctx.max_G:
                comm = ring_allreduce_s(n, ctx.S, intra_node_gbs(n, False, nv, P)) + ring_latency_s(n, LEVEL_NODE, P)
            else:
                G = ctx.max_G
                per = ctx.k if ctx.k else min(G, n)
                nodes = math.ceil(n / per)
                net = max(p.nominal_net for p in ctx.parts) * min(1.0, per / G) * P.net_efficiency
                b = min(net, intra_node_gbs(per, True, nv, P))
                comm = ring_allreduce_s(n, ctx.S, b) + ring_latency_s(n, LEVEL_LEAF_GROUP, P)
        io = 0.0
        if ctx.D > 0:
            G = ctx.max_G
            per = min(n, G) if ctx.single else (ctx.k or min(G, n))
            nominal = max(p.nominal_net for p in ctx.parts) * min(1.0, per / G)
            b = min(nominal, ctx.ds_net if ctx.ds_net > 0 else nominal) * P.net_efficiency
            io = io_s(ctx.D / max(1, nodes), b)
        return max(comp + comm + io, 1e-9)

    # ------------------------------------------------------------------ search

    def find(self, ctx: JobCtx) -> Candidate | None:
        if ctx.sharing != "exclusive":
            return self._find_shared(ctx)
        best: Candidate | None = None
        n = ctx.n
        for part in ctx.parts:
            if part.free_total < n:
                continue
            cand = None
            if ctx.single:
                cand = self._search_single(ctx, part)
            if cand is None and not (ctx.N == 1 or ctx.require in ("island", "node")):
                cand = self._search_multi(ctx, part)
            if cand is not None and (best is None or cand.score < best.score):
                best = cand
                if best.slowdown <= 1.0 + _EPS and len(ctx.parts) > 1:
                    break
        return best

    # -- single node

    def _search_single(self, ctx: JobCtx, part: Partition) -> Candidate | None:
        n = ctx.n
        G = part.G
        if n > G:
            return None
        limit = self.config.max_candidates
        leaf_w = self.params.w_break_leaf
        island_only = ctx.require == "island"
        best: Candidate | None = None
        evals = 0
        if ctx.D > 0:
            sources = [part.gbuckets[g] for g in self._groups_by_dataset(ctx, part)]
        else:
            sources = [part.buckets]
        for buckets in sources:
            for j in range(n, G + 1):
                bucket = buckets[j]
                if not bucket:
                    continue
                for node in bucket:
                    if ctx.host and not node.host_fits(ctx.hcpu, ctx.hmem):
                        continue
                    mask = self._pick_in_node(node, n, island_only)
                    if mask is None:
                        continue
                    cand = self._eval(ctx, part, [(node, mask)])
                    evals += 1
                    if best is None or cand.score < best.score:
                        best = cand
                    # Good enough ends the search, unless it would break a wholly free leaf while a
                    # node of a partly used leaf may still be in the bucket.
                    if evals >= limit or (best.slowdown <= _GOOD_ENOUGH and best.frag < leaf_w):
                        return best
        return best

    def _pick_in_node(self, node: NodeSlot, n: int, island_only: bool) -> int | None:
        free = node.free_mask
        best_im = 0
        best_cnt = 1 << 30
        for im in node.islands:
            c = (free & im).bit_count()
            if n <= c < best_cnt:
                best_im, best_cnt = im, c
        if best_im:
            avail = free & best_im
            return avail if best_cnt == n else _lowest_util(node, avail, n)
        if island_only or free.bit_count() < n:
            return None
        # Span islands: the fullest free islands first, so the job touches as few as possible.
        pieces = sorted((free & im for im in node.islands if free & im), key=lambda m: -m.bit_count())
        mask, need = 0, n
        for piece in pieces:
            c = piece.bit_count()
            take = piece if c <= need else _lowest_util(node, piece, need)
            mask |= take
            need -= min(c, need)
            if need == 0:
                break
        return mask

    def _groups_by_dataset(self, ctx: JobCtx, part: Partition) -> list[int]:
        st = self.state
        dg = ctx.ds_group
        return sorted(
            part.gbuckets,
            key=lambda g: (st.group_level(g, dg) if dg is not None else LEVEL_FABRIC, st.oeff(g), part.gfree[g]),
        )

    # -- several nodes

    def _search_multi(self, ctx: JobCtx, part: Partition) -> Candidate | None:
        st = self.state
        n = ctx.n
        G = part.G
        fixed = not ctx.flex
        N, k = (ctx.N, ctx.k) if fixed else (math.ceil(n / G), 0)
        limit = self.config.domain_candidates
        groups, by_pod, domains, ungrouped = self._domains(part)
        if ungrouped:  # nodes without a leaf group: they count where one of them with a GPU free is reachable
            groups = [g for g in groups if g >= 0 or self._reachable_group(part, g)]
            domains += sum(1 for g in groups if g < 0)
        # The groups with a GPU free: in a full cluster few of them, and a group without one adds nothing at any level.
        gfree = part.gfree
        live = list(compress(groups, map(gfree.__getitem__, groups)))

        def capacity(g: int) -> int:
            return part.nodes_with_at_least(g, k) if fixed else gfree[g]

        need = N if fixed else n
        best: Candidate | None = None
        # Leaf level.
        feasible = [g for g in live if g >= 0 and capacity(g) >= need]
        if ctx.D > 0:
            order = {g: i for i, g in enumerate(self._groups_by_dataset(ctx, part))}
            feasible.sort(key=lambda g: order[g])
        else:
            feasible.sort(key=lambda g: (capacity(g), part.gfree[g], g))
        for g in feasible[:limit]:
            for picks in self._picks_from(ctx, part, [g], fixed, N, k):
                best = self._better(best, self._eval(ctx, part, picks))
        if best is not None and (not best.flagged or ctx.require == "leaf"):
            return best
        if ctx.require == "leaf":
            return None
        # Pod level.
        pods = []
        for p, gs in by_pod:
            gs = list(compress(gs, map(gfree.__getitem__, gs)))
            room = sum(map(capacity, gs))
            if room >= need:
                pods.append((room, p, gs))
        pods.sort(key=lambda t: (t[0], t[1]))
        for _, _, gs in pods[:limit]:
            gs = sorted(gs, key=lambda g: (-capacity(g), st.oeff(g), g))
            for picks in self._picks_from(ctx, part, gs, fixed, N, k):
                best = self._better(best, self._eval(ctx, part, picks))
        if best is not None and (not best.flagged or ctx.require == "pod"):
            return best
        if ctx.require == "pod":
            return best
        # Whole fabric: fill from the groups with most room (fewest groups spanned).
        if domains > 1 and sum(map(capacity, live)) >= need:
            gs = sorted(live, key=lambda g: (-capacity(g), st.oeff(g), g))
            for picks in self._picks_from(ctx, part, gs, fixed, N, k):
                best = self._better(best, self._eval(ctx, part, picks))
        return best

    def _domains(self, part: Partition) -> tuple[list[int], list[tuple[int, list[int]]], int, bool]:
        """The partition's groups, in their order (leaf groups, and the nodes without one as negative groups), its
        pods of more than one leaf group with their groups, the number of pods, and whether it has nodes without a
        leaf (their groups count only while one of their nodes with a GPU free is reachable)."""
        if part.domains is None:
            groups = list(part.gbuckets)
            by_pod: dict[int, list[int]] = {}
            for g in groups:
                if g >= 0:
                    by_pod.setdefault(self.state.topo.groups[g].pod, []).append(g)
            pods = [(p, gs) for p, gs in by_pod.items() if p >= 0 and len(gs) > 1]
            part.domains = (groups, pods, len(by_pod), any(g < 0 for g in groups))
        return part.domains

    def _reachable_group(self, part: Partition, g: int) -> bool:
        lst = part.gbuckets.get(g)
        return bool(lst) and any(node.reachable for b in lst for node in b)

    @staticmethod
    def _better(best: Candidate | None, cand: Candidate | None) -> Candidate | None:
        if cand is None:
            return best
        if best is None or cand.score < best.score:
            return cand
        return best

    def _picks_from(self, ctx: JobCtx, part: Partition, groups: list[int], fixed: bool, N: int, k: int):
        """Candidate node sets drawn from `groups` in order; yields lists of (node, mask)."""
        G = part.G
        if fixed:
            chosen: list[NodeSlot] = []
            for g in groups:
                lst = part.gbuckets[g]
                cool: list[NodeSlot] = []
                warm: list[NodeSlot] = []
                for j in range(k, G + 1):
                    for node in lst[j]:
                        if not node.reachable or (ctx.host and not node.host_fits(ctx.hcpu, ctx.hmem)):
                            continue
                        (warm if (node.hot or node.err) else cool).append(node)
                        if len(cool) >= N - len(chosen):
                            break
                    if len(cool) >= N - len(chosen):
                        break
                take = (cool + warm)[: N - len(chosen)]
                chosen.extend(take)
                if len(chosen) >= N:
                    break
            if len(chosen) < N:
                return
            picks = []
            for node in chosen:
                mask = self._pick_in_node(node, k, False)
                if mask is None:
                    return
                picks.append((node, mask))
            yield picks
            return
        # Free shape: the most-free nodes of the domain first (fewest nodes), bigger groups first on
        # ties (fewest groups), nodes on hot or erroring links last; then split evenly (balanced) or
        # fill whole nodes and put the remainder on the tightest node that takes it (packed).
        n = ctx.n
        pool_nodes: list[NodeSlot] = []
        spare: list[NodeSlot] = []
        warm: list[NodeSlot] = []
        total = 0
        for j in range(G, 0, -1):
            for g in groups:
                for node in part.gbuckets[g][j]:
                    if not node.reachable or (ctx.host and not node.host_fits(ctx.hcpu, ctx.hmem)):
                        continue
                    if node.hot or node.err:
                        warm.append(node)
                    elif total < n:
                        pool_nodes.append(node)
                        total += j
                    elif len(spare) < 16:
                        spare.append(node)
            if total >= n and len(spare) >= 16:
                break
        if total < n:
            for node in warm:
                pool_nodes.append(node)
                total += node.n_free
                if total >= n:
                    break
        if total < n:
            return
        # Balanced.
        alloc = _balanced(n, [node.n_free for node in pool_nodes])
        picks = []
        for node, t in zip(pool_nodes, alloc, strict=True):
            if t:
                mask = self._pick_in_node(node, t, False)
                if mask is None:
                    return
                picks.append((node, mask))
        yield picks
        # Packed: whole nodes, remainder best fit.
        full = [node for node in pool_nodes if node.n_free == G]
        q, r = divmod(n, G)
        if r and len(full) >= q and q >= 1:
            used = set(full[:q])
            rem_node = None
            for node in sorted((x for x in pool_nodes + spare if x not in used), key=lambda x: x.n_free):
                if node.n_free >= r and not (node.hot or node.err):
                    rem_node = node
                    break
            if rem_node is not None:
                picks2 = [(node, node.free_mask) for node in full[:q]]
                mask = self._pick_in_node(rem_node, r, False)
                if mask is not None:
                    picks2.append((rem_node, mask))
                    yield picks2

    # -- evaluation

    def _eval(self, ctx: JobCtx, part: Partition, picks: list[tuple[NodeSlot, int]]) -> Candidate:
        self.evaluations += 1
        st, P = self.state, self.params
        n = ctx.n
        nn = len(picks)
        flagged = False
        if nn == 1:
            node0, mask0 = picks[0]
            level = LEVEL_ISLAND if node0.island_count(mask0) == 1 else LEVEL_NODE
            groups = (node0.group,)
        else:
            g0 = picks[0][0].group
            level = LEVEL_LEAF_GROUP
            groups_set = {node.group for node, _ in picks}
            for g in groups_set:
                if g != g0:
                    lv = st.group_level(g0, g)
                    if lv > level:
                        level = lv
            groups = tuple(groups_set)
        util = 0.0
        bw = INF
        io = 0.0
        broken_isl = broken_nodes = 0
        leftover = 0.0
        per_group: dict[int, int] = {}
        if nn > 1:
            load = self.ring_load()
            own = self.own_ring
            uplinks = self._uplinks(picks, groups, level, load, own) if level >= LEVEL_POD_GROUP else []
            rails = st.topo.host_rails
        for node, mask in picks:
            k = mask.bit_count()
            for g in node.gpus:
                if g.bit & mask and g.util > util:
                    util = g.util
            if k > 1:
                one = node.island_count(mask) == 1
                b = intra_node_gbs(k, one, node.gpus[(mask & -mask).bit_length() - 1].nvlink, P)
                if b < bw:
                    bw = b
            if nn > 1:
                reach = hca_reach(k, node.G, rails.get(node.name, 1))
                b = network_gbs(node.nominal_gbs, node.net_gbs, reach, load.on_node(node.name, own), uplinks, P)
                if b < bw:
                    bw = b
                if node.hot or node.err:
                    flagged = True
            if ctx.D > 0:
                t = self._io_time(ctx, node, k)
                if t > io:
                    io = t
            before = node.free_mask
            after = before & ~mask
            if after:
                if before == node.all_mask:
                    broken_nodes += 1
                for im in node.islands:
                    if im & mask and (before & im) == im and after & im:
                        broken_isl += 1
            leftover += after.bit_count() / node.G
            per_group[node.group] = per_group.get(node.group, 0) + k
        broken_leaves = 0
        for g, used in per_group.items():
            free = part.gfree.get(g, 0)
            if free == part.gcap.get(g, -1) and free - used > 0:
                broken_leaves += 1
        if level >= LEVEL_POD_GROUP:
            for g in groups:
                if st.group_hot.get(g):
                    flagged = True
        comm = ring_allreduce_s(n, ctx.S, bw) + ring_latency_s(n, level, P) if n > 1 else 0.0
        comp = compute_s(ctx.C, part.strength, util, ctx.interference, P)
        step = comp + comm + io
        slowdown = step / ctx.ideal
        min_nodes = math.ceil(n / part.G)
        frag = fragmentation(broken_isl, broken_nodes, broken_leaves, leftover / nn, nn - min_nodes, P)
        return Candidate(slowdown + frag, slowdown, part, picks, None, level, comm, comp, io, bw, frag, flagged)

    # -- the rings the network term shares links with

    own_ring: int | None = None  # a running job priced where it is or moving: its own ring is not another's

    def ring_load(self) -> RingLoad:
        """Multi-node rings on each node's HCAs and on each leaf's (pod's) uplinks: the running jobs that are
        not stopping, and the jobs placed this round (built on first use)."""
        load = getattr(self, "_ring_load", None)
        if load is None:
            load = self._ring_load = RingLoad(self.state)
        return load

    def _uplinks(self, picks, groups, level: int, load: RingLoad, own: int | None) -> list:
        """(capacity, available, other rings, ECMP loss) of the leaf (and pod) uplinks a crossing ring uses."""
        st, P = self.state, self.params
        topo = st.topo
        out = []
        for g in groups:
            if g < 0:
                continue  # a node outside the known fabric: nothing known to share
            info = topo.groups[g]
            cap = info.uplink_gbps / 8.0
            if cap > 0:
                avail = min(cap, info.host_gbps / st.oeff(g) / 8.0)
                out.append((cap, avail, load.on_group(g, own), P.spine_factor))
        if level >= LEVEL_FABRIC:
            for pod in sorted({node.pod for node, _ in picks}):
                if pod < 0:
                    continue
                pinfo = topo.pods[pod]
                cap = pinfo.up_gbps / 8.0
                if cap > 0:
                    avail = min(cap, pinfo.down_gbps / st.pod_oeff.get(pod, 1.0) / 8.0)
                    out.append((cap, avail, load.on_pod(pod, own), P.core_factor))
        return out

    def saturated_slowdown(self, ctx: JobCtx, cand: Candidate) -> float:
        """The candidate's slowdown once its leaves' hosts all communicate across leaves: each leaf's (pod's)
        uplinks then give a ring only their per-host share (capacity / hosts, the oversubscription), less
        the ECMP loss. What a ring that crosses a busy leaf should expect over its run (`cand` itself is
        priced with the rings there now)."""
        if cand.shares is not None or len(cand.picks) < 2 or cand.level < LEVEL_POD_GROUP:
            return cand.slowdown
        st, P = self.state, self.params
        topo = st.topo
        b = cand.bw
        for g in {node.group for node, _ in cand.picks}:
            if g < 0:
                continue
            info = topo.groups[g]
            hosts = max(1, len(info.hosts))
            if info.uplink_gbps > 0:
                b = min(b, info.uplink_gbps / 8.0 / hosts * P.spine_factor * P.net_efficiency)
        if b >= cand.bw:
            return cand.slowdown
        comm = ring_allreduce_s(ctx.n, ctx.S, b) + ring_latency_s(ctx.n, cand.level, P)
        return (cand.comp + comm + cand.io) / ctx.ideal

    def _io_time(self, ctx: JobCtx, node: NodeSlot, k: int) -> float:
        st, P = self.state, self.params
        if node.name == ctx.ds_name:
            return 0.0
        share = node.net_gbs * min(1.0, k / node.G) if node.G else node.net_gbs
        b = min(share, ctx.ds_net) * P.net_efficiency
        dg = ctx.ds_group
        lv = st.group_level(node.group, dg) if dg is not None else LEVEL_FABRIC
        if lv >= LEVEL_POD_GROUP:
            b /= max(st.oeff(node.group), st.oeff(dg) if dg is not None else 1.0)
            if lv >= LEVEL_FABRIC:
                ds_pod = st.topo.groups[dg].pod if dg is not None else -1
                b = b / max(st.pod_oeff.get(node.pod, 1.0), st.pod_oeff.get(ds_pod, 1.0)) * P.core_factor
            else:
                b *= P.spine_factor
        return io_s(ctx.D * k / ctx.n, b)

    # ------------------------------------------------------------------ shared GPUs

    def _find_shared(self, ctx: JobCtx) -> Candidate | None:
        best: Candidate | None = None
        if ctx.sharing == "mps":
            frag = self._frag_for(ctx.parts[0].pool)
            if frag:
                return self._find_mps_frag(ctx, frag)
        for part in ctx.parts:
            cand = self._shared_multi(ctx, part) if ctx.n > 1 else self._shared_single(ctx, part)
            best = self._better(best, cand)
        return best

    # -- MPS against the request mix (FGD)

    def _find_mps_frag(self, ctx: JobCtx, frag: MpsFragmentation) -> Candidate | None:
        """The MPS placement whose node's fragmentation grows least (see `fragmentation`), plus its
        modelled slowdown; equal scores to the node whose hostname sorts first, then the lowest GPU."""
        best: tuple | None = None  # (score, node rank, gpu pos), Candidate
        for part in ctx.parts:
            found = self._mps_frag_single(ctx, part, frag) if ctx.n == 1 else self._mps_frag_multi(ctx, part, frag)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        return None if best is None else best[1]

    def _frag_cost(self, frag: MpsFragmentation, delta: int) -> float:
        # numerator -> GPUs: / (weight x 100 %); the same expression as the inline loop's, so equal changes tie
        return self.params.w_fragmentation / (frag.denominator * 100.0) * delta

    def _mps_frag_host(self, ctx: JobCtx, part: Partition, frag: MpsFragmentation):
        """One MPS share when the mix's classes ask for host CPU: a placement changes which classes the
        node's CPU still admits, so the change depends on the whole node (`node_num`, exact). Nodes in the
        same state (CPU left, each GPU's room and load) are one candidate: the one whose hostname sorts
        first; inside a node, GPUs in the same state are one: the lowest position."""
        P = self.params
        floor = P.min_available
        inter = ctx.interference
        base = ctx.C / max(part.strength, 1e-6) / ctx.ideal
        pct, mem, hcpu, hmem = ctx.mps_pct, ctx.mps_mem, ctx.hcpu, ctx.hmem
        model = part.model.upper()
        rank = self._rank
        reps: dict[tuple, NodeSlot] = {}
        for sig, members in self._state_index(part).items():
            if sig[0] >= hcpu and sig[1] >= hmem:
                reps[sig] = min(members, key=rank.__getitem__) if len(members) > 1 else next(iter(members))
        best_key: tuple | None = None
        best_g: GpuSlot | None = None
        best_frag = 0.0
        evals = 0
        untracked = HOST_UNTRACKED
        w_host = P.w_host_leftover
        cands = self._cands
        for sig, node in reps.items():
            cpu, hm, states = sig
            ck = (sig, pct, mem)
            got = cands.get(ck)
            if got is None:
                before: list[tuple[int, int]] = []
                idxs: list[int] = []
                where: list[tuple[int, float]] = []  # (position, utilisation) of each candidate GPU
                seen: set[tuple] = set()
                for pos, st_ in enumerate(states):
                    if st_ is None:
                        continue
                    L, M, util = st_
                    if L >= pct and M >= mem and st_ not in seen:
                        seen.add(st_)
                        idxs.append(len(before))
                        where.append((pos, util))
                    before.append((L, M))
                got = cands[ck] = (before, idxs, where)
            before, idxs, where = got
            if not idxs:
                continue
            cpu_b = None if cpu >= untracked else cpu
            hm_b = None if hm >= untracked else hm
            host_a = (None if cpu_b is None else cpu_b - hcpu, None if hm_b is None else hm_b - hmem)
            deltas = frag.delta_node(model, before, (cpu_b, hm_b), host_a, pct, mem, idxs)
            r = rank[node]
            pack = 0.0
            if w_host and (cpu_b is not None or hm_b is not None):
                left = []
                if cpu_b is not None:
                    left.append((cpu_b - hcpu) / node.cpu_cap)
                if hm_b is not None:
                    left.append((hm_b - hmem) / node.mem_cap)
                pack = w_host * sum(left) / len(left)
            for (pos, util), d in zip(where, deltas, strict=True):
                fr = self._frag_cost(frag, d) + pack
                free = 1.0 - util * inter
                key = (base / (free if free > floor else floor) + fr, r, pos)
                evals += 1
                if best_key is None or key < best_key:
                    best_key, best_g, best_frag = key, node.gpus[pos], fr
        self.evaluations += evals
        return self._frag_winner(ctx, part, best_key, best_g, best_frag)

    def _frag_winner(self, ctx: JobCtx, part: Partition, key: tuple | None, g: GpuSlot | None, frag: float):
        """The chosen GPU's share as a candidate scored slowdown + fragmentation, with its sort key."""
        if g is None or key is None:
            return None
        sh = self._share_for(ctx, part, g)
        if sh is None:  # pragma: no cover - the search only considers GPUs the share fits
            return None
        cand = self._eval_shared(ctx, part, [(g, sh)])
        cand.score, cand.frag = cand.slowdown + frag, frag
        return (cand.score, key[1], key[2]), cand

    def _state_index(self, part: Partition) -> dict[tuple, dict[NodeSlot, None]]:
        """The partition's eligible nodes grouped by state (CPU and memory left, each GPU's MPS room and load),
        kept up to date from the nodes the state reports changed (`ClusterState.sig_dirty`)."""
        st = self.state
        if st.sig_dirty is None:
            st.sig_dirty = []
        index = self._states
        if st.sig_dirty:
            for node in st.sig_dirty:
                old = self._state_of.get(node)
                if old is None:
                    continue
                groups = index[node.part]
                members = groups[old]
                del members[node]
                if not members:
                    del groups[old]
                new = self._state_of[node] = _node_state(node)
                groups.setdefault(new, {})[node] = None
            st.sig_dirty.clear()
        groups = index.get(part)
        if groups is None:
            groups = index[part] = {}
            for node in part.nodes:
                if node.eligible:
                    sig = self._state_of[node] = _node_state(node)
                    groups.setdefault(sig, {})[node] = None
        return groups

    def _mps_frag_single(self, ctx: JobCtx, part: Partition, frag: MpsFragmentation):
        if frag.cpu_aware:
            return self._mps_frag_host(ctx, part, frag)
        P = self.params
        floor = P.min_available
        inter = ctx.interference
        base = ctx.C / max(part.strength, 1e-6) / ctx.ideal
        pct, mem = ctx.mps_pct, ctx.mps_mem
        model = part.model.upper()
        rank = self._rank
        partial = bool(frag.multi_partial)
        host, hcpu, hmem = ctx.host, ctx.hcpu, ctx.hmem
        best_key: tuple | None = None
        best_g: GpuSlot | None = None
        best_frag = 0.0
        evals = 0

        def others_of(g: GpuSlot) -> list[tuple[int, int]]:
            return [_mps_free(o) for o in g.node.gpus if o is not g and _mps_usable(o)]

        def consider(g: GpuSlot, fr: float | None = None) -> tuple[float, float]:
            nonlocal best_key, best_g, best_frag, evals
            node = g.node
            if fr is None:
                L, M = _mps_free(g)
                d = frag.delta_single(
                    model, pct, mem, L, M, node.n_free, node.G, g.memory_mib, others_of(g) if partial else None
                )
                fr = self._frag_cost(frag, d)
            free = 1.0 - g.util * inter
            slow = base / (free if free > floor else floor)
            key = (slow + fr, rank[node], g.pos)
            evals += 1
            if best_key is None or key < best_key:
                best_key, best_g, best_frag = key, g, fr
            return key[0], fr

        # GPUs already in use: one per bucket of compute left (within a bucket only memory and, for classes
        # of several partial GPUs, the node can differ; the bucket's oldest member stands for it).
        buckets = part.mps_b
        if partial:
            for r in range(pct, 100):
                for g in buckets[r]:
                    if g.memory_mib - g.mps_mem >= mem and (not host or g.node.host_fits(hcpu, hmem)):
                        consider(g)
                        break
        else:  # the same, inline: the change is the GPU's alone (this loop is most of the term's cost)
            used_delta = frag.delta_used_gpu
            scale = self.params.w_fragmentation / (frag.denominator * 100.0)
            for r in range(pct, 100):
                for g in buckets[r]:
                    left = g.memory_mib - g.mps_mem
                    if left >= mem and (not host or g.node.host_fits(hcpu, hmem)):
                        fr = scale * used_delta(model, pct, mem, r, left)
                        u = g.util
                        free = 1.0 - u * inter if u else 1.0
                        key = ((base / (free if free > floor else floor)) + fr, rank[g.node], g.pos)
                        evals += 1
                        if best_key is None or key < best_key:
                            best_key, best_g, best_frag = key, g, fr
                        break
        # Empty GPUs: the change depends on how many empty GPUs their node has, so one node per count (the
        # bucket's oldest). Where that ties the best score, the bucket's node whose hostname sorts first gets
        # it: equal changes are common (every empty GPU, for a whole-GPU share), and taking them in hostname
        # order fills one node after the other, whatever order earlier holds and releases left the bucket in.
        reps: list[tuple[float, int, float]] = []  # (score, empty GPUs, fragmentation cost)
        if part.mps_b[100]:
            for c in range(1, part.G + 1):
                for node in part.buckets[c]:
                    if host and not node.host_fits(hcpu, hmem):
                        continue
                    g = _first_empty(node, mem)
                    if g is not None:
                        score, fr = consider(g)
                        reps.append((score, c, fr))
                        break
        for score, c, fr in reps:
            if best_key is not None and score == best_key[0]:
                top = best_key[1]
                for node in part.buckets[c]:
                    if rank[node] < top and (not host or node.host_fits(hcpu, hmem)):
                        g = _first_empty(node, mem)
                        if g is not None:
                            consider(g, None if partial else fr)  # same count, same change (save those)
                            top = best_key[1]
        self.evaluations += evals
        return self._frag_winner(ctx, part, best_key, best_g, best_frag)

    def _mps_frag_multi(self, ctx: JobCtx, part: Partition, frag: MpsFragmentation):
        """Several MPS GPUs on one node: whole-GPU shares look at one node per count of empty GPUs (the
        bucket's oldest, then, where it ties the best, the bucket's nodes whose hostnames sort before the
        best's); partial ones at the first `max_candidates` nodes that can take them. Each change is exact."""
        n, pct = ctx.n, ctx.mps_pct
        rank = self._rank
        best: tuple | None = None  # (score, rank, 0), Candidate
        evals = 0

        def consider(node: NodeSlot) -> float | None:
            nonlocal best, evals
            if ctx.host and not node.host_fits(ctx.hcpu, ctx.hmem):
                return None
            fits = [(g, sh) for g in node.gpus if (sh := self._share_for(ctx, part, g)) is not None]
            if len(fits) < n:
                return None
            chosen = self._pick_shared(node, fits, n, ctx.sharing)
            before = [_mps_free(g) for g in node.gpus if _mps_usable(g)]
            taken = {g.id for g, _ in chosen}
            after = [
                (L - pct, M - ctx.mps_mem) if g.id in taken else (L, M)
                for g in node.gpus
                if _mps_usable(g)
                for L, M in (_mps_free(g),)
            ]
            cpu_b = None if node.cpu_free >= HOST_UNTRACKED else node.cpu_free
            hm_b = None if node.mem_free >= HOST_UNTRACKED else node.mem_free
            cpu_a = None if cpu_b is None else cpu_b - ctx.hcpu
            hm_a = None if hm_b is None else hm_b - ctx.hmem
            d = frag.node_num(part.model, after, cpu_a, hm_a) - frag.node_num(part.model, before, cpu_b, hm_b)
            fr = self._frag_cost(frag, d)
            cand = self._eval_shared(ctx, part, chosen)
            cand.score, cand.frag = cand.slowdown + fr, fr
            key = (cand.score, rank[node], 0)
            evals += 1
            if best is None or key < best[0]:
                best = (key, cand)
            return cand.score

        if frag.cpu_aware:  # the node's CPU changes the classes it admits: every node is its own case
            for c in range(n, part.G + 1):
                for node in list(part.buckets[c]) if pct >= 100 else ():
                    consider(node)
            if pct < 100:
                for node in part.nodes:
                    if node.eligible:
                        consider(node)
        elif pct >= 100:
            reps: list[tuple[float, int]] = []
            for c in range(n, part.G + 1):
                for node in part.buckets[c]:
                    if ctx.host and not node.host_fits(ctx.hcpu, ctx.hmem):
                        continue
                    score = consider(node)
                    if score is not None:
                        reps.append((score, c))
                    break
            for score, c in reps:
                if best is not None and score == best[0][0]:
                    for node in part.buckets[c]:
                        if rank[node] < best[0][1]:
                            consider(node)
        else:
            for node in part.nodes:
                if node.eligible and consider(node) is not None and evals >= self.config.max_candidates:
                    break
        return best

    @staticmethod
    def _pick_shared(node: NodeSlot, fits: list[tuple[GpuSlot, Share]], n: int, sharing: str):
        """n of the node's fitting GPUs: inside one island if one holds them, least room left first."""
        for im in node.islands:
            inside = [t for t in fits if t[0].bit & im]
            if len(inside) >= n:
                return sorted(inside, key=lambda t: _room(t[0], sharing))[:n]
        return sorted(fits, key=lambda t: (_island_of(node, t[0]), _room(t[0], sharing)))[:n]

    def _share_for(self, ctx: JobCtx, part: Partition, g: GpuSlot) -> Share | None:
        """The share this job would take on GPU g, or None when it does not fit there now."""
        if not g.healthy or not g.node.eligible or g.excl:
            return None
        s = ctx.sharing
        if s == "mps":
            if g.mig_mask or g.ts_used:
                return None
            if g.mps_pct + ctx.mps_pct > 100 or g.mps_mem + ctx.mps_mem > g.memory_mib:
                return None
            return Share(g.id, "mps", ctx.mps_pct, ctx.mps_mem)
        if s == "mig":
            if g.mps_pct or g.mps_mem or g.ts_used:
                return None
            prof = part.profiles.get(ctx.mig_profile or "")
            if prof is None:
                return None
            start = best_start(part.profiles, g.mig_mask, prof.name)
            if start is None:
                return None
            return Share(g.id, "mig", round(100 * prof.compute_fraction), prof.memory_mib, prof.name, start)
        if s == "timeslice":
            if g.mps_pct or g.mps_mem or g.mig_mask or g.ts_used >= part.replicas:
                return None
            replica = next(r for r in range(part.replicas + len(g.ts_reps) + 1) if r not in g.ts_reps)
            return Share(g.id, "timeslice", round(100 / part.replicas), 0, None, None, replica)
        return None

    def _shared_candidates(self, ctx: JobCtx, part: Partition):
        """GPUs that may take the share, best first: MPS/MIG pack (least room left first), time-slicing
        spreads (fewest replicas used first)."""
        if ctx.host:
            hcpu, hmem = ctx.hcpu, ctx.hmem
            for g in self._shared_candidates_any(ctx, part):
                if g.node.host_fits(hcpu, hmem):
                    yield g
            return
        yield from self._shared_candidates_any(ctx, part)

    def _shared_candidates_any(self, ctx: JobCtx, part: Partition):
        s = ctx.sharing
        if s == "mps":
            for r in range(ctx.mps_pct, 101):
                for g in part.mps_b[r]:
                    if g.memory_mib - g.mps_mem >= ctx.mps_mem:
                        yield g
        elif s == "mig":
            buckets = part.mig_b.get(ctx.mig_profile or "")
            if buckets:
                for b in buckets:
                    yield from b
        elif s == "timeslice":
            for b in part.ts_b:
                yield from b

    def _shared_single(self, ctx: JobCtx, part: Partition) -> Candidate | None:
        # The buckets only hold GPUs the share fits on, best fit first: score the first few on load
        # (the same terms as _eval_shared, inline), then build the winner's share once.
        P = self.params
        floor = P.min_available
        inter = ctx.interference
        w = P.w_leftover
        sharing = ctx.sharing
        base = ctx.C / max(part.strength, 1e-6) / ctx.ideal
        best_g: GpuSlot | None = None
        best_score = INF
        evals = 0
        for g in self._shared_candidates(ctx, part):
            free = 1.0 - g.util * inter
            slow = base / (free if free > floor else floor)
            if sharing == "timeslice":
                frag = w * g.ts_used / part.replicas
            else:
                frag = w * _room(g, sharing)
            evals += 1
            if slow + frag < best_score:
                best_g, best_score = g, slow + frag
            if evals >= 4 or slow <= 1.0 + _EPS:
                break
        self.evaluations += evals
        if best_g is None:
            return None
        sh = self._share_for(ctx, part, best_g)
        if sh is None:  # pragma: no cover - the bucket invariant says it fits
            return None
        return self._eval_shared(ctx, part, [(best_g, sh)])

    def _shared_multi(self, ctx: JobCtx, part: Partition) -> Candidate | None:
        best: Candidate | None = None
        evals = 0
        for node in part.nodes:
            if not node.eligible or (ctx.host and not node.host_fits(ctx.hcpu, ctx.hmem)):
                continue
            fits = [(g, sh) for g in node.gpus if (sh := self._share_for(ctx, part, g)) is not None]
            if len(fits) < ctx.n:
                continue
            # Prefer one island, then GPUs with the least room left (packing).
            by_island = sorted(fits, key=lambda t: (_island_of(node, t[0]), _room(t[0], ctx.sharing)))
            chosen = None
            for im in node.islands:
                inside = [t for t in fits if t[0].bit & im]
                if len(inside) >= ctx.n:
                    chosen = sorted(inside, key=lambda t: _room(t[0], ctx.sharing))[: ctx.n]
                    break
            if chosen is None:
                chosen = by_island[: ctx.n]
            best = self._better(best, self._eval_shared(ctx, part, chosen))
            evals += 1
            if evals >= self.config.max_candidates:
                break
        return best

    def _eval_shared(self, ctx: JobCtx, part: Partition, chosen: list[tuple[GpuSlot, Share]]) -> Candidate:
        self.evaluations += 1
        P = self.params
        util = max(g.util for g, _ in chosen)
        # Time-slicing shares the GPU's time with the other contexts (interference 1); MPS caps compute
        # (0.25); MIG is isolated (0).
        comp = compute_s(ctx.C, part.strength, util, ctx.interference, P)
        n = ctx.n
        comm = 0.0
        bw = INF
        level = LEVEL_ISLAND
        if n > 1:
            node = chosen[0][0].node
            mask = 0
            for g, _ in chosen:
                mask |= g.bit
            one = node.island_count(mask) == 1
            level = LEVEL_ISLAND if one else LEVEL_NODE
            bw = intra_node_gbs(n, one, chosen[0][0].nvlink, P)
            comm = ring_allreduce_s(n, ctx.S, bw) + ring_latency_s(n, level, P)
        step = comp + comm
        slowdown = step / ctx.ideal
        room = sum(_room(g, ctx.sharing) for g, _ in chosen) / len(chosen)
        frag = P.w_leftover * room
        if ctx.sharing == "timeslice":
            frag = P.w_leftover * sum(g.ts_used for g, _ in chosen) / (len(chosen) * part.replicas)
        return Candidate(slowdown + frag, slowdown, part, [], chosen, level, comm, comp, 0.0, bw, frag, False)

    # ------------------------------------------------------------------ commit / explain

    def commit(self, job: JobRequest, ctx: JobCtx, cand: Candidate, borrowed: bool = False) -> Placement:
        st = self.state
        shares: list[Share] = []
        held: list[tuple[GpuSlot, Share]] = []
        nodes: list[str] = []
        if cand.shares is not None:
            for g, sh in cand.shares:
                held.append((g, sh))
                if g.node.name not in nodes:
                    nodes.append(g.node.name)
        else:
            for node, mask in cand.picks:
                nodes.append(node.name)
                for g in node.gpus:
                    if g.bit & mask:
                        held.append((g, Share(g.id, "whole", 100, g.memory_mib)))
        if ctx.host:
            on: set[str] = set()
            for i, (g, sh) in enumerate(held):
                if g.node.name not in on:
                    on.add(g.node.name)
                    held[i] = (g, replace(sh, host_cpu_milli=ctx.hcpu, host_memory_mib=ctx.hmem))
        for g, sh in held:
            st.hold(g, sh)
            shares.append(sh)
        if cand.shares is None and len(cand.picks) > 1:
            self.ring_load().add(job.id, [node for node, _ in cand.picks])
        return Placement(
            job_id=job.id,
            shares=tuple(shares),
            nodes=tuple(nodes),
            score=cand.score,
            cost=self.cost_dict(ctx, cand),
            explanation=self.explain(ctx, cand),
            borrowed=borrowed,
            level=LEVEL_NAMES[min(cand.level, LEVEL_FABRIC)],
        )

    def cost_dict(self, ctx: JobCtx, cand: Candidate) -> dict[str, Any]:
        """The cost model's terms for this placement (seconds per step, GB/s, unitless)."""
        return {
            "comm_s": cand.comm,
            "compute_s": cand.comp,
            "io_s": cand.io,
            "step_s": cand.comm + cand.comp + cand.io,
            "ideal_step_s": ctx.ideal,
            "slowdown": cand.slowdown,
            "fragmentation": cand.frag,
            "bandwidth_gbs": None if cand.bw == INF else cand.bw,
            "level": LEVEL_NAMES[min(cand.level, LEVEL_FABRIC)],
        }

    def explain(self, ctx: JobCtx, cand: Candidate) -> str:
        st = self.state
        n = ctx.n
        bw = "" if cand.bw == INF else f"{cand.bw:.0f} GB/s"
        if cand.shares is not None:
            g0 = cand.shares[0][0]
            sh = cand.shares[0][1]
            what = {
                "mps": f"MPS {sh.compute_pct}% / {sh.memory_mib} MiB",
                "mig": f"MIG {sh.mig_profile} at slice {sh.mig_start}",
                "timeslice": f"time-slice replica {sh.replica}",
            }[ctx.sharing]
            where = f"GPU {g0.index} on {g0.node.name}" if n == 1 else f"{n} GPUs on {g0.node.name}"
            text = f"{what} on {where}"
        elif len(cand.picks) == 1:
            node, mask = cand.picks[0]
            if cand.level == LEVEL_ISLAND:
                text = f"{reasons.gpus(n)} in one NVLink island on {node.name}"
                if n > 1:
                    text += f" (all-reduce {bw})"
            else:
                text = f"{reasons.gpus(n)} on {node.name} across {node.island_count(mask)} islands (PCIe {bw})"
        else:
            split = "+".join(str(mask.bit_count()) for _, mask in cand.picks)
            groups = sorted({node.group for node, _ in cand.picks})
            if cand.level == LEVEL_LEAF_GROUP:
                where = f"in {st.group_label(groups[0])}" if len(groups) == 1 else "under shared leaves"
            elif cand.level == LEVEL_POD_GROUP:
                pod = st.topo.groups[groups[0]].pod if groups[0] >= 0 else -1
                where = f"across {len(groups)} leaves of pod {pod + 1} (through the spine)"
            else:
                where = f"across {len(groups)} leaves through the core"
            text = f"{reasons.gpus(n)} on {len(cand.picks)} nodes {where} ({split}, bottleneck {bw})"
        text += f"; step {cand.slowdown:.2f}x ideal"
        if ctx.D > 0 and ctx.ds_name:
            text += f"; dataset on {ctx.ds_name} (io {cand.io * 1000:.0f} ms/step)"
        if cand.flagged:
            text += "; best available despite hot or erroring links"
        return text

    # ------------------------------------------------------------------ failure reasons

    def fail_reason(self, ctx: JobCtx) -> str:
        st = self.state
        pool = ctx.pool_name
        parts = ctx.parts
        n = ctx.n
        if ctx.host:
            room = self._gpu_room_nodes(ctx)
            if room and not any(nd.host_fits(ctx.hcpu, ctx.hmem) for nd in room):
                return reasons.host_block(ctx.hcpu, ctx.hmem, pool, len(room))
        if ctx.sharing == "mps":
            return (
                reasons.mps_full(ctx.mps_pct, ctx.mps_mem, pool) if n == 1 else reasons.shared_node_full(n, "MPS", pool)
            )
        if ctx.sharing == "mig":
            if n == 1:
                return reasons.mig_full(ctx.mig_profile or "", pool)
            return reasons.shared_node_full(n, "MIG", pool)
        if ctx.sharing == "timeslice":
            if n == 1:
                return reasons.timeslice_full(max(p.replicas for p in parts), pool)
            return reasons.shared_node_full(n, "time-slice", pool)
        free = sum(p.free_total for p in parts)
        if ctx.require == "island":
            largest, where = 0, ""
            for p in parts:
                for j in range(p.G, 0, -1):
                    for node in p.buckets[j]:
                        c = max((node.free_mask & im).bit_count() for im in node.islands)
                        if c > largest:
                            largest, where = c, node.name
                    if largest >= j:
                        break
            return reasons.island_block(n, largest, where)
        if ctx.N == 1 or ctx.require == "node":
            largest, where = 0, ""
            for p in parts:
                for j in range(p.G, 0, -1):
                    if p.buckets[j]:
                        if j > largest:
                            largest, where = j, next(iter(p.buckets[j])).name
                        break
            return reasons.node_block(ctx.k or n, largest, where)
        if ctx.require in ("leaf", "pod"):
            best, where = 0, ""
            k = ctx.k or 0
            for p in parts:
                per_domain: dict[int, int] = {}
                for g in p.gbuckets:
                    if g < 0:
                        continue
                    if k:
                        c = sum(len(p.gbuckets[g][j]) for j in range(k, p.G + 1)) * k
                    else:
                        c = p.gfree[g]
                    dom = g if ctx.require == "leaf" else st.topo.groups[g].pod
                    per_domain[dom] = per_domain.get(dom, 0) + c
                for dom, c in per_domain.items():
                    if c > best:
                        best = c
                        where = st.group_label(dom) if ctx.require == "leaf" else f"pod {dom + 1}"
            if ctx.require == "leaf":
                return reasons.leaf_block(n, best, where)
            return reasons.pod_block(n, best, where)
        if ctx.N is not None and ctx.k is not None:
            have = 0
            for p in parts:
                have += sum(len(p.buckets[j]) for j in range(ctx.k, p.G + 1))
            return reasons.shape_block(ctx.N, ctx.k, have, pool)
        if free >= n:
            return reasons.unreachable_nodes(n, pool)
        return reasons.total_free(n, free, pool)

    def _gpu_room_nodes(self, ctx: JobCtx) -> list[NodeSlot]:
        """Nodes with room for the job's GPUs on one node (its per-node part), host resources aside."""
        per = ctx.k or (ctx.n if ctx.single else 1)
        out = []
        for part in ctx.parts:
            for node in part.nodes:
                if not node.eligible:
                    continue
                if ctx.sharing == "exclusive":
                    if node.n_free >= per:
                        out.append(node)
                elif sum(1 for g in node.gpus if self._share_for(ctx, part, g) is not None) >= per:
                    out.append(node)
        return out


class RingLoad:
    """How many multi-node rings use each node's HCAs, and each leaf group's (pod's) uplinks: a ring crosses
    a leaf's uplinks once when it spans leaves through a spine (the launcher orders ranks leaf by leaf), and
    a pod's when it spans pods through the core."""

    def __init__(self, st: ClusterState) -> None:
        self.st = st
        self.nodes: dict[str, int] = {}
        self.groups: dict[int, int] = {}
        self.pods: dict[int, int] = {}
        self.of_job: dict[int, tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]] = {}
        # Each running job's ring, kept with the state while its held GPUs are (ClusterState.rings; None: one node):
        # worked out again only for jobs whose GPUs changed. The counts are sums, the same in any order.
        kept = st.per_job("rings")
        stopping = st.stopping
        for jid, held in st.job_gpus.items():
            if jid in stopping:
                continue  # checkpointing, then gone
            ring = kept.get(jid)
            if ring is None or ring[0] is not held:
                nodes = {g.node.name: g.node for g, _ in held}
                ring = kept[jid] = (held, self._ring([nodes[h] for h in sorted(nodes)]) if len(nodes) > 1 else None)
            if ring[1] is not None:
                self._count(jid, ring[1])

    def add(self, jid: int, nodes: list[NodeSlot]) -> None:
        self._count(jid, self._ring(nodes))

    def _ring(self, nodes: list[NodeSlot]) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
        """The nodes, leaves (crossed through a spine) and pods (crossed through the core) a ring over `nodes` uses."""
        st = self.st
        names = tuple(sorted({n.name for n in nodes}))
        gs = sorted({n.group for n in nodes})
        level = LEVEL_LEAF_GROUP
        for a in gs:
            for b in gs:
                if a < b:
                    level = max(level, st.group_level(a, b))
        groups = tuple(g for g in gs if g >= 0) if level >= LEVEL_POD_GROUP else ()
        pods = tuple(sorted({n.pod for n in nodes if n.pod >= 0})) if level >= LEVEL_FABRIC else ()
        return names, groups, pods

    def _count(self, jid: int, ring: tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]) -> None:
        names, groups, pods = self.of_job[jid] = ring
        for h in names:
            self.nodes[h] = self.nodes.get(h, 0) + 1
        for g in groups:
            self.groups[g] = self.groups.get(g, 0) + 1
        for p in pods:
            self.pods[p] = self.pods.get(p, 0) + 1

    def on_node(self, name: str, own: int | None = None) -> int:
        c = self.nodes.get(name, 0)
        return c - 1 if own is not None and own in self.of_job and name in self.of_job[own][0] else c

    def on_group(self, gid: int, own: int | None = None) -> int:
        c = self.groups.get(gid, 0)
        return c - 1 if own is not None and own in self.of_job and gid in self.of_job[own][1] else c

    def on_pod(self, pid: int, own: int | None = None) -> int:
        c = self.pods.get(pid, 0)
        return c - 1 if own is not None and own in self.of_job and pid in self.of_job[own][2] else c


def _lowest_util(node: NodeSlot, avail: int, n: int) -> int:
    """n GPUs out of `avail`, least loaded first (then lowest index)."""
    gs = [g for g in node.gpus if g.bit & avail]
    if len(gs) > n:
        gs.sort(key=lambda g: (g.util, g.pos))
        gs = gs[:n]
    mask = 0
    for g in gs:
        mask |= g.bit
    return mask


def _balanced(n: int, frees: list[int]) -> list[int]:
    """Split n over nodes with `frees` GPUs free as evenly as their room allows (water filling)."""
    order = sorted(range(len(frees)), key=lambda i: frees[i])
    alloc = [0] * len(frees)
    remaining = n
    left = len(frees)
    for i in order:
        t = min(frees[i], -(-remaining // left))
        alloc[i] = t
        remaining -= t
        left -= 1
    return alloc


def _island_of(node: NodeSlot, g: GpuSlot) -> int:
    for i, im in enumerate(node.islands):
        if im & g.bit:
            return i
    return 0


def _node_state(node: NodeSlot) -> tuple:
    """(CPU left, memory left, per GPU (MPS % left, MiB left, utilisation) or None when it takes no MPS),
    cached on the node until a hold or release changes it."""
    sig = node.frag_sig
    if sig is None:
        sig = node.frag_sig = (
            node.cpu_free,
            node.mem_free,
            tuple((100 - g.mps_pct, g.memory_mib - g.mps_mem, g.util) if _mps_usable(g) else None for g in node.gpus),
        )
    return sig


def _mps_usable(g: GpuSlot) -> bool:
    """The GPU can take MPS shares at all (what the fragmentation measure counts)."""
    return g.healthy and g.node.eligible and not (g.excl or g.mig_mask or g.ts_used)


def _mps_free(g: GpuSlot) -> tuple[int, int]:
    """(compute %, memory MiB) an MPS GPU has left."""
    return 100 - g.mps_pct, g.memory_mib - g.mps_mem


def _first_empty(node: NodeSlot, mem: int) -> GpuSlot | None:
    """The node's empty GPU with the memory for the share, least loaded first, then lowest position."""
    best: GpuSlot | None = None
    for g in node.gpus:
        if g.bit & node.free_mask and g.memory_mib >= mem and (best is None or g.util < best.util):
            best = g
    return best


def _room(g: GpuSlot, sharing: str) -> float:
    """How much of the GPU is left after current holders (0..1): packing prefers small."""
    if sharing == "mps":
        return (100 - g.mps_pct) / 100.0
    if sharing == "mig":
        return 1.0 - (g.mig_mask & 0xFF).bit_count() / 8.0
    return 0.0
