"""The subnet manager's health into the cluster's alerts (issue 18, part 1): the rules of
fabric.telemetry.subnet_manager over what `saquery SMIR` says, with the previous reading kept in the cache as the
rules' memory, recorded through fabric.actions.record_cluster_findings (one open alert per SM rule, hold-down)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache

from fabric import actions
from fabric.choices import SwitchRole
from fabric.models import Switch
from fabric.telemetry.subnet_manager import SM_RULES, SmView, carry, sm_findings, view_from_dict, view_to_dict


def _key(cluster_id: int, which: str = "kept") -> str:
    return f"fabric:sm:{which}:{cluster_id}"


KEEP_S = 7 * 24 * 3600


def tiers_of(cluster_id: int) -> int:
    """Switch tiers of the stored fabric (1: one switch layer; 2: leaves and spines; 3 with cores)."""
    roles = set(Switch.objects.filter(cluster_id=cluster_id).values_list("role", flat=True))
    return 1 + (SwitchRole.SPINE in roles) + (SwitchRole.CORE in roles)


def record_sm_view(cluster_id: int, view: SmView) -> dict:
    """Judge `view` against the kept reading, keep the new memory, and record the findings as alerts."""
    raw = cache.get(_key(cluster_id))
    kept = view_from_dict(raw) if raw else None
    findings = sm_findings(kept, view, tiers=tiers_of(cluster_id))
    kept_now = carry(kept, view)
    cache.set_many(
        {_key(cluster_id): view_to_dict(kept_now), _key(cluster_id, "latest"): view_to_dict(view)}, timeout=KEEP_S
    )
    at = datetime.fromtimestamp(view.at, tz=UTC)
    counts = actions.record_cluster_findings(
        cluster_id, findings, rules=SM_RULES, now=at, hold_down_s=settings.TELEMETRY_HOLD_DOWN_S
    )
    return {"findings": [f.rule for f in findings], **counts}


def sm_status(cluster_id: int) -> dict | None:
    """For the report: the SMs of the last reading, when it was taken, and since when the master's activity count
    stood where it is (the last reading in which it moved). None: no reading yet (`manage.py subnet_manager`)."""
    raw = cache.get_many([_key(cluster_id, "latest"), _key(cluster_id)])
    if _key(cluster_id, "latest") not in raw:
        return None
    latest = view_from_dict(raw[_key(cluster_id, "latest")])
    kept = view_from_dict(raw[_key(cluster_id)]) if _key(cluster_id) in raw else latest
    return {
        "read_at": datetime.fromtimestamp(latest.at, tz=UTC),
        "moved_at": datetime.fromtimestamp(kept.at, tz=UTC),
        "routing_engine": latest.routing_engine,
        "sms": [
            {"lid": s.lid, "guid": s.guid, "state": s.state_name, "priority": s.priority, "activity": s.activity}
            for s in latest.sms
        ],
        "masters": len(latest.masters),
        "no_standby": bool(latest.masters) and not latest.standbys,
    }
