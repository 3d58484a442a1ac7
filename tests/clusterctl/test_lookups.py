"""`field__any_of`: the rows `field__in` finds, as one array parameter on PostgreSQL (clusterctl.lookups)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import GPU, Node
from tests.factories import GpuFactory, NodeFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpus() -> list[GPU]:
    node = NodeFactory()
    return [GpuFactory(node=node, index=i) for i in range(4)]


def test_it_finds_the_rows_in_the_list(gpus):
    wanted = [gpus[0].pk, gpus[2].pk]

    assert sorted(GPU.objects.filter(pk__any_of=wanted).values_list("pk", flat=True)) == sorted(wanted)


def test_a_foreign_key_takes_it_too(gpus):
    other = GpuFactory(node=NodeFactory(), index=0)

    found = GPU.objects.filter(node_id__any_of=[other.node_id]).values_list("pk", flat=True)

    assert list(found) == [other.pk]


def test_an_empty_list_finds_nothing(gpus):
    assert list(GPU.objects.filter(pk__any_of=[])) == []


def test_repeated_ids_count_once(gpus):
    assert GPU.objects.filter(pk__any_of=[gpus[1].pk, gpus[1].pk]).count() == 1


def test_an_update_through_it_changes_only_the_listed_rows(gpus):
    GPU.objects.filter(pk__any_of=[gpus[3].pk]).update(memory_mib=1)

    assert [g.memory_mib for g in GPU.objects.order_by("index")] == [81559, 81559, 81559, 1]


def test_ten_thousand_ids_are_one_parameter_on_postgresql(gpus):
    if connection.vendor != "postgresql":
        pytest.skip("the array parameter is PostgreSQL's")
    ids = [gpus[0].pk, *range(10**9, 10**9 + 9_999)]

    with CaptureQueriesContext(connection) as ctx:
        found = list(GPU.objects.filter(pk__any_of=ids).values_list("pk", flat=True))

    assert found == [gpus[0].pk]
    sql = ctx.captured_queries[0]["sql"]
    assert "= ANY(" in sql
    assert " IN (" not in sql


def test_a_string_is_refused_with_a_clear_error():
    with pytest.raises(TypeError, match="any_of takes a list of values, not str"):
        Node.objects.filter(pk__any_of="12")
