"""The drain rule (scheduler.launch.slurm_drain): what clusterctl tells Slurm about the nodes its health took away.

The Slurm side is a real capture (tests/fixtures/sinfo_N_slurm22.05_emu.out, Debian's slurm-wlm 22.05.8): gpu1 idle,
gpu2 drained by us, gpu3 drained by an operator, gpu4 draining by us with a job still running."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from scheduler.launch.slurm import SlurmError
from scheduler.launch.slurm_drain import (
    PREFIX,
    REASON_MAX,
    SlurmNode,
    check_mode,
    drain_argv,
    parse_sinfo,
    plan_drains,
    resume_argv,
    sinfo_argv,
    slurm_reason,
)

CAPTURE = (Path(__file__).resolve().parents[2] / "fixtures" / "sinfo_N_slurm22.05_emu.out").read_text()


@pytest.fixture
def slurm():
    return parse_sinfo(CAPTURE)


def test_the_capture_reads_as_four_nodes_with_their_states_and_reasons(slurm):
    assert {n: (s.state, s.reason) for n, s in slurm.items()} == {
        "gpu1": ("idle", ""),
        "gpu2": ("drained", "clusterctl: xid_critical gpu2/GPU-1: Xid 79"),
        "gpu3": ("drained", "replacing PSU (ops ticket 4411)"),
        "gpu4": ("draining", "clusterctl: port_down gpu4/mlx5_0/1: link down"),
    }


def test_draining_drained_and_down_are_out_of_service_idle_and_mixed_are_not():
    states = {"idle": False, "mixed": False, "allocated": False, "drained": True, "draining": True,
              "drained*": True, "down*": True, "down": True, "idle*": False, "fail": True}  # fmt: skip
    assert {s: SlurmNode("n", s).drained for s in states} == states


def test_a_node_in_two_partitions_is_one_node():
    nodes = parse_sinfo("gpu1|idle|none\ngpu1|idle|none\n")
    assert list(nodes) == ["gpu1"]


def test_a_line_that_is_not_node_state_reason_is_refused_with_its_number():
    with pytest.raises(SlurmError, match=r"sinfo line 2: expected NODE\|STATE\|REASON, got 'garbage'"):
        parse_sinfo("gpu1|idle|none\ngarbage\n")


def test_an_unhealthy_idle_node_is_drained_with_our_prefix(slurm):
    plan = plan_drains({"gpu1": "xid_critical gpu1/GPU-7: Xid 48"}, slurm)
    assert plan.drain == (("gpu1", "clusterctl: xid_critical gpu1/GPU-7: Xid 48"),)


def test_a_node_an_operator_drained_is_left_with_its_reason_and_never_resumed(slurm):
    wanted = plan_drains({"gpu3": "port_down gpu3/mlx5_0/1"}, slurm)
    assert (wanted.drain, wanted.left) == ((), (("gpu3", "already out of service in Slurm (drained: replacing PSU "
                                                  "(ops ticket 4411))"),))  # fmt: skip
    healthy = plan_drains({}, slurm)
    assert "gpu3" not in healthy.resume


def test_our_drains_are_resumed_once_their_alerts_cleared(slurm):
    # gpu2 (drained) and gpu4 (draining) carry our prefix; with nothing wanted out, both come back.
    assert plan_drains({}, slurm).resume == ("gpu2", "gpu4")


def test_a_node_we_drained_that_is_still_unhealthy_is_neither_drained_again_nor_resumed(slurm):
    plan = plan_drains({"gpu2": "xid_critical gpu2/GPU-1: Xid 79", "gpu4": "port_down gpu4/mlx5_0/1"}, slurm)
    assert (plan.drain, plan.resume, plan.left) == ((), (), ())


def test_a_node_slurm_does_not_know_is_left_saying_so(slurm):
    assert plan_drains({"login1": "down"}, slurm).left == (("login1", "Slurm does not know this node"),)


def test_the_plan_does_not_depend_on_the_order_of_its_inputs(slurm):
    wanted = {"gpu1": "a", "gpu3": "b", "login1": "c"}
    first = plan_drains(wanted, slurm)
    for seed in range(5):
        rng = random.Random(seed)
        w, s = list(wanted.items()), list(slurm.items())
        rng.shuffle(w)
        rng.shuffle(s)
        assert plan_drains(dict(w), dict(s)) == first


def test_a_reason_is_one_line_without_quotes_and_at_most_the_limit():
    assert slurm_reason('Xid 79 "fell off the bus"\nsecond line') == "clusterctl: Xid 79  fell off the bus  second line"
    long = slurm_reason("x" * 500)
    assert (len(long), long.startswith(PREFIX)) == (REASON_MAX, True)
    assert slurm_reason("  ") == "clusterctl: out of service"


def test_the_commands_are_argument_lists_for_scontrol():
    assert drain_argv("gpu1", "clusterctl: Xid 79") == [
        "scontrol", "update", "NodeName=gpu1", "State=DRAIN", "Reason=clusterctl: Xid 79"]  # fmt: skip
    assert resume_argv("gpu1", "/opt/slurm/bin/scontrol") == [
        "/opt/slurm/bin/scontrol", "update", "NodeName=gpu1", "State=RESUME"]  # fmt: skip


def test_a_node_name_scontrol_would_read_as_a_list_is_left_alone():
    slurm = {"gpu[1-2]": SlurmNode("gpu[1-2]", "idle")}
    assert plan_drains({"gpu[1-2]": "x"}, slurm).left == (("gpu[1-2]", "not a name that can go to scontrol"),)


def test_an_unknown_mode_names_the_choices():
    with pytest.raises(ValueError, match="SLURM_DRAIN must be one of off, dry-run, on, not 'yes'"):
        check_mode("yes")


def test_only_the_clusters_own_nodes_are_resumed(slurm):
    # gpu2 and gpu4 carry our prefix; a pass over a cluster of gpu1 and gpu2 may resume gpu2 only (gpu4 may be
    # another cluster's, drained by clusterctl for an alert of that cluster).
    assert plan_drains({}, slurm, hosts={"gpu1", "gpu2"}).resume == ("gpu2",)


def test_sinfo_is_asked_for_one_line_per_node_with_state_and_reason():
    assert sinfo_argv("/opt/slurm/bin/sinfo") == ["/opt/slurm/bin/sinfo", "-N", "-h", "-o", "%N|%T|%E"]
