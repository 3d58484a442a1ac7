"""NVLink islands of a server as the round's snapshot reads them (worked out once per distinct matrix)."""

from scheduler.snapshot_from_db import _islands

PAIRS_NV = {"0-1": "NV18", "2-3": "NV18", "0-2": "SYS", "1-3": "PIX"}


def test_gpus_joined_by_nv_codes_form_islands():
    assert _islands([0, 1, 2, 3], PAIRS_NV, True) == ((0, 1), (2, 3))


def test_two_servers_with_other_matrices_get_their_own_islands_not_the_first_ones():
    first = _islands([0, 1, 2, 3], PAIRS_NV, True)
    other = _islands([0, 1, 2, 3], {**PAIRS_NV, "1-2": "NV4"}, True)
    assert first == ((0, 1), (2, 3))
    assert other == ((0, 1, 2, 3),)


def test_without_a_matrix_the_model_decides():
    assert _islands([0, 1], None, True) == ((0, 1),)
    assert _islands([0, 1], None, False) == ((0,), (1,))
    assert _islands([4, 5], None, False) == ((4,), (5,))  # other indexes, other answer
