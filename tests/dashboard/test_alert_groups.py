"""An alert storm on the Alerts page: alerts grouped by rule, severity and cause (the message without its
measurements), counted per rule, and a group acknowledged at once through fabric.actions.acknowledge_alerts."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard import broadcast, selectors
from fabric import actions as fabric_actions
from fabric.models import Alert
from tests.factories import fat_tree

pytestmark = pytest.mark.django_db

ERRORS = "link errors climbing over {s} s: symbol_error +{n}"


def alert(cluster, rule: str, key: str, message: str, *, severity="warning", kind="port", ago_s=0, **fields) -> Alert:
    at = timezone.now() - timedelta(seconds=ago_s)
    return Alert.objects.create(cluster=cluster, rule=rule, severity=severity, object_kind=kind, object_key=key,
                                message=message, first_seen=at, last_seen=at, **fields)  # fmt: skip


@pytest.fixture
def storm(db):
    """30 ports with symbol errors (30 messages, each its own measurements), 2 ports down, 2 different XIDs."""
    cluster = fat_tree("storm", nodes=2, gpus_per_node=8, leaf_ports=8)
    errors = [
        alert(cluster, "port_errors", f"gpu{i:04d}/mlx5_0/1", ERRORS.format(s=f"{9 + i / 100:g}", n=40 + i), ago_s=i)
        for i in range(1, 31)
    ]
    down = [alert(cluster, "port_down", f"gpu000{i}/mlx5_1/1", "link went down (state DOWN, physical state Polling)",
                  severity="critical", ago_s=100 + i) for i in (1, 2)]  # fmt: skip
    xids = [
        alert(cluster, "gpu_xid_critical", "gpu0001/GPU-1", "XID 79: GPU has fallen off the bus", severity="critical",
              kind="gpu", ago_s=200),
        alert(cluster, "gpu_xid_critical", "gpu0002/GPU-2", "XID 48: double-bit ECC error", severity="critical",
              kind="gpu", ago_s=201),
    ]  # fmt: skip
    return {"cluster": cluster, "errors": errors, "down": down, "xids": xids}


def test_a_cause_is_the_message_without_its_measurements():
    assert selectors.alert_cause(ERRORS.format(s="9.07394", n=1)) == "link errors climbing over N s: symbol_error +N"
    assert (
        selectors.alert_cause("congestion: waiting to send 35% of the time")
        == "congestion: waiting to send N% of the time"
    )
    text = "unreachable: no answer to the last 3 polls the other nodes answered (last answer to a poll sent 45 s ago)"
    assert selectors.alert_cause(text) == (
        "unreachable: no answer to the last N polls the other nodes answered (last answer to a poll sent N s ago)"
    )
    # What names the error or the object stays.
    assert selectors.alert_cause("XID 79: GPU has fallen off the bus") == "XID 79: GPU has fallen off the bus"
    assert selectors.alert_cause("port mlx5_0/1 of gpu0023 at 10.0.0.1") == "port mlx5_0/1 of gpu0023 at 10.0.0.1"


def test_a_storm_is_one_group_per_rule_and_cause(storm):
    groups = selectors.alert_groups(storm["cluster"].pk)
    summary = [(g["rule"], g["count"], g["open"], g["unacknowledged"]) for g in groups]
    # newest first: the errors (1-30 s ago), the downs (101-102 s), XID 79 (200 s), XID 48 (201 s)
    assert summary == [("port_errors", 30, 30, 30), ("port_down", 2, 2, 2), ("gpu_xid_critical", 1, 1, 1),
                       ("gpu_xid_critical", 1, 1, 1)]  # fmt: skip
    errors = groups[0]
    assert errors["cause"] == "link errors climbing over N s: symbol_error +N"
    assert errors["message"] == storm["errors"][0].message  # the newest one's words
    assert errors["last_id"] == max(a.pk for a in storm["errors"])
    assert errors["key"] == "port_errors|warning|link errors climbing over N s: symbol_error +N"


def test_counts_per_rule_add_up_their_groups(storm):
    rules = selectors.rule_counts(selectors.alert_groups(storm["cluster"].pk))
    assert [(r["rule"], r["count"], r["open"]) for r in rules] == [
        ("port_errors", 30, 30), ("gpu_xid_critical", 2, 2), ("port_down", 2, 2)
    ]  # fmt: skip


def test_cleared_alerts_count_in_their_group_but_not_as_open(storm):
    Alert.objects.filter(pk=storm["down"][0].pk).update(cleared_at=timezone.now())
    group = next(g for g in selectors.alert_groups(storm["cluster"].pk) if g["rule"] == "port_down")
    assert (group["count"], group["open"]) == (2, 1)


def test_the_alerts_topic_carries_each_alert_s_group_and_all_groups(storm):
    data = selectors.build(storm["cluster"].pk, ["alerts"])["alerts"]
    assert len(data["alerts"]) == 34 and len(data["groups"]) == 4
    mine = {a["id"]: a["group"] for a in data["alerts"]}
    assert {mine[a.pk] for a in storm["errors"]} == {data["groups"][0]["key"]}


def test_a_delta_carries_the_groups_when_a_count_changes(storm):
    before = selectors.build(storm["cluster"].pk, ["alerts"])["alerts"]
    fabric_actions.acknowledge_alerts(storm["cluster"].pk, [storm["errors"][0].pk], actor="ops")
    after = selectors.build(storm["cluster"].pk, ["alerts"])["alerts"]
    kind, data = broadcast.diff("alerts", before, after)
    assert kind == "delta" and [a["id"] for a in data["upsert"]] == [storm["errors"][0].pk]
    assert data["groups"][0]["unacknowledged"] == 29


def test_acknowledging_many_takes_those_not_acknowledged_yet_of_that_cluster_once(
    storm, django_capture_on_commit_callbacks, monkeypatch
):
    marked = []
    monkeypatch.setattr(broadcast, "mark_dirty", lambda cluster_id, topics, **kw: marked.append((cluster_id, topics)))
    other = fat_tree("other", nodes=2, gpus_per_node=8, leaf_ports=8)
    foreign = alert(other, "port_errors", "gpu0001/mlx5_0/1", "x")
    first = storm["errors"][0]
    fabric_actions.acknowledge_alert(first, actor="earlier")
    ids = [a.pk for a in storm["errors"]] + [foreign.pk]
    with django_capture_on_commit_callbacks(execute=True):
        n = fabric_actions.acknowledge_alerts(storm["cluster"].pk, ids, actor="ops")
    assert n == 29
    assert marked == [(storm["cluster"].pk, "alerts")]  # once, after the commit
    rows = Alert.objects.filter(pk__in=[a.pk for a in storm["errors"][1:]])
    assert set(rows.values_list("acknowledged_by", flat=True)) == {"ops"}
    assert len(set(rows.values_list("acknowledged_at", flat=True))) == 1
    first.refresh_from_db()
    foreign.refresh_from_db()
    assert first.acknowledged_by == "earlier" and foreign.acknowledged_at is None


def group_form(client, cluster) -> dict:
    html = client.get(reverse("alerts", args=[cluster.pk])).content.decode()
    form = re.search(r'<form method="post" action="[^"]*acknowledge-group/" data-role="ack-group">(.*?)</form>', html)
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form.group(1)))
    return {k: v.replace("&#x27;", "'").replace("&quot;", '"').replace("&amp;", "&") for k, v in fields.items()}


def test_a_group_is_acknowledged_at_once_with_a_csrf_protected_post(storm, operator):
    cluster = storm["cluster"]
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    url = reverse("alert-group-acknowledge", args=[cluster.pk])
    fields = group_form(client, cluster)  # the first group's form: the 30 ports with errors
    assert fields["rule"] == "port_errors" and fields["until"] == str(max(a.pk for a in storm["errors"]))
    assert client.get(url).status_code == 405
    assert client.post(url, {k: v for k, v in fields.items() if k != "csrfmiddlewaretoken"}).status_code == 403
    late = alert(cluster, "port_errors", "gpu0099/mlx5_0/1", ERRORS.format(s="9.5", n=7))  # raised after the page
    response = client.post(url, fields, HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert response.json() == {"group": "port_errors|warning|link errors climbing over N s: symbol_error +N",
                               "acknowledged": 30, "members": 30, "acknowledged_by": "operator"}  # fmt: skip
    assert Alert.objects.filter(pk__in=[a.pk for a in storm["errors"]], acknowledged_by="operator").count() == 30
    assert Alert.objects.filter(acknowledged_at__isnull=False).count() == 30  # not the late one, nor other groups
    late.refresh_from_db()
    assert late.acknowledged_at is None


def test_a_group_acknowledgement_without_its_fields_is_refused_by_name(storm, client, operator):
    client.force_login(operator)
    url = reverse("alert-group-acknowledge", args=[storm["cluster"].pk])
    response = client.post(url, {"rule": "port_errors", "severity": "warning"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "rule, severity, cause and until (the newest alert id seen, a whole number) are required."
    }
    assert not Alert.objects.filter(acknowledged_at__isnull=False).exists()


def test_tenants_cannot_acknowledge_a_group(storm, client, django_user_model):
    client.force_login(django_user_model.objects.create_user("tenant", "t@example.org", "pw"))
    url = reverse("alert-group-acknowledge", args=[storm["cluster"].pk])
    cause = "link errors climbing over N s: symbol_error +N"
    data = {"rule": "port_errors", "severity": "warning", "cause": cause, "until": "999999"}
    assert client.post(url, data).status_code == 403
    assert not Alert.objects.filter(acknowledged_at__isnull=False).exists()


def test_the_alerts_page_shows_the_groups_and_counts_per_rule(storm, client, operator):
    client.force_login(operator)
    html = client.get(reverse("alerts", args=[storm["cluster"].pk])).content.decode()
    assert html.count('data-testid="alert-group"') == 4
    buttons = re.findall(r'data-testid="acknowledge-group">(Acknowledge [^<]+)<', html)
    assert buttons == ["Acknowledge all 30", "Acknowledge all 2", "Acknowledge it", "Acknowledge it"]
    rules = re.findall(r'data-rule="([\w]+)"><button[^>]*><span data-f="rule" class="mono">\1</span> '
                       r'<b data-f="count">(\d+)</b>', html)  # fmt: skip
    assert rules == [("port_errors", "30"), ("gpu_xid_critical", "2"), ("port_down", "2")]
    assert html.count('data-testid="alert-row"') == 34  # every alert, one click away
    assert "and 27 more" in html  # 3 ports named in the group's row
