"""The dashboard's pages: who may open which, what they render (with the hooks the browser tests use), in how many
queries, under which Content-Security-Policy; the login page, and acknowledging an alert."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from fabric.choices import AlertSeverity, GpuHealth
from fabric.models import GPU, Alert, GpuMetric
from scheduler import actions
from scheduler.models import Allocation, PriorityClass
from scheduler.rounds import run_round
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "dashboard" / "static" / "dashboard"
JOB_HOOKS = ["job-status", "job-events", "placement", "job-gpus", "job-series", "pending-reason"]


def cluster_pages(cluster_id: int, job_id: int) -> list[str]:
    return [
        reverse("fabric", args=[cluster_id]),
        reverse("gpus", args=[cluster_id]),
        reverse("queue", args=[cluster_id]),
        reverse("alerts", args=[cluster_id]),
        reverse("report", args=[cluster_id]),
        reverse("job", args=[cluster_id, job_id]),
    ]


def operator_pages(cluster_id: int, job_id: int) -> list[str]:
    return [reverse("overview"), *cluster_pages(cluster_id, job_id)]


@pytest.fixture
def busy(site):
    """The site with a running gang, a running single-GPU job, waiting jobs of both tenants and two alerts."""
    gang = site.submit(site.tenant_a, 16, name="llm-pretrain", nodes=2, gpus_per_node=8)
    single = site.submit(site.tenant_b, 1, name="notebook")
    run_round(site.cluster.pk, "test")
    high = PriorityClass.objects.get(name="high")
    waiting_a = actions.submit_job(site.tenant_a, site.pool, high, gpus=32, name="sweep-a")
    waiting_b = site.submit(site.tenant_b, 32, name="sweep-b")
    run_round(site.cluster.pk, "test")
    now = timezone.now()
    open_alert = Alert.objects.create(
        cluster=site.cluster, rule="gpu_xid", severity=AlertSeverity.CRITICAL, object_kind="gpu",
        object_key="gpu0001/GPU-0", message="XID 79 on gpu0001 GPU 0", first_seen=now, last_seen=now,
    )  # fmt: skip
    cleared = Alert.objects.create(
        cluster=site.cluster, rule="port_errors", severity=AlertSeverity.WARNING, object_kind="port",
        object_key="gpu0002/mlx5_0/1", message="symbol errors", first_seen=now - timedelta(hours=2),
        last_seen=now - timedelta(hours=1), cleared_at=now - timedelta(minutes=30),
    )  # fmt: skip
    gang.refresh_from_db()
    single.refresh_from_db()
    return {
        "site": site, "gang": gang, "single": single, "waiting_a": waiting_a, "waiting_b": waiting_b,
        "open_alert": open_alert, "cleared": cleared,
    }  # fmt: skip


@pytest.fixture
def staff(client, operator):
    client.force_login(operator)
    return client


def count_queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx.captured_queries)


class _Markup(HTMLParser):
    """Inline scripts (other than JSON data), inline styles, style attributes, and external resources."""

    def __init__(self) -> None:
        super().__init__()
        self.inline_scripts: list[str] = []
        self.style_attrs: list[str] = []
        self.style_elements = 0
        self.external: list[str] = []
        self.event_handlers: list[str] = []
        self.testids: set[str] = set()
        self._script: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "style" in a:
            self.style_attrs.append(f"<{tag} style={a['style']!r}>")
        self.event_handlers += [f"{tag} {k}" for k in a if k.startswith("on")]
        if "data-testid" in a:
            self.testids.add(a["data-testid"])
        for key in ("src", "href"):
            if a.get(key) and re.match(r"^(https?:)?//", a[key]) and tag in ("script", "link", "img", "iframe"):
                self.external.append(a[key])
        if tag == "style":
            self.style_elements += 1
        if tag == "script":
            self._script = a

    def handle_data(self, data):
        if self._script is not None and "src" not in self._script and data.strip():
            if self._script.get("type") != "application/json":
                self.inline_scripts.append(data.strip()[:80])

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None


def markup(response) -> _Markup:
    parser = _Markup()
    parser.feed(response.content.decode())
    return parser


def csp_of(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy", "")
    assert header, "no Content-Security-Policy header"
    out = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def assert_strict(policy: dict[str, list[str]]) -> None:
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert set(policy["img-src"]) == {"'self'", "data:"}
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["connect-src"][0] == "'self'"
    assert all(re.match(r"^wss?://[^/*][^/]*$", src) for src in policy["connect-src"][1:]), policy["connect-src"]
    assert not any("unsafe" in src or src == "*" for srcs in policy.values() for src in srcs), policy


#
# Every page, for an operator
#


def test_every_page_renders_for_an_operator_with_its_hooks_and_no_inline_code(staff, busy):
    cluster, gang = busy["site"].cluster, busy["gang"]
    expected = {
        reverse("overview"): {"cluster-card", "queue-by-priority", "trend-chart", "socket-state"},
        reverse("gpus", args=[cluster.pk]): {"gpu-heatmap", "gpu-metric", "gpu-table", "gpu-detail", "loading"},
        reverse("queue", args=[cluster.pk]): {"pending-table", "running-table", "recent-table", "queue-filters"},
        reverse("alerts", args=[cluster.pk]): {"alerts-table", "alert-row", "acknowledge", "filter-severity"},
        reverse("report", args=[cluster.pk]): {"report-summary", "report-spof", "report-tiers"},
        reverse("job", args=[cluster.pk, gang.pk]): set(JOB_HOOKS),
        reverse("fabric", args=[cluster.pk]): {"fabric-chart"},
    }
    for url, testids in expected.items():
        response = staff.get(url)
        assert response.status_code == 200, url
        page = markup(response)
        assert testids <= page.testids, (url, testids - page.testids)
        assert {"socket-state", "logout", "user"} <= page.testids, url
        assert page.inline_scripts == [], (url, page.inline_scripts)
        assert page.style_attrs == [] and page.style_elements == 0, (url, page.style_attrs)
        assert page.event_handlers == [] and page.external == [], url
        assert_strict(csp_of(response))


def test_navigation_links_every_page_of_the_cluster(staff, busy):
    cluster = busy["site"].cluster
    html = staff.get(reverse("gpus", args=[cluster.pk])).content.decode()
    for name in ("overview", "admin:index", "api-docs"):
        assert f'href="{reverse(name)}"' in html
    for name in ("fabric", "gpus", "queue", "alerts", "report"):
        assert f'href="{reverse(name, args=[cluster.pk])}"' in html
    assert 'action="/accounts/logout/"' in html and 'aria-current="page"' in html


def test_overview_shows_each_cluster_with_its_live_numbers(staff, busy):
    other = fat_tree("second", nodes=2, gpus_per_node=4, leaf_ports=4)
    response = staff.get(reverse("overview"))
    html = response.content.decode()
    assert html.count('data-testid="cluster-card"') == 2
    assert f'data-ws-fabric="/ws/clusters/{busy["site"].cluster.pk}/fabric/"' in html
    assert f'data-ws-fabric="/ws/clusters/{other.pk}/fabric/"' in html
    first = response.context["clusters"][0]
    assert first["name"] == "dash" and first["live"]["gpus"]["allocated"] == 17
    assert re.search(r'data-testid="allocated">17<', html)
    assert re.search(r'data-priority="high"><span class="k">high</span> <b>1</b>', html)


def report_gpu_utilisation(cluster, percents: list[float]) -> None:
    """The latest GPU utilisation of the cluster's first GPUs, as ingest leaves it in the cache (one node's load)."""
    import time

    from fabric import latest
    from fabric.collectors.samples import NodeSample

    gpus = list(GPU.objects.filter(node__cluster=cluster, node__role="compute").order_by("pk")[: len(percents)])
    metrics = {g.pk: (pct, 1000.0, 81559.0, 50.0, 300.0) for g, pct in zip(gpus, percents, strict=True)}
    host = gpus[0].node.hostname
    latest.store(
        cluster.pk, {host: (NodeSample(host, time.time(), "nvml"), {"links": {}, "gpus": {}, "gpu_metrics": metrics})}
    )


def spread_shown(html: str) -> str:
    return re.search(r'data-field="utilisation.cv" data-format="cv">([^<]*)<', html).group(1)


def test_overview_shows_no_spread_while_the_gpus_are_idle(staff, busy):
    # One GPU at 1 % beside three idle ones: mean 0.25 %, CV = sqrt(3) = 1.73, the "1.73 at 0 %".
    cluster = busy["site"].cluster
    report_gpu_utilisation(cluster, [1.0, 0.0, 0.0, 0.0])
    response = staff.get(reverse("overview"))
    live = next(c for c in response.context["clusters"] if c["id"] == cluster.pk)["live"]
    assert live["utilisation"] == {"mean": 0.003, "cv": None}
    assert spread_shown(response.content.decode()) == "\N{EN DASH}"


def test_overview_shows_the_spread_of_a_busy_cluster(staff, busy):
    # 10, 10, 10, 50 %: mean 20 %, population stddev sqrt((3 x 10^2 + 30^2) / 4) = sqrt(300) = 17.32 %, CV 0.866.
    cluster = busy["site"].cluster
    report_gpu_utilisation(cluster, [10.0, 10.0, 10.0, 50.0])
    response = staff.get(reverse("overview"))
    live = next(c for c in response.context["clusters"] if c["id"] == cluster.pk)["live"]
    assert live["utilisation"] == {"mean": 0.2, "cv": 0.866}
    assert spread_shown(response.content.decode()) == "0.87"


def test_overview_without_clusters_says_how_to_make_one(staff):
    html = staff.get(reverse("overview")).content.decode()
    assert 'data-testid="empty"' in html and "generate_fabric" in html


def test_report_is_tables_and_links_single_points_of_failure_to_the_fabric_page(staff, busy):
    cluster = busy["site"].cluster
    response = staff.get(reverse("report", args=[cluster.pk]))
    html = response.content.decode()
    assert "<pre" not in html and 'data-testid="spof-switches"' in html
    switch_ids = [x["id"] for x in response.context["spof_switches"]]
    assert switch_ids and all(switch_ids)
    assert f'href="/clusters/{cluster.pk}/fabric/?switch={switch_ids[0]}"' in html


def test_job_page_has_placement_events_and_its_gpus(staff, busy):
    cluster, gang = busy["site"].cluster, busy["gang"]
    response = staff.get(reverse("job", args=[cluster.pk, gang.pk]))
    html = response.content.decode()
    held = list(Allocation.objects.filter(job=gang, active=True).values_list("gpu_id", flat=True))
    assert len(held) == 16
    for gpu_id in held:
        assert f'data-gpu-id="{gpu_id}"' in html
    assert html.count('<li data-node="') == 2 and f"?job={gang.pk}" in html
    assert 'data-testid="job-events"' in html and "Pending" in html and "Running" in html
    waiting = busy["waiting_b"]
    html = staff.get(reverse("job", args=[cluster.pk, waiting.pk])).content.decode()
    assert re.search(r'data-testid="queue-position">\d+<', html)
    reason = re.search(r'data-testid="pending-reason">([^<]+)<', html).group(1)
    assert reason.strip() not in ("", "\N{EN DASH}")


def test_job_of_another_cluster_is_404(staff, busy):
    other = fat_tree("second", nodes=2, gpus_per_node=4, leaf_ports=4)
    assert staff.get(reverse("job", args=[other.pk, busy["gang"].pk])).status_code == 404


def test_job_series_gives_the_history_of_its_gpus(staff, busy):
    cluster, gang = busy["site"].cluster, busy["gang"]
    gpu_id = Allocation.objects.filter(job=gang, active=True).order_by("gpu__node__hostname", "gpu__index")[0].gpu_id
    now = timezone.now()
    GpuMetric.objects.bulk_create(
        GpuMetric(gpu_id=gpu_id, at=now - timedelta(minutes=m), utilisation_pct=90.0 - m, memory_used_mib=1000,
                  temperature_c=60, power_w=500)
        for m in range(1, 11)
    )  # fmt: skip
    response = staff.get(reverse("job-series", args=[cluster.pk, gang.pk]) + "?hours=1")
    data = response.json()
    assert data["fields"] == ["util", "mem_used", "temp", "power"] and data["units"]["util"] == "%"
    assert len(data["gpus"]) == 16 and data["truncated"] is False
    first = next(g for g in data["gpus"] if g["id"] == gpu_id)
    assert len(first["points"]) == 10 and first["points"][-1][1:] == [89.0, 1000, 60, 500]
    assert staff.get(reverse("job-series", args=[cluster.pk, gang.pk]) + "?hours=x").status_code == 200


def test_pages_render_in_a_number_of_queries_that_does_not_grow_with_the_cluster(staff, busy, django_user_model):
    small = busy["site"].cluster
    big = fat_tree("big", nodes=24, gpus_per_node=8, leaf_ports=8, hcas_per_node=1)
    pool = actions.ensure_scheduler(big)
    tenant = actions.create_tenant("tenant-big")
    actions.set_quota(tenant, pool, guaranteed_gpus=128, borrow_limit=64)
    normal = PriorityClass.objects.get(name="normal")
    big_gang = actions.submit_job(tenant, pool, normal, gpus=64, nodes=8, gpus_per_node=8, name="big-gang")
    for i in range(6):
        actions.submit_job(tenant, pool, normal, gpus=8, name=f"small-{i}")
    run_round(big.pk, "test")
    for i in range(20):
        actions.submit_job(tenant, pool, normal, gpus=64, name=f"waits-{i}")
    run_round(big.pk, "test")
    now = timezone.now()
    Alert.objects.bulk_create(
        Alert(cluster=big, rule="gpu_xid", severity="warning", object_kind="gpu", object_key=f"k{i}",
              message="m", first_seen=now, last_seen=now)
        for i in range(30)
    )  # fmt: skip
    small_pages = cluster_pages(small.pk, busy["gang"].pk)
    big_pages = cluster_pages(big.pk, big_gang.pk)
    for small_url, big_url in zip(small_pages, big_pages, strict=True):
        n_small, n_big = count_queries(staff, small_url), count_queries(staff, big_url)
        assert n_big <= n_small, (big_url, n_small, n_big)
        assert n_big <= 25, (big_url, n_big)
    # The overview costs the same per cluster.
    assert count_queries(staff, reverse("overview")) <= 40
    # And the tenant's page does not grow with its jobs.
    user = django_user_model.objects.create_user("big", "big@example.org", "pw-big")
    actions.add_member(tenant, user)
    client = Client()
    client.force_login(user)
    assert count_queries(client, reverse("my")) <= 15


#
# Access: operators, tenants, anonymous
#


def test_anonymous_users_are_sent_to_the_login_page(client, busy):
    site = busy["site"]
    for url in [*operator_pages(site.cluster.pk, busy["gang"].pk), reverse("my")]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url


def test_tenants_are_refused_every_operator_page(client, busy, user_a):
    site = busy["site"]
    client.force_login(user_a)
    # Another tenant's job (its own leads to its page: tests/dashboard/test_tenant_pages.py).
    for url in cluster_pages(site.cluster.pk, busy["single"].pk):
        response = client.get(url)
        assert response.status_code == 403, url
        assert 'data-testid="forbidden"' in response.content.decode()
        assert "llm-pretrain" not in response.content.decode() and "notebook" not in response.content.decode()
    series = client.get(reverse("job-series", args=[site.cluster.pk, busy["gang"].pk]))
    assert series.status_code == 403
    # The overview is their home page: it sends them to their own.
    response = client.get(reverse("overview"))
    assert response.status_code == 302 and response["Location"] == reverse("my")


def test_a_user_of_no_tenant_gets_403_on_my(client, busy, tenant_user):
    client.force_login(tenant_user)
    response = client.get(reverse("my"))
    assert response.status_code == 403 and "belongs to no tenant" in response.content.decode()
    assert client.get(reverse("overview")).status_code == 403


def test_my_page_shows_only_the_tenants_own_jobs_and_quotas(client, busy, user_a, user_b):
    site = busy["site"]
    client.force_login(user_a)
    response = client.get(reverse("my"))
    html = response.content.decode()
    page = markup(response)
    assert response.status_code == 200 and page.inline_scripts == [] and page.style_attrs == []
    assert_strict(csp_of(response))
    assert "llm-pretrain" in html and "sweep-a" in html
    assert "notebook" not in html and "sweep-b" not in html and "tenant-b" not in html
    assert f'data-job-id="{busy["gang"].pk}"' in html and f'data-job-id="{busy["waiting_a"].pk}"' in html
    assert f'data-job-id="{busy["single"].pk}"' not in html and f'data-job-id="{busy["waiting_b"].pk}"' not in html
    # Its place in the whole queue, its reason, its quota use, and the tenant socket of the cluster.
    position = response.context["pending"][0]["position"]
    assert position is not None and re.search(rf'data-f="position" class="num">{position}<', html)
    assert 'data-testid="pending-reason"' in html and 'data-testid="placement"' in html
    quota = response.context["quotas"][0]
    assert (quota["used"], quota["borrowed"], quota["limit"]) == (16, 0, 32)
    assert f'data-ws-queue="/ws/clusters/{site.cluster.pk}/queue/"' in html
    # Bob sees his and not Alice's.
    client.force_login(user_b)
    html = client.get(reverse("my")).content.decode()
    assert "notebook" in html and "sweep-b" in html and "llm-pretrain" not in html and "sweep-a" not in html


def test_operators_without_a_tenant_go_from_my_to_the_overview(staff, busy):
    response = staff.get(reverse("my"))
    assert response.status_code == 302 and response["Location"] == reverse("overview")


#
# Login and logout
#


def test_login_page_signs_in_operators_to_the_overview_and_tenants_to_my(client, busy, operator, user_a):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    page = markup(response)
    assert {"login", "login-submit"} <= page.testids and page.inline_scripts == [] and page.style_attrs == []
    assert_strict(csp_of(response))
    response = client.post(reverse("login"), {"username": "operator", "password": "pw-operator"})
    assert response.status_code == 302 and response["Location"] == reverse("overview")
    client.post(reverse("logout"))
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302 and response["Location"] == reverse("my")
    assert client.get(reverse("my")).status_code == 200


def test_login_follows_next_and_rejects_bad_passwords_and_foreign_next(client, busy, operator):
    queue = reverse("queue", args=[busy["site"].cluster.pk])
    response = client.post(f"{reverse('login')}?next={queue}", {"username": "operator", "password": "nope"})
    assert response.status_code == 200 and 'data-testid="login-error"' in response.content.decode()
    response = client.post(reverse("login"), {"username": "operator", "password": "pw-operator", "next": queue})
    assert response["Location"] == queue
    client.post(reverse("logout"))
    response = client.post(
        reverse("login"), {"username": "operator", "password": "pw-operator", "next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("overview")


def test_logout_is_a_post_with_csrf(busy, operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 403  # no CSRF token
    page = client.get(reverse("overview"))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(reverse("logout"), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert client.get(reverse("overview")).status_code == 302


#
# Acknowledging an alert
#


def test_acknowledge_needs_a_post_with_csrf_and_records_who(busy, operator):
    cluster, alert = busy["site"].cluster, busy["open_alert"]
    url = reverse("alert-acknowledge", args=[cluster.pk, alert.pk])
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 403  # no CSRF token
    alert.refresh_from_db()
    assert alert.acknowledged_at is None
    page = client.get(reverse("alerts", args=[cluster.pk]))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(url, {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == reverse("alerts", args=[cluster.pk])
    alert.refresh_from_db()
    assert alert.acknowledged_by == "operator" and alert.acknowledged_at is not None
    html = client.get(reverse("alerts", args=[cluster.pk])).content.decode()
    assert "Alert acknowledged" in html and 'data-testid="acknowledged"' in html


def test_acknowledge_from_the_page_script_gets_json_and_tells_the_other_pages(
    staff, busy, monkeypatch, django_capture_on_commit_callbacks
):
    from dashboard import broadcast

    marked = []
    monkeypatch.setattr(broadcast, "mark_dirty", lambda cluster_id, topics, **kw: marked.append((cluster_id, topics)))
    cluster, alert = busy["site"].cluster, busy["open_alert"]
    url = reverse("alert-acknowledge", args=[cluster.pk, alert.pk])
    with django_capture_on_commit_callbacks(execute=True):  # the action announces after its commit
        response = staff.post(url, HTTP_ACCEPT="application/json")
    assert response.status_code == 200 and response.json()["acknowledged_by"] == "operator"
    assert marked == [(cluster.pk, "alerts")]  # by the action: every open Alerts page shows who acknowledged it


def test_acknowledge_is_for_operators_of_that_cluster(client, busy, user_a, staff):
    cluster, alert = busy["site"].cluster, busy["open_alert"]
    other = fat_tree("second", nodes=2, gpus_per_node=4, leaf_ports=4)
    assert staff.post(reverse("alert-acknowledge", args=[other.pk, alert.pk])).status_code == 404
    client.force_login(user_a)
    assert client.post(reverse("alert-acknowledge", args=[cluster.pk, alert.pk])).status_code == 403
    alert.refresh_from_db()
    assert alert.acknowledged_at is None


def test_alerts_page_lists_open_and_recently_cleared(staff, busy):
    cluster = busy["site"].cluster
    Alert.objects.create(
        cluster=cluster, rule="old", severity="info", object_kind="gpu", object_key="x", message="long gone",
        first_seen=timezone.now() - timedelta(days=3), last_seen=timezone.now() - timedelta(days=3),
        cleared_at=timezone.now() - timedelta(days=2),
    )  # fmt: skip
    html = staff.get(reverse("alerts", args=[cluster.pk])).content.decode()
    assert f'data-alert-id="{busy["open_alert"].pk}"' in html and f'data-alert-id="{busy["cleared"].pk}"' in html
    assert "long gone" not in html
    assert html.index("XID 79") < html.index("symbol errors")  # newest first


#
# Content-Security-Policy on the other pages, and the legend stylesheet
#


def test_admin_and_api_docs_work_under_the_policy(staff, admin_user):
    admin = Client()
    admin.force_login(admin_user)
    for client, url in [(Client(), "/admin/login/"), (admin, "/admin/"), (admin, "/admin/fabric/node/")]:
        response = client.get(url)
        assert response.status_code == 200, url
        assert_strict(csp_of(response))
        assert markup(response).inline_scripts == [], url
    # Swagger UI: its start-up script comes from our origin (split view); only inline styles are relaxed, here only.
    response = staff.get(reverse("api-docs"))
    assert response.status_code == 200
    policy = csp_of(response)
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'", "'unsafe-inline'"]
    page = markup(response)
    assert page.inline_scripts == [] and page.external == []
    script = re.search(r'<script src="([^"]*\?script[^"]*)"', response.content.decode()).group(1)
    js = staff.get(script.replace("&amp;", "&"))
    assert js.status_code == 200 and "SwaggerUIBundle" in js.content.decode()
    # Redoc: styled-components and a blob: worker; and no web fonts from a CDN.
    response = staff.get(reverse("api-redoc"))
    assert response.status_code == 200
    policy = csp_of(response)
    assert policy["script-src"] == ["'self'"] and "blob:" in policy["worker-src"]
    page = markup(response)
    assert page.inline_scripts == [] and page.external == [], page.external


def test_legend_stylesheet_is_the_one_legend(client):
    response = client.get(reverse("legend-css"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/css")
    css = response.content.decode()
    assert f".st-gpu_health-failed {{ --c: {GpuHealth.colour('failed')}; }}" in css
    assert f".st-alert_severity-critical {{ --c: {AlertSeverity.colour('critical')}; }}" in css
    assert ".st-switch_role-none" in css


def test_favicon_ico_is_served_to_anyone(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/vnd.microsoft.icon"
    body = response.content
    assert body[:4] == b"\x00\x00\x01\x00" and int.from_bytes(body[4:6], "little") == 3  # an ICO of 3 sizes
    assert "max-age=86400" in response["Cache-Control"]


#
# Static files: vendored, and the page scripts
#


def test_echarts_is_vendored_with_its_licence_and_no_page_uses_a_cdn():
    vendor = ROOT / "static" / "vendor"
    assert (vendor / "echarts" / "echarts.min.js").stat().st_size > 500_000
    assert "Apache License" in (vendor / "echarts" / "LICENSE").read_text()
    assert (vendor / "echarts" / "NOTICE").is_file()
    assert "echarts@" in (vendor / "README.md").read_text()
    templates = [*(ROOT / "dashboard" / "templates").rglob("*.html"), *(ROOT / "templates").rglob("*.html")]
    for path in templates:
        text = path.read_text()
        assert not re.search(r"""(src|href)=["'](https?:)?//""", text), path
        assert not re.search(r"<script(?![^>]*\b(src|type=\"application/json\")\b)[^>]*>", text), path
        assert " style=" not in text, path


def test_live_module_follows_the_socket_contract():
    live = (STATIC / "live.js").read_text()
    for needle in ('"resync"', '"subscribe"', "topics=", "BACKOFF_CAP_MS = 10_000", "4400", "4401", "4403", "4404",
                   "seq > last + 1", 'getElementById("live-state")', "dataset.state"):  # fmt: skip
        assert needle in live, needle


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_page_scripts_parse_as_modules():
    for path in sorted(STATIC.glob("*.js")):
        result = subprocess.run(
            ["node", "--input-type=module", "--check"],
            input=path.read_text(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, (path.name, result.stderr)


def test_unhealthy_gpus_are_counted_on_the_gpus_page_context(staff, busy):
    cluster = busy["site"].cluster
    gpu = GPU.objects.filter(node__cluster=cluster).first()
    gpu.health = GpuHealth.FAILED
    gpu.save(update_fields=["health"])
    response = staff.get(reverse("gpus", args=[cluster.pk]))
    assert response.context["counts"] == {"n": 32, "nodes": 4}
    assert f'data-ws-fabric="/ws/clusters/{cluster.pk}/fabric/"' in response.content.decode()
