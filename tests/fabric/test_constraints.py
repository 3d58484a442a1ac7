"""The database itself refuses inventory that cannot exist."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from fabric.models import HCA, Link, Port, Switch
from tests.factories import ClusterFactory, NodeFactory, SwitchFactory

pytestmark = pytest.mark.django_db


def refused(fn) -> bool:
    try:
        with transaction.atomic():
            fn()
    except IntegrityError:
        return True
    return False


@pytest.fixture
def two_ports():
    sw = SwitchFactory()
    a = Port.objects.create(cluster=sw.cluster, switch=sw, number=1)
    b = Port.objects.create(cluster=sw.cluster, switch=sw, number=2)
    return sw, a, b


def test_switch_guid_unique_per_cluster():
    sw = SwitchFactory()
    assert refused(lambda: Switch.objects.create(cluster=sw.cluster, guid=sw.guid, name="dup"))


def test_same_guid_allowed_in_another_cluster():
    sw = SwitchFactory()
    assert not refused(lambda: Switch.objects.create(cluster=ClusterFactory(), guid=sw.guid, name="other"))


def test_guid_must_be_16_hex_digits():
    cluster = ClusterFactory()
    assert refused(lambda: Switch.objects.create(cluster=cluster, guid="0xF452", name="bad"))


def test_port_has_at_most_one_link_end(two_ports):
    sw, a, b = two_ports
    link = Link.objects.create(cluster=sw.cluster)
    Port.objects.filter(pk=a.pk).update(link=link, link_end="a")
    assert refused(lambda: Port.objects.filter(pk=b.pk).update(link=link, link_end="a"))


def test_link_end_needs_link(two_ports):
    _, a, _ = two_ports
    assert refused(lambda: Port.objects.filter(pk=a.pk).update(link_end="b"))


def test_port_belongs_to_switch_xor_hca(two_ports):
    sw, _, _ = two_ports
    node = NodeFactory(cluster=sw.cluster)
    hca = HCA.objects.create(cluster=sw.cluster, node=node, guid="00000000000000aa", device="mlx5_0")
    assert refused(lambda: Port.objects.create(cluster=sw.cluster, switch=sw, hca=hca, number=9))
    assert refused(lambda: Port.objects.create(cluster=sw.cluster, number=9))


def test_switch_port_number_unique(two_ports):
    sw, _, _ = two_ports
    assert refused(lambda: Port.objects.create(cluster=sw.cluster, switch=sw, number=1))


def test_host_hca_needs_a_node():
    cluster = ClusterFactory()
    assert refused(lambda: HCA.objects.create(cluster=cluster, guid="00000000000000ab", kind="host"))
    assert not refused(lambda: HCA.objects.create(cluster=cluster, guid="00000000000000ac", kind="aggregation"))
