"""The fabric page (its hooks for browser tests, CSP-clean markup) and the link history its side panel reads."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboard.views import LINK_HISTORY_MAX_MINUTES, LINK_HISTORY_MAX_POINTS
from fabric.models import Link, Port, PortMetric
from fabric.topology.layout import LayoutLink, LayoutNode, LayoutSwitch, layout
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ["fabric-chart", "fabric-summary", "fabric-search", "fabric-search-list", "job-chip", "mode-toggle",
         "link-panel", "fabric-legend", "fabric-hot", "fabric-tip"]  # fmt: skip


@pytest.fixture
def cluster(db):
    return fat_tree("fab", nodes=8, gpus_per_node=8, leaf_ports=8)


@pytest.fixture
def staff(client, operator):
    client.force_login(operator)
    return client


def history_url(cluster_id: int, link_id: int, **query) -> str:
    url = reverse("fabric-link-history", args=[cluster_id, link_id])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def host_link(cluster) -> Link:
    return Link.objects.filter(cluster=cluster, ports__hca__isnull=False).order_by("pk").first()


def add_samples(link: Link, n: int, *, every_s: int = 10, errors_every: int = 50) -> None:
    now = timezone.now()
    rows = []
    for port in Port.objects.filter(link=link):
        for k in range(n):
            rows.append(
                PortMetric(
                    port=port,
                    at=now - timedelta(seconds=every_s * (k + 1)),
                    tx_bytes_per_s=1e9,
                    rx_bytes_per_s=5e8,
                    xmit_wait_per_s=0.0,
                    utilisation=(k % 100) / 100,
                    errors={"symbol_error": 2} if k % errors_every == 0 else {},
                )
            )
    PortMetric.objects.bulk_create(rows)


#
# The page
#


def test_page_carries_the_hooks_the_sockets_and_no_inline_script(staff, cluster):
    response = staff.get(reverse("fabric", args=[cluster.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    for hook in HOOKS:
        assert f'id="{hook}"' in html, hook
    page = re.search(r'<section id="fabric-page"[^>]*>', html).group(0)
    assert f'data-ws-fabric="/ws/clusters/{cluster.pk}/fabric/"' in page
    assert f'data-ws-queue="/ws/clusters/{cluster.pk}/queue/"' in page
    assert f'data-history-url="/clusters/{cluster.pk}/fabric/links/0/history/"' in page
    assert re.search(r'<div id="fabric-summary"[^>]*hidden', html)
    assert re.search(r'<aside id="link-panel"[^>]*hidden', html)
    # Content-Security-Policy: scripts from files (the page module, vendored ECharts) or JSON data only.
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag or 'type="application/json"' in tag, tag
    assert "style=" not in html.split("<main", 1)[1]
    assert 'src="/static/dashboard/fabric.js"' in html and 'type="module"' in html
    assert "/static/vendor/echarts/echarts.min.js" in html
    # The state colours come from the one legend, passed as JSON (fabric.js reads link_state, node_state ...).
    legends = json.loads(re.search(r'<script id="legends" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert {"link_state", "node_state", "node_role", "alert_severity"} <= set(legends)


def test_jobs_are_found_with_a_search_box_not_a_dropdown(staff, cluster):
    html = staff.get(reverse("fabric", args=[cluster.pk])).content.decode()
    assert 'id="job-select"' not in html
    search = re.search(r'<input id="fabric-search"[^>]*>', html, re.S).group(0)
    assert 'type="search"' in search and 'role="combobox"' in search and 'aria-controls="fabric-search-list"' in search
    assert re.search(r'<ul id="fabric-search-list"[^>]*role="listbox"[^>]*hidden', html)


def test_page_is_for_operators_only(client, cluster, tenant_user):
    url = reverse("fabric", args=[cluster.pk])
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(tenant_user)
    assert client.get(url).status_code == 403


def test_page_of_an_unknown_cluster_is_404(staff):
    assert staff.get(reverse("fabric", args=[10**6])).status_code == 404


def test_page_script_uses_the_hooks_and_the_served_colours():
    """fabric.js keeps the ids the template has, and takes state colours from the legend instead of restating them."""
    js = (ROOT / "dashboard/static/dashboard/fabric.js").read_text()
    for hook in [*HOOKS, "link-panel-title", "link-panel-minutes", "link-history-chart", "fabric-fit"]:
        assert f'"{hook}"' in js, hook
    assert 'colourOf("link_state"' in js and 'colourOf("node_state"' in js
    okabe_ito = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
    assert not {c for c in okabe_ito if c.lower() in js.lower()}
    assert "window.__fabric" in js and "setOption" in js  # the history chart is ECharts


#
# Link history
#


def test_history_has_both_ports_in_percent_with_errors(staff, cluster):
    link = host_link(cluster)
    add_samples(link, 30)
    data = staff.get(history_url(cluster.pk, link.pk, minutes=60)).json()
    assert data["link"]["id"] == link.pk and "<->" in data["link"]["label"]
    assert data["minutes"] == 60 and data["units"]["util"] == "% of link capacity"
    assert [p["end"] for p in data["ports"]] == ["a", "b"]
    points = data["ports"][0]["points"]
    assert len(points) == 30
    assert data["fields"] == ["at", "util", "util_max", "errors", "xmit_wait"]
    at, util, util_max, errors, _ = points[-1]  # oldest first: the last is the newest sample (k = 0)
    assert points[0][0] < at
    assert util == util_max == 0.0 and errors == 2
    assert max(p[1] for p in points) == 29.0


def test_history_is_bounded_in_points_span_and_queries(staff, cluster):
    link = host_link(cluster)
    add_samples(link, 1000, every_s=3)  # 50 minutes of 3-second samples: more rows than points allowed
    with CaptureQueriesContext(connection) as queries:
        data = staff.get(history_url(cluster.pk, link.pk, minutes=60)).json()
    assert all(0 < len(p["points"]) <= LINK_HISTORY_MAX_POINTS for p in data["ports"])
    assert len(queries) <= 10  # session, user, link, ports, label, one series query per port
    huge = staff.get(history_url(cluster.pk, link.pk, minutes=10**9)).json()
    assert huge["minutes"] == LINK_HISTORY_MAX_MINUTES
    assert staff.get(history_url(cluster.pk, link.pk, minutes=0)).json()["minutes"] == 1
    assert staff.get(history_url(cluster.pk, link.pk, minutes="soon")).status_code == 400


def test_history_without_samples_is_empty_not_an_error(staff, cluster):
    link = Link.objects.filter(cluster=cluster).order_by("-pk").first()
    data = staff.get(history_url(cluster.pk, link.pk)).json()
    assert data["minutes"] == 60 and all(p["points"] == [] for p in data["ports"])


def test_history_is_for_operators_only(client, cluster, tenant_user):
    url = history_url(cluster.pk, host_link(cluster).pk)
    assert client.get(url).status_code == 302
    client.force_login(tenant_user)
    assert client.get(url).status_code == 403


def test_history_of_a_link_of_another_cluster_is_404(staff, cluster):
    other = fat_tree("other", nodes=2, gpus_per_node=8, leaf_ports=8)
    foreign = host_link(other)
    assert staff.get(history_url(cluster.pk, foreign.pk)).status_code == 404
    assert staff.get(history_url(other.pk, foreign.pk)).status_code == 200
    assert staff.get(history_url(cluster.pk, 10**9)).status_code == 404


#
# The snapshot the page draws: positions from the pure layout (how the server side adds them)
#


def snapshot_with_positions(switches: list[dict], nodes: list[dict], links: list[dict]) -> dict:
    """docs/dashboard.md's fabric snapshot plus x/y per switch and node, from fabric.topology.layout."""
    lay = layout(
        [LayoutSwitch(s["id"], s["tier"], s["name"]) for s in switches],
        [LayoutNode(n["id"], n["leaf"], n["role"], n["hostname"]) for n in nodes],
        [LayoutLink(tuple(link["a"]), tuple(link["b"])) for link in links],
    )
    for s in switches:
        s["x"], s["y"] = lay.switches[s["id"]].x, lay.switches[s["id"]].y
    for n in nodes:
        n["x"], n["y"] = lay.nodes[n["id"]].x, lay.nodes[n["id"]].y
    return {"switches": switches, "nodes": nodes, "links": links, "aggregated": lay.aggregated}


def test_contract_snapshot_gets_a_position_for_everything_it_draws():
    switches = [
        {"id": 1, "name": "spine01", "tier": 1, "role": "spine", "hottest": 0.4},
        {"id": 3, "name": "leaf01", "tier": 0, "role": "leaf", "hottest": 0.42},
        {"id": 4, "name": "leaf02", "tier": 0, "role": "leaf", "hottest": 0.1},
    ]
    nodes = [
        {"id": 7, "hostname": "gpu0001", "role": "compute", "state": "up", "leaf": 3, "gpus": 8},
        {"id": 8, "hostname": "tank1", "role": "storage", "state": "up", "leaf": 4, "gpus": 0},
    ]

    def link(pk, a, b, state="up", util=0.5, errors=False):
        return {"id": pk, "a": a, "b": b, "capacity_gbps": 400.0, "state": state, "util": util, "errors": errors}

    links = [
        link(11, ["switch", 3], ["node", 7], util=0.37),
        link(12, ["switch", 4], ["node", 8], util=0.1),
        link(13, ["switch", 3], ["switch", 1], state="down", util=None, errors=True),
        link(14, ["switch", 4], ["switch", 1], util=0.9),
    ]
    snap = snapshot_with_positions(switches, nodes, links)
    json.dumps(snap)  # plain JSON for the socket
    ys = {s["name"]: s["y"] for s in snap["switches"]}
    assert ys["spine01"] < ys["leaf01"] == ys["leaf02"] < min(n["y"] for n in snap["nodes"])
    by_host = {n["hostname"]: n for n in snap["nodes"]}
    assert by_host["gpu0001"]["x"] == next(s["x"] for s in snap["switches"] if s["id"] == 3)
