"""MIG catalogue: profiles per model, NVIDIA's valid start slices, overlap rules."""

import dataclasses

import pytest

from scheduler.core import mig
from scheduler.core.mig import (
    MigProfile,
    best_start,
    free_placements,
    is_valid_layout,
    occupied_mask,
    profiles_for,
    validate_profile,
    variant,
    variant_name,
)

A100_40 = ("A100", 40960)
A100_80 = ("A100", 81920)
H100 = ("H100", 81559)  # what nvidia-smi reports for an H100 SXM 80GB
H200 = ("H200", 143771)


def test_a100_40gb_profiles():
    assert list(profiles_for(*A100_40)) == ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]


@pytest.mark.parametrize("gpu", [A100_80, H100])
def test_80gb_profiles(gpu):
    assert list(profiles_for(*gpu)) == ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]


def test_h200_profiles():
    assert list(profiles_for(*H200)) == ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]


def test_valid_start_slices_follow_nvidia_placements():
    p = profiles_for(*H100)
    assert p["1g.10gb"].starts == (0, 1, 2, 3, 4, 5, 6)
    assert p["1g.20gb"].starts == (0, 2, 4, 6)
    assert p["2g.20gb"].starts == (0, 2, 4)
    assert p["3g.40gb"].starts == (0, 4)
    assert p["4g.40gb"].starts == (0,)
    assert p["7g.80gb"].starts == (0,)


def test_max_instances():
    p = profiles_for(*A100_40)
    assert [p[n].max_instances for n in p] == [7, 4, 3, 2, 1, 1]


def test_free_placements_on_empty_gpu_is_everything():
    free = free_placements(*H100, ())
    assert free["1g.10gb"] == (0, 1, 2, 3, 4, 5, 6) and free["7g.80gb"] == (0,)


def test_free_placements_after_3g_at_4():
    free = free_placements(*H100, (("3g.40gb", 4),))
    assert free == {
        "1g.10gb": (0, 1, 2, 3),
        "1g.20gb": (0, 2),
        "2g.20gb": (0, 2),
        "3g.40gb": (0,),
        "4g.40gb": (0,),
    }


def test_7g_takes_the_whole_gpu():
    assert free_placements(*H100, (("7g.80gb", 0),)) == {}


def test_4g_plus_3g_is_a_valid_layout_and_fills_the_gpu():
    assert is_valid_layout(*A100_40, [("4g.20gb", 0), ("3g.20gb", 4)]) is None
    assert free_placements(*A100_40, [("4g.20gb", 0), ("3g.20gb", 4)]) == {}


def test_overlapping_layout_is_rejected():
    assert is_valid_layout(*H100, [("3g.40gb", 0), ("2g.20gb", 2)]) == "2g.20gb at slice 2 overlaps another instance"


def test_invalid_start_is_rejected():
    assert is_valid_layout(*H100, [("3g.40gb", 2)]) == "3g.40gb cannot start at slice 2 (valid: 0, 4)"


def test_validate_profile_ok():
    assert validate_profile(*A100_80, "3g.40gb") is None


def test_validate_profile_wrong_memory_variant():
    assert validate_profile(*A100_40, "3g.40gb") == (
        "3g.40gb is not a MIG profile of A100-40GB; valid profiles: 1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"
    )


def test_validate_profile_on_gpu_without_mig():
    assert validate_profile("V100", 32768, "1g.5gb") == "V100 (32 GB) does not support MIG"


def test_unknown_memory_size_has_no_profiles():
    assert profiles_for("A100", 60000) == {}


def test_best_start_keeps_the_4g_slot_free_for_a_small_instance():
    p = profiles_for(*H100)
    # A 1g in slices 0-3 would block the only 4g placement (slice 0); slice 6 keeps 4g and 2g slots.
    assert best_start(p, 0, "1g.10gb") == 6


def test_best_start_packs_next_to_an_existing_instance():
    p = profiles_for(*H100)
    assert best_start(p, occupied_mask(p, [("3g.40gb", 4)]), "2g.20gb") == 0  # ties go to the lowest slice
    assert best_start(p, occupied_mask(p, [("7g.80gb", 0)]), "1g.10gb") is None


# One row per catalogue entry: the memory nvidia-smi would report for the class (GB x 1024 MiB), the name the
# scheduler shows, and NVIDIA's profile names smallest first.
@pytest.mark.parametrize(
    ("gpu", "name", "profiles"),
    [
        (("A30", 24576), "A30-24GB", ["1g.6gb", "2g.12gb", "4g.24gb"]),
        (("A100", 40960), "A100-40GB", ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]),
        (("A100", 81920), "A100-80GB", ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]),
        (("A800", 40960), "A800-40GB", ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]),
        (("A800", 81920), "A800-80GB", ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]),
        (("H100", 81920), "H100-80GB", ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]),
        (("H100", 96256), "H100-94GB", ["1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"]),
        (("H200", 144384), "H200-141GB", ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]),
        (("B200", 184320), "B200-180GB", ["1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"]),
    ],
)
def test_each_catalogue_gpu_has_its_name_and_nvidia_profiles(gpu, name, profiles):
    assert variant_name(*gpu) == name
    assert list(profiles_for(*gpu)) == profiles


def test_a_profile_carries_the_memory_of_its_name():
    p = profiles_for(*H100)["3g.40gb"]
    assert (p.memory_gb, p.memory_mib) == (40, 40960)  # 40 x 1024


def test_seven_slice_geometry_compute_and_memory_slices():
    p = profiles_for(*H100)
    assert [(q.compute_slices, q.memory_slots) for q in p.values()] == [(1, 1), (1, 2), (2, 2), (3, 4), (4, 4), (7, 8)]
    assert {(q.total_compute, q.total_slots) for q in p.values()} == {(7, 8)}


def test_a30_geometry_has_four_compute_and_four_memory_slices():
    p = profiles_for("A30", 24576)
    assert [(q.compute_slices, q.memory_slots, q.starts) for q in p.values()] == [
        (1, 1, (0, 1, 2, 3)),
        (2, 2, (0, 2)),
        (4, 4, (0,)),
    ]
    assert {(q.total_compute, q.total_slots) for q in p.values()} == {(4, 4)}


@pytest.mark.parametrize(
    ("gpu", "profile", "fraction"),
    [(H100, "3g.40gb", 3 / 7), (H100, "7g.80gb", 1.0), (("A30", 24576), "2g.12gb", 0.5)],
)
def test_compute_fraction_is_the_share_of_the_gpus_compute_slices(gpu, profile, fraction):
    assert profiles_for(*gpu)[profile].compute_fraction == pytest.approx(fraction)


def test_a30_max_instances():
    a30 = profiles_for("A30", 24576)
    assert [q.max_instances for q in a30.values()] == [4, 2, 1]


def test_max_instances_counts_overlapping_starts_once():
    # Two-slice instances that may start at 0, 1 or 2: the one at 1 overlaps the one at 0, so 0 and 2 fit.
    p = MigProfile("1g.x", 1, 2, 10, (0, 1, 2), 7, 8)
    assert p.max_instances == 2


def test_profiles_are_frozen():
    p = profiles_for(*H100)["1g.10gb"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.memory_slots = 2


@pytest.mark.parametrize(
    ("model", "memory_mib", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", 81559, ("H100", 80)),
        ("  nvidia a100-sxm4-40gb ", 40960, ("A100", 40)),
        ("NVIDIA A30", 24576, ("A30", 24)),
    ],
)
def test_variant_finds_the_model_inside_nvidia_smis_name_whatever_the_case(model, memory_mib, expected):
    assert variant(model, memory_mib) == expected


@pytest.mark.parametrize(
    ("memory_mib", "expected"),
    [
        (72090, ("A100", 80)),  # 70.4004 GiB: 9.5996 / 80 = 0.119995 below the class, inside 0.12
        (72089, None),  # 70.3994 GiB: 0.120007 below, outside
        (91750, ("A100", 80)),  # 89.5996 GiB: 0.119995 above, inside
        (91751, None),  # 89.6006 GiB: 0.120007 above, outside
    ],
)
def test_memory_within_twelve_percent_of_the_class_is_that_class(memory_mib, expected):
    # A100 rather than H100: H100's 94 GB class would take the memory above 80 GB.
    assert variant("A100", memory_mib) == expected


@pytest.mark.parametrize(
    ("memory_mib", "shown"),
    [(33300, "V100 (33 GB)"), (33270, "V100 (32 GB)")],  # 32.52 and 32.49 GiB
)
def test_a_gpu_without_mig_is_named_with_its_memory_rounded_to_whole_gib(memory_mib, shown):
    assert variant_name("V100", memory_mib) == shown


def test_a_gpu_without_mig_has_a_valid_empty_layout():
    assert is_valid_layout("V100", 32768, []) is None


def test_a_gpu_without_mig_cannot_hold_an_instance():
    assert is_valid_layout("V100", 32768, [("1g.5gb", 0)]) == "V100 (32 GB) does not support MIG"


def test_an_unknown_profile_is_not_a_valid_layout():
    assert is_valid_layout(*H100, [("1g.10gb", 0), ("5g.50gb", 1)]) == "5g.50gb is not a MIG profile of H100-80GB"


def test_an_unknown_profile_takes_all_eight_slices():
    p = profiles_for(*H100)
    assert occupied_mask(p, [("1g.10gb", 0), ("5g.50gb", 1)]) == 0b1111_1111


def test_a_gpu_with_an_unknown_profile_offers_nothing():
    assert free_placements(*H100, [("5g.50gb", 1)]) == {}


def test_occupied_mask_sets_the_bits_of_each_instances_slices():
    p = profiles_for(*H100)
    # 1g.10gb at 1 -> slice 1; 2g.20gb at 4 -> slices 4 and 5
    assert occupied_mask(p, [("1g.10gb", 1), ("2g.20gb", 4)]) == 0b0011_0010


def test_best_start_answers_a_repeated_question_from_its_memo(monkeypatch):
    p = dict(profiles_for(*H100))  # a fresh dict: nothing of it is memoised yet
    calls = []
    search = mig._best_start
    monkeypatch.setattr(mig, "_best_start", lambda *a: calls.append(a) or search(*a))
    assert best_start(p, 0, "1g.10gb") == 6
    assert best_start(p, 0, "1g.10gb") == 6
    assert len(calls) == 1


# The catalogue is built by _family at import, before any test runs: these call it so that its own code is
# judged too.
@pytest.mark.parametrize(
    ("geometry", "sizes", "expected"),
    [
        (mig._GEOMETRY_4, (6, 12, 24), [("1g.6gb", 1, 6, 4, 4), ("2g.12gb", 2, 12, 4, 4), ("4g.24gb", 4, 24, 4, 4)]),
        (
            mig._GEOMETRY_7,
            (5, 10, 10, 20, 20, 40),
            [
                ("1g.5gb", 1, 5, 7, 8),
                ("1g.10gb", 1, 10, 7, 8),
                ("2g.10gb", 2, 10, 7, 8),
                ("3g.20gb", 3, 20, 7, 8),
                ("4g.20gb", 4, 20, 7, 8),
                ("7g.40gb", 7, 40, 7, 8),
            ],
        ),
    ],
)
def test_a_family_names_each_profile_by_its_compute_slices_and_memory(geometry, sizes, expected):
    family = mig._family(sizes, geometry)
    got = [(n, p.compute_slices, p.memory_gb, p.total_compute, p.total_slots) for n, p in family.items()]
    assert got == expected


def test_a_family_refuses_a_memory_size_list_that_does_not_match_its_profiles():
    with pytest.raises(ValueError):
        mig._family((6, 12), mig._GEOMETRY_4)
