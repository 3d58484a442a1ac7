"""What a round works out per waiting job and the next round can keep. PURE.

    carry = RoundCarry()                      # one per cluster, kept by the caller between rounds
    decisions = schedule(snapshot, carry=carry)

At 50,000 waiting jobs a round spends most of its time on things that do not change from one round to the
next for a job that is still waiting: its service sort key, its place in its tenant's line, the signature
of its turn. A carry keeps them, and a round works them out again only for the jobs that are new or changed.
A round decides exactly as it would without a carry (tests compare the two over churn rounds).

A job is known by identity: `JobRequest` is frozen, so the same object is the same job, and the snapshot
adapter hands the same object while a job's row is unchanged (scheduler.snapshot_from_db caches them by
version). Everything else a kept value depends on (the policy, the service settings, the tenants' priority
caps, and the clock when service aging is on) makes up the carry's `signature`; when it differs, the
carry starts again empty and the round works everything out.

It also holds the last round's cluster index (`state`), which the next round brings to its snapshot instead of
building it (`ClusterState.advance`: the same index a build gives, orders included, or a build where more than
occupancy and load changed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from itertools import compress, filterfalse, repeat
from operator import attrgetter, is_not

from scheduler.core.policies import Line
from scheduler.core.state import ClusterState
from scheduler.core.types import JobRequest

_id = attrgetter("id")


class RoundCarry:
    __slots__ = (
        "jobs",
        "line_of",
        "lines",
        "service_keys",
        "signature",
        "state",
        "turn_count",
        "turn_floor",
        "turn_ids",
        "turn_table",
        "victims",
    )

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget everything (a round that failed half-way leaves the carry like this)."""
        self.signature: Hashable = None
        self.jobs: dict[int, JobRequest] = {}  # job id -> the object the values below were worked out for
        self.victims: set[int] = set()  # the ids of those jobs preempted for another (JobRequest.preempted_for)
        self.service_keys: dict[int, tuple] = {}  # job id -> ServiceRank.sort_keys
        # The queue policy's lines (PriorityFairSharePolicy): (priority, tenant) -> its Line, in order.
        self.lines: dict[tuple, Line] = {}
        self.line_of: dict[int, tuple[tuple, tuple]] = {}  # job id -> (its line, its sort key there)
        self.turn_ids: dict[int, int] = {}  # job id -> the number of its turn's signature (engine)
        self.turn_table: dict[tuple, int] = {}  # turn signature -> its number
        self.turn_count: dict[int, int] = {}  # turn signature number -> the waiting jobs with it (engine)
        self.turn_floor: dict[int, float] = {}  # turn signature number -> the least estimate of a job given it
        # The last round's cluster index (ClusterState), brought to the next snapshot by `advance` (engine).
        self.state: ClusterState | None = None

    def begin(
        self, pending: list[JobRequest], ids: set[int], signature: Hashable, id_list: list[int] | None = None
    ) -> list[JobRequest]:
        """Start a round over `pending` (their ids: `ids`, and in their order `id_list` when the caller has it): drop
        what is kept for jobs gone or changed, and return the jobs whose values must be worked out (new, changed, or
        all of them when the signature changed)."""
        if signature != self.signature:
            self.clear()
            self.signature = signature
        known = self.jobs
        if id_list is None:
            id_list = list(map(_id, pending))
        # C passes over the 50,000 waiting jobs, of which a churn round changed a few dozen.
        changed = list(compress(pending, map(is_not, map(known.get, id_list), pending)))
        dropped = set(filterfalse(ids.__contains__, known))
        dropped.update(j.id for j in changed if j.id in known)
        if dropped:
            # C passes: the round after one that placed thousands drops them all.
            gone = list(dropped)
            list(map(known.__delitem__, gone))
            self.victims.difference_update(gone)
            list(map(self.service_keys.pop, gone, repeat(None)))
            tids = list(map(self.turn_ids.pop, gone, repeat(None)))
            count = self.turn_count
            for tid, k in Counter(compress(tids, map(is_not, tids, repeat(None)))).items():
                count[tid] -= k
            out_of: dict[tuple, tuple[list[tuple], set[int]]] = {}  # line -> the keys and ids of its jobs to take out
            for jid, where in zip(gone, map(self.line_of.pop, gone, repeat(None)), strict=True):
                if where is not None:
                    out = out_of.get(where[0])
                    if out is None:
                        out = out_of[where[0]] = ([], set())
                    out[0].append(where[1])
                    out[1].add(jid)
            for lk, (keys, jids) in out_of.items():
                self.lines[lk].remove_many(keys, jids)
        for j in changed:
            known[j.id] = j
            if j.preempted_for is not None:
                self.victims.add(j.id)
        return changed

    def place_in_lines(
        self,
        jobs: list[JobRequest],
        line_of: Callable[[JobRequest], tuple],
        key_of: Callable[[JobRequest], tuple],
        tag_of: Callable[[JobRequest], int] | None = None,
    ) -> None:
        """Put new or changed jobs into their lines, in order (`key_of` ends with the job id: keys are unique), with
        their tags (PolicyContext.tag_of) when given."""
        lines, where = self.lines, self.line_of
        for j in jobs:
            lk, key = line_of(j), key_of(j)
            line = lines.get(lk)
            if line is None:
                line = lines[lk] = Line([], [])
            line.insert(key, j, tag_of(j) if tag_of is not None else None)
            where[j.id] = (lk, key)

    def retag(self, tag_of: Callable[[int], int]) -> None:
        """Tag every kept job again, by id (the engine numbered its turn signatures afresh)."""
        for line in self.lines.values():
            line.tags = list(map(tag_of, line.ids))

    def fill_lines(self, lines: dict[tuple, Line]) -> None:
        """Take lines built afresh (every job of the round in one of them)."""
        self.lines = lines
        # From the lines' own lists (C passes), not from the 50,000 job objects: each is a cache miss.
        where: dict[int, tuple] = {}
        for lk, line in lines.items():
            where.update(zip(line.ids, zip(repeat(lk, len(line.keys)), line.keys, strict=True), strict=True))
        self.line_of = where
