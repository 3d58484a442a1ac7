"""The published baselines, faithful to the Tiresias simulator (SymbioticLab/Tiresias, `simulator/`). PURE.

Each policy reproduces one scheduler of `run_sim.py`, event for event: it is called when jobs arrive or
finish (and at its own wake-ups), never periodically, exactly as that simulator's loops are.

* `fifo` = `fifo` (`one_queue_fifo_sim_jobs`): submission order; the first job that does not fit blocks
  the queue (head-of-line blocking); never preempts.
* `fjf` = `fjf` (`fit_first_sim_jobs`): submission order, but any later job that fits starts.
* `srtf` = `shortest` (`shortest_first_sim_jobs`): at every event the runnable jobs are sorted by
  remaining time (oracle durations; a stable sort of a list kept between events) and admitted while GPUs
  are left; a running job not admitted is preempted.
* `tiresias-l` = `dlas-gpu` (`dlas_sim_jobs(gputime=True)`): 2D-LAS. Attained service = GPUs x executed
  seconds; 3 queues, demotion when it reaches 3250 and then 7200 GPU-seconds (`jobs.py` `queue_limit`);
  new jobs enter Q0; queues are served in order, inside a queue in list order, where running jobs come
  first and pending ones keep their order behind them; fit-first admission; a running job not admitted
  is preempted; no starvation reset (`solve_starvation=0`; `starvation=K` gives `dlas-gpu-K`: a demoted
  job that waited K x its executed time returns to Q0 with its executed time reset).
* `tiresias-g` = `dlas-gpu-gittins`: the same queues, each sorted by the Gittins index of the job's
  attained GPU-time (highest first, earlier submission on ties); the index comes from the YARN GPU-time
  distribution the simulator ships (`yarn-gput1000.csv`, service quantum 3250 GPU-seconds). (Its
  `gittins` schedule sorts the other way round, lowest index first, and is not reproduced.)

Placement (`placement=`):
* `yarn` (`--scheme=yarn`, `ms_yarn_placement`; the YARN-CS baseline): all GPUs under one switch (leaf);
  a job that fits a node takes the first node (in order) with enough free GPUs; a larger one takes
  whole free nodes plus one node for the remainder. `fifo` and `fjf` use it (consolidated placement).
* `count` (`--scheme=count`): only the number of free GPUs matters. `srtf` uses it (the simulator's
  `shortest` only runs under `count`: under `yarn`, `empty_infra()` never gives node memory back, and
  after a few dozen events no job fits any more), and so do `tiresias-l` and `tiresias-g` (`dlas_sim_jobs`
  counts free GPUs whatever the scheme). Counting decides who runs; the GPUs are then assigned the
  consolidating way (jobs that keep running keep theirs; a new job takes the fullest node that holds
  it, else the nodes with most free GPUs).

Where the traces ask more than the Tiresias simulator knows (it has GPU counts only, and one switch in
its shipped cluster specs), the baselines do what their rule implies, and nothing that strands a job:
* a job larger than any leaf: the simulator's `yarn` never places it (`fifo` finished 18 of the 160
  Pollux jobs on 16x4/4). Here `yarn` consolidates it over as few leaves as the free whole nodes allow
  (the leaves with most of them first); a job that a leaf can hold still waits for one leaf;
* a gang (`nodes` x `gpus_per_node`, e.g. a Slurm job): `yarn` takes the first `nodes` nodes of one leaf
  with that many free GPUs each (across leaves only when no leaf could ever hold it); counting takes the
  fullest nodes that still hold `gpus_per_node` (best fit; blind to leaves, as counting is). When the
  count admits a gang whose shape finds no GPUs, that event goes on without it: nothing is preempted for
  it and its GPUs go to the next jobs in order (`admit_by_count`);
* `require-leaf`: every placement above stays inside one leaf (`prefer-leaf` and `any` change nothing:
  `yarn` always consolidates, counting never looks).

The simulator's node CPU (2 or 6 per GPU) and memory (5 GB + parameter-server share) checks are not
modelled: with its clusters (4 GPUs, 40 cores, 256 GB a node) they never bind under `fifo` and `fjf`.

Fidelity details kept on purpose: demotions are checked only at events, and the next demotion event
is computed as the simulator does, `floor((limit - executed_s) / gpus)` seconds ahead (executed
seconds, not GPU-seconds: a multi-GPU job is demoted at the first event after it crossed the limit);
the Gittins index of a pending job is taken at its GPU-time (`dlas-gpu-gittins`).
"""

from __future__ import annotations

import csv
import functools
import itertools
import math
from collections.abc import Iterable
from importlib import resources
from typing import TYPE_CHECKING

from scheduler.sim.simulator import PENDING, RUNNING

if TYPE_CHECKING:  # pragma: no cover
    from scheduler.sim.cluster import SimCluster
    from scheduler.sim.simulator import JobState, Simulator

QUEUE_LIMITS = (3250, 7200, 18000)  # jobs.py: queue_limit (GPU-seconds)
NUM_QUEUES = 3  # jobs.py: num_queue
GITTINS_DELTA = 3250  # jobs.py: gittins_delta


# ---------------------------------------------------------------------------------------- placement


class FreeView:
    """The GPUs a placement may use: the simulator's free ones, plus those of `release` (running jobs this
    event is about to preempt), minus what this view has already handed out (a trial of several placements
    in one event, applied only if all of them fit)."""

    __slots__ = ("_extra", "_owner", "_taken", "c", "free_count", "node_free")

    def __init__(self, sim: Simulator, release: Iterable[JobState] = ()) -> None:
        c = sim.cluster
        self.c = c
        self.node_free = list(sim.node_free)
        self.free_count = sim.free_count
        self._owner = sim.gpu_owner
        self._extra: set[int] = set()
        self._taken: set[int] = set()
        for job in release:
            for p in job.shares:
                self._extra.add(p)
                self.node_free[c.gpu_node[p]] += 1
            self.free_count += len(job.shares)

    def free_positions(self, ni: int) -> list[int]:
        owner, extra, taken = self._owner, self._extra, self._taken
        return [p for p in self.c.node_gpus[ni] if (owner[p] < 0 or p in extra) and p not in taken]

    def take(self, positions: Iterable[int]) -> None:
        node_of = self.c.gpu_node
        for p in positions:
            self._taken.add(p)
            self.node_free[node_of[p]] -= 1
            self.free_count -= 1


def fits_one_leaf(c: SimCluster, job: JobState) -> bool:
    """Could the job, on an empty cluster, be placed under one leaf the YARN way (a gang: `nodes` nodes of
    at least `gpus_per_node` GPUs; otherwise whole nodes plus one node for the remainder)?"""
    gpn = c.max_gpus_per_node
    for leaf in c.leaves():
        sizes = [len(c.node_gpus[ni]) for ni in leaf]
        if job.nodes is not None:
            if sum(1 for g in sizes if g >= job.gpus_per_node) >= job.nodes:  # type: ignore[operator]
                return True
        elif job.gpus <= gpn:
            if any(g >= job.gpus for g in sizes):
                return True
        else:
            full, rest = divmod(job.gpus, gpn)
            whole = sum(1 for g in sizes if g == gpn)
            if whole >= full and (not rest or len(sizes) > full):
                return True
    return False


def _gang_nodes_across(view: FreeView, n_nodes: int, k: int) -> list[int] | None:
    """`n_nodes` nodes with `k` free GPUs each over as few leaves as the free nodes allow: the leaves with the
    most such nodes first (ties in leaf order), nodes in order inside a leaf."""
    per_leaf = [[ni for ni in leaf if view.node_free[ni] >= k] for leaf in view.c.leaves()]
    order = sorted(range(len(per_leaf)), key=lambda i: -len(per_leaf[i]))
    out: list[int] = []
    for i in order:
        out += per_leaf[i][: n_nodes - len(out)]
        if len(out) == n_nodes:
            return out
    return None


def yarn_place(view: FreeView, job: JobState) -> list[int] | None:
    """Tiresias' ms_yarn_placement on the free GPUs, or None: the first leaf (switch) that can hold the job,
    a job that fits a node on the first node with room, a larger one on whole free nodes plus one node for
    the remainder; a gang on the first `nodes` nodes of one leaf with `gpus_per_node` free GPUs each.
    A job that no leaf could ever hold (larger than a leaf) is consolidated over as few leaves as the free
    whole nodes allow instead of waiting forever (the simulator's code never places it: a deviation, so
    that the baseline does not strand jobs that fit the cluster); one that requires a leaf waits for one."""
    c = view.c
    node_free = view.node_free
    if job.nodes is not None:
        N, k = job.nodes, job.gpus_per_node
        assert k is not None
        for leaf in c.leaves():
            nodes = [ni for ni in leaf if node_free[ni] >= k][:N]
            if len(nodes) == N:
                return [p for ni in nodes for p in view.free_positions(ni)[:k]]
        if job.topology == "require-leaf" or fits_one_leaf(c, job):
            return None
        nodes = _gang_nodes_across(view, N, k)
        return None if nodes is None else [p for ni in nodes for p in view.free_positions(ni)[:k]]
    need = job.gpus
    gpn = c.max_gpus_per_node
    for leaf in c.leaves():
        if need > gpn:
            full_needed = need // gpn
            full: list[int] = []
            for ni in leaf:
                if node_free[ni] == len(c.node_gpus[ni]) and node_free[ni] > 0:
                    full.append(ni)
                    if len(full) == full_needed:
                        break
            if len(full) < full_needed:
                continue
            rest = need % gpn
            last = None
            if rest:
                for ni in leaf:
                    if ni not in full and node_free[ni] >= rest:
                        last = ni
                        break
                if last is None:
                    continue
            out = [p for ni in full for p in view.free_positions(ni)]
            if last is not None:
                out += view.free_positions(last)[:rest]
            return out
        for ni in leaf:
            if node_free[ni] >= need:
                return view.free_positions(ni)[:need]
    if need <= gpn or job.topology == "require-leaf" or fits_one_leaf(c, job):
        return None
    # Larger than any leaf: whole free nodes from the leaves with the most of them, then the remainder on
    # a node of a leaf already used if one has room (else any).
    full_needed, rest = divmod(need, gpn)
    whole = [[ni for ni in leaf if node_free[ni] == len(c.node_gpus[ni]) == gpn] for leaf in c.leaves()]
    order = sorted(range(len(whole)), key=lambda i: -len(whole[i]))
    full = []
    used: list[int] = []
    for i in order:
        take = whole[i][: full_needed - len(full)]
        if take:
            full += take
            used.append(i)
        if len(full) == full_needed:
            break
    if len(full) < full_needed:
        return None
    out = [p for ni in full for p in view.free_positions(ni)]
    if rest:
        leaves = c.leaves()
        chosen = set(full)
        cands = [ni for i in used for ni in leaves[i]] + [ni for i in order if i not in used for ni in leaves[i]]
        last = next((ni for ni in cands if ni not in chosen and node_free[ni] >= rest), None)
        if last is None:
            return None
        out += view.free_positions(last)[:rest]
    return out


def _on_node(view: FreeView, ni: int, need: int) -> list[int]:
    """`need` free GPUs of node `ni`: the NVLink island that holds them most tightly, else the first ones."""
    free = view.free_positions(ni)
    by_island: dict[int, list[int]] = {}
    for p in free:
        by_island.setdefault(view.c.gpu_island[p], []).append(p)
    fits = [ps for ps in by_island.values() if len(ps) >= need]
    if fits:
        return min(fits, key=len)[:need]
    return free[:need]


def consolidated_place(view: FreeView, job: JobState) -> list[int] | None:
    """GPUs for a job that counting admitted, or None: the fullest node that holds it (inside it the
    tightest NVLink island), else the nodes with the most free GPUs. A gang of one node the same way; a
    gang of several takes the fullest nodes that still have `gpus_per_node` free GPUs (best fit, blind to
    leaves as the counting schedulers are), inside one leaf when it requires one."""
    c = view.c
    node_free = view.node_free
    if job.nodes is not None and job.nodes > 1:
        N, k = job.nodes, job.gpus_per_node
        assert k is not None
        gang_groups = c.leaves() if job.topology == "require-leaf" else (range(c.n_nodes),)
        for group in gang_groups:
            nodes = sorted((ni for ni in group if node_free[ni] >= k), key=lambda i: node_free[i])[:N]
            if len(nodes) == N:
                return [p for ni in nodes for p in _on_node(view, ni, k)]
        return None
    need = job.gpus
    if view.free_count < need:
        return None
    best = None
    for ni in range(c.n_nodes):
        f = node_free[ni]
        if f >= need and (best is None or f < node_free[best]):
            best = ni
    if best is not None:
        return _on_node(view, best, need)
    if job.nodes == 1:
        return None  # a one-node gang that no node holds now
    groups = c.leaves() if job.topology == "require-leaf" else (range(c.n_nodes),)
    for group in groups:
        out: list[int] = []
        for ni in sorted(group, key=lambda i: -node_free[i]):
            if node_free[ni] == 0:
                break
            out += view.free_positions(ni)[: need - len(out)]
            if len(out) == need:
                return out
    return None  # a job that requires one leaf, and no leaf has room


def admit_by_count(sim: Simulator, ordered: Iterable[JobState]) -> None:
    """Tiresias' counting admission: walk the jobs in priority order, admit each while enough GPUs are left
    (counting the whole cluster), preempt a running job that no longer fits, then place the admitted ones.

    A gang can be admitted by count and still find no `nodes` x `gpus_per_node` GPUs (the free GPUs are
    scattered). Then nothing of that trial is applied: the gang is left out of this event and the count
    is redone without it, so a preemption always makes room for a job that starts, and the GPUs the gang
    would have counted go to the next jobs in order. Jobs of any shape always fit what counting gave them,
    so for them this is the simulator's admission, unchanged."""
    ordered = list(ordered)
    skip: set[int] = set()
    while True:
        free = sim.cluster.n_gpus
        admit: list[JobState] = []
        evict: list[JobState] = []
        for job in ordered:
            if job.id in skip:
                continue
            if free >= job.gpus:
                free -= job.gpus
                if job.status == PENDING:
                    admit.append(job)
            elif job.status == RUNNING:
                evict.append(job)
        view = FreeView(sim, evict)
        plan: list[tuple[JobState, list[int]]] = []
        failed = None
        for job in admit:
            gpus = consolidated_place(view, job)
            if gpus is None:
                failed = job
                break
            view.take(gpus)
            plan.append((job, gpus))
        if failed is None:
            break
        skip.add(failed.id)
    for job in evict:
        sim.preempt(job)
    for job, gpus in plan:
        sim.start(job, gpus)


class _Base:
    name = "baseline"
    placement = "count"

    def __init__(self, placement: str | None = None) -> None:
        if placement is not None:
            if placement not in ("yarn", "count"):
                raise ValueError(f"placement {placement!r} is not 'yarn' or 'count'")
            self.placement = placement
            if placement != type(self).placement:
                self.name = f"{self.name}@{placement}"
        self.sim: Simulator | None = None

    def bind(self, sim: Simulator) -> None:
        self.sim = sim

    def next_wakeup(self, now: float) -> float | None:
        return None

    def _place(self, job: JobState) -> list[int] | None:
        sim = self.sim
        assert sim is not None
        if job.gpus > sim.free_count:
            return None
        view = FreeView(sim)
        if self.placement == "yarn":
            return yarn_place(view, job)
        return consolidated_place(view, job)


# ---------------------------------------------------------------------------------------- fifo / fjf


class FifoBaseline(_Base):
    """`fifo` (head-of-line blocking) and, with `skip=True`, `fjf` (fit-job-first)."""

    name = "fifo"
    placement = "yarn"

    def __init__(self, placement: str | None = None, skip: bool = False) -> None:
        self.skip = skip
        if skip:
            self.name = "fjf"
        super().__init__(placement)
        self.pending: list[JobState] = []

    def on_event(self, now: float, arrived: list[JobState], finished: list[JobState]) -> None:
        sim = self.sim
        assert sim is not None
        self.pending.extend(arrived)
        started: list[JobState] = []
        if self.skip:
            for job in self.pending:
                if sim.free_count <= 0:
                    break
                gpus = self._place(job)
                if gpus is None:
                    continue
                sim.start(job, gpus)
                started.append(job)
        elif sim.free_count > 0:
            for job in self.pending:
                gpus = self._place(job)
                if gpus is None:
                    break
                sim.start(job, gpus)
                started.append(job)
        if started:
            gone = {j.id for j in started}
            self.pending = [j for j in self.pending if j.id not in gone]


# ---------------------------------------------------------------------------------------- srtf


class SrtfBaseline(_Base):
    """Tiresias `shortest`: preemptive shortest-remaining-time-first with oracle durations (counting)."""

    name = "srtf"
    placement = "count"

    def __init__(self) -> None:
        super().__init__(None)
        self.runnable: list[JobState] = []

    def on_event(self, now: float, arrived: list[JobState], finished: list[JobState]) -> None:
        sim = self.sim
        assert sim is not None
        if finished:
            gone = {j.id for j in finished}
            self.runnable = [j for j in self.runnable if j.id not in gone]
        self.runnable.extend(arrived)
        self.runnable.sort(key=lambda j: j.remaining)
        admit_by_count(sim, self.runnable)


# ---------------------------------------------------------------------------------------- tiresias


@functools.cache
def load_gittins_table() -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The Gittins index per attained-service bucket, as run_sim.py's parse_job_dist computes it from the
    YARN GPU-time samples it ships (yarn-gput1000.csv). Computed once per process (every tiresias-g policy,
    including the ones `parse_policies` builds only to validate a name, shares it)."""
    text = resources.files("scheduler.sim").joinpath("data/tiresias_yarn_gput1000.csv").read_text()
    durations = sorted(int(r["duration"]) for r in csv.DictReader(text.splitlines()))
    num = len(durations)

    def index(a: int) -> float:  # cal_r_gittins_index
        if a > durations[-1] - 1:
            return 0.0
        idx = next(i for i, d in enumerate(durations) if d > a)
        nxt = a + GITTINS_DELTA
        if nxt > durations[-1] - 1:
            idx_delta = num - 1
        else:
            idx_delta = next(i for i, d in enumerate(durations) if d > nxt)
        p = round((idx_delta - idx) / (num - idx), 5)
        e_sum = sum(durations[idx:idx_delta]) + GITTINS_DELTA * (num - idx_delta)
        e = round(e_sum // (num - idx), 5)  # integer division, as in the Python 2 original
        return round(p * 1_000_000 / e, 4)

    return tuple(durations), tuple(index(d - 1) for d in durations)


class TiresiasBaseline(_Base):
    """Tiresias-L (`dlas-gpu`) or, with `gittins=True`, Tiresias-G (`dlas-gpu-gittins`)."""

    name = "tiresias-l"
    placement = "count"

    def __init__(self, gittins: bool = False, starvation: float = 0.0, limits=QUEUE_LIMITS, queues: int = NUM_QUEUES):
        super().__init__(None)
        self.gittins = gittins
        if gittins:
            self.name = "tiresias-g"
            self._data, self._gi = load_gittins_table()
        if starvation:
            self.name += f"-{starvation:g}"
        self.starvation = starvation
        self.limits = tuple(limits)
        self.queues: list[list[JobState]] = [[] for _ in range(queues)]
        self.info: dict[int, dict] = {}  # job id -> the simulator's per-job fields
        self.runnable: list[JobState] = []
        self.next_jump: float | None = None

    def gittins_index(self, attained: float) -> float:  # get_gittins_index
        data = self._data
        if attained > data[-1]:
            return 0.0
        for i, d in enumerate(data):
            if d > attained:
                return self._gi[i]
        return 0.0  # pragma: no cover

    def next_wakeup(self, now: float) -> float | None:
        return self.next_jump

    def on_event(self, now: float, arrived: list[JobState], finished: list[JobState]) -> None:
        sim = self.sim
        assert sim is not None
        info = self.info
        queues = self.queues
        last_q = len(queues) - 1
        for job in finished:
            self.runnable.remove(job)
            queues[info[job.id]["q"]].remove(job)
            del info[job.id]
        for job in arrived:
            info[job.id] = {"q": 0, "exec": 0.0, "total": 0.0, "check": now, "last_pending": 0.0, "rank": 0.0}
            self.runnable.append(job)
            queues[0].append(job)
        for job in self.runnable:
            d = info[job.id]
            tmp = now - d["check"]
            d["check"] = now
            if job.status == RUNNING:
                d["total"] += tmp
                d["exec"] += tmp
                gt = d["exec"] * job.gpus
                q = d["q"]
                if q < last_q and gt >= self.limits[q]:
                    d["q"] = q + 1
                    queues[q + 1].append(job)
                    queues[q].remove(job)
                if self.gittins:
                    d["rank"] = self.gittins_index(gt)
            else:
                if d["exec"] > 0:
                    d["last_pending"] += tmp
                if self.starvation > 0 and d["q"] > 0 and d["total"] > 0 and d["exec"] > 0:
                    if d["last_pending"] >= d["exec"] * self.starvation:
                        d["exec"] = 0.0
                        d["last_pending"] = 0.0
                        queues[0].append(job)
                        queues[d["q"]].remove(job)
                        d["q"] = 0
                if self.gittins:
                    d["rank"] = self.gittins_index(d["exec"] * job.gpus)
        if self.gittins:
            for queue in queues:
                queue.sort(key=lambda j: (info[j.id]["rank"], -j.submit), reverse=True)
        admit_by_count(sim, itertools.chain.from_iterable(queues))
        for queue in queues:  # running jobs first, pending ones keep their order behind them
            queue[:] = [j for j in queue if j.status == RUNNING] + [j for j in queue if j.status != RUNNING]
        nxt = math.inf
        for job in self.runnable:
            d = info[job.id]
            if job.status == RUNNING:
                q = d["q"]
                if q < last_q:
                    jump = math.floor((self.limits[q] - d["exec"]) / job.gpus) + now
                    nxt = min(nxt, jump)
            elif self.starvation > 0 and d["q"] > 0 and d["total"] > 0 and d["exec"] > 0:
                diff = d["exec"] * self.starvation - d["last_pending"]
                if diff > 0:
                    nxt = min(nxt, diff + now)
        self.next_jump = nxt if nxt < math.inf else None


BASELINES = ("fifo", "fjf", "srtf", "tiresias-l", "tiresias-g")


def make_baseline(name: str):
    """`fifo`, `fjf`, `srtf`, `tiresias-l`, `tiresias-g`; `fifo@count` / `fjf@count` count GPUs instead of
    placing them the YARN way. KeyError for other names."""
    base, _, placement = name.partition("@")
    if base in ("fifo", "fjf"):
        return FifoBaseline(placement or None, skip=base == "fjf")
    if placement:
        raise KeyError(f"{base} has no placement variant (it counts GPUs, as the Tiresias simulator does)")
    if base == "srtf":
        return SrtfBaseline()
    if base == "tiresias-l":
        return TiresiasBaseline()
    if base == "tiresias-g":
        return TiresiasBaseline(gittins=True)
    raise KeyError(name)
