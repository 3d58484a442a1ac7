"""The subnet manager's health into the cluster's alerts (issue 18, part 1): the rules of
fabric.telemetry.subnet_manager over what `saquery SMIR` says, with the previous reading kept in the cache as the
rules' memory, recorded through fabric.actions.record_cluster_findings (one open alert per SM rule, hold-down)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache

from fabric import actions
from fabric.choices import SwitchRole
from fabric.models import Port, Switch
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
    cache.delete(_key(cluster_id, "error"))
    at = datetime.fromtimestamp(view.at, tz=UTC)
    counts = actions.record_cluster_findings(
        cluster_id, findings, rules=SM_RULES, now=at, hold_down_s=settings.TELEMETRY_HOLD_DOWN_S
    )
    return {"findings": [f.rule for f in findings], **counts}


def record_sm_error(cluster_id: int, message: str, at: float | None = None) -> None:
    """The fabric agent could not read the SMs (no umad access, saquery missing): shown beside the last reading,
    judged as nothing (a host's trouble is not the fabric's)."""
    cache.set(_key(cluster_id, "error"), {"message": message[:300], "at": at or time.time()}, timeout=KEEP_S)


def where(cluster_id: int, guids: list[str]) -> dict[str, str]:
    """Port GUID ("0x" + 16 hex) -> what runs that SM: "gpu0001 mlx5_0" (an HCA port) or the switch's name."""
    bare = [g.removeprefix("0x") for g in guids]
    found = {f"0x{g}": f"{host} {device}".strip() for g, host, device in
             Port.objects.filter(cluster_id=cluster_id, guid__in=bare, hca__isnull=False)
             .values_list("guid", "hca__node__hostname", "hca__device")}  # fmt: skip
    for g, name in Switch.objects.filter(cluster_id=cluster_id, guid__in=bare).values_list("guid", "name"):
        found.setdefault(f"0x{g}", f"switch {name or g}")
    return found


def _sm_row(s, runs: dict[str, str]) -> dict:
    return {"lid": s.lid, "guid": s.guid, "state": s.state_name, "priority": s.priority, "activity": s.activity,
            "where": runs.get(s.guid, "")}  # fmt: skip


def sm_status(cluster_id: int) -> dict | None:
    """For the fabric page and the report: the SMs of the last reading (each with what runs it), when it was taken,
    since when the master's activity count stood where it is (the last reading in which it moved), and the last
    failed read. None: neither a reading nor a failure yet."""
    raw = cache.get_many([_key(cluster_id, "latest"), _key(cluster_id), _key(cluster_id, "error")])
    error = raw.get(_key(cluster_id, "error"))
    failed = {"message": error["message"], "at": datetime.fromtimestamp(error["at"], tz=UTC)} if error else None
    if _key(cluster_id, "latest") not in raw:
        return {"error": failed, "sms": [], "read_at": None} if failed else None
    latest = view_from_dict(raw[_key(cluster_id, "latest")])
    kept = view_from_dict(raw[_key(cluster_id)]) if _key(cluster_id) in raw else latest
    runs = where(cluster_id, [s.guid for s in latest.sms])
    return {
        "read_at": datetime.fromtimestamp(latest.at, tz=UTC),
        "moved_at": datetime.fromtimestamp(kept.at, tz=UTC),
        "routing_engine": latest.routing_engine,
        "last_sweep": latest.last_sweep,
        "log_events": list(latest.log_events[-5:]),
        "sms": [_sm_row(s, runs) for s in latest.sms],
        "masters": len(latest.masters),
        "master": next((_sm_row(s, runs) for s in latest.masters), None),
        "standbys": len(latest.standbys),
        "no_standby": bool(latest.masters) and not latest.standbys,
        "error": failed,
    }
