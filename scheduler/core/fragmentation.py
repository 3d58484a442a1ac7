"""Fragmentation of shared (MPS) GPUs against the workload's request mix. PURE.

The placement term of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC '23), on the engine's GPUs (no CPU: the engine does not
schedule host resources). Units: compute percent (a GPU has 100).

A node's usable MPS GPUs g (healthy, on an eligible node, not held whole, by MIG or time-slicing) have
free compute L_g and free memory M_g. A request class m of the mix asks for n_m GPUs with p_m % and
mem_m MiB each (optionally of one GPU model), with weight w_m. g fits m when L_g >= p_m and M_g >= mem_m.

    F_n(m) = sum_g L_g                          when m cannot run on n (model, fewer than n_m fitting GPUs)
           = sum of L_g over the GPUs that do not fit m      otherwise
    F_n(M) = sum_m w_m F_n(m) / sum_m w_m       (the compute a request drawn from the mix could not use)

A placement's cost is the change of F on its node (FGD: the least increase, or the largest decrease, wins);
compared with packing by least room left, it keeps whole GPUs (and whole nodes) for the classes that need
them and fills the leftovers that only small requests can use.

Complexity. F is additive over GPUs for one-GPU classes, so a share's change on GPU g is a function of
(L_g, M_g) alone; for classes of whole GPUs (p_m = 100) it depends only on how many empty GPUs the node
has. `delta_single` therefore costs O(classes) once per (GPU state, node count) and then a dict lookup: the
placer scores one GPU per room bucket and one node per empty-GPU count, O(candidates x classes) in all.
Classes of several partial GPUs (rare) are computed exactly from the node's GPUs.

The mix: `Snapshot.request_mix` (the adapter's decayed histogram of recent submissions) or, when it holds
nothing for a pool, the pool's pending and running jobs of the snapshot. The heaviest classes covering
`Config.fragmentation_coverage` of the weight are kept (at most `Config.fragmentation_max_classes`),
as FGD keeps its "typical pods", after `Config.fragmentation_prior_whole` pseudo-requests of a whole GPU
are added (with one pending 30 % job as the whole mix, FGD alone would rather start a fresh GPU than
leave 10 % of a used one stranded; the prior keeps whole GPUs until the mix says what they are for).
Weights become integers so that equal changes compare equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler.core.types import JobRequest, RequestClass

WEIGHT_SCALE = 10_000  # the heaviest class weighs this much once weights are integers


@dataclass(frozen=True, slots=True)
class MixClass:
    """One MPS request class, weight as an integer."""

    gpus: int
    pct: int
    mem: int
    model: str | None  # upper case; None = any model
    weight: int


def mix_from_jobs(jobs: Iterable[JobRequest]) -> list[RequestClass]:
    """The shared requests among `jobs` as a mix: one class per shape, weighed by how many jobs have it."""
    counts: dict[tuple, int] = {}
    for j in jobs:
        if j.sharing == "exclusive":
            continue
        k = (j.pool, j.sharing, j.gpus, j.mps_compute_pct, j.mps_memory_mib, j.mig_profile, j.gpu_model)
        counts[k] = counts.get(k, 0) + 1
    return [
        RequestClass(pool, sharing, gpus, pct or 0, mem or 0, mig, model, float(n))  # type: ignore[arg-type]
        for (pool, sharing, gpus, pct, mem, mig, model), n in counts.items()
    ]


def mps_classes(
    mix: Iterable[RequestClass],
    pool: int,
    coverage: float = 0.95,
    max_classes: int = 32,
    prior_whole: float = 0.0,
) -> tuple[MixClass, ...]:
    """The pool's MPS classes of the mix, merged by shape, heaviest first (ties: the larger request
    first), cut once they cover `coverage` of the weight (the class that crosses it is kept) or reach
    `max_classes`; weights scaled to integers (the heaviest = WEIGHT_SCALE, none below 1).
    `prior_whole` pseudo-requests of one whole GPU join a mix that has any MPS request: while few
    requests have been seen, the term keeps whole GPUs as packing does; a large mix outweighs them."""
    merged: dict[tuple[int, int, int, str | None], float] = {}
    for c in mix:
        if c.pool != pool or c.sharing != "mps" or c.weight <= 0 or c.gpus < 1:
            continue
        pct = c.mps_compute_pct
        if not 1 <= pct <= 100:
            continue
        model = c.gpu_model.strip().upper() if c.gpu_model else None
        k = (c.gpus, pct, max(0, c.mps_memory_mib), model)
        merged[k] = merged.get(k, 0.0) + c.weight
    if not merged:
        return ()
    if prior_whole > 0:
        k = (1, 100, 0, None)
        merged[k] = merged.get(k, 0.0) + prior_whole
    total = sum(merged.values())
    ranked = sorted(merged.items(), key=lambda kv: (-kv[1], -kv[0][0], -kv[0][1], -kv[0][2], kv[0][3] or ""))
    top = ranked[0][1]
    out: list[MixClass] = []
    cum = 0.0
    for (gpus, pct, mem, model), w in ranked:
        if cum >= coverage * total or len(out) >= max_classes:
            break
        out.append(MixClass(gpus, pct, mem, model, max(1, round(WEIGHT_SCALE * w / top))))
        cum += w
    return tuple(out)


class MpsFragmentation:
    """F_n(M) of one pool's mix on MPS GPUs, and its change by a placement (see the module docstring).
    Numerators are integers: sum_m w_m F_n(m) in weight x percent; divide by `denominator` for percent."""

    __slots__ = (
        "_empty_memo",
        "_partial_memo",
        "_single_memo",
        "classes",
        "denominator",
        "multi_partial",
        "multi_whole",
        "single",
    )

    def __init__(self, classes: Sequence[MixClass]) -> None:
        self.classes = tuple(classes)
        self.denominator = max(1, sum(c.weight for c in self.classes))
        self.single = tuple(c for c in self.classes if c.gpus == 1)
        self.multi_whole = tuple(c for c in self.classes if c.gpus > 1 and c.pct == 100)
        self.multi_partial = tuple(c for c in self.classes if c.gpus > 1 and c.pct < 100)
        self._single_memo: dict[tuple, int] = {}
        self._empty_memo: dict[tuple, int] = {}
        self._partial_memo: dict[tuple, int] = {}

    def __bool__(self) -> bool:
        return bool(self.classes)

    # -- exact, from a node's GPUs

    def node_num(self, model: str, gpus: Sequence[tuple[int, int]]) -> int:
        """sum_m w_m F_n(m) for a node of `model` whose usable GPUs have (free %, free MiB) `gpus`."""
        model = model.upper()
        total = sum(L for L, _ in gpus)
        if total <= 0:
            return 0
        return _fragment(self.classes, model, gpus, total)

    # -- fast, one share on one GPU

    def delta_used_gpu(self, model: str, pct: int, mem: int, free_pct: int, free_mem: int) -> int:
        """`delta_single` for a GPU that already holds shares (free_pct < 100), when the mix has no classes
        of several partial GPUs: the change then depends on the GPU alone (whole-GPU classes of several GPUs
        lose pct of a fragment they had anyway). `model` in upper case."""
        key = (model, pct, mem, free_pct, free_mem)
        d = self._partial_memo.get(key)
        if d is None:
            d = self._partial_memo[key] = self._single_terms(model, pct, mem, free_pct, free_mem) - pct * sum(
                c.weight for c in self.multi_whole
            )
        return d

    def delta_single(
        self,
        model: str,
        pct: int,
        mem: int,
        free_pct: int,
        free_mem: int,
        node_empty: int,
        node_gpus: int,
        empty_mem: int,
        others: Sequence[tuple[int, int]] | None = None,
    ) -> int:
        """Change of the node's numerator when a share (pct, mem) goes on a GPU with (free_pct, free_mem).
        node_empty: the node's usable GPUs with nothing on them (this one included when it is empty),
        node_gpus: its GPUs, empty_mem: an empty GPU's memory there; `others`: the (free %, free MiB) of the
        node's other usable GPUs, needed only when the mix has classes of several partial GPUs."""
        model = model.upper()
        key = (model, pct, mem, free_pct, free_mem)
        d = self._single_memo.get(key)
        if d is None:
            d = self._single_memo[key] = self._single_terms(model, pct, mem, free_pct, free_mem)
        if self.multi_whole:
            empty = free_pct >= 100 and free_mem >= empty_mem
            ekey = (model, pct, node_empty, node_gpus, empty_mem, empty)
            e = self._empty_memo.get(ekey)
            if e is None:
                e = self._empty_memo[ekey] = self._whole_terms(model, pct, node_empty, node_gpus, empty_mem, empty)
            d += e
        if self.multi_partial:
            if others is None:
                raise ValueError("the mix has classes of several partial GPUs: pass the node's other GPUs")
            before = [(free_pct, free_mem), *others]
            after = [(free_pct - pct, free_mem - mem), *others]
            d += self._partial_num(model, after) - self._partial_num(model, before)
        return d

    def _single_terms(self, model: str, pct: int, mem: int, L: int, M: int) -> int:
        """sum over one-GPU classes of w_m (f_m(L - pct, M - mem) - f_m(L, M)), f_m = L when g does not fit m."""
        L2, M2 = L - pct, M - mem
        d = 0
        for c in self.single:
            runs = c.model is None or c.model == model
            before = L if not (runs and L >= c.pct and M >= c.mem) else 0
            after = L2 if not (runs and L2 >= c.pct and M2 >= c.mem) else 0
            d += c.weight * (after - before)
        return d

    def _whole_terms(self, model: str, pct: int, c_empty: int, G: int, empty_mem: int, empty: bool) -> int:
        """sum over classes of several whole GPUs of w_m x the change of F_n(m): the node's free compute S
        drops by pct; F_n(m) = S while fewer than n_m GPUs are empty, S - 100 x empties otherwise."""
        d = 0
        for c in self.multi_whole:
            runs = (c.model is None or c.model == model) and c.mem <= empty_mem and c.gpus <= G
            if not runs or not empty:
                d -= c.weight * pct  # its F is all of S, or the GPU was no use to it anyway: S shrinks
                continue
            n = c.gpus
            if c_empty < n:
                d -= c.weight * pct
            elif c_empty == n:
                d += c.weight * (100 * n - pct)  # the node could run it and now cannot
            else:
                d += c.weight * (100 - pct)  # one empty GPU fewer, its leftover is a fragment
        return d

    def _partial_num(self, model: str, gpus: Sequence[tuple[int, int]]) -> int:
        return _fragment(self.multi_partial, model, gpus, sum(L for L, _ in gpus))


def _fragment(classes: Sequence[MixClass], model: str, gpus: Sequence[tuple[int, int]], total: int) -> int:
    """sum over `classes` of weight x the free % a request of that class could not use: all of it when the
    request does not fit the node (another model, too few GPUs with room), else the GPUs too small for it."""
    f = 0
    for c in classes:
        if c.model is not None and c.model != model:
            f += c.weight * total
            continue
        fits = 0
        unfit = 0
        for L, M in gpus:
            if L >= c.pct and M >= c.mem:
                fits += 1
            else:
                unfit += L
        f += c.weight * (unfit if fits >= c.gpus else total)
    return f
