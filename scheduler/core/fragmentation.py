"""Fragmentation of shared (MPS) GPUs against the workload's request mix. PURE.

The placement term of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC '23), on the engine's GPUs and, where requests ask for it and
nodes track it, host CPU. Units: compute percent (a GPU has 100).

A node's usable MPS GPUs g (healthy, on an eligible node, not held whole, by MIG or time-slicing) have
free compute L_g and free memory M_g. A request class m of the mix asks for n_m GPUs with p_m % and
mem_m MiB each (optionally of one GPU model) and cpu_m host milli-CPUs and hmem_m MiB of host memory on the
node, with weight w_m. g fits m when L_g >= p_m and M_g >= mem_m.

    F_n(m) = sum_g L_g                          when m cannot run on n (model, fewer than n_m fitting GPUs,
                                                less than cpu_m CPU or hmem_m host memory left)
           = sum of L_g over the GPUs that do not fit m      otherwise
    F_n(M) = sum_m w_m F_n(m) / sum_m w_m       (the compute a request drawn from the mix could not use)

A placement's cost is the change of F on its node (FGD: the least increase, or the largest decrease, wins);
compared with packing by least room left, it keeps whole GPUs (and whole nodes) for the classes that need
them and fills the leftovers that only small requests can use.

Complexity. F is additive over GPUs for one-GPU classes, so a share's change on GPU g is a function of
(L_g, M_g) alone; for classes of whole GPUs (p_m = 100) it depends only on how many empty GPUs the node
has. `delta_single` therefore costs O(classes) once per (GPU state, node count) and then a dict lookup: the
placer scores one GPU per room bucket and one node per empty-GPU count, O(candidates x classes) in all.
Classes of several partial GPUs (rare) are computed exactly from the node's GPUs. With classes that ask for
host CPU or memory (`cpu_aware`) a placement can change which classes the node still admits, so the change is a
function of the whole node: `node_num` (exact, memoised by the node's state) is used instead.

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
    cpu: int = 0  # host milli-CPUs a request of the class needs on the node
    hmem: int = 0  # host memory (MiB) it needs there


def mix_from_jobs(jobs: Iterable[JobRequest]) -> list[RequestClass]:
    """The shared requests among `jobs` as a mix: one class per shape, weighed by how many jobs have it."""
    counts: dict[tuple, int] = {}
    for j in jobs:
        if j.sharing == "exclusive":
            continue
        k = (
            j.pool,
            j.sharing,
            j.gpus,
            j.mps_compute_pct,
            j.mps_memory_mib,
            j.mig_profile,
            j.gpu_model,
            j.host_cpu_milli,
            j.host_memory_mib,
        )
        counts[k] = counts.get(k, 0) + 1
    return [
        RequestClass(pool, sharing, gpus, pct or 0, mem or 0, mig, model, float(n), cpu, hmem)  # type: ignore[arg-type]
        for (pool, sharing, gpus, pct, mem, mig, model, cpu, hmem), n in counts.items()
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
    merged: dict[tuple[int, int, int, str | None, int, int], float] = {}
    for c in mix:
        if c.pool != pool or c.sharing != "mps" or c.weight <= 0 or c.gpus < 1:
            continue
        pct = c.mps_compute_pct
        if not 1 <= pct <= 100:
            continue
        model = c.gpu_model.strip().upper() if c.gpu_model else None
        k = (c.gpus, pct, max(0, c.mps_memory_mib), model, max(0, c.host_cpu_milli), max(0, c.host_memory_mib))
        merged[k] = merged.get(k, 0.0) + c.weight
    if not merged:
        return ()
    if prior_whole > 0:
        k = (1, 100, 0, None, 0, 0)
        merged[k] = merged.get(k, 0.0) + prior_whole
    total = sum(merged.values())
    ranked = sorted(
        merged.items(), key=lambda kv: (-kv[1], -kv[0][0], -kv[0][1], -kv[0][2], kv[0][3] or "", -kv[0][4], -kv[0][5])
    )
    top = ranked[0][1]
    out: list[MixClass] = []
    cum = 0.0
    for (gpus, pct, mem, model, cpu, hmem), w in ranked:
        if cum >= coverage * total or len(out) >= max_classes:
            break
        out.append(MixClass(gpus, pct, mem, model, max(1, round(WEIGHT_SCALE * w / top)), cpu, hmem))
        cum += w
    return tuple(out)


class MpsFragmentation:
    """F_n(M) of one pool's mix on MPS GPUs, and its change by a placement (see the module docstring).
    Numerators are integers: sum_m w_m F_n(m) in weight x percent; divide by `denominator` for percent."""

    __slots__ = (
        "_empty_memo",
        "_node_memo",
        "_partial_memo",
        "_single_memo",
        "classes",
        "cpu_aware",
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
        self._node_memo: dict[tuple, int] = {}
        self.cpu_aware = any(c.cpu > 0 or c.hmem > 0 for c in self.classes)

    def __bool__(self) -> bool:
        return bool(self.classes)

    # -- exact, from a node's GPUs

    def node_num(
        self, model: str, gpus: Sequence[tuple[int, int]], cpu: int | None = None, hmem: int | None = None
    ) -> int:
        """sum_m w_m F_n(m) for a node of `model` whose usable GPUs have (free %, free MiB) `gpus`, with
        `cpu` host milli-CPUs and `hmem` MiB of host memory left (None: not tracked, no class is refused
        for it). Memoised."""
        model = model.upper()
        aware = self.cpu_aware
        key = (model, tuple(gpus), cpu if aware else None, hmem if aware else None)
        v = self._node_memo.get(key)
        if v is None:
            total = sum(L for L, _ in gpus)
            v = _fragment(self.classes, model, gpus, total, key[2], key[3]) if total > 0 else 0
            self._node_memo[key] = v
        return v

    def delta_node(
        self,
        model: str,
        gpus: Sequence[tuple[int, int]],
        host_b: tuple[int | None, int | None],
        host_a: tuple[int | None, int | None],
        pct: int,
        mem: int,
        idxs: Sequence[int],
    ) -> list[int]:
        """For each i of `idxs`: the change of `node_num` when a share (pct, mem) goes on GPU gpus[i] and the
        node's (CPU, host memory) left goes from host_b to host_a (None: not tracked). Exact; O(classes) per
        GPU after one pass over the node: a share changes one GPU, so each class's count of fitting GPUs and
        sum of unfit room change by that GPU's part alone."""
        model = model.upper()
        total = sum(L for L, _ in gpus)
        out = [0] * len(idxs)
        for c in self.classes:
            model_ok = c.model is None or c.model == model
            runs_b = model_ok and _admits(c, *host_b)
            runs_a = model_ok and _admits(c, *host_a)
            cp, cm, need, w = c.pct, c.mem, c.gpus, c.weight
            fits = 0
            unfit = 0
            for L, M in gpus:
                if L >= cp and M >= cm:
                    fits += 1
                else:
                    unfit += L
            f_b = unfit if runs_b and fits >= need else total
            for j, i in enumerate(idxs):
                L, M = gpus[i]
                L2, M2 = L - pct, M - mem
                fb = L >= cp and M >= cm
                fa = L2 >= cp and M2 >= cm
                fits_a = fits - fb + fa
                if runs_a and fits_a >= need:
                    f_a = unfit - (0 if fb else L) + (0 if fa else L2)
                else:
                    f_a = total - pct
                out[j] += w * (f_a - f_b)
        return out

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


def _fragment(
    classes: Sequence[MixClass],
    model: str,
    gpus: Sequence[tuple[int, int]],
    total: int,
    cpu: int | None = None,
    hmem: int | None = None,
) -> int:
    """sum over `classes` of weight x the free % a request of that class could not use: all of it when the
    request does not fit the node (another model, too little CPU left, too few GPUs with room), else the GPUs
    too small for it."""
    f = 0
    for c in classes:
        if (c.model is not None and c.model != model) or not _admits(c, cpu, hmem):
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


def _admits(c: MixClass, cpu: int | None, hmem: int | None) -> bool:
    """The node's host CPU and memory left (None: not tracked) admit a request of class c."""
    return (cpu is None or c.cpu <= cpu) and (hmem is None or c.hmem <= hmem)
