"""The admin works for operators at volume: changelists render with bounded queries, bulk drain works."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import Node, Switch

SX6036 = str(Path(__file__).parent.parent / "fixtures" / "ibnetdiscover_sx6036_8switch.topo")

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_lab(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", "r@example.org", "pw")
    client.force_login(user)
    call_command("import_fabric", SX6036, "--cluster", "lab", "--format", "ibnetdiscover", "--json")
    return client


@pytest.mark.parametrize("model", ["cluster", "switch", "node", "hca", "port", "link", "gpu", "importrecord"])
def test_changelist_renders(admin_client_lab, model):
    assert admin_client_lab.get(f"/admin/fabric/{model}/").status_code == 200


@pytest.mark.parametrize("model", ["switch", "node", "hca", "port", "link"])
def test_changelist_queries_bounded(admin_client_lab, model):
    with CaptureQueriesContext(connection) as queries:
        admin_client_lab.get(f"/admin/fabric/{model}/")
    assert len(queries) < 25, [q["sql"][:100] for q in queries]


def test_bulk_drain_action(admin_client_lab):
    ids = list(Node.objects.filter(hostname__startswith="stage1").values_list("pk", flat=True)[:5])
    resp = admin_client_lab.post(
        "/admin/fabric/node/", {"action": "drain", "_selected_action": ids, "index": 0}, follow=True
    )
    assert resp.status_code == 200
    assert Node.objects.filter(pk__in=ids, state="drain").count() == 5
    assert "drained by root" in Node.objects.get(pk=ids[0]).state_reason


def test_switch_role_edit_marks_it_set(admin_client_lab):
    switch = Switch.objects.get(name="ib1")
    data = {
        "cluster": switch.cluster_id, "guid": switch.guid, "name": switch.name, "port_count": 36, "role": "core",
        "description": switch.description, "ports-TOTAL_FORMS": 0, "ports-INITIAL_FORMS": 0,
    }  # fmt: skip
    resp = admin_client_lab.post(f"/admin/fabric/switch/{switch.pk}/change/", data)
    assert resp.status_code == 302, resp.content[:2000]
    switch.refresh_from_db()
    assert (switch.role, switch.role_source) == ("core", "set")


def test_search_by_guid(admin_client_lab):
    resp = admin_client_lab.get("/admin/fabric/switch/", {"q": "f4521403001165a0"})
    assert b"ib5" in resp.content
