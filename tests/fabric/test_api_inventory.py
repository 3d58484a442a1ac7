"""Inventory API: reads for signed-in users, writes for operators, filters, bounded queries."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import GPU, Cluster, Node, Switch
from tests.factories import ClusterFactory, GpuFactory, NodeFactory

SX6036 = str(Path(__file__).parent.parent / "fixtures" / "ibnetdiscover_sx6036_8switch.topo")

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab():
    call_command("import_fabric", SX6036, "--cluster", "lab", "--format", "ibnetdiscover", "--json")
    return Cluster.objects.get(name="lab")


def test_anonymous_is_refused(client, lab):
    assert client.get("/api/v1/switches/").status_code in (401, 403)


def test_switch_list_filtered_by_role(tenant_api, lab):
    body = tenant_api.get("/api/v1/switches/", {"cluster": "lab", "role": "spine"}).json()
    assert body["count"] == 2
    assert sorted(s["name"] for s in body["results"]) == ["ib7", "ib8"]
    assert set(body["results"][0]) == {
        "id", "url", "cluster", "guid", "lid", "name", "description", "vendor_id", "device_id", "model",
        "port_count", "role", "role_source", "rack",
    }  # fmt: skip


def test_link_list_shows_both_ends(tenant_api, lab):
    body = tenant_api.get("/api/v1/links/", {"node": "tank1"}).json()
    assert body["count"] == 2
    for link in body["results"]:
        ends = {link["a"]["kind"], link["b"]["kind"]}
        assert ends == {"switch", "hca"}
        assert link["capacity_gbps"] == 32.0


def test_link_filter_by_state(tenant_api, lab):
    assert tenant_api.get("/api/v1/links/", {"state": "down"}).json()["count"] == 0
    assert tenant_api.get("/api/v1/links/", {"state": "up"}).json()["count"] == 192


def test_tenant_cannot_write(tenant_api, lab):
    switch = Switch.objects.get(name="ib1")
    assert tenant_api.patch(f"/api/v1/switches/{switch.pk}/", {"rack": "r9"}, format="json").status_code == 403
    node = Node.objects.first()
    assert tenant_api.post(f"/api/v1/nodes/{node.pk}/drain/").status_code == 403


def test_operator_sets_switch_role_through_action(operator_api, lab):
    switch = Switch.objects.get(name="ib1")
    resp = operator_api.patch(f"/api/v1/switches/{switch.pk}/", {"role": "spine"}, format="json")
    assert resp.status_code == 200, resp.json()
    switch.refresh_from_db()
    assert (switch.role, switch.role_source) == ("spine", "set")


def test_protected_fields_ignored(operator_api, lab):
    switch = Switch.objects.get(name="ib1")
    operator_api.patch(f"/api/v1/switches/{switch.pk}/", {"guid": "0000000000000001", "lid": 9}, format="json")
    switch.refresh_from_db()
    assert switch.guid != "0000000000000001" and switch.lid != 9


def test_operator_drains_and_undrains_node(operator_api, lab):
    node = Node.objects.get(hostname="stage100")
    body = operator_api.post(f"/api/v1/nodes/{node.pk}/drain/", {"reason": "bad DIMM"}, format="json").json()
    assert (body["state"], body["state_reason"]) == ("drain", "bad DIMM")
    body = operator_api.post(f"/api/v1/nodes/{node.pk}/undrain/", {}, format="json").json()
    assert body["state"] == "up"


def test_mig_on_incapable_gpu_rejected(operator_api):
    gpu = GpuFactory(mig_capable=False, model="V100")
    resp = operator_api.patch(f"/api/v1/gpus/{gpu.pk}/", {"mig_enabled": True}, format="json")
    assert resp.status_code == 400
    assert "mig_enabled" in resp.json()


def test_report_endpoint(tenant_api, lab):
    body = tenant_api.get(f"/api/v1/clusters/{lab.pk}/report/").json()
    assert body["cluster"] == "lab"
    assert "bisection" in str(body)


def test_cluster_create_is_staff_only(tenant_api, operator_api):
    assert tenant_api.post("/api/v1/clusters/", {"name": "new"}, format="json").status_code == 403
    assert operator_api.post("/api/v1/clusters/", {"name": "new"}, format="json").status_code == 201
    assert operator_api.post("/api/v1/clusters/", {"name": "new"}, format="json").status_code == 400


def test_import_upload(operator_api):
    cluster = ClusterFactory(name="up")
    with open(SX6036, "rb") as fh:
        resp = operator_api.post(f"/api/v1/clusters/{cluster.pk}/import/", {"format": "ibnetdiscover", "file": fh})
    assert resp.status_code == 200, resp.content
    assert (resp.json()["switches"], resp.json()["links"]) == (8, 192)


def test_import_upload_bad_file_is_400_and_stores_nothing(operator_api, tmp_path):
    cluster = ClusterFactory(name="up")
    bad = tmp_path / "bad.topo"
    bad.write_text('[1]\t"H-24be05ffff980030"[1]\n')
    with open(bad, "rb") as fh:
        resp = operator_api.post(f"/api/v1/clusters/{cluster.pk}/import/", {"format": "ibnetdiscover", "file": fh})
    assert resp.status_code == 400
    assert "bad.topo:1" in resp.json()["file"][0]
    assert not Switch.objects.exists()


def test_schema_and_docs_served(client, operator):
    client.force_login(operator)
    assert client.get("/api/v1/schema/").status_code == 200
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()  # swagger-ui served from our own static files


def _bulk_gpus(count: int) -> None:
    cluster = ClusterFactory(name="big")
    nodes = Node.objects.bulk_create(
        Node(cluster=cluster, hostname=f"n{i:05d}", gpu_model="H100") for i in range(count // 8)
    )
    GPU.objects.bulk_create(
        GPU(node=node, index=i, uuid=f"GPU-{node.pk:06d}-{i}", model="H100", memory_mib=81559)
        for node in nodes
        for i in range(8)
    )


@pytest.mark.parametrize("path", ["/api/v1/gpus/", "/api/v1/nodes/", "/api/v1/links/", "/api/v1/switches/"])
def test_list_query_count_does_not_grow(tenant_api, path):
    _bulk_gpus(80)
    call_command("generate_fabric", "--cluster", "ft", "--nodes", "8", "--leaf-ports", "16", "--json")
    with CaptureQueriesContext(connection) as small:
        assert tenant_api.get(path, {"limit": 10}).status_code == 200
    with CaptureQueriesContext(connection) as large:
        assert tenant_api.get(path, {"limit": 100}).status_code == 200
    assert len(large) == len(small)


def test_listing_10000_gpus_is_constant_queries(tenant_api):
    _bulk_gpus(10_000)
    with CaptureQueriesContext(connection) as queries:
        body = tenant_api.get("/api/v1/gpus/", {"limit": 10_000}).json()
    assert body["count"] == 10_000 and len(body["results"]) == 10_000
    assert len(queries) <= 4, [q["sql"][:80] for q in queries]


def test_gpu_filters(tenant_api):
    node = NodeFactory(hostname="a1")
    GpuFactory(node=node, index=0, health="failed")
    GpuFactory(node=node, index=1)
    assert tenant_api.get("/api/v1/gpus/", {"node": "a1", "health": "failed"}).json()["count"] == 1


def test_node_list_counts_gpus_and_hcas(tenant_api):
    call_command("generate_fabric", "--cluster", "ft", "--nodes", "4", "--leaf-ports", "16", "--json")
    rows = tenant_api.get("/api/v1/nodes/", {"cluster": "ft", "role": "compute"}).json()["results"]
    assert [(r["gpu_count"], r["hca_count"]) for r in rows] == [(8, 8)] * 4


def test_oversized_upload_refused(operator_api, monkeypatch):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from fabric.api import views

    monkeypatch.setattr(views, "MAX_IMPORT_BYTES", 10)
    cluster = ClusterFactory(name="up")
    upload = SimpleUploadedFile("big.topo", b"x" * 11)
    resp = operator_api.post(f"/api/v1/clusters/{cluster.pk}/import/", {"format": "ibnetdiscover", "file": upload})
    assert resp.status_code == 400 and "limit" in resp.json()["file"][0]


def test_choices_legend_has_a_colour_for_every_state(tenant_api):
    body = tenant_api.get("/api/v1/choices/").json()
    assert [item["value"] for item in body["link_state"]] == ["up", "degraded", "down"]
    states = {name: items for name, items in body.items() if name != "priority_class"}  # classes have no colour
    assert all(item["colour"].startswith("#") for items in states.values() for item in items)


def test_choices_legend_includes_scheduler_states(tenant_api):
    body = tenant_api.get("/api/v1/choices/").json()
    assert {item["value"] for item in body["job_status"]} >= {"pending", "running", "preempted"}
    assert "sharing_mode" in body
