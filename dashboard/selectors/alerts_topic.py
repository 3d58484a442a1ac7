"""The alerts topic and the Alerts page's groups: open alerts and those cleared lately, grouped by rule and cause."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from dashboard.selectors.cluster import _Cluster, iso
from fabric.models import Alert

ALERTS_LIMIT = 500
ALERTS_CLEARED_WITHIN = timedelta(hours=24)


ALERT_FIELDS = ("id", "rule", "severity", "object_kind", "object_key", "message", "first_seen", "last_seen",
                "cleared_at", "acknowledged_by")  # fmt: skip
ALERT_TIMES = ("first_seen", "last_seen", "cleared_at")


def listed_alerts(cluster_id: int, now: datetime | None = None):
    """The alerts the Alerts page lists: open ones, and those cleared within ALERTS_CLEARED_WITHIN."""
    since = (now or timezone.now()) - ALERTS_CLEARED_WITHIN
    return Alert.objects.filter(Q(cleared_at__isnull=True) | Q(cleared_at__gte=since), cluster_id=cluster_id)


# A measurement in a message: a number, not the number that names an error ("XID 79", kept).
_MEASURE = re.compile(r"(?<!XID )(?<![\w./])\d+(?:\.\d+)?(?![\w./])")


def alert_cause(message: str) -> str:
    """What an alert says with its measurements left out, so that a storm of one fault reads as one cause: "link errors
    climbing over 9.07394 s: link_downed +1" and "... over 8.92811 s: link_downed +1" are both "link errors climbing
    over N s: link_downed +N"; "XID 79: ..." keeps its 79 (it names the error). Names with digits stay."""
    return _MEASURE.sub("N", message)


def group_key(rule: str, severity: str, cause: str) -> str:
    return f"{rule}|{severity}|{cause}"


def alert_groups(cluster_id: int, now: datetime | None = None, *, times_as_text: bool = True) -> list[dict]:
    """Every listed alert (not only the newest ALERTS_LIMIT) grouped by rule, severity and cause, in one aggregate
    query (one row per distinct message) merged here: count, open, unacknowledged, first and last seen, the newest
    alert's id and message. Groups with open alerts first, then the most recently seen."""
    rows = (
        listed_alerts(cluster_id, now)
        .values("rule", "severity", "message")
        .annotate(
            n=Count("id"),
            open=Count("id", filter=Q(cleared_at__isnull=True)),
            unacknowledged=Count("id", filter=Q(acknowledged_at__isnull=True)),
            first=Min("first_seen"),
            last=Max("last_seen"),
            last_id=Max("id"),
        )
        .order_by()
    )
    groups: dict[str, dict] = {}
    for r in rows:
        cause = alert_cause(r["message"])
        key = group_key(r["rule"], r["severity"], cause)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"key": key, "rule": r["rule"], "severity": r["severity"], "cause": cause,
                               "message": r["message"], "count": 0, "open": 0, "unacknowledged": 0,
                               "first_seen": r["first"], "last_seen": r["last"], "last_id": r["last_id"]}  # fmt: skip
        g["count"] += r["n"]
        g["open"] += r["open"]
        g["unacknowledged"] += r["unacknowledged"]
        g["first_seen"] = min(g["first_seen"], r["first"])
        if (r["last"], r["last_id"]) > (g["last_seen"], g["last_id"]):
            g["message"] = r["message"]
        g["last_seen"] = max(g["last_seen"], r["last"])
        g["last_id"] = max(g["last_id"], r["last_id"])
    out = sorted(groups.values(), key=lambda g: (g["open"] == 0, -g["last_seen"].timestamp(), g["key"]))
    if not times_as_text:
        return out
    return [g | {"first_seen": iso(g["first_seen"]), "last_seen": iso(g["last_seen"])} for g in out]


def group_members(
    cluster_id: int, rule: str, severity: str, cause: str, until: int, now: datetime | None = None
) -> list[int]:
    """Ids of the listed alerts of one group (rule, severity, cause) up to alert id `until` (what the page had seen)."""
    rows = listed_alerts(cluster_id, now).filter(rule=rule, severity=severity, pk__lte=until)
    return [pk for pk, message in rows.values_list("pk", "message") if alert_cause(message) == cause]


GROUP_SAMPLES = 3  # objects named in a group's row on the Alerts page ("and N more")


def rule_counts(groups: list[dict]) -> list[dict]:
    """Alerts per rule, from alert_groups: [{rule, count, open, unacknowledged}], the rules with most open first."""
    rules: dict[str, dict] = {}
    for g in groups:
        r = rules.setdefault(g["rule"], {"rule": g["rule"], "count": 0, "open": 0, "unacknowledged": 0})
        for k in ("count", "open", "unacknowledged"):
            r[k] += g[k]
    return sorted(rules.values(), key=lambda r: (-r["open"], -r["count"], r["rule"]))


def alerts(c: _Cluster) -> dict:
    """The newest ALERTS_LIMIT listed alerts (each with its cause and group key), and the groups of all of them."""
    now = timezone.now()
    rows = listed_alerts(c.id, now).order_by("-last_seen", "-id").values(*ALERT_FIELDS)[:ALERTS_LIMIT]
    out = []
    for a in rows:
        cause = alert_cause(a["message"])
        out.append(a | {k: iso(a[k]) for k in ALERT_TIMES} | {"group": group_key(a["rule"], a["severity"], cause)})
    return {"alerts": out, "groups": alert_groups(c.id, now)}
