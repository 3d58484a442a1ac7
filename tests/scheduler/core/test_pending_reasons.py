"""Decisions.pending_reasons as the engine hands it (types.PendingReasons): the reasons by id, read on first use from
the reasons in queue order and those of the jobs whose turn was taken."""

import copy
import pickle

from scheduler.core.types import PendingReasons


def _reasons() -> PendingReasons:
    # Queue 5, 3, 9, 7. Jobs 5 and 7 read remembered turns ("a", "b"). Job 3's turn was taken: it was told "x", then
    # placed (None in queue order). Job 9's turn was taken and told nothing ("" in queue order).
    return PendingReasons([5, 3, 9, 7], ["a", None, "", "b"], [1, 2], {3: "x"})


def test_holds_each_job_given_a_reason_and_nothing_else():
    assert dict(_reasons()) == {5: "a", 3: "x", 7: "b"}


def test_reads_like_the_dict_it_stands_for():
    r = _reasons()
    assert r == {5: "a", 3: "x", 7: "b"}
    assert r[7] == "b"
    assert r.get(9) is None
    assert r.get(9, "") == ""
    assert 9 not in r and 5 in r
    assert len(r) == 3


def test_a_copy_or_a_pickle_is_a_plain_dict():
    for other in (copy.deepcopy(_reasons()), pickle.loads(pickle.dumps(_reasons()))):
        assert type(other) is dict
        assert other == {5: "a", 3: "x", 7: "b"}
