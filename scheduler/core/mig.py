"""MIG profile catalogue and placement rules, per GPU model. PURE.

A MIG-capable GPU of the A100/H100/H200/B200 family has 7 compute slices and 8 memory slices; a GPU
instance of a profile takes `slots` consecutive memory slices starting at one of the profile's valid
start indices. This is exactly what `nvidia-smi mig -lgipp` prints as `{starts}:size`, e.g. on H100:

    Profile ID 19 (1g.10gb)  Placements: {0,1,2,3,4,5,6}:1
    Profile ID 15 (1g.20gb)  Placements: {0,2,4,6}:2
    Profile ID 14 (2g.20gb)  Placements: {0,2,4}:2
    Profile ID  9 (3g.40gb)  Placements: {0,4}:4
    Profile ID  5 (4g.40gb)  Placement : {0}:4
    Profile ID  0 (7g.80gb)  Placement : {0}:8

Source: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles" (profile tables per product:
A30, A100-40GB, A100-80GB, H100, H200, B200) and "Getting Started with MIG / List GPU Instance
Profiles" (the `-lgipp` placement listing above):
https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html
https://docs.nvidia.com/datacenter/tesla/mig-user-guide/ (section "Creating GPU Instances").
The geometry (slots and start indices) is the same on every 7/8-slice product; only the memory in a
profile's name changes. A30 has 4 compute and 4 memory slices. Instances of different profiles may
share a GPU as long as their memory slices do not overlap (the hardware's placement rule).
The "+me" (media extension) variants are left out: the scheduler does not place media workloads.

    profiles_for("H100", 81559)                      # {"1g.10gb": MigProfile(...), ...}
    validate_profile("A100", 40960, "3g.40gb")       # "3g.40gb is not a MIG profile of A100-40GB; ..."
    free_placements("H100", 81920, (("3g.40gb", 4),))  # {"1g.10gb": (0, 1, 2, 3), ..., "3g.40gb": (0,)}
"""

from __future__ import annotations

from dataclasses import dataclass

# (compute slices, memory slots, valid starts) for each profile position of a 7/8-slice GPU, smallest first.
_GEOMETRY_7 = (
    ("1g", 1, (0, 1, 2, 3, 4, 5, 6)),  # 1g with one memory slice
    ("1g2", 2, (0, 2, 4, 6)),  # 1g with two memory slices (e.g. 1g.20gb on 80 GB parts)
    ("2g", 2, (0, 2, 4)),
    ("3g", 4, (0, 4)),
    ("4g", 4, (0,)),
    ("7g", 8, (0,)),
)
_GEOMETRY_4 = (  # A30: 4 compute, 4 memory slices
    ("1g", 1, (0, 1, 2, 3)),
    ("2g", 2, (0, 2)),
    ("4g", 4, (0,)),
)


@dataclass(frozen=True, slots=True)
class MigProfile:
    name: str  # "3g.40gb"
    compute_slices: int  # g
    memory_slots: int  # memory slices it takes (size in `-lgipp`)
    memory_gb: int  # as named
    starts: tuple[int, ...]  # valid start slices
    total_compute: int  # compute slices of the whole GPU (7, or 4 on A30)
    total_slots: int  # memory slices of the whole GPU (8, or 4 on A30)

    @property
    def memory_mib(self) -> int:
        return self.memory_gb * 1024

    @property
    def max_instances(self) -> int:
        """How many fit on an empty GPU (starts that do not overlap)."""
        count, end = 0, -1
        for s in self.starts:
            if s > end:
                count += 1
                end = s + self.memory_slots - 1
        return count

    @property
    def compute_fraction(self) -> float:
        """Share of the GPU's compute, for quotas and fair share (a 3g of 7 is 3/7 of a GPU)."""
        return self.compute_slices / self.total_compute

    def mask(self, start: int) -> int:
        return ((1 << self.memory_slots) - 1) << start


def _family(names_gb: tuple[int, ...], geometry: tuple[tuple[str, int, tuple[int, ...]], ...]) -> dict[str, MigProfile]:
    total_compute = 7 if geometry is _GEOMETRY_7 else 4
    total_slots = 8 if geometry is _GEOMETRY_7 else 4
    out: dict[str, MigProfile] = {}
    for (g, slots, starts), gb in zip(geometry, names_gb, strict=True):
        compute = int(g[0])
        name = f"{compute}g.{gb}gb"
        out[name] = MigProfile(name, compute, slots, gb, starts, total_compute, total_slots)
    return out


# (model, memory class in GB) -> profiles. Names per NVIDIA's tables (see the module docstring).
CATALOGUE: dict[tuple[str, int], dict[str, MigProfile]] = {
    ("A30", 24): _family((6, 12, 24), _GEOMETRY_4),
    ("A100", 40): _family((5, 10, 10, 20, 20, 40), _GEOMETRY_7),
    ("A100", 80): _family((10, 20, 20, 40, 40, 80), _GEOMETRY_7),
    ("A800", 40): _family((5, 10, 10, 20, 20, 40), _GEOMETRY_7),
    ("A800", 80): _family((10, 20, 20, 40, 40, 80), _GEOMETRY_7),
    ("H100", 80): _family((10, 20, 20, 40, 40, 80), _GEOMETRY_7),
    ("H100", 94): _family((12, 24, 24, 47, 47, 94), _GEOMETRY_7),  # H100 NVL
    ("H200", 141): _family((18, 35, 35, 71, 71, 141), _GEOMETRY_7),
    ("B200", 180): _family((23, 45, 45, 90, 90, 180), _GEOMETRY_7),
}
_MEMORY_TOLERANCE = 0.12  # a GPU's reported memory is within this of its class (H100: 81559 MiB ~ 80 GB)


def _model_key(model: str) -> str:
    m = model.strip().upper()
    for known in ("A100", "A800", "A30", "H100", "H200", "B200"):
        if known in m:
            return known
    return m


def variant(model: str, memory_mib: int) -> tuple[str, int] | None:
    """The catalogue key for a GPU: ("A100", 40) for an A100 with 40960 MiB; None when not MIG-capable."""
    key = _model_key(model)
    best: tuple[str, int] | None = None
    best_err = _MEMORY_TOLERANCE
    gib = memory_mib / 1024
    for m, gb in CATALOGUE:
        if m != key:
            continue
        err = abs(gib - gb) / gb
        if err <= best_err:
            best, best_err = (m, gb), err
    return best


def variant_name(model: str, memory_mib: int) -> str:
    v = variant(model, memory_mib)
    return f"{v[0]}-{v[1]}GB" if v else f"{model} ({round(memory_mib / 1024)} GB)"


def profiles_for(model: str, memory_mib: int) -> dict[str, MigProfile]:
    """The MIG profiles a GPU of this model and memory supports ({} when it has no MIG)."""
    v = variant(model, memory_mib)
    return CATALOGUE[v] if v else {}


def validate_profile(model: str, memory_mib: int, profile: str) -> str | None:
    """None when `profile` is valid on this GPU, else an error naming the valid ones."""
    profiles = profiles_for(model, memory_mib)
    if not profiles:
        return f"{variant_name(model, memory_mib)} does not support MIG"
    if profile in profiles:
        return None
    return f"{profile} is not a MIG profile of {variant_name(model, memory_mib)}; valid profiles: {', '.join(profiles)}"


def occupied_mask(profiles: dict[str, MigProfile], used: tuple[tuple[str, int], ...] | list) -> int:
    """Bit mask of the memory slices taken by `used` instances. Unknown profiles take the whole GPU
    (safe: a GPU whose layout we cannot read is not offered)."""
    mask = 0
    for name, start in used:
        p = profiles.get(name)
        if p is None:
            return (1 << 8) - 1
        mask |= p.mask(start)
    return mask


def free_starts(profile: MigProfile, occupied: int) -> tuple[int, ...]:
    return tuple(s for s in profile.starts if not profile.mask(s) & occupied)


def free_placements(
    model: str, memory_mib: int, used: tuple[tuple[str, int], ...] | list
) -> dict[str, tuple[int, ...]]:
    """Profile -> the start slices still free on a GPU with `used` (profile, start) instances.
    Profiles with no free start are left out."""
    profiles = profiles_for(model, memory_mib)
    occupied = occupied_mask(profiles, used)
    out: dict[str, tuple[int, ...]] = {}
    for name, p in profiles.items():
        starts = free_starts(p, occupied)
        if starts:
            out[name] = starts
    return out


_BEST_START_CACHE: dict[tuple[int, int, str], int | None] = {}


def best_start(profiles: dict[str, MigProfile], occupied: int, profile: str) -> int | None:
    """The free start for `profile` that keeps the most room: after placing, the largest profile that
    still fits should be as large as possible, then as many (profile, start) options as possible remain;
    ties go to the lowest start. None when no start is free. Memoised (at most 256 layouts a GPU)."""
    key = (id(profiles), occupied, profile)
    if key in _BEST_START_CACHE and profiles is _CACHED_PROFILES.get(id(profiles)):
        return _BEST_START_CACHE[key]
    _CACHED_PROFILES[id(profiles)] = profiles
    result = _best_start(profiles, occupied, profile)
    _BEST_START_CACHE[key] = result
    return result


_CACHED_PROFILES: dict[int, dict[str, MigProfile]] = {}


def _best_start(profiles: dict[str, MigProfile], occupied: int, profile: str) -> int | None:
    p = profiles[profile]
    best: tuple[int, int, int] | None = None
    best_s: int | None = None
    for s in free_starts(p, occupied):
        after = occupied | p.mask(s)
        largest = 0
        options = 0
        for q in profiles.values():
            n = len(free_starts(q, after))
            if n:
                options += n
                largest = max(largest, q.memory_slots * 10 + q.compute_slices)
        key = (largest, options, -s)
        if best is None or key > best:
            best, best_s = key, s
    return best_s


def is_valid_layout(model: str, memory_mib: int, used: tuple[tuple[str, int], ...] | list) -> str | None:
    """None when every (profile, start) is a valid placement and none overlap; else the problem."""
    profiles = profiles_for(model, memory_mib)
    if not profiles:
        return f"{variant_name(model, memory_mib)} does not support MIG" if used else None
    mask = 0
    for name, start in used:
        p = profiles.get(name)
        if p is None:
            return f"{name} is not a MIG profile of {variant_name(model, memory_mib)}"
        if start not in p.starts:
            return f"{name} cannot start at slice {start} (valid: {', '.join(map(str, p.starts))})"
        if p.mask(start) & mask:
            return f"{name} at slice {start} overlaps another instance"
        mask |= p.mask(start)
    return None
