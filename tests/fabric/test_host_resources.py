"""A node's host CPU and memory for jobs (Node.cpu_milli / memory_mib): the node agent's report
(fabric.actions.record_host_resources, which ingest calls when it changes), unless an operator set the value (the
admin, the node API, fabric.actions.set_host_resources)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric import actions
from fabric.models import Node
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    return fat_tree("hostres", nodes=2, gpus_per_node=8, leaf_ports=16)


def hosts(cluster) -> list[str]:
    return sorted(Node.objects.filter(cluster=cluster, role="compute").values_list("hostname", flat=True))


def node(host: str) -> Node:
    return Node.objects.get(hostname=host)


def figures(n: Node) -> tuple:
    return (n.cpu_milli, n.memory_mib, n.reported_cpu_milli, n.reported_memory_mib, n.cpu_milli_manual,
            n.memory_mib_manual)  # fmt: skip


def node_writes(queries) -> list[str]:
    return [q["sql"] for q in queries if "fabric_node" in q["sql"] and not q["sql"].lstrip().startswith("SELECT")]


def seed(cluster, *hosts: str) -> None:
    """The node agents of `hosts` reported 64 CPUs and 515797 MiB (a 512 GiB server's MemTotal)."""
    assert actions.record_host_resources(cluster.pk, {h: (64000, 515_797) for h in hosts}) == sorted(hosts)


def test_a_report_becomes_what_jobs_may_take_and_the_same_one_writes_nothing(cluster):
    a, b = hosts(cluster)
    seed(cluster, a, b)
    assert figures(node(a)) == figures(node(b)) == (64000, 515_797, 64000, 515_797, False, False)
    with CaptureQueriesContext(connection) as queries:
        assert actions.record_host_resources(cluster.pk, {a: (64000, 515_797)}) == []
    assert node_writes(queries) == []


def test_an_operators_value_is_kept_when_the_agent_reports(cluster):
    a, _ = hosts(cluster)
    seed(cluster, a)
    actions.set_host_resources(node(a), cpu_milli=56000)  # 8 cores kept for the system
    assert actions.record_host_resources(cluster.pk, {a: (96000, 515_797)}) == [a]  # more cores after a BIOS change
    assert figures(node(a)) == (56000, 515_797, 96000, 515_797, True, False)


def test_following_the_agent_again_takes_its_last_report(cluster):
    a, _ = hosts(cluster)
    seed(cluster, a)
    n = actions.set_host_resources(node(a), cpu_milli=56000, memory_mib=0)  # memory: not tracked, by hand
    assert figures(n) == (56000, 0, 64000, 515_797, True, True)
    n = actions.set_host_resources(node(a), cpu_milli=None)
    assert figures(node(a)) == figures(n) == (64000, 0, 64000, 515_797, False, True)


def test_set_host_resources_refuses_a_negative_amount(cluster):
    a, _ = hosts(cluster)
    with pytest.raises(actions.ActionError, match="cpu_milli must be a whole number from 0 to 2147483647, not -1"):
        actions.set_host_resources(node(a), cpu_milli=-1)


# -- the node API and the admin ------------------------------------------------------------------------------------


def test_node_api_shows_the_figures(tenant_api, cluster):
    a, _ = hosts(cluster)
    seed(cluster, a)
    row = tenant_api.get("/api/v1/nodes/", {"hostname": a}).json()["results"][0]
    assert {k: row[k] for k in ("cpu_milli", "memory_mib", "cpu_milli_manual", "memory_mib_manual",
                                 "reported_cpu_milli", "reported_memory_mib")} == {
        "cpu_milli": 64000, "memory_mib": 515_797, "cpu_milli_manual": False, "memory_mib_manual": False,
        "reported_cpu_milli": 64000, "reported_memory_mib": 515_797,
    }  # fmt: skip


def test_operator_caps_cpus_through_the_api(operator_api, cluster):
    a, _ = hosts(cluster)
    seed(cluster, a)
    pk = node(a).pk
    body = operator_api.patch(f"/api/v1/nodes/{pk}/", {"cpu_milli": 60000}, format="json").json()
    assert (body["cpu_milli"], body["cpu_milli_manual"], body["reported_cpu_milli"]) == (60000, True, 64000)
    body = operator_api.patch(f"/api/v1/nodes/{pk}/", {"cpu_milli_manual": False}, format="json").json()
    assert (body["cpu_milli"], body["cpu_milli_manual"]) == (64000, False)


def test_operator_pins_the_current_value_by_sending_it(operator_api, cluster):
    a, _ = hosts(cluster)
    seed(cluster, a)
    body = operator_api.patch(f"/api/v1/nodes/{node(a).pk}/", {"memory_mib": 515_797}, format="json").json()
    assert (body["memory_mib"], body["memory_mib_manual"]) == (515_797, True)


def test_api_refuses_a_value_with_follow_the_agent(operator_api, cluster):
    a, _ = hosts(cluster)
    resp = operator_api.patch(
        f"/api/v1/nodes/{node(a).pk}/", {"cpu_milli": 60000, "cpu_milli_manual": False}, format="json"
    )
    assert resp.status_code == 400
    assert resp.json() == {
        "cpu_milli": ["cpu_milli_manual false follows the node agent's report: leave cpu_milli out, or send it alone "
                      "to set it"]
    }  # fmt: skip


@pytest.mark.parametrize("body", [{"cpu_milli": -1}, {"memory_mib": 2**31}])
def test_api_refuses_an_amount_out_of_range(operator_api, cluster, body):
    a, _ = hosts(cluster)
    resp = operator_api.patch(f"/api/v1/nodes/{node(a).pk}/", body, format="json")
    assert resp.status_code == 400 and list(resp.json()) == list(body)


def test_tenant_cannot_set_host_resources(tenant_api, cluster):
    a, _ = hosts(cluster)
    assert tenant_api.patch(f"/api/v1/nodes/{node(a).pk}/", {"cpu_milli": 1000}, format="json").status_code == 403


@pytest.fixture
def admin(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.org", "pw"))
    return client


def test_admin_edit_of_cpus_is_the_operators(admin, cluster):
    a, _ = hosts(cluster)
    seed(cluster, a)
    n = node(a)
    data = {
        "cluster": n.cluster_id, "hostname": n.hostname, "role": n.role, "rack": n.rack, "state": n.state,
        "state_reason": n.state_reason, "gpu_model": n.gpu_model, "system_guid": n.system_guid,
        "cpu_milli": 48000, "memory_mib": n.memory_mib,
        "gpus-TOTAL_FORMS": 0, "gpus-INITIAL_FORMS": 0, "hcas-TOTAL_FORMS": 0, "hcas-INITIAL_FORMS": 0,
    }  # fmt: skip
    resp = admin.post(f"/admin/fabric/node/{n.pk}/change/", data)
    assert resp.status_code == 302, resp.content[:3000]
    assert figures(node(a)) == (48000, 515_797, 64000, 515_797, True, False)
    listing = admin.get("/admin/fabric/node/", {"q": a}).content.decode()
    assert "48 (set)" in listing and "515797 MiB" in listing


def test_admin_action_follows_the_agent_again(admin, cluster):
    a, b = hosts(cluster)
    seed(cluster, a, b)
    for host in (a, b):
        actions.set_host_resources(node(host), cpu_milli=1000, memory_mib=1024)
    ids = [node(a).pk, node(b).pk]
    resp = admin.post("/admin/fabric/node/", {"action": "follow_agent", "_selected_action": ids, "index": 0})
    assert resp.status_code == 302
    assert figures(node(a)) == figures(node(b)) == (64000, 515_797, 64000, 515_797, False, False)
