"""Where a job runs, in words (dashboard.selectors.placement): its nodes grouped by the leaves their host links reach.
On a rail-optimised fat tree (tests.factories.fat_tree: 8 HCAs per server, leaf_ports=16 -> 8 servers and 8 leaves per
scalable unit, HCA i on leaf i) a server reaches the 8 leaves of its unit; with one HCA it reaches one leaf."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard import selectors
from fabric.models import Node
from scheduler import actions
from scheduler.models import PriorityClass
from scheduler.rounds import run_round
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


def nodes(cluster, *hostnames: str) -> dict[int, str]:
    rows = Node.objects.filter(cluster=cluster, hostname__in=hostnames).order_by("hostname")
    return dict(rows.values_list("pk", "hostname"))


@pytest.fixture
def rails(db):
    return fat_tree("rails", nodes=16, gpus_per_node=8, leaf_ports=16)


def test_a_server_on_a_rail_group_reaches_its_eight_leaves(rails):
    node = Node.objects.get(cluster=rails, hostname="gpu0009")
    assert selectors.leaves_of([node.pk]) == {node.pk: tuple(f"leaf{i:03d}" for i in range(9, 17))}


def test_eight_nodes_of_one_rail_group_are_one_rail_group_of_eight_leaves(rails):
    hosts = [f"gpu{i:04d}" for i in range(1, 9)]
    where = selectors.placement(64, nodes(rails, *hosts))
    assert where.text == "64 GPUs on 8 nodes, 1 rail group of 8 leaf switches (leaf001\N{EN DASH}leaf008)"
    assert where.leaves == 8
    assert [(label, group) for label, _, group in where.groups] == [
        ("rail group leaf001\N{EN DASH}leaf008 (8 leaf switches)", hosts)
    ]


def test_nodes_of_two_rail_groups_count_both_groups_and_all_their_leaves(rails):
    where = selectors.placement(16, nodes(rails, "gpu0001", "gpu0009"))
    assert where.text == "16 GPUs on 2 nodes, 2 rail groups of 8 leaf switches (16 leaf switches)"
    assert [group for _, _, group in where.groups] == [["gpu0001"], ["gpu0009"]]


def test_servers_with_one_hca_count_leaf_switches():
    cluster = fat_tree("racks", nodes=8, gpus_per_node=8, leaf_ports=8, hcas_per_node=1)
    one = selectors.placement(16, nodes(cluster, "gpu0001", "gpu0002"))
    assert one.text == "16 GPUs on 2 nodes, 1 leaf switch (leaf001)"
    two = selectors.placement(16, nodes(cluster, "gpu0001", "gpu0008"))
    assert two.text == "16 GPUs on 2 nodes, 2 leaf switches (leaf001, leaf002)"


def test_switch_names_are_shortened_only_when_they_run_in_sequence():
    assert selectors.name_span(["leaf017"]) == "leaf017"
    assert selectors.name_span(["leaf001", "leaf002", "leaf003"]) == "leaf001\N{EN DASH}leaf003"
    assert selectors.name_span(["leaf001", "leaf003", "leaf004"]) == "leaf001, leaf003, leaf004"
    assert selectors.name_span(["a1", "a2", "b3", "b4"]) == "a1, a2, b3 and 1 more"
    assert selectors.name_span(["leaf9", "leaf10", "leaf11"]) == "leaf9, leaf10, leaf11"  # not one width


def test_the_job_page_says_how_many_leaves_an_eight_node_job_spans(client, operator):
    cluster = fat_tree("su", nodes=8, gpus_per_node=8, leaf_ports=16)
    pool = actions.ensure_scheduler(cluster)
    tenant = actions.create_tenant("acme")
    actions.set_quota(tenant, pool, guaranteed_gpus=64, borrow_limit=0)
    job = actions.submit_job(tenant, pool, PriorityClass.objects.get(name="normal"), name="wide", gpus=64, nodes=8,
                             gpus_per_node=8, sharing="exclusive")  # fmt: skip
    run_round(cluster.pk, "test")
    client.force_login(operator)
    html = client.get(reverse("job", args=[cluster.pk, job.pk])).content.decode()
    assert (
        '<span data-testid="placement-text">64 GPUs on 8 nodes, 1 rail group of 8 leaf switches '
        "(leaf001\N{EN DASH}leaf008)</span>" in html
    )
    assert "on 1 leaf switch" not in html
    assert html.count('<li data-node="') == 8
