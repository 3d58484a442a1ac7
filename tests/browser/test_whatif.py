"""The what-if page in a real browser against a live server: the form shows the fields of the chosen trace kind, a
replay of the Tiresias fixture ends on its results with both charts drawn, and a run's page follows its progress
(polling the status endpoint every second) until the run has finished; the policy suite run from the page ends on its
table, and its run page names the case in its progress."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, off_the_loop, screenshot
from tests.browser.test_dashboard import attribute_becomes

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator_login(live_url, page):
    def create():
        from django.contrib.auth import get_user_model

        return get_user_model().objects.create_user("ops", "ops@example.org", "pw-ops-123", is_staff=True)

    user = off_the_loop(create)
    login(page, "ops", "pw-ops-123")
    return user


def test_replay_the_tiresias_fixture_from_the_form(operator_login, page):
    page.goto("/whatif/")
    expect(page.locator("[data-testid=nav-whatif]")).to_have_attribute("aria-current", "page")
    page.select_option("#id_trace", "0/tiresias_60_job.csv")
    expect(page.locator("fieldset[data-for=jct]").first).to_be_visible()
    expect(page.locator("fieldset[data-for=fractional]")).to_be_hidden()
    page.select_option("#id_kind", "alibaba")  # the Alibaba trace has its own nodes and policies
    expect(page.locator("fieldset[data-for=jct]").first).to_be_hidden()
    expect(page.locator("fieldset[data-for=fractional]")).to_be_visible()
    page.select_option("#id_kind", "")
    page.fill("#id_cluster_spec", "2x4")
    page.uncheck("#id_network_model")
    page.click("[data-testid=whatif-submit]")
    page.wait_for_url("**/whatif/*/")
    expect(page.locator("[data-testid=whatif-status]")).to_have_attribute("data-status", "done")
    expect(page.locator("[data-testid=whatif-results] tbody tr")).to_have_count(6)
    assert page.get_attribute("tr[data-policy=fifo]", "data-avg-jct") == "1556.48"  # docs/policy-lab.md, 2x4
    for chart in ("whatif-jct-cdf", "whatif-utilisation"):
        attribute_becomes(page, f"#{chart}", "data-series", lambda v: v == "6")
        expect(page.locator(f"#{chart} canvas")).to_be_visible()
    expect(page.locator("[data-testid=whatif-progress]")).to_be_hidden()
    screenshot(page, "whatif")
    assert page.js_errors == []


def test_a_run_page_follows_its_progress_until_it_finishes(operator_login, page):
    from scheduler import policy_lab

    record = {"id": "d" * 32, "user": operator_login.pk, "username": "ops", "created": time.time(), "status": "running",
              "params": {"kind": "tiresias", "upload": False, "trace_name": "t_job.csv", "trace_path": "/x/t_job.csv",
                         "jobs": 60, "cluster_spec": "2x4", "cluster_label": "2x4", "spec_file": None,
                         "gpu_model": "V100", "link_rate": "EDR", "policies": ["fifo", "default"],
                         "network_model": "off", "round_s": 10.0, "seed": 0, "limit": None},
              "progress": None, "error": "", "result": None}  # fmt: skip
    off_the_loop(policy_lab.save_run, record)
    page.goto(f"/whatif/{record['id']}/")
    expect(page.locator("[data-testid=whatif-progress]")).to_be_visible()
    record["progress"] = {"policy": "default", "done": 30, "total": 60, "index": 2, "policies": 2, "fraction": 0.75}
    off_the_loop(policy_lab.save_run, record)
    expect(page.locator("#whatif-step")).to_have_text("default (2/2): 30/60", timeout=5_000)
    assert page.get_attribute("#whatif-progress", "max") == "1"
    record.update(status="failed", error="the replay took longer than 300 s")
    off_the_loop(policy_lab.save_run, record)
    expect(page.locator("[data-testid=whatif-error]")).to_have_text("the replay took longer than 300 s", timeout=5_000)
    expect(page.locator("[data-testid=whatif-status]")).to_have_attribute("data-status", "failed")
    expect(page.locator("[data-testid=whatif-progress]")).to_be_hidden()
    off_the_loop(lambda: policy_lab.cache.delete(policy_lab.run_key(record["id"])))
    assert page.js_errors == []


def test_the_policy_suite_from_the_page(operator_login, page):
    """Two cases ticked (the whole suite takes minutes): the run ends on one table per case with the command's
    figures, and a JSON to download."""
    page.goto("/whatif/")
    boxes = page.locator("[data-testid=whatif-suite-cases] input[name=cases]")
    for i in range(boxes.count()):
        boxes.nth(i).uncheck()
    page.check("#id_suite_tiresias-2x4")
    page.check("#id_suite_slurm-churn")
    page.click("[data-testid=whatif-suite-submit]")
    page.wait_for_url("**/whatif/*/")
    expect(page.locator("[data-testid=whatif-status]")).to_have_attribute("data-status", "done")
    expect(page.locator("[data-testid=whatif-suite-table]")).to_have_count(2)
    tiresias = page.locator("table[data-case=tiresias-2x4]")
    # Tiresias 60-job on 2x4: fifo's sum of JCTs 93389 s over 60 jobs = 1556.48 s, shown 1,556.5; x tiresias-l
    # (42916 s) = 2.176, shown 2.18 (tests/scheduler/sim/test_sim_regression.py pins both sums).
    expect(tiresias.locator("tbody[data-metric=avg_jct] tr.figures td[data-policy=fifo]")).to_have_text("1,556.5")
    expect(tiresias.locator("tbody[data-metric=avg_jct] tr.ratios td[data-policy=fifo]")).to_have_text("2.18")
    churn = page.locator("table[data-case=slurm-churn]")
    for metric in ("avg_jct", "makespan", "leaf", "preemptions"):
        expect(churn.locator(f"tbody[data-metric={metric}]")).to_have_count(1)
    download = re.compile(r"policy-suite-\w+\.json")
    expect(page.locator("[data-testid=whatif-json]")).to_have_attribute("download", download)
    expect(page.locator("[data-testid=whatif-progress]")).to_be_hidden()
    page.locator("[data-testid=whatif-suite]").scroll_into_view_if_needed()
    screenshot(page, "whatif-suite")
    assert page.js_errors == []


def test_a_suite_run_page_names_the_case_in_its_progress(operator_login, page):
    from scheduler import policy_lab

    record = {"id": "e" * 32, "user": operator_login.pk, "username": "ops", "created": time.time(), "status": "running",
              "params": {"kind": "suite", "upload": False, "trace_name": "policy suite", "suite_cases": ["slurm-churn"],
                         "trace_dirs": ["/x"], "policies": [], "cluster_spec": None, "cluster_label": None,
                         "round_s": 10.0, "seed": 0, "limit": None},
              "progress": None, "error": "", "result": None}  # fmt: skip
    off_the_loop(policy_lab.save_run, record)
    page.goto(f"/whatif/{record['id']}/")
    expect(page.locator("[data-testid=whatif-progress]")).to_be_visible()
    record["progress"] = {"case": "slurm-churn", "policy": "default", "done": 250, "total": 500, "index": 6,
                          "policies": 7, "fraction": 0.7857}  # fmt: skip
    off_the_loop(policy_lab.save_run, record)
    expect(page.locator("#whatif-step")).to_have_text("slurm-churn · default (6/7): 250/500", timeout=5_000)
    off_the_loop(lambda: policy_lab.cache.delete(policy_lab.run_key(record["id"])))
    assert page.js_errors == []
