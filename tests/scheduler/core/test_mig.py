"""MIG catalogue: profiles per model, NVIDIA's valid start slices, overlap rules."""

import pytest

from scheduler.core.mig import (
    best_start,
    free_placements,
    is_valid_layout,
    occupied_mask,
    profiles_for,
    validate_profile,
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
