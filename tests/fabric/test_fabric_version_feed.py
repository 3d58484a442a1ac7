"""fabric_version on PostgreSQL counts the fabric again only after a write to a table it reads (fabric.change_feed),
and never keeps a count that saw writes which may yet roll back. Transactional tests: each write commits."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from fabric import selectors
from fabric.choices import LinkState
from fabric.models import ImportRecord, Link
from fabric.selectors import _fabric_version, fabric_version
from tests.factories import fat_tree

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres("transaction ids and triggers are PostgreSQL's"),
]


@pytest.fixture
def cluster(monkeypatch):
    monkeypatch.setattr(selectors, "_VERSIONS", {})
    return fat_tree("feed", nodes=4, leaf_ports=16)


def _counted(queries) -> bool:
    return any('FROM "fabric_link"' in q["sql"] and "COUNT" in q["sql"] for q in queries.captured_queries)


def test_with_nothing_written_the_version_is_not_counted_again(cluster):
    first = fabric_version(cluster.pk)
    with CaptureQueriesContext(connection) as queries:
        assert fabric_version(cluster.pk) == first
    assert not _counted(queries)


def test_a_link_taken_down_changes_the_version(cluster):
    first = fabric_version(cluster.pk)
    Link.objects.filter(pk=Link.objects.filter(cluster=cluster).first().pk).update(state=LinkState.DOWN)
    with CaptureQueriesContext(connection) as queries:
        second = fabric_version(cluster.pk)
    assert _counted(queries) and second != first and second == _fabric_version(cluster.pk)


def test_a_deleted_import_record_changes_the_version(cluster):
    first = fabric_version(cluster.pk)
    ImportRecord.objects.filter(cluster=cluster).order_by("-pk").first().delete()  # the latest import: counted
    second = fabric_version(cluster.pk)
    assert second != first and second == _fabric_version(cluster.pk)


def test_a_count_that_saw_writes_rolled_back_is_not_kept(cluster):
    before = fabric_version(cluster.pk)
    with pytest.raises(RuntimeError), transaction.atomic():
        Link.objects.filter(pk=Link.objects.filter(cluster=cluster).first().pk).update(state=LinkState.DOWN)
        assert fabric_version(cluster.pk) != before  # counted inside the transaction that took it down
        raise RuntimeError("rolled back")
    assert fabric_version(cluster.pk) == before == _fabric_version(cluster.pk)
