"""Backfill (EASY): a reservation for the top blocked job of each pool, and the test that lets smaller
jobs run ahead without delaying it. PURE.

Reservation: running jobs in the blocked job's partitions end at `started_at + est_runtime_s` (or
`Config.default_runtime_s` without an estimate; a stopping job at now + `preemption_grace_s`; a job past
its estimate in min(60 s, a quarter of its estimate) from now, so a short job that overran is not taken
to hold its GPUs for another minute). They
are released in that order on the state (journaled, then undone) and the job's placement is tried
after each release that freed GPUs it could use, up to `Config.backfill_probes` tries (then once with
everything released). The first success gives the shadow time T (the end of the last job released)
and the GPU set P the job would take then. The GPUs of P that are free now are held for it.

A later job may then start now if it fits without the held GPUs (it cannot delay the reserved job,
which needs only P), or if its estimated run ends before T (it gives the GPUs back in time). Jobs
without an estimate never use reserved GPUs. T is the earliest success among the probed release
points, so it can be a little later than the true earliest start; it is never earlier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

from scheduler.core.placement import Candidate, JobCtx, Placer
from scheduler.core.state import GpuSlot
from scheduler.core.types import Share


@dataclass(slots=True)
class HeldReservation:
    job_id: int
    pool: int
    start_at: float
    holds: list[tuple[GpuSlot, Share]] = field(default_factory=list)  # what is held for it now
    gpu_ids: tuple[int, ...] = ()
    nodes: tuple[str, ...] = ()

    def release(self, placer: Placer) -> None:
        for g, sh in self.holds:
            placer.state.release(g, sh)

    def rehold(self, placer: Placer) -> None:
        """Hold again what is still free (a short backfilled job may have taken part of it)."""
        kept = []
        for g, sh in self.holds:
            if not placer.state.share_fits(g, sh):
                continue
            placer.state.hold(g, sh)
            kept.append((g, sh))
        self.holds = kept


Ends = list[tuple[float, int, list[tuple[GpuSlot, Share]]]]  # (expected end, job id, its shares), in that order
_END_THEN_ID = itemgetter(0, 1)


def running_ends(placer: Placer, ctx: JobCtx) -> Ends:
    """The snapshot's running jobs on the eligible nodes of the job's partitions, by expected end (then id).

    Within a round this changes only when a job starts stopping: the engine keeps it per partitions and number of
    jobs stopping (`plan_reservation`'s `ends_cache`)."""
    st = placer.state
    on_node = st.jobs_on_node
    jobs: set[int] = set()
    for part in ctx.parts:
        for node in part.nodes:
            if node.eligible:
                held = on_node.get(node.name)
                if held:
                    jobs.update(held)
    # Each job's expected end: a job stopping ends after the grace period, another by its estimate (the default
    # runtime without one); past it, soon but not at once (a minute, or a quarter of a short estimate).
    running, job_gpus, stopping = st.running, st.job_gpus, st.stopping
    now = st.now
    stopping_end = now + st.config.preemption_grace_s
    default_run = st.config.default_runtime_s
    # Per job, while it is the same RunningJob: (it, its end by its estimate, how soon after now it ends past it),
    # kept with the state (ClusterState.end_terms): its request read again only when it changed.
    terms = st.per_job("end_terms")
    ends: Ends = []
    for j in jobs:
        rj = running.get(j)
        if rj is None:
            continue
        if j in stopping:
            end = stopping_end
        else:
            t = terms.get(j)
            if t is None or t[0] is not rj:
                est = rj.request.est_runtime_s
                run = est if est is not None else default_run
                t = terms[j] = (rj, rj.started_at + run, min(60.0, run / 4))
            end, soon = t[1], now + t[2]
            if end < soon:  # max(end by estimate, soon)
                end = soon
        ends.append((end, j, job_gpus.get(j, [])))
    ends.sort()  # (end, id): ids are unique, so the shares are never compared
    return ends


def plan_reservation(
    placer: Placer,
    ctx: JobCtx,
    started: dict[int, tuple[float, list[tuple[GpuSlot, Share]]]] | None = None,
    ends_cache: dict[tuple, Ends] | None = None,
) -> tuple[float, Candidate] | None:
    """(start time, placement) of the blocked job once enough running jobs have ended, or None.
    `started`: jobs placed earlier in this round, job id -> (expected end, shares); they end too.
    `ends_cache`: the round's `running_ends` so far, by (partitions, jobs stopping)."""
    st = placer.state
    part_ids = {id(p) for p in ctx.parts}
    key = (frozenset(part_ids), len(st.stopping))  # stopping only grows during a round's placement phase
    ends = ends_cache.get(key) if ends_cache is not None else None
    if ends is None:
        ends = running_ends(placer, ctx)
        if ends_cache is not None:
            ends_cache[key] = ends
    extra = [
        (end, jid, held)
        for jid, (end, held) in (started or {}).items()
        if any(g.node.part is not None and id(g.node.part) in part_ids for g, _ in held)
    ]
    if extra:
        ends = ends + extra  # a copy: the kept list stays the snapshot's
        ends.sort(key=_END_THEN_ID)
    if not ends:
        return None
    mark = st.journal()
    try:
        probes = 0
        limit = st.config.backfill_probes
        n = ctx.n
        # Every job listed holds a GPU in the job's partitions (running_ends walks their nodes; `extra` is filtered),
        # so each release may be the one that lets it fit.
        release = st.release
        for i, (end, _, held) in enumerate(ends):
            for g, sh in held:
                release(g, sh)
            if ctx.sharing == "exclusive" and sum(p.free_total for p in ctx.parts) < n:
                continue
            last = i == len(ends) - 1
            if probes >= limit and not last:
                continue
            probes += 1
            cand = placer.find(ctx)
            if cand is not None:
                return end, cand
            if probes >= limit:
                # Release the rest and try once more: the reservation is then at the last end.
                for _, _, held2 in ends[i + 1 :]:
                    for g, sh in held2:
                        st.release(g, sh)
                cand = placer.find(ctx)
                return (ends[-1][0], cand) if cand is not None else None
        return None
    finally:
        st.rollback(mark)


def hold_reservation(placer: Placer, job_id: int, start_at: float, cand: Candidate, pool: int) -> HeldReservation:
    """Hold the GPUs of `cand` that are free now for the reserved job."""
    res = HeldReservation(job_id, pool, start_at)
    gpu_ids: list[int] = []
    nodes: list[str] = []
    if cand.shares is not None:
        for g, sh in cand.shares:
            gpu_ids.append(g.id)
            if g.node.name not in nodes:
                nodes.append(g.node.name)
            if placer.state.share_fits(g, sh):
                placer.state.hold(g, sh)
                res.holds.append((g, sh))
    else:
        for node, mask in cand.picks:
            nodes.append(node.name)
            for g in node.gpus:
                if g.bit & mask:
                    gpu_ids.append(g.id)
                    if node.free_mask & g.bit:
                        sh = Share(g.id, "whole", 100, g.memory_mib)
                        placer.state.hold(g, sh)
                        res.holds.append((g, sh))
    res.gpu_ids = tuple(gpu_ids)
    res.nodes = tuple(nodes)
    return res
