"""The policy suite on the what-if page (/whatif/suite/): operators only; a run through the same task, queue, site-wide
cap and one-run-per-user rule as a replay; its table and its JSON carry the numbers `manage.py replay --suite --json`
prints for the same cases and trace folders. Small: the Tiresias 2x4 case (0.3 s) and the Gavel case, whose full trace
is not in tests/fixtures (skipped, as the command reports it)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from io import StringIO
from pathlib import Path

import pytest
from django.core.cache import cache
from django.urls import reverse

from scheduler import policy_lab
from scheduler.sim.suite import CASE_KEYS
from tests.dashboard.test_whatif import assert_csp_and_no_inline_code, form_data, in_flight, run_id_of

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CASES = ["tiresias-2x4", "gavel"]  # gavel_physical_max_min_fairness.trace: only its head24 is a fixture


@pytest.fixture(autouse=True)
def fixture_folder(settings):
    settings.WHATIF_TRACE_DIRS = [str(FIXTURES)]


@pytest.fixture
def staff(client, operator):
    client.force_login(operator)
    yield client
    cache.delete_many([policy_lab.user_key(operator.pk), policy_lab.recent_key(operator.pk)])


@pytest.fixture
def one_slot(settings):
    settings.WHATIF_MAX_CONCURRENT = 1
    yield
    cache.delete(policy_lab.slot_key(0))


def command_suite(*cases: str) -> dict:
    from django.core.management import call_command

    out = StringIO()
    call_command(
        "replay", "--suite", "--suite-cases", ",".join(cases), "--json", "--no-progress", stdout=out, stderr=StringIO()
    )
    return json.loads(out.getvalue())


def without_walls(doc):
    """The document less its wall times (seconds measured, not figures)."""
    if isinstance(doc, dict):
        return {k: without_walls(v) for k, v in doc.items() if k not in ("wall_s", "policy_wall_s")}
    if isinstance(doc, list):
        return [without_walls(v) for v in doc]
    return doc


def suite_errors(response, status: int) -> str:
    assert response.status_code == status, response.status_code
    html = response.content.decode()
    return " ".join(re.sub(r"<[^>]+>", " ", m) for m in re.findall(r'<div class="errors"[^>]*>(.*?)</div>', html, re.S))


class SuiteTables(HTMLParser):
    """The run page's suite tables as {case: {metric: {"values", "ratios", "best", "vs_best"}}}, from the data-
    attributes (raw numbers; "" for none)."""

    def __init__(self) -> None:
        super().__init__()
        self.cases: dict[str, dict[str, dict]] = {}
        self.case = self.metric = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("data-testid") == "whatif-suite-table":
            self.case = self.cases.setdefault(a["data-case"], {})
        elif tag == "tbody" and self.case is not None:
            self.metric = self.case.setdefault(
                a["data-metric"],
                {"values": {}, "ratios": {}, "best": (a["data-best-policy"], a["data-best-value"]),
                 "vs_best": a["data-vs-best"]},
            )  # fmt: skip
        elif tag == "td" and self.metric is not None and "data-policy" in a:
            if "data-value" in a:
                self.metric["values"][a["data-policy"]] = a["data-value"]
            if "data-ratio" in a:
                self.metric["ratios"][a["data-policy"]] = a["data-ratio"]

    def handle_endtag(self, tag):
        if tag == "table":
            self.case = self.metric = None


def page_tables(html: str) -> dict:
    parser = SuiteTables()
    parser.feed(html)
    return parser.cases


def as_attr(v) -> str:
    return "" if v is None else str(v)


#
# Access
#


def test_operators_only(client, tenant_user, monkeypatch):
    sent = []
    monkeypatch.setattr(policy_lab.whatif_replay, "delay", lambda run_id: sent.append(run_id))
    url = reverse("whatif-suite")
    response = client.post(url, {"cases": CASES})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(tenant_user)
    assert client.post(url, {"cases": CASES}).status_code == 403
    assert sent == []


def test_the_action_needs_a_post_and_the_csrf_token(operator):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.get(reverse("whatif-suite")).status_code == 405
    assert client.post(reverse("whatif-suite"), {"cases": CASES}).status_code == 403  # no token


#
# The form
#


def test_the_form_ticks_the_shipped_cases_and_says_which_are_missing(staff):
    html = staff.get(reverse("whatif")).content.decode()
    assert 'data-testid="whatif-suite-form"' in html and "Run the policy suite" in html
    ticked = re.findall(r'name="cases" value="([^"]+)" id="[^"]+" checked', html)
    assert ticked == list(CASE_KEYS)  # the command's default run; the variations only when asked
    assert 'value="churn-seed2"' in html and 'value="churn-seed2" id="id_suite_churn-seed2" checked' not in html
    # tests/fixtures has neither Gavel's full trace nor Alibaba's (research-use): both would be skipped
    assert html.count("not in the trace folders: skipped") == 2


@pytest.mark.parametrize(
    ("cases", "words"),
    [([], "Choose at least one case."), (["tiresias-2x4", "lottery"], "unknown suite case(s) lottery")],
)
def test_form_errors(staff, cases, words):
    assert words in suite_errors(staff.post(reverse("whatif-suite"), {"cases": cases}), 400)


#
# A run: the command's numbers, table and JSON
#


def test_the_page_shows_the_commands_table(staff):
    expected = command_suite(*CASES)
    run = run_id_of(staff.post(reverse("whatif-suite"), {"cases": CASES}))

    doc = staff.get(reverse("whatif-result", args=[run])).json()
    assert without_walls(doc) == without_walls(expected)

    response = staff.get(reverse("whatif-run", args=[run]))
    assert_csp_and_no_inline_code(response)
    html = response.content.decode()
    assert 'data-testid="whatif-suite"' in html and 'data-status="done"' in html
    assert "echarts.min.js" not in html and 'data-testid="whatif-results"' not in html  # the suite's table only
    tables = page_tables(html)
    assert list(tables) == ["tiresias-2x4"]  # gavel skipped: no table
    for case in expected["cases"]:
        if case.get("skipped"):
            continue
        for m in case["metrics"]:
            shown = tables[case["key"]][m["metric"]]
            columns = [*case["policies"], *(("bound",) if case["kind"] != "alibaba" else ())]
            assert shown["values"] == {p: as_attr(m["values"].get(p)) for p in columns}
            assert shown["ratios"] == ({p: as_attr(m["ratios"].get(p)) for p in columns} if m["peer"] else {})
            best = m["best_baseline"]
            assert shown["best"] == (best["policy"], as_attr(best["value"]))
            assert shown["vs_best"] == as_attr(m["default_vs_best_baseline"])

    # By hand, Tiresias 60-job on 2x4 (sums of JCTs pinned in tests/scheduler/sim/test_sim_regression.py): fifo 93389 s,
    # tiresias-l 42916 s over 60 jobs -> fifo 1556.48 s, ratio 93389 / 42916 = 2.176 (table: 2.18); the bound is the
    # mean duration, 10705 / 60 = 178.42 s.
    avg = tables["tiresias-2x4"]["avg_jct"]
    assert avg["values"]["fifo"] == "1556.48" and avg["ratios"]["fifo"] == "2.176"
    assert avg["values"]["bound"] == "178.42" and avg["ratios"]["tiresias-l"] == "1.0"
    assert '<td class="num" data-policy="fifo" data-value="1556.48">1,556.5</td>' in html
    assert 'data-policy="fifo" data-ratio="2.176">2.18</td>' in html
    assert "skipped: gavel_physical_max_min_fairness.trace not found in the trace folders" in html
    assert f'download="policy-suite-{run}.json"' in html
    assert "python manage.py replay --suite --suite-cases tiresias-2x4,gavel --json" in html


def test_progress_counts_every_case_and_policy(staff):
    run = run_id_of(staff.post(reverse("whatif-suite"), {"cases": CASES}))
    status = staff.get(reverse("whatif-status", args=[run])).json()
    assert status["status"] == "done" and status["finished"] and "result" not in status
    # tiresias-2x4 under the 7 JCT policies (fifo, fjf, srtf, tiresias-l, tiresias-g, default, default-blind);
    # gavel is skipped (no file): 7 steps, the last default-blind's.
    p = status["progress"]
    assert (p["case"], p["policy"], p["index"], p["policies"]) == ("tiresias-2x4", "default-blind", 7, 7)
    assert p["fraction"] == 1.0


def test_the_default_run_is_the_commands_default():
    from dashboard.whatif import command_line

    params = {"kind": "suite", "suite_cases": list(CASE_KEYS)}
    assert command_line(params) == "python manage.py replay --suite --json"


def test_a_run_over_its_time_fails_with_a_clear_error(staff, operator, monkeypatch):
    monkeypatch.setattr(policy_lab, "TIMEOUT_S", 1e-9)
    run = run_id_of(staff.post(reverse("whatif-suite"), {"cases": CASES}))
    status = staff.get(reverse("whatif-status", args=[run])).json()
    assert status["status"] == "failed" and "took longer than" in status["error"] and "tiresias-2x4" in status["error"]
    assert staff.get(reverse("whatif-result", args=[run])).status_code == 409
    assert cache.get(policy_lab.user_key(operator.pk)) is None  # released


#
# The same rules as a replay
#


def test_one_run_at_a_time_across_replays_and_suites(staff, operator, monkeypatch):
    sent = []
    monkeypatch.setattr(policy_lab.whatif_replay, "delay", lambda run_id: sent.append(run_id))  # stays queued
    suite = run_id_of(staff.post(reverse("whatif-suite"), {"cases": CASES}))
    assert policy_lab.get_run(suite)["status"] == "queued" and sent == [suite]
    text = suite_errors(staff.post(reverse("whatif-suite"), {"cases": CASES}), 400)
    assert "already have a what-if run in progress" in text
    assert f'href="/whatif/{suite}/"' in staff.post(reverse("whatif-suite"), {"cases": CASES}).content.decode()
    replay = staff.post(reverse("whatif"), form_data(limit="5"))  # a replay waits for the suite too
    assert replay.status_code == 400 and "already have a what-if run in progress" in replay.content.decode()
    assert sent == [suite]
    policy_lab.release_slot(policy_lab.get_run(suite))
    cache.delete(policy_lab.run_key(suite))


def test_a_suite_beyond_the_sites_cap_is_refused_and_nothing_is_queued(staff, operator, one_slot, monkeypatch):
    other = in_flight(operator.pk + 1000)  # another operator's replay holds the only slot
    sent = []
    monkeypatch.setattr(policy_lab.whatif_replay, "delay", lambda run_id: sent.append(run_id))
    text = suite_errors(staff.post(reverse("whatif-suite"), {"cases": CASES}), 429)
    assert "1 what-if run is already queued or running on this site (WHATIF_MAX_CONCURRENT = 1)" in text, text
    assert sent == [] and cache.get(policy_lab.user_key(operator.pk)) is None
    other["status"] = "done"
    policy_lab.save_run(other)
    assert staff.post(reverse("whatif-suite"), {"cases": CASES}).status_code == 302 and len(sent) == 1


def test_a_finished_suite_gives_its_slot_back_and_is_listed(staff, one_slot):
    run = run_id_of(staff.post(reverse("whatif-suite"), {"cases": CASES}))  # eager: done when the POST returns
    assert policy_lab.get_run(run)["status"] == "done" and cache.get(policy_lab.slot_key(0)) is None
    page = staff.get(reverse("whatif")).content.decode()
    assert f'href="/whatif/{run}/"' in page and "policy suite · tiresias-2x4, gavel" in page


def test_suites_go_to_the_whatif_queue():
    from clusterctl.celery import app

    # one task for replays and suites: its route is the whatif queue (CELERY_TASK_ROUTES)
    assert app.amqp.router.route({}, policy_lab.whatif_replay.name)["queue"].name == "whatif"
