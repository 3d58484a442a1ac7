"""The subnet manager, watched (fabric.telemetry.subnet_manager): real outputs of OpenSM 3.3.23 and infiniband-diags
on ibsim (tests/fixtures/sminfo_ibsim_*, saquery_smir_ibsim_*, opensm_*: see SOURCES.md), and the health rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.telemetry.subnet_manager import (
    SmInfo,
    SmParseError,
    SmView,
    carry,
    parse_opensm_conf,
    parse_opensm_log,
    parse_saquery_smir,
    parse_sminfo,
    sm_findings,
    view_from_dict,
    view_to_dict,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MASTER = SmInfo(1, "0x0000000000200000", 165, 14, 3)
STANDBY = SmInfo(4, "0x0000000000100004", 68, 5, 2)


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def rules(previous, current, **kw) -> list[str]:
    return [f.rule for f in sm_findings(previous, current, **kw)]


def test_sminfo_of_the_master():
    assert parse_sminfo(read("sminfo_ibsim_master.out")) == MASTER


def test_sminfo_of_a_standby_by_its_lid():
    s = parse_sminfo(read("sminfo_ibsim_standby.out"))
    assert (s.lid, s.guid, s.activity, s.priority, s.state_name) == (4, "0x0000000000100004", 71, 5, "standby")


def test_sminfo_that_no_sm_answers_is_none():
    assert parse_sminfo(read("sminfo_ibsim_no_sm.out")) is None


def test_sminfo_of_something_else_is_refused():
    with pytest.raises(SmParseError, match=r"no 'sminfo: sm lid \.\.\.' line"):
        parse_sminfo("ibwarn: something\n")


def test_saquery_lists_every_sm_of_the_subnet():
    assert parse_saquery_smir(read("saquery_smir_ibsim_two_sms.out")) == (MASTER, STANDBY)
    after = parse_saquery_smir(read("saquery_smir_ibsim_after_failover.out"))
    assert after == (SmInfo(4, "0x0000000000100004", 162, 5, 3),)


def test_a_saquery_record_missing_a_field_is_named():
    with pytest.raises(SmParseError, match="saquery record 1: missing SMState"):
        parse_saquery_smir("SMInfoRecord dump:\n\t\tLID....1\n\t\tGUID....0x1\n\t\tActCount....3\n\t\tPriority....1\n")


def test_the_opensm_log_tells_the_standby_becoming_master_and_the_sweep():
    events = parse_opensm_log(read("opensm_ibsim_standby_to_master.log"))
    assert events[-3:] == [
        ("Dec 03 07:19:41", "Entering DISCOVERING state"),
        ("Dec 03 07:19:41", "Entering MASTER state"),
        ("Dec 03 07:19:41", "SUBNET UP"),
    ]
    assert ("Dec 03 07:18:31", "Entering STANDBY state") in events


def test_opensm_conf_unset_routing_engine_is_minhop():
    assert parse_opensm_conf(read("opensm_3.3.23_default.conf")) == {
        "sweep_interval": "10",
        "routing_engine": "minhop",
        "sm_priority": "0",
    }


def test_a_master_and_a_standby_are_healthy():
    assert rules(None, SmView(0.0, (MASTER, STANDBY), "ftree")) == []


def test_no_sm_is_critical():
    [f] = sm_findings(None, SmView(0.0, ()))
    assert (f.rule, f.severity, f.object_kind) == ("sm_none", "critical", "cluster")


def test_two_masters_are_a_split_brain():
    other = SmInfo(4, "0x0000000000100004", 10, 5, 3)
    assert rules(None, SmView(0.0, (MASTER, other), "ftree")) == ["sm_split_brain", "sm_no_standby"]


def test_no_standby_makes_the_master_a_single_point_of_failure():
    assert rules(None, SmView(0.0, (MASTER,), "ftree")) == ["sm_no_standby"]


def test_the_real_failover_is_seen_once():
    # Before: the two SMs of the capture; after: the standby's GUID is master and alone.
    before = SmView(0.0, parse_saquery_smir(read("saquery_smir_ibsim_two_sms.out")), "ftree")
    after = SmView(80.0, parse_saquery_smir(read("saquery_smir_ibsim_after_failover.out")), "ftree")
    assert rules(before, after) == ["sm_no_standby", "sm_failover"]
    kept = carry(before, after)
    later = SmView(90.0, (SmInfo(4, "0x0000000000100004", 170, 5, 3),), "ftree")
    assert rules(kept, later) == ["sm_no_standby"]


def test_an_activity_count_that_stands_still_for_the_hold_down_is_a_hung_sm():
    first = SmView(0.0, (MASTER, STANDBY), "ftree")
    kept = first
    for t in (10.0, 60.0, 119.0):  # same count: the first reading stays the memory
        kept = carry(kept, SmView(t, (MASTER, STANDBY), "ftree"))
    assert kept is first
    assert rules(kept, SmView(119.0, (MASTER, STANDBY), "ftree")) == []
    assert rules(kept, SmView(120.0, (MASTER, STANDBY), "ftree")) == ["sm_hung"]


def test_a_moving_activity_count_is_kept_as_the_new_memory():
    moved = SmView(30.0, (SmInfo(1, MASTER.guid, 166, 14, 3), STANDBY), "ftree")
    assert carry(SmView(0.0, (MASTER, STANDBY)), moved) is moved


def test_minhop_on_a_fat_tree_is_flagged_ftree_and_updn_are_not():
    assert rules(None, SmView(0.0, (MASTER, STANDBY), "minhop"), tiers=2) == ["sm_routing_engine"]
    assert rules(None, SmView(0.0, (MASTER, STANDBY), "updn"), tiers=3) == []
    assert rules(None, SmView(0.0, (MASTER, STANDBY), "minhop"), tiers=1) == []


def test_each_sminfo_state_has_its_name():
    names = [SmInfo(1, "0x1", 0, 0, s).state_name for s in (0, 1, 2, 3, 4)]
    assert names == ["not active", "discovering", "standby", "master", "state 4"]


def test_a_reading_survives_the_cache_as_it_was():
    view = SmView(12.5, (MASTER, STANDBY), "ftree", (("Dec 03 07:19:41", "SUBNET UP"),))
    assert view_to_dict(view) == {
        "at": 12.5,
        "routing_engine": "ftree",
        "sms": [[1, "0x0000000000200000", 165, 14, 3], [4, "0x0000000000100004", 68, 5, 2]],
        "log_events": [["Dec 03 07:19:41", "SUBNET UP"]],
    }
    assert view_from_dict(view_to_dict(view)) == view
    assert view_from_dict({"at": 1, "sms": []}) == SmView(1.0)  # a reading kept before the log was read


def test_the_first_reading_and_a_split_brain_become_the_memory():
    first = SmView(0.0, (MASTER, STANDBY))
    assert carry(None, first) is first
    two = SmView(5.0, (MASTER, SmInfo(4, "0x0000000000100004", 10, 5, 3)))
    assert carry(first, two) is two
    assert carry(two, first) is first


def test_min_hop_is_flagged_on_the_default_two_tier_fabric():
    assert rules(None, SmView(0.0, (MASTER, STANDBY), "minhop")) == ["sm_routing_engine"]


def test_a_reading_cannot_be_changed_after_it_was_taken():
    with pytest.raises(AttributeError):
        MASTER.activity = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        SmView(0.0).at = 1.0  # type: ignore[misc]


def test_a_saquery_field_before_any_record_names_its_line():
    with pytest.raises(SmParseError, match=r"saquery line 2: LID before any 'SMInfoRecord dump'"):
        parse_saquery_smir("header\n\t\tLID....1\n")


def test_a_split_brain_names_both_masters_and_the_first_in_the_spof():
    other = SmInfo(4, "0x0000000000100004", 10, 5, 3)
    found = {f.rule: f.message for f in sm_findings(None, SmView(0.0, (MASTER, other), "ftree"))}
    assert found["sm_split_brain"] == "2 master SMs (0x0000000000200000, 0x0000000000100004): split brain"
    assert found["sm_no_standby"] == "no standby SM: the master 0x0000000000200000 is a single point of failure"


def test_a_setting_with_two_words_keeps_both():
    assert parse_opensm_conf("routing_engine ftree updn\n")["routing_engine"] == "ftree updn"
