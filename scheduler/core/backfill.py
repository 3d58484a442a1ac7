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

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import itemgetter

from scheduler.core.placement import Candidate, JobCtx, Placer
from scheduler.core.state import ClusterState, GpuSlot
from scheduler.core.types import RunningJob, Share


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
_LAST_ID = float("inf")  # after every job id in a (time, id) key
_MOST_SOON_S = 60.0  # a job past its estimate ends at most this long after now (see _term)
_REBUILD_SHARE = 2  # a line rebuilt rather than updated when more than half its jobs changed (an update of a job
# costs about what a build of it costs, and the round after one that started 1,000 jobs should not build)


def _term(rj: RunningJob, default_run: float) -> tuple:
    """(the RunningJob, its end by its estimate, how soon after now it ends once past it): min(60 s, a quarter of its
    estimate), so a short job that overran is not taken to hold its GPUs for another minute."""
    est = rj.request.est_runtime_s
    run = est if est is not None else default_run
    return (rj, rj.started_at + run, min(_MOST_SOON_S, run / 4))


def _term_of(terms: dict[int, tuple], j: int, rj: RunningJob, default_run: float) -> tuple:
    """The job's `_term` from the memo (ClusterState.end_terms), worked out again where its RunningJob changed."""
    t = terms.get(j)
    if t is None or t[0] is not rj:
        t = terms[j] = _term(rj, default_run)
    return t


class EndsLine:
    """The running jobs on the eligible nodes of one set of partitions, by their end by estimate (then id): what a
    reservation plan walks in order of expected end, and mostly only its first few dozen. Kept with the cluster index
    (ClusterState.ends_lines) from round to round and brought up to date by the jobs that changed
    (ClusterState.running_changes), so that a round reads the jobs that end first without listing and sorting the
    partitions' thousands of running jobs for each plan (`ordered_ends`)."""

    __slots__ = ("epoch", "keys", "members", "part_ids")

    def __init__(self, st: ClusterState, parts, part_ids: frozenset[int]) -> None:
        self.part_ids = part_ids
        self.epoch = st.running_epoch
        on_node, running = st.jobs_on_node, st.running
        jobs: set[int] = set()
        for part in parts:
            for node in part.nodes:
                if node.eligible:
                    held = on_node.get(node.name)
                    if held:
                        jobs.update(held)
        terms = st.per_job("end_terms")
        default_run = st.config.default_runtime_s
        self.members: dict[int, float] = {}  # job -> its end by estimate (its key's time)
        keys: list[tuple[float, int]] = []
        for j in jobs:
            rj = running.get(j)
            if rj is None:
                continue
            t = _term_of(terms, j, rj, default_run)
            self.members[j] = t[1]
            keys.append((t[1], j))
        keys.sort()
        self.keys = keys

    def update(self, st: ClusterState, changes: set[int]) -> None:
        """Take out the jobs that changed and put back those of them that still run here, each in its place."""
        members, keys = self.members, self.keys
        running, job_gpus, part_ids = st.running, st.job_gpus, self.part_ids
        terms = st.per_job("end_terms")
        default_run = st.config.default_runtime_s
        for j in changes:
            end = members.pop(j, None)
            if end is not None:
                del keys[bisect_left(keys, (end, j))]
        for j in changes:
            rj = running.get(j)
            held = job_gpus.get(j)
            if rj is None or not held:
                continue
            for g, _ in held:
                node = g.node
                if node.eligible and node.part is not None and id(node.part) in part_ids:
                    break
            else:
                continue
            t = _term_of(terms, j, rj, default_run)
            members[j] = t[1]
            insort(keys, (t[1], j))
        self.epoch = st.running_epoch


def ends_line(st: ClusterState, parts) -> EndsLine:
    """The kept EndsLine of these partitions, brought to this round's running jobs (built where none is kept, or where
    the last round did not use it or most of its jobs changed)."""
    part_ids = frozenset(map(id, parts))
    line = st.ends_lines.get(part_ids)
    if line is not None:
        changes = st.changes_since(line.epoch, len(line.members), _REBUILD_SHARE)
        if changes is None:
            line = None
        elif changes:
            line.update(st, changes)
    if line is None:
        line = st.ends_lines[part_ids] = EndsLine(st, parts, part_ids)
    return line


def ordered_ends(st: ClusterState, line: EndsLine, extra: Ends = ()) -> Iterator[tuple[float, int, list]]:
    """The line's running jobs by expected end, then id, with their shares, merged with `extra` (jobs started this
    round, sorted alike): a stopping job ends after the grace period, another by its estimate (the default runtime
    without one), or, past it, soon (`_term`) after now.

    Only the line's head is worked out and sorted: the jobs that end by their estimate before now + 60 s (those past
    it among them), or before a stopping job's end, and the stopping jobs. Any later job ends by its estimate, after
    all of those, in the line's own order."""
    running, stopping, job_gpus = st.running, st.stopping, st.job_gpus
    now = st.now
    stopping_end = now + st.config.preemption_grace_s
    members = line.members
    stops = [j for j in stopping if j in members and j in running]
    cut = now + _MOST_SOON_S
    if stops and stopping_end > cut:
        cut = stopping_end
    keys = line.keys
    k = bisect_right(keys, (cut, _LAST_ID))
    terms = st.per_job("end_terms")
    default_run = st.config.default_runtime_s
    head: list[tuple[float, int]] = []
    for _, j in keys[:k]:
        if j in stopping:
            continue
        rj = running.get(j)
        if rj is None:
            continue
        t = _term_of(terms, j, rj, default_run)
        end, soon = t[1], now + t[2]
        if end < soon:  # max(end by estimate, soon)
            end = soon
        head.append((end, j))
    head.extend((stopping_end, j) for j in stops)
    head.sort()
    b, nb = 0, len(extra)
    for part in (head, keys[k:]):
        for end, j in part:
            if part is not head and (j in stopping or j not in running):
                continue
            while b < nb and (extra[b][0], extra[b][1]) < (end, j):
                yield extra[b]
                b += 1
            yield (end, j, job_gpus.get(j, []))
    yield from extra[b:]


def plan_reservation(
    placer: Placer,
    ctx: JobCtx,
    started: dict[int, tuple[float, list[tuple[GpuSlot, Share]]]] | None = None,
) -> tuple[float, Candidate] | None:
    """(start time, placement) of the blocked job once enough running jobs have ended, or None.
    `started`: jobs placed earlier in this round, job id -> (expected end, shares); they end too."""
    st = placer.state
    line = ends_line(st, ctx.parts)
    part_ids = line.part_ids
    extra = [
        (end, jid, held)
        for jid, (end, held) in (started or {}).items()
        if any(g.node.part is not None and id(g.node.part) in part_ids for g, _ in held)
    ]
    extra.sort(key=_END_THEN_ID)
    ends = ordered_ends(st, line, extra)
    nxt = next(ends, None)
    if nxt is None:
        return None
    mark = st.journal()
    try:
        probes = 0
        limit = st.config.backfill_probes
        n = ctx.n
        # Every job listed holds a GPU in the job's partitions (the line holds only such jobs; `extra` is filtered),
        # so each release may be the one that lets it fit.
        release = st.release
        while nxt is not None:
            end, _, held = nxt
            nxt = next(ends, None)
            for g, sh in held:
                release(g, sh)
            if ctx.sharing == "exclusive" and sum(p.free_total for p in ctx.parts) < n:
                continue
            last = nxt is None
            if probes >= limit and not last:
                continue
            probes += 1
            cand = placer.find(ctx)
            if cand is not None:
                return end, cand
            if probes >= limit:
                # Release the rest and try once more: the reservation is then at the last end.
                rest: list[tuple[GpuSlot, Share]] = []
                while nxt is not None:
                    end, _, held = nxt
                    nxt = next(ends, None)
                    rest += held
                st.release_many(rest)
                cand = placer.find(ctx)
                return (end, cand) if cand is not None else None
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
