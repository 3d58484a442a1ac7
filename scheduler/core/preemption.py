"""Preemption: the smallest set of running jobs whose GPUs, once freed, give a blocked job a placement
that fits the topology. PURE.

Who may be a victim (decided by the engine, `eligible`): a preemptible running job, not already
stopping, that either has a lower priority than the blocked job, or is borrowing capacity in the pool
while the blocked job is within its tenant's guaranteed quota (reclaim). A borrowing job may only
preempt lower-priority jobs that are themselves borrowing, or its own tenant's.

Search by domain, the way the job would be placed:
* a job that fits one node: per node, the fewest victims (largest first, then lowest priority) that
  leave enough GPUs free there; nodes are ranked by (victims, GPUs they hold in all, highest victim
  priority), so a whole island or node is freed rather than GPUs scattered over the cluster;
* a gang of N nodes x k GPUs: per leaf group the N cheapest nodes (victims shared by two nodes count
  once); groups ranked the same way; only when no leaf can be cleared (and the job does not require
  one) the N cheapest nodes anywhere;
* shared GPUs (MPS, MIG, time-slice): per GPU, the fewest shares to remove until the job's share fits.
Each plan is checked by placing the job on the state with the victims' GPUs released (then undone):
a job that still would not fit preempts nobody, and victims the final placement does not touch are
dropped from the set.

`avoid`: GPUs the blocked job may not take even once freed (the planned GPUs of a backfill reservation it
must not delay, docs/scheduler.md "No thrashing"). A victim's GPUs there count for nothing, and the check
places the job with them blocked, so a preemption never frees GPUs its beneficiary then cannot use.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import attrgetter

from scheduler.core.placement import Candidate, JobCtx, Placer
from scheduler.core.state import ClusterState, GpuSlot, NodeSlot
from scheduler.core.types import Share

MAX_PLANS = 4  # plans verified by a placement try, cheapest first
_SEQ = attrgetter("seq")  # a node's place in the snapshot's order


VictimIndex = dict[int, dict[NodeSlot, dict[int, int]]]  # id(partition) -> node -> job -> GPUs held there


def victim_index(st: ClusterState) -> VictimIndex:
    """Preemptible running jobs per partition and node (built once a round, filtered per attempt)."""
    index: VictimIndex = {}
    for jid, held in st.job_gpus.items():
        if st.running[jid].request.preemptible:
            _add_counts(index, jid, _per_node(held))
    return index


def _per_node(held: list[tuple[GpuSlot, Share]]) -> tuple[tuple[int, NodeSlot, int], ...]:
    """The job's GPUs on each eligible node of a partition: (id(partition), node, GPUs), nodes in the order of its
    GPUs."""
    out: dict[NodeSlot, int] = {}
    for g, _ in held:
        node = g.node
        if node.part is not None and node.eligible:
            out[node] = out.get(node, 0) + 1
    return tuple((id(node.part), node, n) for node, n in out.items())


def _add_counts(index: VictimIndex, jid: int, counts: tuple[tuple[int, NodeSlot, int], ...]) -> None:
    """Add the job's GPUs per node (`_per_node`) to `index`, per partition and node."""
    for pid, node, n in counts:
        per = index.get(pid)
        if per is None:
            per = index[pid] = {}
        d = per.get(node)
        if d is None:
            per[node] = {jid: n}
        else:
            d[jid] = n


def victims_by_node(
    st: ClusterState,
    ctx: JobCtx,
    eligible: Callable[[int], bool],
    index: VictimIndex,
    avoid: frozenset[int] | set[int] = frozenset(),
) -> dict[NodeSlot, dict[int, int]]:
    """The eligible victims on each node of the job's partitions, with the GPUs each holds there that the job
    may take (not in `avoid`). Depends on the job only through `eligible` and its partitions."""
    stopping = st.stopping
    ok: dict[int, bool] = {}
    by_node: dict[NodeSlot, dict[int, int]] = {}
    avoid_nodes = _avoided_on(st, avoid)
    for part in ctx.parts:
        for node, jobs in index.get(id(part), {}).items():
            d = {}
            for jid, c in jobs.items():
                e = ok.get(jid)
                if e is None:
                    e = ok[jid] = jid not in stopping and eligible(jid)
                if e:
                    if node in avoid_nodes:
                        c = _takeable(st, node, jid, avoid)
                    if c:
                        d[jid] = c
            if d:
                by_node[node] = d
    return by_node


def _avoided_on(st: ClusterState, avoid: frozenset[int] | set[int]) -> set[NodeSlot] | tuple[()]:
    """The nodes with GPUs the job may not take: only there does a victim count fewer GPUs than it holds."""
    return {st.gpus[g].node for g in avoid if g in st.gpus} if avoid else ()


def _takeable(st: ClusterState, node: NodeSlot, jid: int, avoid: frozenset[int] | set[int]) -> int:
    """The victim's GPUs on `node` that the job may take (asked only on a node with avoided GPUs)."""
    return sum(1 for g, _ in st.job_gpus[jid] if g.node is node and g.id not in avoid)


VictimClass = tuple[int, int, bool, str, bool]  # (pool, effective priority, borrowed, tenant, young)
ClassRule = Callable[[int, int, bool, str], "bool | None"]  # pool, priority, borrowed, tenant -> None: ask per job


class VictimClasses:
    """The preemptible running jobs grouped by what decides whether one may give way, but its service level:
    its pool, effective priority, whether it borrows, its tenant, and whether it is still within its minimum
    run time. Per class: per partition, node -> {job: GPUs it holds there}. Built once a round, so that a
    preemption try decides per class (a handful) and walks only the classes that may give way, where
    `victims_by_node` asks every running job of the partitions."""

    def __init__(self, st: ClusterState, info: dict[int, tuple], now: float, min_run_s: float) -> None:
        """`info`: preemptible running job -> (effective priority, borrowed, tenant, pool, last start or move)."""
        self.classes: dict[VictimClass, VictimIndex] = {}
        self.left: dict[int, float] = {}  # young job -> seconds until it has run its minimum
        classes, young = self.classes, self.left
        # Each job's GPUs per node, kept with the state while its GPUs are (ClusterState.held_nodes): counted again
        # only for the jobs that moved; 10,000 GPUs are 10 ms a round to count one by one.
        kept, counts = st.held_nodes, {}
        for jid, held in st.job_gpus.items():
            i = info.get(jid)
            if i is None:
                continue
            c = kept.get(jid)
            if c is None or c[0] is not held:
                c = (held, _per_node(held))
            counts[jid] = c
            left = min_run_s - (now - i[4]) if min_run_s > 0 else 0.0
            if left > 0:
                young[jid] = left
            key = (i[3], i[0], i[1], i[2], left > 0)
            index = classes.get(key)
            if index is None:
                index = classes[key] = {}
            _add_counts(index, jid, c[1])
        st.held_nodes = counts

    def select(
        self,
        st: ClusterState,
        ctx: JobCtx,
        rule: ClassRule,
        job_rule: Callable[[int], bool],
        protected: Callable[[int], bool],
        avoid: frozenset[int] | set[int] = frozenset(),
    ) -> tuple[dict[NodeSlot, dict[int, int]], dict[NodeSlot, dict[int, int]], dict[int, float]]:
        """(victims by node now, as `victims_by_node` gives them for `eligible`; the young ones that may give way
        once they have run their minimum, by node likewise; those young: job -> seconds left). `rule` decides a
        class (None: `job_rule` decides each of its jobs); `protected(priority)`: a young job of that priority
        may not give way yet. `with_young` merges the first two."""
        stopping = st.stopping
        part_ids = [id(p) for p in ctx.parts]
        avoid_nodes = _avoided_on(st, avoid)
        now: dict[NodeSlot, dict[int, int]] = {}
        later: dict[NodeSlot, dict[int, int]] = {}
        young: dict[int, float] = {}
        left = self.left
        for (vpool, vprio, borrowed, vtenant, is_young), parts in self.classes.items():
            r = rule(vpool, vprio, borrowed, vtenant)
            if r is False:
                continue
            waits = is_young and protected(vprio)
            for pid in part_ids:
                for node, jobs in parts.get(pid, {}).items():
                    for jid, c in jobs.items():
                        if jid in stopping or (r is None and not job_rule(jid)):
                            continue
                        if waits:
                            young[jid] = left[jid]
                        if node in avoid_nodes:
                            c = _takeable(st, node, jid, avoid)
                        if c:
                            (later if waits else now).setdefault(node, {})[jid] = c
        return now, later, young

    @staticmethod
    def with_young(
        now: dict[NodeSlot, dict[int, int]], young: dict[NodeSlot, dict[int, int]]
    ) -> dict[NodeSlot, dict[int, int]]:
        """Victims by node counting the young too (a plan reads each node's victims, not their order)."""
        out = {node: dict(d) for node, d in now.items()}
        for node, d in young.items():
            out.setdefault(node, {}).update(d)
        return out


def plan_preemption(
    placer: Placer,
    ctx: JobCtx,
    eligible: Callable[[int], bool] | None,
    index: VictimIndex | None = None,
    avoid: frozenset[int] | set[int] = frozenset(),
    by_node: dict[NodeSlot, dict[int, int]] | None = None,
) -> tuple[list[int], Candidate] | None:
    """`by_node`: `victims_by_node` for these arguments, when the caller has it already (then `eligible` and
    `index` are not read)."""
    st = placer.state
    if by_node is None:
        assert eligible is not None
        by_node = victims_by_node(st, ctx, eligible, index if index is not None else victim_index(st), avoid)
    if not by_node:
        return None
    if ctx.sharing != "exclusive":
        plans = _plans_shared(placer, ctx, by_node, avoid)
    elif ctx.single and (ctx.N == 1 or ctx.require in ("island", "node") or ctx.n <= ctx.max_G):
        plans = _plans_node(st, ctx, by_node)
    else:
        plans = _plans_gang(st, ctx, by_node)
    for victims in plans[:MAX_PLANS]:
        found = _verify(placer, ctx, victims, avoid)
        if found is not None:
            return found
    return None


def block_gpus(st: ClusterState, gpu_ids) -> list[tuple[GpuSlot, Share]]:
    """Make these GPUs unusable for any placement, busy or not (a whole-GPU hold counts up, so a job
    released on one in a what-if still leaves it blocked); `unblock_gpus` undoes it exactly."""
    blocks = []
    gpus = st.gpus
    for gid in gpu_ids:
        g = gpus.get(gid)
        if g is not None:
            sh = Share(gid, "whole", 100, 0)
            st.hold(g, sh)
            blocks.append((g, sh))
    return blocks


def unblock_gpus(st: ClusterState, blocks: list[tuple[GpuSlot, Share]]) -> None:
    for g, sh in blocks:
        st.release(g, sh)


def _victim_key(st: ClusterState, jid: int) -> tuple[int, int]:
    rj = st.running[jid]
    return (rj.request.priority, len(st.job_gpus.get(jid, ())))


def _clear_node(st: ClusterState, node: NodeSlot, victims: dict[int, int], need: int) -> list[int] | None:
    """Fewest victims on `node` that leave `need` GPUs free there: the smallest single job that is
    enough, else the largest holders first (fewest jobs, then fewest GPUs, then lowest priority)."""
    free = node.n_free
    if free >= need:
        return []
    short = need - free
    singles = [j for j, c in victims.items() if c >= short]
    if len(singles) == 1:  # the only one (a key for each is most of this function's time, 630 nodes a try)
        return singles
    if singles:
        return [min(singles, key=lambda j: (victims[j], _victim_key(st, j), j))]
    chosen = []
    for jid in sorted(victims, key=lambda j: (-victims[j], _victim_key(st, j), j)):
        chosen.append(jid)
        free += victims[jid]
        if free >= need:
            return chosen
    return None


def _cost(st: ClusterState, victims: set[int] | list[int]) -> tuple[int, int, int]:
    if len(victims) == 1:  # most plans clear a node with one job
        (j,) = victims
        return (1, len(st.job_gpus.get(j, ())), st.running[j].request.priority)
    return (
        len(victims),
        sum(len(st.job_gpus.get(j, ())) for j in victims),
        max((st.running[j].request.priority for j in victims), default=-1),
    )


def _plans_node(st: ClusterState, ctx: JobCtx, by_node: dict[NodeSlot, dict[int, int]]) -> list[list[int]]:
    need = ctx.k or ctx.n
    plans = []
    for node, victims in by_node.items():
        if node.G < need:
            continue
        vs = _clear_node(st, node, victims, need)
        if vs:
            plans.append((_cost(st, vs), node.name, vs))
    plans.sort(key=lambda t: (t[0], t[1]))
    return [vs for _, _, vs in plans]


def _plans_gang(st: ClusterState, ctx: JobCtx, by_node: dict[NodeSlot, dict[int, int]]) -> list[list[int]]:
    G = ctx.max_G
    if ctx.N is not None and ctx.k is not None:
        N, k = ctx.N, ctx.k
    else:
        N = math.ceil(ctx.n / G)
        k = math.ceil(ctx.n / N)
    # Per node: victims needed to get k free (nodes already free enough cost nothing). Only a node with victims or
    # with k GPUs free already can have k free: the others are left out without a try, in the nodes' order (a walk
    # of every node of the partitions was most of a gang's preemption try at 50,000 GPUs, where few have victims).
    per_group: dict[int, list[tuple[tuple, str, list[int]]]] = {}
    for part in ctx.parts:
        nodes = {node for node in by_node if node.part is part}
        for bucket in part.buckets[k:]:
            nodes.update(bucket)
        for node in sorted(nodes, key=_SEQ):
            if not node.eligible or not node.reachable or node.G < k:
                continue
            vs = _clear_node(st, node, by_node.get(node, {}), k)
            if vs is None:
                continue
            per_group.setdefault(node.group, []).append((_cost(st, vs), node.name, vs))
    plans: list[tuple[tuple, list[int]]] = []

    def pick(entries: list[tuple[tuple, str, list[int]]]) -> list[int] | None:
        if len(entries) < N:
            return None
        entries = sorted(entries, key=lambda t: (t[0], t[1]))
        chosen: set[int] = set()
        for _, _, vs in entries[:N]:
            chosen.update(vs)
        return sorted(chosen)

    for g, entries in per_group.items():
        if g < 0:
            continue
        vs = pick(entries)
        if vs:
            plans.append((_cost(st, vs), vs))
    if not plans and ctx.require not in ("leaf",):
        everything = [e for entries in per_group.values() for e in entries]
        vs = pick(everything)
        if vs:
            plans.append((_cost(st, vs), vs))
    plans.sort(key=lambda t: t[0])
    return [vs for _, vs in plans]


def _plans_shared(
    placer: Placer, ctx: JobCtx, by_node: dict[NodeSlot, dict[int, int]], avoid: frozenset[int] | set[int]
) -> list[list[int]]:
    st = placer.state
    plans = []
    for node in by_node:
        part = node.part
        for g in node.gpus:
            if g.id in avoid:
                continue
            holders = [
                (jid, sh)
                for jid in st.jobs_on_node.get(node.name, ())
                if jid in by_node[node]
                for gg, sh in st.job_gpus[jid]
                if gg is g
            ]
            if not holders:
                continue
            mark = st.journal()
            chosen: list[int] = []
            fits = placer._share_for(ctx, part, g) is not None
            for jid, sh in sorted(holders, key=lambda t: (-t[1].compute_pct, _victim_key(st, t[0]))):
                if fits:
                    break
                st.release(g, sh)
                chosen.append(jid)
                fits = placer._share_for(ctx, part, g) is not None
            st.rollback(mark)
            if fits and chosen:
                plans.append((_cost(st, chosen), g.id, chosen))
    plans.sort(key=lambda t: (t[0], t[1]))
    return [vs for _, _, vs in plans]


def _verify(
    placer: Placer, ctx: JobCtx, victims: list[int], avoid: frozenset[int] | set[int] = frozenset()
) -> tuple[list[int], Candidate] | None:
    st = placer.state
    mark = st.journal()
    for jid in victims:
        st.release_job(jid)
    if avoid:
        block_gpus(st, avoid)
    cand = placer.find(ctx)
    st.rollback(mark)
    if cand is None:
        return None
    used = set()
    if cand.shares is not None:
        used = {g.id for g, _ in cand.shares}
    else:
        for node, mask in cand.picks:
            used.update(g.id for g in node.gpus if g.bit & mask)
    needed = [jid for jid in victims if any(g.id in used for g, _ in st.job_gpus.get(jid, ()))]
    if not needed:
        return None
    return needed, cand
