"""The Alerts page in a real browser during a storm: one row per rule and cause with its count, the counts per rule, and
a whole group acknowledged with one click (a CSRF-protected POST through fetch), which every open Alerts page then
shows through the `alerts` topic."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, off_the_loop
from tests.browser.test_dashboard import live

pytestmark = pytest.mark.django_db(transaction=True)


def raise_storm(cluster) -> None:
    """40 host ports whose symbol errors climb (each message with its own interval and count), 3 ports down."""

    def go():
        from datetime import timedelta

        from django.utils import timezone

        from fabric import events
        from fabric.models import Alert

        now = timezone.now()
        rows = [Alert(cluster=cluster, rule="port_errors", severity="warning", object_kind="port",
                      object_key=f"gpu{1 + i % 8:04d}/mlx5_{i // 8}/1",
                      message=f"link errors climbing over {9 + i / 97:.5f} s: symbol_error +{30 + i}",
                      first_seen=now - timedelta(seconds=i), last_seen=now - timedelta(seconds=i))
                for i in range(40)]  # fmt: skip
        rows += [Alert(cluster=cluster, rule="port_down", severity="critical", object_kind="port",
                       object_key=f"@fabric/0xb8cef6000001000{i}/2{i}",
                       message="link went down (state DOWN, physical state Polling)",
                       first_seen=now - timedelta(seconds=60), last_seen=now - timedelta(seconds=60))
                 for i in range(3)]  # fmt: skip
        Alert.objects.bulk_create(rows)
        from django.db import transaction

        with transaction.atomic():
            events.live_changed(cluster.pk, "alerts")

    off_the_loop(go)


ERRORS = "[data-testid=alert-group][data-rule=port_errors]"
DOWN = "[data-testid=alert-group][data-rule=port_down]"


def test_an_alert_storm_is_a_few_groups_acknowledged_at_once(scenario, page, browser, live_url):
    raise_storm(scenario.cluster)
    login(page, "ops", "pw-ops-123")
    page.goto(f"/clusters/{scenario.cluster.pk}/alerts/")
    live(page)
    expect(page.locator("[data-testid=alert-group]")).to_have_count(2)
    errors = page.locator(ERRORS)
    expect(errors.locator("[data-f=count]")).to_have_text("40")
    expect(errors.locator("[data-f=objects]")).to_contain_text("and 37 more")
    expect(page.locator("[data-testid=rule-count][data-rule=port_errors] [data-f=count]")).to_have_text("40")
    expect(page.locator("[data-testid=rule-count][data-rule=port_down] [data-f=count]")).to_have_text("3")
    assert page.locator("[data-testid=alert-row]:visible").count() == 0  # the 43 rows are one click away

    # A second operator's page learns of the acknowledgement through the socket.
    other = browser.new_context(viewport={"width": 1366, "height": 768}, base_url=live_url).new_page()
    login(other, "ops", "pw-ops-123")
    other.goto(f"/clusters/{scenario.cluster.pk}/alerts/")
    live(other)
    expect(other.locator(f"{ERRORS} [data-testid=acknowledge-group]")).to_have_text("Acknowledge all 40")

    errors.locator("[data-testid=acknowledge-group]").click()
    expect(errors.locator("[data-testid=group-acknowledged]")).to_be_visible(timeout=10_000)
    expect(other.locator(f"{ERRORS} [data-testid=group-acknowledged]")).to_be_visible(timeout=15_000)
    expect(page.locator(f"{DOWN} [data-testid=acknowledge-group]")).to_have_text("Acknowledge all 3")  # untouched

    def acknowledged():
        from fabric.models import Alert

        done = Alert.objects.filter(acknowledged_at__isnull=False)
        return sorted(set(done.values_list("rule", flat=True))), done.filter(acknowledged_by="ops").count()

    assert off_the_loop(acknowledged) == (["port_errors"], 40)

    # Its rows, listed from the group, say who acknowledged them.
    errors.locator("[data-role=list-group]").click()
    rows = page.locator("[data-testid=alert-row]:visible")
    expect(rows).to_have_count(40)
    expect(rows.locator("[data-testid=acknowledged]")).to_have_count(40)
    assert page.js_errors == []
