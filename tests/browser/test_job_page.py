"""The job page's small fabric view (minifabric.js) in a real browser against a live server: the running job's nodes,
the switches and links its traffic uses, recoloured live by a telemetry poll; the empty state of a pending job; and
the fabric page's deep links (?job=, ?link=, ?switch=) that the job and report pages use."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, off_the_loop
from tests.browser.test_dashboard import attribute_becomes, live

pytestmark = pytest.mark.django_db(transaction=True)

MINI = "#job-fabric-summary"


def poll_with_a_hot_node(scenario) -> str:
    """A telemetry poll like Scenario.poll, but the host ports of the running job's first node count twice the bytes
    they had: the rate since the previous poll comes out far above the links' capacity, i.e. 100 %, while every other
    host link stays at 25 %. Returns that node's hostname."""

    def go():
        import time

        from fabric.collectors.samples import GpuSample, NodeSample, PortSample
        from fabric.ingest import ingest_samples
        from fabric.models import GPU, Port
        from scheduler.models import Allocation

        hot = Allocation.objects.filter(job=scenario.running, active=True).order_by("gpu__node__hostname")
        hot = hot.values_list("gpu__node__hostname", flat=True).first()
        now = time.time()
        samples = []
        for node in scenario.hosts:
            data = int(now * 12.5e9 / 4) * (2 if node.hostname == hot else 1)
            ports = [PortSample(device=d, port=n, state="ACTIVE", counters={"port_xmit_data": data, "port_rcv_data": 0})
                     for d, n in Port.objects.filter(hca__node=node).values_list("hca__device", "number")]  # fmt: skip
            gpus = [GpuSample(index=g.index, utilisation_gpu_pct=40.0, memory_used_mib=1000.0,
                              memory_total_mib=81559.0, temperature_c=50.0, power_w=300.0)
                    for g in GPU.objects.filter(node=node)]  # fmt: skip
            samples.append(NodeSample(node=node.hostname, collected_at=now, collector="test", gpus=gpus, ports=ports))
        ingest_samples(scenario.cluster.pk, samples)
        return hot

    return off_the_loop(go)


def test_the_job_page_draws_its_placement_on_a_small_fabric_view_and_recolours_it_live(scenario, page):
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{scenario.cluster.pk}/jobs/{scenario.running.pk}/")
    live(page)
    attribute_becomes(page, MINI, "data-state", lambda v: v == "placed")
    # its 2 nodes, the leaf (or leaves and spines) between them, and at least each node's host link
    assert page.get_attribute(MINI, "data-nodes") == "2" and page.get_attribute(MINI, "data-hosts") == "2"
    assert int(page.get_attribute(MINI, "data-links")) >= 2 and int(page.get_attribute(MINI, "data-switches")) >= 1
    assert page.get_attribute(MINI, "data-aggregated") == "false"
    expect(page.locator("[data-testid=job-fabric-view] canvas")).to_be_visible()
    expect(page.locator("[data-testid=job-fabric] .legend-bar")).to_be_visible()
    attribute_becomes(page, MINI, "data-renders", lambda v: int(v) > 0)
    attribute_becomes(page, MINI, "data-util-max", lambda v: v == "25")  # the scenario's polls: host links at 25 %
    colours = page.get_attribute(MINI, "data-colours")
    snapshots = page.get_attribute(MINI, "data-snapshots")

    poll_with_a_hot_node(scenario)
    attribute_becomes(page, MINI, "data-colours", lambda v: v != colours)
    assert page.get_attribute(MINI, "data-util-max") == "100"
    # applied as a delta to the changed links (the hot node's); a fresh snapshot comes only after a resync (a frame
    # missed, e.g. while the socket joined its group), and then carries the new colours itself
    if page.get_attribute(MINI, "data-snapshots") == snapshots:
        assert int(page.get_attribute(MINI, "data-link-updates")) >= 1
    assert page.js_errors == []


def test_a_pending_job_is_not_placed_yet(scenario, page):
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{scenario.cluster.pk}/jobs/{scenario.waiting.pk}/")
    live(page)
    attribute_becomes(page, MINI, "data-state", lambda v: v == "pending")
    expect(page.locator("[data-testid=job-fabric] [data-mini=empty]")).to_contain_text("Not placed yet")
    expect(page.locator("[data-testid=job-fabric-view]")).to_be_hidden()
    assert page.js_errors == []


def test_the_fabric_page_follows_job_link_and_switch_in_its_address(scenario, page):
    def ids():
        from fabric.models import Link, Switch

        return (Link.objects.filter(cluster=scenario.cluster).order_by("pk").first().pk,
                Switch.objects.filter(cluster=scenario.cluster).order_by("name").first().pk)  # fmt: skip

    link_id, switch_id = off_the_loop(ids)
    login(page, "ops", "pw-ops-123")
    fabric, summary = f"/clusters/{scenario.cluster.pk}/fabric/", "#fabric-summary"

    page.goto(f"{fabric}?job={scenario.running.pk}")
    live(page)
    highlighted = attribute_becomes(page, summary, "data-highlighted-links", lambda v: v.isdigit() and int(v) > 0)
    assert int(highlighted) >= 2 and page.get_attribute(summary, "data-job") == str(scenario.running.pk)
    expect(page.locator("[data-testid=job-chip]")).to_contain_text("llm-pretrain")

    page.goto(f"{fabric}?link={link_id}")
    live(page)
    attribute_becomes(page, summary, "data-selected-link", lambda v: v == str(link_id))
    expect(page.locator("[data-testid=link-panel]")).to_be_visible()

    page.goto(f"{fabric}?switch={switch_id}")
    live(page)
    attribute_becomes(page, summary, "data-selected-switch", lambda v: v == str(switch_id))
    assert page.js_errors == []


def test_on_an_aggregated_fabric_the_job_s_groups_are_drawn(live_url, page):
    """Above 256 nodes the fabric topic groups nodes per leaf: the small view draws the job's groups (with how many
    of their nodes are the job's), their folded host links and the switches those touch."""

    def build():
        from django.contrib.auth import get_user_model

        from scheduler import actions
        from scheduler.models import PriorityClass
        from tests.factories import fat_tree

        cluster = fat_tree("big", nodes=264, gpus_per_node=2, hcas_per_node=1, leaf_ports=32)
        pool = actions.ensure_scheduler(cluster)
        get_user_model().objects.create_user("ops", "ops@example.org", "pw-ops-123", is_staff=True)
        acme = actions.create_tenant("acme")
        actions.set_quota(acme, pool, guaranteed_gpus=8, borrow_limit=0)
        job = actions.submit_job(acme, pool, PriorityClass.objects.get(name="normal"), name="wide", gpus=4, nodes=2,
                                 gpus_per_node=2, sharing="exclusive")  # fmt: skip
        job.refresh_from_db()
        assert job.status == "running", job.status
        return cluster.pk, job.pk

    cluster_id, job_id = off_the_loop(build)
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{cluster_id}/jobs/{job_id}/")
    live(page)
    attribute_becomes(page, MINI, "data-state", lambda v: v == "placed", timeout=30)
    assert page.get_attribute(MINI, "data-aggregated") == "true"
    groups = int(page.get_attribute(MINI, "data-groups"))
    assert groups >= 1 and page.get_attribute(MINI, "data-nodes") == str(groups)
    assert page.get_attribute(MINI, "data-hosts") == "2"
    assert int(page.get_attribute(MINI, "data-links")) >= 1 and int(page.get_attribute(MINI, "data-switches")) >= 1
    assert page.js_errors == []


# Text elements ECharts drew (zrender's display list): [text, x, y, width, height] in the chart's pixels.
CHART_TEXTS = """(id) => {
  const chart = window.echarts.getInstanceByDom(document.getElementById(id));
  const out = [];
  for (const e of chart.getZr().storage.getDisplayList(true)) {
    if (!e.style || typeof e.style.text !== "string" || !e.style.text || e.ignore || e.invisible) continue;
    const r = e.getBoundingRect().clone();
    const m = e.getComputedTransform();
    if (m) r.applyTransform(m);
    out.push([e.style.text, r.x, r.y, r.width, r.height]);
  }
  return out;
}"""


def meets(a, b) -> bool:
    return a[1] < b[1] + b[3] and b[1] < a[1] + a[3] and a[2] < b[2] + b[4] and b[2] < a[2] + a[4]


def test_the_history_chart_keeps_its_axis_name_clear_of_the_legend(scenario, page):
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{scenario.cluster.pk}/jobs/{scenario.running.pk}/")
    live(page)
    expect(page.locator("#job-history [data-loading]")).to_be_hidden(timeout=15_000)
    page.wait_for_timeout(300)
    texts = page.evaluate(CHART_TEXTS, "job-series")
    name = next(t for t in texts if t[0] == "Utilisation (%)")
    legend = [t for t in texts if "/" in t[0] and t[0].split("/")[0].startswith("gpu")]  # "gpu0001/0", ...
    assert legend, texts
    assert [t[0] for t in legend if meets(t, name)] == []
    ticks = [t for t in texts if t[0].isdigit()]
    assert [t[0] for t in ticks if meets(t, name)] == []  # nor the axis' own numbers
    assert page.js_errors == []


def test_on_the_job_page_no_node_covers_another_s_name(live_url, page):
    """A 12-node job on gpu0007-gpu0018 of a scalable unit of 24 servers (8 leaves, 2:1): the fabric layout stacks a
    leaf's servers 8 to a row, so the job's nodes sit on three rows (7-8, 9-16, 17-18), and the small view drew each
    row's circles on the names of the row above (the demo's 8-node jobs did the same)."""

    def build():
        from django.contrib.auth import get_user_model

        from fabric import actions as fabric_actions
        from fabric.models import Node
        from scheduler import actions
        from scheduler.models import PriorityClass
        from tests.factories import fat_tree

        cluster = fat_tree("wide", nodes=24, gpus_per_node=8, leaf_ports=64, oversubscription=2.0)
        first = Node.objects.filter(cluster=cluster, hostname__in=[f"gpu{i:04d}" for i in range(1, 7)])
        fabric_actions.set_node_state(first, "drain", "the job must start at gpu0007")
        pool = actions.ensure_scheduler(cluster)
        get_user_model().objects.create_user("ops", "ops@example.org", "pw-ops-123", is_staff=True)
        acme = actions.create_tenant("acme")
        actions.set_quota(acme, pool, guaranteed_gpus=96, borrow_limit=0)
        job = actions.submit_job(acme, pool, PriorityClass.objects.get(name="normal"), name="twelve", gpus=96,
                                 nodes=12, gpus_per_node=8, sharing="exclusive")  # fmt: skip
        job.refresh_from_db()
        assert job.status == "running", job.status
        hosts = Node.objects.filter(gpus__allocations__job=job, gpus__allocations__active=True).distinct()
        assert sorted(hosts.values_list("hostname", flat=True)) == [f"gpu{i:04d}" for i in range(7, 19)]
        return cluster.pk, job.pk

    cluster_id, job_id = off_the_loop(build)
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{cluster_id}/jobs/{job_id}/")
    live(page)
    attribute_becomes(page, MINI, "data-state", lambda v: v == "placed", timeout=30)
    attribute_becomes(page, MINI, "data-renders", lambda v: int(v) > 0)
    assert page.get_attribute(MINI, "data-nodes") == "12"
    assert int(page.get_attribute(MINI, "data-labels")) == 12 + 8  # every node's name (on two lines) and leaf's
    assert page.get_attribute(MINI, "data-overlaps") == "0"
    assert page.js_errors == []
