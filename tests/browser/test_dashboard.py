"""The dashboard in a real browser (Debian's Chromium) against a live server: log in, every page, live updates
without reloading, a job found by name and its links highlighted, pending reasons, a tenant's own view. The README's
pictures of the operator pages are taken at 128 and 2,000 servers (test_at_scale.py); the tenant's here."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def live(page) -> None:
    """The page's socket(s) are open and the first snapshot arrived."""
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open", timeout=15_000)


def attribute_becomes(page, selector: str, name: str, predicate, timeout: float = 15.0) -> str:
    # Polling from Python: the pages' Content-Security-Policy forbids the eval that wait_for_function needs.
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = page.get_attribute(selector, name)
        if value is not None and predicate(value):
            return value
        time.sleep(0.1)
    raise AssertionError(f"{selector}[{name}] stayed {value!r}")


def test_operator_opens_every_page_without_errors(scenario, page):
    scenario.poll(util=55.0, xid_on=scenario.idle_gpu())
    login(page, "ops", "pw-ops-123")
    c = scenario.cluster.pk
    pages = {
        "overview": "/",
        "fabric": f"/clusters/{c}/fabric/",
        "gpus": f"/clusters/{c}/gpus/",
        "queue": f"/clusters/{c}/queue/",
        "job": f"/clusters/{c}/jobs/{scenario.running.pk}/",
        "alerts": f"/clusters/{c}/alerts/",
        "report": f"/clusters/{c}/report/",
    }
    for name, url in pages.items():
        page.goto(url)
        if name != "report":
            live(page)
        page.wait_for_timeout(600)  # let the charts finish their first draw
        assert page.locator("[data-loading]:visible").count() == 0, f"{name} still loading"
    assert page.js_errors == []


def test_the_overview_socket_carries_the_overview_topic_only(scenario, page):
    """Issue 16: the overview's cards got every topic of the fabric socket (the fabric and GPU snapshots and deltas
    they never show); they ask for `overview` now, and get nothing else."""
    from dashboard.broadcast import decode

    urls, frames = [], []

    def watch(ws) -> None:
        urls.append(ws.url)
        ws.on("framereceived", lambda payload: frames.append(decode(payload)))

    page.on("websocket", watch)
    login(page, "ops", "pw-ops-123")
    page.goto("/")
    live(page)
    scenario.poll(util=90.0)  # changes the GPUs and host links too: their frames are sent, to other groups
    expect(page.locator("[data-field='utilisation.mean']")).to_contain_text("90", timeout=10_000)
    assert urls and all(url.endswith("?topics=overview") for url in urls), urls
    assert {(f["type"], f["topic"]) for f in frames} == {("snapshot", "overview"), ("delta", "overview")}


def test_gpu_heat_map_follows_telemetry_without_a_reload(scenario, page):
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{scenario.cluster.pk}/gpus/")
    live(page)
    expect(page.locator("#gpu-mean")).to_contain_text("40", timeout=10_000)
    scenario.poll(util=90.0)
    expect(page.locator("#gpu-mean")).to_contain_text("90", timeout=10_000)


def test_selecting_a_job_highlights_the_links_its_traffic_uses(scenario, page):
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{scenario.cluster.pk}/fabric/")
    live(page)
    summary = "#fabric-summary"
    attribute_becomes(page, summary, "data-snapshot-seq", lambda v: v != "")
    assert page.get_attribute(summary, "data-highlighted-links") in ("0", None)
    attribute_becomes(page, summary, "data-jobs", lambda v: v == "1")
    page.fill("#fabric-search", "pretr")  # typed in part: the job is found by name
    match = page.locator(f"[data-testid=search-match][data-kind=job][data-id='{scenario.running.pk}']")
    expect(match).to_have_count(1, timeout=10_000)
    match.click()
    highlighted = attribute_becomes(page, summary, "data-highlighted-links", lambda v: v.isdigit() and int(v) > 0)
    # a 2-node job on a fat tree: at least each node's host links, plus the way up and down between them
    assert int(highlighted) >= 2
    assert int(page.get_attribute(summary, "data-highlighted-nodes")) == 2
    expect(page.locator("[data-testid=job-chip]")).to_contain_text("llm-pretrain")
    page.click("[data-testid=job-clear]")
    attribute_becomes(page, summary, "data-highlighted-links", lambda v: v == "0")


def test_the_queue_explains_why_a_job_waits_and_shows_new_jobs_live(scenario, page):
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{scenario.cluster.pk}/queue/")
    live(page)
    reason = page.locator(f"[data-job-id='{scenario.waiting.pk}'] [data-testid=pending-reason]")
    expect(reason).to_have_text(re.compile(r"\w{8,}"), timeout=10_000)
    job = scenario.submit("arrives-live", gpus=64, tenant="globex")
    expect(page.locator(f"[data-job-id='{job.pk}']")).to_have_count(1, timeout=10_000)


def test_a_tenant_sees_only_its_own_jobs(scenario, page):
    login(page, "bob", "pw-bob-123")
    assert "/my/" in page.url
    live(page)
    expect(page.locator("body")).to_contain_text("too-big")
    assert "llm-pretrain" not in page.content()
    screenshot(page, "tenant")
    page.goto(f"/clusters/{scenario.cluster.pk}/fabric/")
    assert page.locator("[data-testid=forbidden]").count() == 1


def test_a_tenant_opens_its_own_job_from_my_and_not_anothers(scenario, page):
    login(page, "bob", "pw-bob-123")
    live(page)
    page.click(f"[data-job-id='{scenario.waiting.pk}'] a[data-f=name]")
    expect(page).to_have_url(re.compile(rf"/my/jobs/{scenario.waiting.pk}/$"))
    live(page)
    expect(page.locator("[data-testid=job-status]")).to_have_attribute("data-state", "pending")
    expect(page.locator("[data-testid=pending-reason]")).to_have_text(re.compile(r"\w{8,}"), timeout=10_000)
    assert page.js_errors == []
    # Alice's running job is not Bob's to see, by either address.
    assert page.goto(f"/my/jobs/{scenario.running.pk}/").status == 404
    page.goto(f"/clusters/{scenario.cluster.pk}/jobs/{scenario.running.pk}/")
    assert page.locator("[data-testid=forbidden]").count() == 1


def test_a_page_reconnects_after_the_server_restarts_and_resynchronises(scenario, page, live_server_asgi):
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{scenario.cluster.pk}/gpus/")
    live(page)
    live_server_asgi.stop()
    expect(page.locator("#live-state")).not_to_have_attribute("data-state", "open", timeout=10_000)
    scenario.poll(util=70.0)  # happens while the page is cut off: it must come back with the fresh snapshot
    live_server_asgi.start()
    live(page)
    expect(page.locator("#gpu-mean")).to_contain_text("70", timeout=15_000)
