"""Node liveness from sample times: a node that missed K polls is unreachable, after more it is down (pure).

The rule speaks only of time since a node's newest sample, in polls: a slow node that answers late is still
alive, a node whose agent or network is gone stops producing samples. Unreachable is a warning (the node may
come back; nothing is moved), down is critical and removes the node's capacity until samples return and the
hold-down passes.
"""

from __future__ import annotations

from .health import Finding

UNREACHABLE = "node_unreachable"
DOWN = "node_down"


def liveness_findings(
    last_seen: dict[str, float | None],
    *,
    now: float,
    interval_s: float,
    unreachable_polls: int,
    down_polls: int,
    watching_since: float,
) -> dict[str, list[Finding]]:
    """Node -> findings (an empty list for a live node, so its liveness alerts can clear).

    `last_seen[node]` is the time of its newest sample, None if none ever came; such a node is judged from
    `watching_since` (when polling started), so a fresh deployment does not call every node dead at once.
    """
    if interval_s <= 0:
        raise ValueError("interval_s must be positive")
    if not 0 < unreachable_polls <= down_polls:
        raise ValueError("need 0 < unreachable_polls <= down_polls")
    out: dict[str, list[Finding]] = {}
    for node, seen in last_seen.items():
        age = now - (seen if seen is not None else watching_since)
        missed = int(age // interval_s)
        what = f"no sample for {age:.0f} s ({missed} polls missed)" if seen is not None else (
            f"no sample since polling started {age:.0f} s ago"
        )  # fmt: skip
        if missed >= down_polls:
            out[node] = [Finding(DOWN, "critical", "node", f"{node}/node", f"{what}: node taken out of service", True)]
        elif missed >= unreachable_polls:
            out[node] = [Finding(UNREACHABLE, "warning", "node", f"{node}/node", f"unreachable: {what}")]
        else:
            out[node] = []
    return out
