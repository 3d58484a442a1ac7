"""The fabric report page (issue 16): analysed once per fabric version (fabric.reports), every row of a small
fabric's tables, the first rows of long ones with how many more.

The fabric: 24 servers with one HCA each on 8-port leaves, 1:1 (fabric.importers.fattree): 4 hosts and 4 uplinks per
leaf, so 6 leaves (leaf001-leaf006) and 4 spines (spine01-spine04), each leaf cabled once to each spine; 24 host links
and 24 leaf-spine links of NDR 400 Gb/s.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from dashboard import views
from fabric import actions
from fabric.models import Link, Switch
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    return fat_tree("rep", nodes=24, gpus_per_node=8, leaf_ports=8, hcas_per_node=1)


@pytest.fixture
def staff(client, operator):
    client.force_login(operator)
    return client


def page(client, cluster, query: str = "") -> str:
    response = client.get(reverse("report", args=[cluster.pk]) + query)
    assert response.status_code == 200
    return response.content.decode()


def table(html: str, testid: str) -> str:
    return re.search(rf'<table class="grid" data-testid="{testid}">(.*?)</table>', html, re.S).group(1)


def body_rows(html: str, testid: str) -> list[str]:
    """The first cell's text of each body row of a table."""
    body = table(html, testid).split("<tbody>", 1)[1]
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<tr[^>]*><td>(.*?)</td>", body, re.S)]


def test_two_visits_at_one_fabric_version_analyse_the_fabric_once(staff, cluster, analyses):
    first, second = page(staff, cluster), page(staff, cluster)
    assert analyses == [48]
    assert body_rows(first, "report-tiers") == body_rows(second, "report-tiers")


def test_a_link_going_down_makes_the_next_visit_analyse_again(staff, cluster, analyses):
    page(staff, cluster)
    leaf3 = Switch.objects.get(cluster=cluster, name="leaf003")
    uplink = Link.objects.filter(ports__switch=leaf3).filter(ports__switch__name="spine01").get()
    Link.objects.filter(pk=uplink.pk).update(state="down")
    html = page(staff, cluster)
    assert analyses == [48, 48]
    assert "47 up, 1 down" in html


def test_a_switch_renamed_through_the_actions_shows_its_new_name(staff, cluster, django_capture_on_commit_callbacks):
    # A rename leaves fabric_version as it was; the committed edit renews the report's inventory stamp.
    page(staff, cluster)
    with django_capture_on_commit_callbacks(execute=True):
        actions.update_inventory_object(Switch.objects.get(cluster=cluster, name="spine04"), {"name": "spine-d"})
    assert body_rows(page(staff, cluster), "report-tiers")[-1] == "spine-d"


def test_a_small_fabric_shows_every_row_and_no_more_note(staff, cluster):
    html = page(staff, cluster)
    leaves = [f"leaf00{i}" for i in range(1, 7)]
    assert body_rows(html, "report-tiers") == [*leaves, "spine01", "spine02", "spine03", "spine04"]
    assert body_rows(html, "report-oversubscription") == leaves
    assert body_rows(html, "spof-switches") == leaves  # each leaf cuts off its 4 single-homed hosts
    assert html.count('<td class="num">1.00:1</td>') == 6
    assert "<b>9600 Gb/s</b>" in html  # 24 host links x 400
    assert "<b>4800 Gb/s</b>" in html  # bisection: 12 host ports x 400 on each half
    assert "24 hosts are single-homed" in html
    assert "<small>6 leaf, 4 spine, 0 core</small>" in html  # no "unknown" tier: none of that tier, no comma after
    assert 'data-testid="more-rows"' not in html


def test_the_most_oversubscribed_leaf_comes_first(staff, cluster):
    leaf3 = Switch.objects.get(cluster=cluster, name="leaf003")
    Link.objects.filter(ports__switch=leaf3).filter(ports__switch__name="spine01").update(state="down")
    html = page(staff, cluster)
    # leaf003: 4 hosts x 400 Gb/s over 3 live uplinks x 400 Gb/s = 1.33:1; the others 1:1, in name order.
    order = ["leaf003", "leaf001", "leaf002", "leaf004", "leaf005", "leaf006"]
    assert body_rows(html, "report-oversubscription") == order
    first = table(html, "report-oversubscription").split("<tbody>", 1)[1]
    worst = (
        r'<tr class="worst"><td>leaf003</td><td class="num">4</td><td class="num">1600</td>'
        r'<td class="num">3</td><td class="num">1200</td>\s*<td class="num">1.33:1</td>'
    )
    assert re.search(worst, first)


def test_long_tables_show_their_first_rows_and_how_many_more(staff, cluster, monkeypatch):
    monkeypatch.setattr(views, "REPORT_ROWS", 4)
    html = page(staff, cluster)
    assert body_rows(html, "report-tiers") == ["leaf001", "leaf002", "leaf003", "leaf004"]
    assert body_rows(html, "report-oversubscription") == ["leaf001", "leaf002", "leaf003", "leaf004"]
    assert body_rows(html, "spof-switches") == ["leaf001", "leaf002", "leaf003", "leaf004"]
    notes = re.findall(r'<p class="muted" data-testid="more-rows" data-more="(\d+)">([^:]*):', html)
    assert notes == [
        ("2", "2 more switches (6 in all; the first 4 shown, the widest scope first)"),
        ("2", "2 more leaves (6 in all; the first 4 shown, the most oversubscribed)"),
        ("6", "6 more switches (10 in all; the first 4 shown)"),
    ]
    assert 'href="?all=1#tiers">show all</a>' in html


def test_all_shows_every_row_of_a_long_table(staff, cluster, monkeypatch):
    monkeypatch.setattr(views, "REPORT_ROWS", 4)
    html = page(staff, cluster, "?all=1")
    assert len(body_rows(html, "report-tiers")) == 10
    assert len(body_rows(html, "report-oversubscription")) == 6
    assert 'data-testid="more-rows"' not in html and "every row shown" in html
