"""Slurm hostlist compression (fabric/topology/hostlist.py), each expected string worked by hand from Slurm's rule: a
range takes the width of its low bound (src/common/hostlist.c, _parse_single_range: width = strlen(lo))."""

from __future__ import annotations

import random

import pytest

from fabric.topology.hostlist import compress, expand, invalid_name


def test_a_zero_padded_run_keeps_its_width():
    assert compress([f"gpu{i:03d}" for i in range(1, 33)]) == "gpu[001-032]"


def test_gaps_split_the_ranges_inside_one_bracket():
    assert compress(["stage1", "stage2", "stage3", "stage5", "stage7", "stage8"]) == "stage[1-3,5,7-8]"


def test_an_unpadded_run_crosses_a_power_of_ten():
    # "n[9-11]": width 1, so 9 -> n9 and 10 -> n10, exactly the names given.
    assert compress(["n9", "n10", "n11"]) == "n[9-11]"


def test_a_padded_run_crosses_into_more_digits():
    # 100 written at width 3 is "100": n099 and n100 are one range.
    assert compress(["n098", "n099", "n100"]) == "n[098-100]"


def test_the_same_number_padded_and_not_stays_two_hosts():
    # n7 and n07 are different hosts; "n[7,07-08]" expands to n7, n07, n08 (each range its own width).
    assert compress(["n07", "n7", "n08"]) == "n[7,07-08]"


def test_a_padded_and_an_unpadded_neighbour_do_not_merge():
    # n09 then n10: "10" is 10 written at width 2, so they do merge; n9 then n010 do not (010 is not 10 at width 1).
    assert compress(["n09", "n10"]) == "n[09-10]"
    assert compress(["n9", "n010"]) == "n[9,010]"


def test_mixed_prefixes_in_name_order():
    names = ["stage121", "rocket", "booster2", "atlas", "booster1", "stage122", "sputnik1"]
    assert compress(names) == "atlas,booster[1-2],rocket,sputnik1,stage[121-122]"


def test_a_single_numbered_name_takes_no_bracket():
    assert compress(["ib7"]) == "ib7"
    assert compress(["ib1", "ib7-hosts"]) == "ib1,ib7-hosts"


def test_only_the_trailing_digits_are_ranged():
    names = [f"a05-p1-dgx-01-c{i:02d}" for i in (1, 3, 4, 9)]
    assert compress(names) == "a05-p1-dgx-01-c[01,03-04,09]"


def test_duplicates_are_dropped():
    assert compress(["n1", "n1", "n2"]) == "n[1-2]"


@pytest.mark.parametrize("name", ["gpu[1]", "a,b", "two words", "x=1", "#c", ""])
def test_names_a_hostlist_cannot_hold_are_refused(name):
    assert invalid_name(name)
    with pytest.raises(ValueError, match="cannot be written in a Slurm hostlist"):
        compress([name, "ok1"])


def test_expand_reads_what_slurm_prints():
    assert expand("atlas,booster[1-4],stage[1-3,5],tank[1-2]") == [
        "atlas", "booster1", "booster2", "booster3", "booster4", "stage1", "stage2", "stage3", "stage5", "tank1",
        "tank2",
    ]  # fmt: skip
    assert expand("n[9-10],n[08-09]") == ["n9", "n10", "n08", "n09"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("n[1-", "unclosed '[' in 'n[1-'"),
        ("n[a-b]", "bad range 'a-b' in 'n[a-b]'"),
        ("n[1-x]", "bad range '1-x' in 'n[1-x]'"),
        ("n[3-1]", "range '3-1' runs backwards in 'n[3-1]'"),
        ("n[1-2]r[3]", "more than one range in 'n[1-2]r[3]'"),
    ],
)
def test_expand_refuses_a_malformed_range(bad, message):
    with pytest.raises(ValueError) as err:
        expand(bad)
    assert str(err.value) == message


def test_expand_keeps_what_follows_the_bracket():
    assert expand("rack[1-2]a") == ["rack1a", "rack2a"]


def test_a_name_slurm_can_hold_has_no_reason_against_it():
    assert invalid_name("gpu-01.a") == ""


def test_names_that_differ_only_in_case_are_both_kept_upper_case_first():
    # "GPU1" and "gpu1" sort alike by natural key (case folded); the tie goes to the text: "G" < "g".
    assert compress(["gpu1", "GPU1"]) == "GPU1,gpu1"


def test_compress_then_expand_gives_back_the_names():
    rng = random.Random(17)
    prefixes = ["gpu", "node-", "a05-p1-dgx-01-c", "x"]
    for _ in range(200):
        names = set()
        for _ in range(rng.randint(1, 40)):
            n = rng.randint(0, 130)
            width = rng.choice([0, 2, 3, 4])
            names.add(rng.choice(prefixes) + (f"{n:0{width}d}" if width else str(n)))
        if rng.random() < 0.2:
            names.add("login")
        assert sorted(expand(compress(names))) == sorted(names)
