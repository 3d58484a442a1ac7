"""Migration: move running jobs whose placement went bad when the move pays for itself. PURE.

Triggers, most urgent first (a job is only looked at when one holds):
1. an erroring link on its path (its nodes' HCA links; its leaves' uplinks when it crosses a spine);
2. a hot link on its path (utilisation >= Config.hot_link_utilisation). A job's own traffic is
   discounted: on a node where it holds k of G GPUs, up to k/G of the HCA links' load is its own, so a
   job that owns a whole node never flees its own traffic; the same holds for a leaf's uplinks, in
   proportion to its GPUs in the leaf;
3. an overloaded shared GPU (MPS / time-slice GPU with utilisation >= Config.overloaded_gpu_utilisation);
4. a better domain freed up: the job spans islands, nodes or leaves while its partitions now have room
   for it in fewer.
Unhealthy GPUs and nodes that are down are failures (requeue), not migrations.

For each candidate (at most `Config.migration_scan_limit` per round, jobs not moved or started within
`Config.migration_hold_down_s` nor `Config.preemption_min_run_s`, not stopping) the current placement and
the best new one (always disjoint from the current GPUs, which the job holds until it moves) are priced
with the cost model:

    remaining = (est_runtime_s or Config.default_runtime_s) - (now - started_at)     (at the current pace)
    gain_s    = remaining * (1 - step_new / step_now)
    cost_s    = checkpoint_cost_s + Config.restart_overhead_s
    move when gain_s - cost_s >= Config.migration_min_net_gain_s

The largest net gains move first, at most `Config.max_migrations_per_round`; each later move is
re-planned on the state the earlier ones left. A move lands only on GPUs free now and not held for anyone
(reservations, GPUs freed by a preemption for its beneficiary), and a job preempted for one that still
waits is not moved back onto the GPUs freed for it (`kept_off`).
"""

from __future__ import annotations

from scheduler.core import reasons
from scheduler.core.placement import Candidate, JobCtx, Placer
from scheduler.core.preemption import block_gpus, unblock_gpus
from scheduler.core.state import ClusterState, GpuSlot, NodeSlot
from scheduler.core.topology import LEVEL_NAMES, LEVEL_POD_GROUP
from scheduler.core.types import Migration, RunningJob, Share

_ERR, _HOT, _OVERLOAD, _BETTER = 0, 1, 2, 3


def _masks(held: list[tuple[GpuSlot, Share]]) -> dict[NodeSlot, int]:
    """The job's GPUs per node, as masks, nodes in the order of its GPUs."""
    masks: dict[NodeSlot, int] = {}
    for g, _ in held:
        masks[g.node] = masks.get(g.node, 0) | g.bit
    return masks


def _job_layout(st: ClusterState, jid: int) -> tuple[dict[NodeSlot, int], list[tuple[GpuSlot, Share]]]:
    held = st.job_gpus.get(jid, [])
    return _masks(held), held


def _layout(st: ClusterState, held: list[tuple[GpuSlot, Share]]) -> tuple:
    """What `_trigger` reads of a job's GPUs that changes only with them: (GPUs per node as masks, on several nodes,
    its leaves in order, crossing a spine, its nodes by name with their masks, its partitions)."""
    masks = _masks(held)
    groups = sorted({node.group for node in masks})
    crosses = len(groups) > 1 and any(st.group_level(a, b) >= LEVEL_POD_GROUP for a in groups for b in groups)
    parts = tuple({id(node.part): node.part for node in masks if node.part is not None}.values())
    by_name = sorted(masks.items(), key=lambda t: t[0].name)
    return masks, len(masks) > 1, groups, crosses, by_name, parts


def _trigger(st: ClusterState, rj: RunningJob) -> tuple[int, str] | None:
    jid = rj.request.id
    held = st.job_gpus.get(jid)
    if not held:
        return None
    # Kept with the state while the job's GPUs are the same list (ClusterState.layouts): only the load, the links'
    # state and the free GPUs are read again each round.
    kept = st.layouts.get(jid)
    if kept is None or kept[0] is not held:
        kept = st.layouts[jid] = (held, _layout(st, held))
    masks, multi, groups, crosses, by_name, parts = kept[1]
    cfg = st.config
    data = rj.request.dataset_node is not None and rj.request.workload == "data-intensive"
    if multi or data:
        for node, _ in by_name:
            if node.err:
                return _ERR, f"erroring link on {node.name}'s fabric path"
        for node, mask in by_name:
            if node.hot and mask.bit_count() < node.G:
                return _HOT, f"hot link on {node.name}'s fabric path"
    if crosses or data:
        for g in groups:
            if g >= 0 and st.group_hot.get(g):
                return _HOT, f"hot or erroring uplinks on {st.group_label(g)}"
    if rj.request.sharing in ("mps", "timeslice"):
        for g, _ in held:
            if g.util >= cfg.overloaded_gpu_utilisation:
                return _OVERLOAD, f"GPU {g.index} on {g.node.name} overloaded ({g.util:.0%})"
    n = len(held)
    if rj.request.sharing == "exclusive":
        free = sum(p.free_total for p in parts)
        if free >= n:
            node0 = next(iter(masks))
            island = node0.part.max_island if node0.part else 1
            if not multi and n <= island and node0.island_count(masks[node0]) > 1:
                return _BETTER, f"a whole NVLink island freed up (it spans {node0.island_count(masks[node0])} islands)"
            G = node0.part.G if node0.part else node0.G
            if multi and n <= G:
                return _BETTER, f"a single node freed up (it spans {len(masks)} nodes)"
            if crosses:
                return _BETTER, f"room freed up in one leaf (it spans {len(groups)} leaves)"
    return None


def _may_trigger(st: ClusterState, rj: RunningJob) -> bool:
    """Whether `_trigger` can ever ask to move the job while it holds these GPUs: on several nodes, near its dataset,
    sharing its GPUs by MPS or time slices, or an exclusive job on one node across NVLink islands when it could fit in
    one. What decides it changes only with the job's GPUs (`_layout`) and its request."""
    held = st.job_gpus.get(rj.request.id)
    if not held:
        return False
    req = rj.request
    if req.dataset_node is not None and req.workload == "data-intensive":
        return True
    if req.sharing in ("mps", "timeslice"):
        return True
    kept = st.layouts.get(req.id)
    if kept is None or kept[0] is not held:
        kept = st.layouts[req.id] = (held, _layout(st, held))
    masks, multi = kept[1][0], kept[1][1]
    if multi:
        return True
    if req.sharing != "exclusive":
        return False
    node0 = next(iter(masks))
    island = node0.part.max_island if node0.part else 1
    return len(held) <= island and node0.island_count(masks[node0]) > 1


class MoveWatch:
    """The running jobs `_may_trigger` says a move may be asked for, kept with the cluster index from round to round
    (ClusterState.move_watch) and brought up to date by the jobs that changed (ClusterState.running_changes): most
    running jobs (one node, one island) never trigger a move, and the rebalance pass asks only these."""

    __slots__ = ("epoch", "jobs")

    def __init__(self, st: ClusterState) -> None:
        self.epoch = st.running_epoch
        self.jobs: set[int] = {jid for jid, rj in st.running.items() if _may_trigger(st, rj)}

    @staticmethod
    def of(st: ClusterState) -> set[int]:
        """The watched jobs for the state's running jobs now (some may have been dropped this round since)."""
        watch = st.move_watch
        if watch is not None:
            # A job brought up to date costs what it costs in a build: updated while fewer changed than run (the
            # round after one that started 1,000 jobs, too).
            changes = st.changes_since(watch.epoch, len(st.running), 1)
            if changes is None:
                watch = None
            elif changes:
                jobs, running = watch.jobs, st.running
                for jid in changes:
                    jobs.discard(jid)
                    rj = running.get(jid)
                    if rj is not None and _may_trigger(st, rj):
                        jobs.add(jid)
                watch.epoch = st.running_epoch
        if watch is None:
            watch = st.move_watch = MoveWatch(st)
        return watch.jobs


class _OwnTraffic:
    """Temporarily credit a job's own share of the load back to its GPUs, nodes and leaves (module doc):
    an exclusive GPU's utilisation is the job's own; on a shared GPU its own part is its MPS percentage
    or its time slice."""

    def __init__(self, st: ClusterState, masks: dict[NodeSlot, int], held: list[tuple[GpuSlot, Share]]) -> None:
        self.st = st
        self.saved_gpus = [(g, g.util) for g, _ in held]
        for g, sh in held:
            if sh.kind in ("whole", "mig"):
                g.util = 0.0
            elif sh.kind == "mps":
                g.util = max(0.0, g.util - sh.compute_pct / 100.0)
            elif sh.kind == "timeslice" and g.ts_used > 0:
                g.util = g.util * (g.ts_used - 1) / g.ts_used
        self.saved_nodes = [(node, node.net_gbs) for node in masks]
        self.saved_groups: list[tuple[int, float]] = []
        for node, mask in masks.items():
            if node.G:
                f = mask.bit_count() / node.G
                node.net_gbs = min(node.nominal_gbs, node.net_gbs + f * node.nominal_gbs)
        per_group: dict[int, int] = {}
        for node, mask in masks.items():
            per_group[node.group] = per_group.get(node.group, 0) + mask.bit_count()
        for g, k in per_group.items():
            if g < 0:
                continue
            oeff = st.group_oeff.get(g, 1.0)
            info = st.topo.groups[g]
            if oeff <= 1.0 or info.uplink_gbps <= 0 or info.host_gbps <= 0:
                continue
            cap = sum(p.gcap.get(g, 0) for p in {id(n.part): n.part for n in masks if n.part}.values()) or 1
            f = min(1.0, k / cap)
            avail = info.host_gbps / oeff
            others = min(info.uplink_gbps, avail + f * info.uplink_gbps)
            self.saved_groups.append((g, oeff))
            st.group_oeff[g] = max(1.0, info.host_gbps / others) if others > 0 else oeff

    def restore(self) -> None:
        for g, u in self.saved_gpus:
            g.util = u
        for node, v in self.saved_nodes:
            node.net_gbs = v
        for g, v in self.saved_groups:
            self.st.group_oeff[g] = v


def current_candidate(placer: Placer, ctx: JobCtx, jid: int) -> Candidate | None:
    """The job's present placement, priced like a new one (own traffic discounted)."""
    st = placer.state
    masks, held = _job_layout(st, jid)
    if not held:
        return None
    own = _OwnTraffic(st, masks, held)
    placer.own_ring = jid
    try:
        if ctx.sharing != "exclusive":
            part = held[0][0].node.part
            if part is None:
                return None
            return placer._eval_shared(ctx, part, list(held))
        picks = sorted(masks.items(), key=lambda t: t[0].name)
        part = picks[0][0].part
        if part is None:
            return None
        return placer._eval(ctx, part, picks)
    finally:
        own.restore()
        placer.own_ring = None


def plan_migrations(
    placer: Placer, exclude: set[int], kept_off: dict[int, tuple[int, ...]] | None = None
) -> tuple[list[Migration], dict[str, int]]:
    st = placer.state
    cfg = st.config
    now = st.now
    kept_off = kept_off or {}
    counters = {"migration_triggers": 0, "migration_scanned": 0}
    if cfg.max_migrations_per_round <= 0:
        return [], counters
    hold_down = max(cfg.migration_hold_down_s, cfg.preemption_min_run_s)
    st.per_job("layouts")  # the memo _trigger reads, started again if jobs gone since could outnumber those running
    triggered: list[tuple[int, int, RunningJob, str]] = []
    running = st.running
    # Only the jobs a trigger may fire for, in any order: the triggered are sorted by (kind, job) below.
    for jid in MoveWatch.of(st):
        rj = running.get(jid)
        if rj is None or jid in st.stopping or jid in exclude or not rj.request.movable:
            continue
        last = rj.last_migrated_at if rj.last_migrated_at is not None else rj.started_at
        if now - last < hold_down:
            continue
        t = _trigger(st, rj)
        if t is not None:
            triggered.append((t[0], jid, rj, t[1]))
    counters["migration_triggers"] = len(triggered)
    triggered.sort(key=lambda t: (t[0], t[1]))
    options: list[tuple[float, int, RunningJob, str]] = []
    for _, jid, rj, why in triggered[: cfg.migration_scan_limit]:
        counters["migration_scanned"] += 1
        est = _estimate(placer, rj, why, kept_off.get(jid, ()))
        if est is not None:
            options.append((est[0], jid, rj, why))
    options.sort(key=lambda t: (-t[0], t[1]))
    out: list[Migration] = []
    for _, jid, rj, why in options:
        if len(out) >= cfg.max_migrations_per_round:
            break
        est = _estimate(placer, rj, why, kept_off.get(jid, ()))  # re-plan on the state earlier moves left
        if est is None:
            continue
        _net, ctx, new, gain, cost, cur = est
        placement = placer.commit(rj.request, ctx, new, borrowed=rj.borrowed)
        old_level = LEVEL_NAMES[min(len(LEVEL_NAMES) - 1, cur.level)]
        text = reasons.migration(why, cur.slowdown, new.slowdown, gain, cost)
        if old_level != placement.level:
            text += f" ({old_level} -> {placement.level})"
        out.append(Migration(jid, placement, round(gain, 1), round(cost, 1), text))
        st.stopping.add(jid)
    return out, counters


def _estimate(placer: Placer, rj: RunningJob, why: str, kept_off: tuple[int, ...] = ()):
    st = placer.state
    cfg = st.config
    total = rj.request.est_runtime_s if rj.request.est_runtime_s is not None else cfg.default_runtime_s
    remaining = total - (st.now - rj.started_at)
    cost = rj.request.checkpoint_cost_s + cfg.restart_overhead_s
    # The gain is at most the time left (a move that made each step free): a job that cannot win back its move
    # is not priced.
    if remaining <= 0 or remaining - cost < cfg.migration_min_net_gain_s:
        return None
    ctx, err = placer.context(rj.request)
    if ctx is None or err:
        return None
    cur = current_candidate(placer, ctx, rj.request.id)
    if cur is None:
        return None
    blocks = block_gpus(st, kept_off) if kept_off else []
    placer.own_ring = rj.request.id  # its ring leaves where it is: priced beside the others only
    try:
        new = placer.find(ctx)
    finally:
        placer.own_ring = None
        unblock_gpus(st, blocks)
    if new is None:
        return None
    step_now = cur.comm + cur.comp + cur.io
    step_new = new.comm + new.comp + new.io
    if step_now <= 0 or step_new >= step_now:
        return None
    gain = remaining * (1.0 - step_new / step_now)
    net = gain - cost
    if net < cfg.migration_min_net_gain_s:
        return None
    return net, ctx, new, gain, cost, cur
