"""The subnet managers on the fabric agent's own poll: poll_cluster sends one saquery reading per
TELEMETRY_SM_INTERVAL_S to the fabric agent's queue, its answer becomes the cluster's SM alerts and what the fabric
page and the report show (which host or switch runs each SM); a failed read is shown and judges nothing."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from fabric import tasks
from fabric.collectors.subnet_manager import read_subnet_managers
from fabric.models import Alert, Port
from fabric.subnet_manager import sm_status
from fabric.telemetry.subnet_manager import view_to_dict
from tests.conftest import FIXTURES
from tests.fabric.collectors.test_subnet_manager_reader import saquery
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    c = fat_tree("smp", nodes=4, gpus_per_node=8, leaf_ports=16)
    cache.delete_many([f"fabric:sm:{w}:{c.pk}" for w in ("kept", "latest", "error")] + [f"fabric:sm-poll:{c.pk}"])
    return c


@pytest.fixture
def sent(monkeypatch, settings):
    settings.TELEMETRY_FABRIC_AGENTS = ["gpu0001"]
    settings.TELEMETRY_SM_INTERVAL_S = 60.0
    box = []
    for name in ("poll_node", "poll_switches", "poll_subnet_managers"):
        task = getattr(tasks, name)
        monkeypatch.setattr(task, "apply_async", lambda args, name=name, **kw: box.append((name, args, kw)))
    return box


def reading(name: str, at: float) -> dict:
    text = (FIXTURES / name).read_text()
    return {"host": "gpu0001", "view": view_to_dict(read_subnet_managers(run=saquery(text), now=lambda: at))}


def test_the_fabric_agent_is_asked_once_per_interval(cluster, sent):
    tasks.poll_cluster(cluster.pk, "nvml")
    tasks.poll_cluster(cluster.pk, "nvml")
    asked = [(args, kw["queue"]) for name, args, kw in sent if name == "poll_subnet_managers"]
    assert asked == [(("gpu0001",), "node.gpu0001")]
    (link,) = [kw["link"] for name, _, kw in sent if name == "poll_subnet_managers"]
    assert link.task == "fabric.tasks.ingest_subnet_managers" and link.args == (cluster.pk,)


def test_no_reading_when_switched_off(cluster, sent, settings):
    settings.TELEMETRY_SM_INTERVAL_S = 0
    tasks.poll_cluster(cluster.pk, "nvml")
    assert not [name for name, _, _ in sent if name == "poll_subnet_managers"]


def test_the_agents_reading_shows_where_each_sm_runs(cluster, client, operator):
    port = Port.objects.filter(cluster=cluster, hca__node__hostname="gpu0002", hca__device="mlx5_3").get()
    port.guid = "0000000000200000"  # the master's port GUID in the capture
    port.save(update_fields=["guid"])
    tasks.ingest_subnet_managers(reading("saquery_smir_ibsim_two_sms.out", 1000.0), cluster.pk)
    status = sm_status(cluster.pk)
    assert [(s["where"], s["state"]) for s in status["sms"]] == [("gpu0002 mlx5_3", "master"), ("", "standby")]
    assert status["master"]["where"] == "gpu0002 mlx5_3" and status["standbys"] == 1
    client.force_login(operator)
    page = client.get(reverse("fabric", args=[cluster.pk])).content.decode()
    assert "Subnet manager: master on gpu0002 mlx5_3 (LID 1), 1 standby" in page
    assert "not in the inventory" in page  # the standby's port is not one of this cluster's


def test_a_failover_seen_by_the_agent_raises_the_alert(cluster):
    tasks.ingest_subnet_managers(reading("saquery_smir_ibsim_two_sms.out", 1000.0), cluster.pk)
    tasks.ingest_subnet_managers(reading("saquery_smir_ibsim_after_failover.out", 1060.0), cluster.pk)
    assert "sm_failover" in set(
        Alert.objects.filter(cluster=cluster, cleared_at__isnull=True).values_list("rule", flat=True)
    )


def test_a_failed_read_is_shown_and_judges_nothing(cluster, client, operator):
    tasks.ingest_subnet_managers({"host": "gpu0001", "error": "saquery SMIR: Permission denied"}, cluster.pk)
    assert not Alert.objects.filter(cluster=cluster, rule__startswith="sm_").exists()
    assert sm_status(cluster.pk)["error"]["message"] == "gpu0001: saquery SMIR: Permission denied"
    client.force_login(operator)
    page = client.get(reverse("fabric", args=[cluster.pk])).content.decode()
    assert "Subnet manager: not read" in page and "gpu0001: saquery SMIR: Permission denied" in page
    tasks.ingest_subnet_managers(reading("saquery_smir_ibsim_two_sms.out", 1000.0), cluster.pk)
    assert sm_status(cluster.pk)["error"] is None  # a good reading clears it


def test_the_local_opensms_last_sweep_is_on_the_fabric_page(cluster, client, operator):
    text = (FIXTURES / "saquery_smir_ibsim_after_failover.out").read_text()
    view = read_subnet_managers(opensm_log=str(FIXTURES / "opensm_ibsim_standby_to_master.log"), run=saquery(text))
    tasks.ingest_subnet_managers({"host": "gpu0001", "view": view_to_dict(view)}, cluster.pk)
    client.force_login(operator)
    page = client.get(reverse("fabric", args=[cluster.pk])).content.decode()
    assert "the local OpenSM last brought the subnet up Dec 03 07:19:41 (opensm.log)" in page
    assert "<li>Dec 03 07:19:41: Entering MASTER state</li>" in page
