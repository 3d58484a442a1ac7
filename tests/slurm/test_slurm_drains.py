"""Health flows back to a real Slurm (issue 17, part 4): clusterctl drains the nodes its alerts took out of service,
resumes them when the alerts clear, and never touches a node an operator drained by hand.

Debian's Slurm 22.05 on emulated nodes named like the stored cluster's hosts (tests/slurm/emu.py); skipped, saying
so, where Slurm is not installed."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

from fabric.actions import TELEMETRY_REASON
from fabric.choices import NodeState
from fabric.models import GPU, Alert, Node
from scheduler import tasks
from scheduler.slurm_drains import sync_drains, wanted_drains
from tests.factories import fat_tree
from tests.slurm.emu import MISSING, PATHS, SKIP_REASON, SlurmEmu

pytestmark = pytest.mark.skipif(bool(MISSING) or not PATHS.get("scontrol"), reason=SKIP_REASON)
HOSTS = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]  # what fat_tree names the four servers


@pytest.fixture(scope="module")
def slurm():
    emu = SlurmEmu(gpus=8, names=HOSTS).start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def site(db, slurm):
    cluster = fat_tree("drains", nodes=4, gpus_per_node=8, leaf_ports=16)
    with override_settings(SLURM_CONF=str(slurm.conf), SLURM_BINDIR=str(Path(PATHS["scontrol"]).parent)):
        yield cluster
    for host in HOSTS:  # every test starts from idle nodes
        slurm.cmd("scontrol", "update", f"NodeName={host}", "State=RESUME")


def nodes(slurm) -> dict[str, tuple[str, str]]:
    out = slurm.cmd("sinfo", "-N", "-h", "-o", "%N|%T|%E").stdout
    # State without its flags: right after a RESUME slurmctld marks the node "*" (not responding) until the emulated
    # slurmd answers its next ping; that is Slurm's business, not the drain's.
    return {n: (s.rstrip("*~#!%$@^-"), r) for n, s, r in (line.split("|", 2) for line in out.splitlines())}


def alert(cluster, host: str, *, rule="gpu_xid_critical", message="XID 79: GPU has fallen off the bus", cleared=False):
    gpu = GPU.objects.filter(node__cluster=cluster, node__hostname=host).order_by("index").first()
    now = timezone.now()
    return Alert.objects.create(cluster=cluster, rule=rule, severity="critical", object_kind="gpu",
                                object_key=f"{host}/{gpu.uuid}", message=message, removes_capacity=True,
                                first_seen=now - timedelta(minutes=1), last_seen=now,
                                cleared_at=now if cleared else None)  # fmt: skip


def test_an_alert_that_took_a_gpu_away_drains_its_node_with_the_reason(site, slurm):
    a = alert(site, "gpu0002")
    result = sync_drains(site.pk, mode="on")
    assert result.done == ["drain gpu0002"]
    assert nodes(slurm)["gpu0002"] == ("drained", f"clusterctl: gpu_xid_critical {a.object_key}: XID 79: GPU has "
                                                  "fallen off the bus")  # fmt: skip
    assert {h: s for h, (s, _) in nodes(slurm).items() if h != "gpu0002"} == dict.fromkeys(
        ["gpu0001", "gpu0003", "gpu0004"], "idle"
    )


def test_a_cleared_alert_resumes_the_node_clusterctl_drained(site, slurm):
    a = alert(site, "gpu0002")
    sync_drains(site.pk, mode="on")
    Alert.objects.filter(pk=a.pk).update(cleared_at=timezone.now())
    result = sync_drains(site.pk, mode="on")
    assert (result.done, nodes(slurm)["gpu0002"]) == (["resume gpu0002"], ("idle", "none"))


def test_a_node_an_operator_drained_keeps_its_reason_and_stays_drained(site, slurm):
    slurm.cmd("scontrol", "update", "NodeName=gpu0003", "State=DRAIN", "Reason=replacing PSU (ticket 4411)", check=True)
    a = alert(site, "gpu0003")
    assert sync_drains(site.pk, mode="on").done == []
    Alert.objects.filter(pk=a.pk).update(cleared_at=timezone.now())
    assert sync_drains(site.pk, mode="on").plan.resume == ()
    assert nodes(slurm)["gpu0003"] == ("drained", "replacing PSU (ticket 4411)")


def test_dry_run_plans_and_changes_nothing_in_slurm(site, slurm):
    alert(site, "gpu0004")
    result = sync_drains(site.pk, mode="dry-run")
    assert ([n for n, _ in result.plan.drain], result.done) == (["gpu0004"], [])
    assert nodes(slurm)["gpu0004"] == ("idle", "none")


def test_a_node_the_liveness_check_took_down_is_drained_and_a_switch_port_alert_is_not_a_node(site, slurm):
    Node.objects.filter(cluster=site, hostname="gpu0001").update(
        state=NodeState.DOWN, state_reason=f"{TELEMETRY_REASON}no sample for 60 s"
    )
    now = timezone.now()
    Alert.objects.create(cluster=site, rule="port_down", severity="critical", object_kind="port",
                         object_key="0x0002c90300000001/7", message="link down", removes_capacity=True,
                         first_seen=now, last_seen=now)  # fmt: skip
    assert wanted_drains(site.pk) == {"gpu0001": f"{TELEMETRY_REASON}no sample for 60 s"}
    sync_drains(site.pk, mode="on")
    assert nodes(slurm)["gpu0001"] == ("drained", "clusterctl: telemetry: no sample for 60 s")


def test_the_command_prints_the_plan_as_json(site, slurm):
    alert(site, "gpu0002")
    out = StringIO()
    call_command("slurm_drains", cluster="drains", dry_run=True, json=True, stdout=out)
    doc = json.loads(out.getvalue())
    assert (doc["mode"], [d["node"] for d in doc["drain"]], doc["done"]) == ("dry-run", ["gpu0002"], [])


def test_the_command_refuses_when_drains_are_off_unless_told(site, slurm):
    with override_settings(SLURM_DRAIN="off"), pytest.raises(CommandError, match="SLURM_DRAIN is off"):
        call_command("slurm_drains", cluster="drains")


def test_a_slurm_that_cannot_be_reached_is_a_clear_error(site, slurm, tmp_path):
    with override_settings(SLURM_CONF=str(tmp_path / "missing.conf")), pytest.raises(CommandError, match="sinfo"):
        call_command("slurm_drains", cluster="drains", apply=True)


def test_the_beat_task_drains_every_cluster_and_reports_what_it_did(site, slurm):
    alert(site, "gpu0004", rule="gpu_ecc_dbe", message="uncorrectable ECC errors")
    with override_settings(SLURM_DRAIN="on"):
        report = tasks.slurm_drains()
    assert report["drains"]["done"] == ["drain gpu0004"]
    assert nodes(slurm)["gpu0004"][0] == "drained"
