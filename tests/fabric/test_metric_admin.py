"""Time series admin: changelists of millions of rows never COUNT(*) the table and do not query per row."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusterctl.admin_paginators import EstimatedCountPaginator
from fabric import actions
from fabric.models import GPU, GpuMetric, Port, PortMetric
from tests.factories import ClusterFactory, fat_tree

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
MODELS = ["gpumetric", "portmetric", "gpumetricrollup", "portmetricrollup"]


def unbounded_counts(queries) -> list[str]:
    """COUNT queries that scan without a LIMIT: what a huge table must never get."""
    return [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and not re.search(r"\bLIMIT\b", q["sql"])]


def add_samples(n_per_object: int, n_gpus: int = 4, *, start: datetime = T0) -> None:
    gpus = list(GPU.objects.order_by("pk")[:n_gpus])
    ports = list(Port.objects.filter(hca__isnull=False).order_by("pk")[:n_gpus])
    times = [start + timedelta(seconds=10 * i) for i in range(n_per_object)]
    GpuMetric.objects.bulk_create(GpuMetric(gpu=g, at=t, utilisation_pct=50.0) for g in gpus for t in times)
    PortMetric.objects.bulk_create(
        PortMetric(port=p, at=t, tx_bytes_per_s=1e9, errors={"symbol_error": 1}) for p in ports for t in times
    )
    actions.rollup_metrics(now=times[-1] + timedelta(hours=1))


@pytest.fixture
def admin_client(client, django_user_model):
    fat_tree("series-admin", nodes=4, gpus_per_node=2, leaf_ports=16)
    ClusterFactory(name="other")  # the cluster filter shows (and filters) with two clusters or more
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.org", "pw"))
    return client


class SmallCap(EstimatedCountPaginator):
    cap = 20


def test_count_stops_at_the_cap(admin_client):
    add_samples(10)  # 40 GPU rows
    paginator = SmallCap(GpuMetric.objects.order_by("-pk"), 10)
    with CaptureQueriesContext(connection) as queries:
        assert paginator.count == 21
    assert paginator.count_label == "20+"
    assert len(queries) <= 2 and not unbounded_counts(queries), [q["sql"] for q in queries]


def test_filtered_count_is_exact_under_the_cap_and_bounded(admin_client):
    add_samples(10)
    gpu = GPU.objects.order_by("pk").first()
    paginator = SmallCap(GpuMetric.objects.filter(gpu=gpu).order_by("-pk"), 10)
    with CaptureQueriesContext(connection) as queries:
        assert paginator.count == 10
    assert paginator.count_label == "10"
    assert not unbounded_counts(queries) and "LIMIT 21" in queries[-1]["sql"]


@pytest.mark.postgres("pg_class estimates are PostgreSQL's")
def test_unfiltered_count_is_the_planner_estimate_on_postgresql(admin_client):
    add_samples(10)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE fabric_gpumetric")
    paginator = SmallCap(GpuMetric.objects.order_by("-pk"), 10)
    with CaptureQueriesContext(connection) as queries:
        assert paginator.count == 40
    assert paginator.count_label == "about 40"
    assert not any("COUNT(" in q["sql"].upper() for q in queries)
    assert "pg_class" in queries[0]["sql"]


def test_count_of_a_list_is_its_length():
    assert EstimatedCountPaginator(list(range(7)), 5).count == 7


@pytest.mark.parametrize("model", MODELS)
def test_changelist_never_counts_the_whole_table(admin_client, model, monkeypatch):
    monkeypatch.setattr(EstimatedCountPaginator, "cap", 5)
    add_samples(30)
    cluster = "gpu__node__cluster" if model.startswith("gpu") else "port__cluster"
    cluster_id = GPU.objects.values_list("node__cluster", flat=True).first()
    for query in ("", f"?{cluster}__id__exact={cluster_id}"):
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(f"/admin/fabric/{model}/{query}")
        assert response.status_code == 200
        assert not unbounded_counts(queries), unbounded_counts(queries)
    assert "5+" in response.content.decode()  # filtered: counted up to the cap


@pytest.mark.parametrize("model", MODELS)
def test_changelist_queries_do_not_grow_with_rows(admin_client, model):
    add_samples(2, n_gpus=1)
    with CaptureQueriesContext(connection) as few:
        assert admin_client.get(f"/admin/fabric/{model}/").status_code == 200
    add_samples(40, start=T0 + timedelta(days=1))
    with CaptureQueriesContext(connection) as many:
        assert admin_client.get(f"/admin/fabric/{model}/").status_code == 200
    assert len(many) == len(few) <= 12, [q["sql"][:120] for q in many.captured_queries]


@pytest.mark.parametrize("model", MODELS)
def test_series_are_read_only_in_the_admin(admin_client, model):
    add_samples(2, n_gpus=1)
    assert admin_client.get(f"/admin/fabric/{model}/add/").status_code == 403
