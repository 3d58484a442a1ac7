"""Liveness rule (pure): polls sent and answers ingested -> node findings and one cluster finding for the pipeline.

Every figure here is worked by hand: polls every 10 s, unreachable after 3 missed, down after 10, answers due
5 s after sending, a poll missed by half the nodes or more is the pipeline's.
"""

from __future__ import annotations

import dataclasses

import pytest

from fabric.telemetry.liveness import (
    BEAT_STALLED,
    BEHIND,
    DOWN,
    STALLED,
    UNREACHABLE,
    Answers,
    Progress,
    Round,
    Rules,
    State,
    beat_findings,
    cadence,
    judge,
    missing_share,
    poller_findings,
    sent,
)

RULES = Rules(interval_s=10.0, unreachable_polls=3, down_polls=10, answer_s=5.0, stalled_fraction=0.5)
NODES = ("a", "b", "c", "d")


def history(answered: dict[float, set[str]], asked=NODES, newest_before: dict[str, float] | None = None):
    """Rounds sent at the given times to `asked`, and the Answers ingest recorded for them."""
    state = State()
    for at in sorted(answered):
        state = sent(state, Round(at, tuple(asked)), keep=20)
    newest = dict(newest_before or {})
    for at, nodes in sorted(answered.items()):
        for n in nodes:
            newest[n] = at
    return state, Answers(newest=newest, counts={at: len(n) for at, n in answered.items()})


def at(now: float, until: float | None = None, **extra) -> Progress:
    return Progress(now=now, ingested_until=now if until is None else until, **extra)


def test_a_node_that_missed_three_polls_the_others_answered_is_unreachable():
    state, answers = history({100.0: {"b", "c", "d"}, 110.0: {"b", "c", "d"}, 120.0: {"b", "c", "d"}},
                             newest_before={"a": 90.0})  # fmt: skip
    verdict = judge(state, answers, at(130.0), RULES, NODES)
    (f,) = verdict.nodes["a"]
    assert (f.rule, f.severity, f.removes_capacity, f.object_key) == (UNREACHABLE, "warning", False, "a/node")
    assert f.message == (
        "unreachable: no answer to the last 3 polls the other nodes answered (last answer to a poll sent 40 s ago)"
    )
    assert verdict.nodes["b"] == verdict.nodes["c"] == verdict.nodes["d"] == []
    assert verdict.cluster == [] and verdict.streaks == {"a": 3, "b": 0, "c": 0, "d": 0}


def test_two_missed_polls_are_not_yet_unreachable():
    state, answers = history({100.0: {"b", "c", "d"}, 110.0: {"b", "c", "d"}})
    assert judge(state, answers, at(130.0), RULES, NODES).nodes["a"] == []


def test_ten_missed_polls_take_a_node_down():
    state, answers = history({100.0 + 10 * i: {"b", "c", "d"} for i in range(10)})
    (f,) = judge(state, answers, at(200.0), RULES, NODES).nodes["a"]
    assert (f.rule, f.severity, f.removes_capacity) == (DOWN, "critical", True)
    assert f.message.endswith("(never answered a poll): node taken out of service")


def test_an_answer_ends_the_streak():
    state, answers = history({100.0: {"b", "c", "d"}, 110.0: {"b", "c", "d"}, 120.0: set(NODES)})
    verdict = judge(state, answers, at(130.0), RULES, NODES)
    assert verdict.nodes["a"] == [] and verdict.streaks["a"] == 0 and "a" not in verdict.state.misses


def test_rounds_whose_answers_are_not_ingested_yet_are_not_judged():
    # Ingest caught up to 112 s: the round of 100 s was due at 105 (judged), those of 110 and 120 at 115 and 125.
    state, answers = history({100.0: {"b", "c", "d"}, 110.0: set(), 120.0: set()})
    verdict = judge(state, answers, at(130.0, until=112.0), RULES, NODES)
    assert verdict.streaks == {"a": 1, "b": 0, "c": 0, "d": 0}
    assert [r.at for r in verdict.state.pending] == [110.0, 120.0]
    assert verdict.cluster == []  # 18 s behind, under the 30 s of three intervals


def test_ingest_three_intervals_behind_is_one_cluster_finding_and_no_node_finding():
    state, answers = history({100.0: set(), 110.0: set(), 120.0: set()})
    verdict = judge(state, answers, at(130.0, until=95.0, inbox_backlog=12), RULES, NODES)
    (f,) = verdict.cluster
    assert (f.rule, f.object_kind, f.object_key, f.removes_capacity) == (STALLED, "cluster", "cluster", False)
    assert "ingest: 35 s behind (12 results wait in the inbox)" in f.message
    assert all(findings == [] for findings in verdict.nodes.values())  # nobody judged: no misses at all
    assert len(verdict.state.pending) == 3


@pytest.mark.parametrize(("answered", "streak"), [({"b", "c", "d"}, 3), ({"c", "d"}, 0)])
def test_a_poll_missed_by_half_the_nodes_or_more_counts_against_nobody(answered, streak):
    # 1 of 4 missing (25 %) is the node's; 2 of 4 (50 %) is the pipeline's.
    state, answers = history({100.0: answered, 110.0: answered, 120.0: answered})
    assert judge(state, answers, at(130.0), RULES, NODES).streaks["a"] == streak


def test_three_polls_in_a_row_missed_by_most_nodes_are_one_pipeline_alert():
    nodes = tuple(f"n{i}" for i in range(10))
    answered = {"n6", "n7", "n8", "n9"}  # 6 of 10 silent: 60 %
    state, answers = history({100.0: answered, 110.0: answered, 120.0: answered}, asked=nodes)
    verdict = judge(state, answers, at(130.0), RULES, nodes)
    (f,) = verdict.cluster
    assert f.rule == STALLED and not f.removes_capacity
    assert (
        "answers: 6 of 10 nodes (60%) missed the newest poll, and at least 50% missed each of the last 3" in f.message
    )
    assert all(findings == [] for findings in verdict.nodes.values()) and set(verdict.nodes) == set(nodes)


def test_two_such_polls_are_not_yet_an_alert():
    state, answers = history({110.0: {"d"}, 120.0: {"d"}})
    assert judge(state, answers, at(130.0), RULES, NODES).cluster == []


def test_a_poll_that_expired_on_the_broker_is_no_miss():
    state, answers = history({100.0: {"b", "c", "d"}, 110.0: {"b", "c", "d"}, 120.0: {"b", "c", "d"}})
    answers = Answers(answers.newest, answers.counts, expired={100.0: frozenset("a"), 110.0: frozenset("a")})
    assert judge(state, answers, at(130.0), RULES, NODES).streaks["a"] == 1


def test_a_late_expiry_report_or_a_late_answer_takes_back_misses_already_counted():
    state = State(misses={"a": (100.0, 110.0, 120.0)}, last_sent=120.0)
    expired_late = Answers(expired={110.0: frozenset("a")})
    assert judge(state, expired_late, at(130.0), RULES, NODES).streaks["a"] == 2
    answered_late = Answers(newest={"a": 110.0})
    assert judge(state, answered_late, at(130.0), RULES, NODES).streaks["a"] == 1


def test_a_node_not_asked_is_not_charged():
    state, answers = history({100.0: {"b", "c"}, 110.0: {"b", "c"}, 120.0: {"b", "c"}}, asked=("b", "c", "d"))
    verdict = judge(state, answers, at(130.0), RULES, NODES)
    assert verdict.streaks == {"a": 0, "b": 0, "c": 0, "d": 3}


@pytest.mark.parametrize(("beat_age", "cause"), [(100.0, "beat/polls: no poll was sent for 100 s, beat's last tick "
                                                  "was 100 s ago"), (2.0, "broker/polls: no poll was sent for 100 s "
                                                  "though beat ticks")])  # fmt: skip
def test_polls_never_sent_blame_the_beat_or_the_broker_not_the_nodes(beat_age, cause):
    state, answers = history({100.0: set(NODES)})
    verdict = judge(state, answers, at(200.0, beat_age_s=beat_age), RULES, NODES)
    (f,) = verdict.cluster
    assert cause in f.message
    assert verdict.nodes == {n: [] for n in NODES}


def test_while_the_pipeline_is_behind_a_node_with_misses_is_left_as_it_is():
    state = State(misses={"a": (100.0, 110.0, 120.0)}, last_sent=120.0)
    verdict = judge(state, Answers(newest={"a": 90.0, "b": 120.0}), at(200.0), RULES, NODES)
    assert verdict.cluster and "a" not in verdict.nodes and verdict.nodes["b"] == []
    assert verdict.state.misses == {"a": (100.0, 110.0, 120.0)}


def test_at_most_keep_rounds_wait_for_judgement():
    state = State()
    for t in (100.0, 110.0, 120.0):
        state = sent(state, Round(t, NODES), keep=2)
    assert [r.at for r in state.pending] == [110.0, 120.0] and state.last_sent == 120.0


def test_beat_findings():
    assert beat_findings(30.0, limit_s=30.0) == []
    (f,) = beat_findings(31.0, limit_s=30.0)
    assert (f.rule, f.severity, f.object_key, f.removes_capacity) == (BEAT_STALLED, "critical", "cluster", False)
    assert f.message.startswith("beat's last tick was 31 s ago (limit 30 s)")
    assert beat_findings(None, limit_s=30.0)[0].message.startswith("no beat has ticked yet")


@pytest.mark.parametrize(
    ("options", "word"),
    [({"unreachable_polls": 0}, "unreachable_polls"), ({"unreachable_polls": 11}, "unreachable_polls"),
     ({"stalled_fraction": 0.0}, "stalled_fraction"), ({"interval_s": 0.0}, "interval_s")],
)  # fmt: skip
def test_rules_are_checked(options, word):
    values = {"interval_s": 10.0, "unreachable_polls": 3, "down_polls": 10, "answer_s": 5.0, **options}
    with pytest.raises(ValueError, match=word):
        Rules(**values)


# --- edges and defaults, each worked by hand ------------------------------------------------------------------------


def test_by_default_a_poll_missed_by_half_the_nodes_is_the_pipelines():
    rules = Rules(interval_s=10.0, unreachable_polls=3, down_polls=10, answer_s=5.0)  # stalled_fraction left out
    for answered, streak in (({"b", "c", "d"}, 3), ({"c", "d"}, 0)):
        state, answers = history({100.0: answered, 110.0: answered, 120.0: answered})
        assert judge(state, answers, at(130.0), rules, NODES).streaks["a"] == streak


@pytest.mark.parametrize(
    "options",
    [{"interval_s": 0.5}, {"unreachable_polls": 3, "down_polls": 3}, {"unreachable_polls": 1, "down_polls": 1},
     {"answer_s": 0.0}, {"answer_s": 0.5}, {"stalled_fraction": 1.0}],
)  # fmt: skip
def test_rules_at_their_bounds_are_accepted(options):
    values = {"interval_s": 10.0, "unreachable_polls": 3, "down_polls": 10, "answer_s": 5.0, **options}
    assert Rules(**values).stall_after_s == values["unreachable_polls"] * values["interval_s"]


@pytest.mark.parametrize(
    ("options", "word"), [({"answer_s": -0.5}, "answer_s"), ({"stalled_fraction": 1.5}, "stalled")]
)
def test_rules_just_past_their_bounds_are_refused(options, word):
    values = {"interval_s": 10.0, "unreachable_polls": 3, "down_polls": 10, "answer_s": 5.0, **options}
    with pytest.raises(ValueError, match=word):
        Rules(**values)


def test_missing_share_of_a_round():
    assert missing_share(Answers(), 100.0, 0) == 0.0  # nobody asked: nobody missing
    assert missing_share(Answers(), 100.0, 4) == 1.0  # no answer recorded at all
    assert missing_share(Answers(counts={100.0: 4}), 100.0, 4) == 0.0
    assert missing_share(Answers(counts={100.0: 5}), 100.0, 4) == 0.0  # more answers than asks is not negative
    assert missing_share(Answers(counts={100.0: 1}), 100.0, 4) == 0.75


def test_a_round_is_judged_once_ingest_reached_exactly_its_due_time():
    state, answers = history({100.0: {"b", "c", "d"}})
    assert judge(state, answers, at(130.0, until=105.0), RULES, NODES).streaks["a"] == 1


def test_a_round_sent_now_with_no_answer_time_is_judged_now():
    rules = Rules(interval_s=10.0, unreachable_polls=3, down_polls=10, answer_s=0.0)
    state, answers = history({130.0: {"b", "c", "d"}})
    verdict = judge(state, answers, at(130.0), rules, NODES)
    assert verdict.streaks["a"] == 1 and verdict.state.pending == ()


def test_a_poll_sent_exactly_three_intervals_ago_is_not_yet_a_stall():
    state, answers = history({100.0: set(NODES)})
    assert judge(state, answers, at(130.0), RULES, NODES).cluster == []


def test_ingest_exactly_three_intervals_behind_is_not_yet_a_stall():
    state, answers = history({110.0: set(NODES), 120.0: set(NODES)})
    assert judge(state, answers, at(130.0, until=100.0), RULES, NODES).cluster == []


def test_ingest_that_never_ran_is_behind_since_the_oldest_round_waiting():
    state, answers = history({100.0: set(), 110.0: set(), 120.0: set()})
    (f,) = judge(state, answers, Progress(now=140.0, ingested_until=None), RULES, NODES).cluster
    assert f.message == (
        "telemetry stalled (no node is judged or taken down meanwhile): "
        "ingest: 40 s behind (0 results wait in the inbox)"
    )


def test_a_beat_that_ticked_exactly_at_the_limit_still_ticks():
    state, answers = history({100.0: set(NODES)})
    (f,) = judge(state, answers, at(200.0, beat_age_s=30.0), RULES, NODES).cluster
    assert "broker/polls: no poll was sent for 100 s though beat ticks" in f.message


def test_three_polls_each_missed_by_exactly_half_are_a_pipeline_alert():
    state, answers = history({100.0: {"c", "d"}, 110.0: {"c", "d"}, 120.0: {"c", "d"}})
    (f,) = judge(state, answers, at(130.0), RULES, NODES).cluster
    assert "answers: 2 of 4 nodes (50%) missed the newest poll" in f.message


def test_the_pipeline_alert_counts_the_newest_poll_and_its_expiries():
    nodes = tuple(f"n{i}" for i in range(10))
    # Missed by 6, 7 and 8 of 10; 2 of the newest poll's expired on the broker; no count kept for the newest.
    state, answers = history({100.0: set(nodes[6:]), 110.0: set(nodes[7:]), 120.0: set()}, asked=nodes)
    counts = {100.0: 4, 110.0: 3}
    answers = Answers(answers.newest, counts, expired={120.0: frozenset({"n0", "n1"})})
    (f,) = judge(state, answers, at(130.0), RULES, nodes).cluster
    assert f.message == (
        "telemetry stalled (no node is judged or taken down meanwhile): answers: 10 of 10 nodes (100%) missed the "
        "newest poll, and at least 50% missed each of the last 3, 2 of them expired on the broker before an agent "
        "took them: the broker, the agents or their network, not the nodes one by one"
    )
    state, answers = history({100.0: set(nodes[6:]), 110.0: set(nodes[7:]), 120.0: set(nodes[8:])}, asked=nodes)
    (f,) = judge(state, answers, at(130.0), RULES, nodes).cluster
    assert "answers: 8 of 10 nodes (80%) missed the newest poll, and at least 50% missed each of the last 3: " in (
        f.message
    )


@pytest.mark.parametrize("keep", [0, 1])
def test_at_least_the_newest_round_waits_whatever_keep_says(keep):
    state = State()
    for t in (100.0, 110.0, 120.0):
        state = sent(state, Round(t, NODES), keep=keep)
    assert [r.at for r in state.pending] == [120.0]


def test_the_judges_records_cannot_be_changed_in_place():
    # The state is handed from one check to the next (and cached between processes): nothing may edit it.
    state, answers = history({100.0: set(NODES)})
    verdict = judge(state, answers, at(130.0), RULES, NODES)
    for obj, name in ((Round(1.0, ()), "at"), (answers, "newest"), (at(1.0), "now"), (RULES, "answer_s"),
                      (state, "pending"), (verdict, "cluster")):  # fmt: skip
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)


#
# The poller's own pace (poller_findings): rounds every 10 s are on time, on average more than 15 s apart are behind
#


def test_cadence_is_the_mean_gap_of_the_newest_rounds_with_the_wait_since_the_last():
    assert cadence([], 100.0, 3) is None
    assert cadence([100.0], 110.0, 3) == 10.0
    # (160 - 100) / 3: the rounds at 100, 120, 140 and the wait since 140; the one at 70 is older than the last 3
    assert cadence([70.0, 100.0, 120.0, 140.0], 160.0, 3) == 20.0
    assert cadence([140.0, 70.0, 120.0, 100.0], 160.0, 3) == 20.0  # in any order


def test_a_poller_that_sent_nothing_yet_is_not_behind():
    assert poller_findings([], now=1000.0, rules=RULES, due=4, polled=0) == []


def test_a_poller_on_its_cadence_says_nothing():
    assert poller_findings([100.0, 110.0, 120.0], now=130.0, rules=RULES, due=4, polled=4) == []


def test_a_poller_whose_rounds_come_twice_the_interval_apart_is_behind():
    (f,) = poller_findings([100.0, 120.0, 140.0], now=160.0, rules=RULES, due=2004, polled=812)
    assert (f.rule, f.severity, f.object_kind, f.object_key, f.removes_capacity) == (
        BEHIND, "warning", "cluster", "cluster", False,
    )  # fmt: skip
    assert f.message == (
        "telemetry polling is behind: 812 of 2004 nodes polled in the last 10 s; poll cadence 20.0 s instead of 10 s. "
        "The control plane is slower than its schedule (a busy worker or broker, or too little CPU for this many "
        "nodes), not the nodes: no node is judged unreachable or down until it keeps up"
    )


def test_a_poller_exactly_one_and_a_half_intervals_apart_is_not_yet_behind():
    assert poller_findings([100.0, 115.0, 130.0], now=145.0, rules=RULES, due=4, polled=4) == []
    assert poller_findings([100.0, 115.0, 130.0], now=145.3, rules=RULES, due=4, polled=4) != []


def test_ticks_skipped_while_a_round_is_read_make_it_behind_and_are_named():
    # Rounds at 100 and 110 on time; the one at 120 still being read at 130, 140 and now 150: (150 - 100) / 3.
    (f,) = poller_findings([100.0, 110.0, 120.0], now=150.0, rules=RULES, due=4, polled=1, skipped=3)
    assert (
        "1 of 4 nodes polled in the last 10 s; poll cadence 16.7 s instead of 10 s; 3 polls waited for the "
        "previous round to be read." in f.message
    )


def test_no_round_for_longer_than_three_intervals_is_a_stall_not_a_late_poller():
    # judge names that one (telemetry_stalled: no poll was sent for 31 s ...); exactly 30 s is still behind
    assert poller_findings([100.0, 120.0, 140.0], now=171.0, rules=RULES, due=4, polled=0) == []
    assert poller_findings([100.0, 120.0, 140.0], now=170.0, rules=RULES, due=4, polled=0) != []
