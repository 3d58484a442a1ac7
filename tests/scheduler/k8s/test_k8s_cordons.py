"""Health flows back to Kubernetes: clusterctl cordons the nodes its alerts took out of service (unschedulable, with
the annotation clusterctl.io/cordoned), uncordons them when the alerts clear, and never touches a node an operator
cordoned. Against a fake API server (tests/scheduler/k8s/fake_apiserver.py): no real one can run on these machines."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from fabric.models import GPU, Alert
from scheduler.k8s_cordons import K8sError, api_from_kubeconfig, sync_cordons
from scheduler.launch.k8s_cordon import ANNOTATION, K8sNode, plan_cordons, reason_text
from tests.factories import fat_tree
from tests.scheduler.k8s.fake_apiserver import FakeApiServer

pytestmark = pytest.mark.django_db
HOSTS = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]


@pytest.fixture
def cluster():
    return fat_tree("k8s", nodes=4, gpus_per_node=2, leaf_ports=8)


@pytest.fixture
def k8s(tmp_path):
    with FakeApiServer(HOSTS) as server:
        server.config = server.kubeconfig(tmp_path / "kubeconfig")
        yield server


def alert(cluster, host: str, cleared: bool = False) -> Alert:
    gpu = GPU.objects.filter(node__cluster=cluster, node__hostname=host).order_by("index").first()
    now = timezone.now()
    return Alert.objects.create(cluster=cluster, rule="gpu_xid_critical", severity="critical", object_kind="gpu",
                                object_key=f"{host}/{gpu.uuid}", message="XID 79: GPU has fallen off the bus",
                                removes_capacity=True, first_seen=now - timedelta(minutes=1), last_seen=now,
                                cleared_at=now if cleared else None)  # fmt: skip


def state(k8s, name: str) -> tuple[bool, str]:
    node = k8s.nodes[name]
    return bool(node["spec"].get("unschedulable")), node["metadata"].get("annotations", {}).get(ANNOTATION, "")


def test_an_alert_cordons_its_node_with_the_reason(cluster, k8s):
    a = alert(cluster, "gpu0002")
    result = sync_cordons(cluster.pk, mode="on", api=api_from_kubeconfig(k8s.config))
    assert result.done == ["cordon gpu0002"] and not result.errors
    assert state(k8s, "gpu0002") == (
        True,
        f"clusterctl: gpu_xid_critical {a.object_key}: XID 79: GPU has fallen off the bus",
    )
    assert state(k8s, "gpu0001") == (False, "")


def test_a_cleared_alert_uncordons_only_what_clusterctl_cordoned(cluster, k8s):
    a = alert(cluster, "gpu0002")
    api = api_from_kubeconfig(k8s.config)
    sync_cordons(cluster.pk, mode="on", api=api)
    k8s.nodes["gpu0003"]["spec"]["unschedulable"] = True  # an operator's kubectl cordon
    Alert.objects.filter(pk=a.pk).update(cleared_at=timezone.now())
    assert sync_cordons(cluster.pk, mode="on", api=api).done == ["uncordon gpu0002"]
    assert state(k8s, "gpu0002") == (False, "") and state(k8s, "gpu0003") == (True, "")
    assert k8s.patches[-1] == (
        "gpu0002",
        {"spec": {"unschedulable": False}, "metadata": {"annotations": {ANNOTATION: None}}},
    )


def test_a_node_an_operator_cordoned_is_left_even_with_an_alert(cluster, k8s):
    k8s.nodes["gpu0004"]["spec"]["unschedulable"] = True
    alert(cluster, "gpu0004")
    result = sync_cordons(cluster.pk, mode="on", api=api_from_kubeconfig(k8s.config))
    assert result.plan.leave == [("gpu0004", "cordoned already, not by clusterctl: left as it is")] and not k8s.patches


def test_dry_run_changes_nothing_and_the_command_prints_the_plan(cluster, k8s):
    alert(cluster, "gpu0001")
    out = StringIO()
    call_command("k8s_cordons", "--cluster", "k8s", "--dry-run", "--kubeconfig", k8s.config, stdout=out)
    assert out.getvalue().startswith("cordon gpu0001: clusterctl: gpu_xid_critical gpu0001/")
    assert not k8s.patches
    call_command("k8s_cordons", "--cluster", "k8s", "--apply", "--kubeconfig", k8s.config, stdout=StringIO())
    assert state(k8s, "gpu0001")[0] is True


def test_a_wrong_token_is_the_api_servers_refusal(cluster, k8s, tmp_path):
    bad = k8s.kubeconfig(tmp_path / "bad", token="nope")
    alert(cluster, "gpu0001")
    with pytest.raises(K8sError, match="GET /api/v1/nodes: 401 Unauthorized"):
        sync_cordons(cluster.pk, mode="on", api=api_from_kubeconfig(bad))
    with pytest.raises(CommandError, match="401 Unauthorized"):
        call_command("k8s_cordons", "--cluster", "k8s", "--apply", "--kubeconfig", bad)


def test_a_kubeconfig_without_a_current_context_is_refused_naming_it(tmp_path):
    path = tmp_path / "kc"
    path.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(K8sError, match=f"kubeconfig {path}: no current-context"):
        api_from_kubeconfig(str(path))


def test_the_plan_is_the_same_whatever_the_order():
    nodes = {"b": K8sNode("b", True, "clusterctl: old"), "a": K8sNode("a"), "c": K8sNode("c", True, "")}
    want = {"a": "x", "c": "y", "zz": "z"}
    plan = plan_cordons(want, nodes)
    assert plan.cordon == [("a", "clusterctl: x")] and plan.uncordon == ["b"]
    assert plan.leave == [("c", "cordoned already, not by clusterctl: left as it is"), ("zz", "not a Kubernetes node")]
    again = plan_cordons(dict(reversed(want.items())), dict(reversed(nodes.items())))
    assert again == plan


def test_a_reason_is_one_line_and_bounded():
    assert reason_text("a\nb\tc") == "clusterctl: a b c"
    assert len(reason_text("x" * 1000)) == 250
