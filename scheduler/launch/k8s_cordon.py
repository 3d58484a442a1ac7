"""Health flows back to Kubernetes (issue 17, part 4): cordon the nodes clusterctl took out of service, uncordon only
those. PURE: the caller gives what should be out of service and why, and the API server's nodes; the plan says what
to PATCH.

- A node we want out that Kubernetes schedules on: `spec.unschedulable: true` (what `kubectl cordon` sets) and the
  annotation `clusterctl.io/cordoned` with the reason ("clusterctl: <alert>"; Kubernetes has no reason field for a
  cordon). Running pods stay: nothing is evicted.
- A node cordoned already (by an operator, a drain, an upgrade) is left alone, annotation or not.
- A node cordoned with our annotation that we no longer want out (the alert cleared): `unschedulable: false` and the
  annotation removed. A node an operator cordoned never carries it, so it is never uncordoned by us.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

ANNOTATION = "clusterctl.io/cordoned"
PREFIX = "clusterctl: "
REASON_MAX = 250
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class K8sNode:
    name: str
    unschedulable: bool = False
    cordoned_by_us: str = ""  # our annotation's value, "" when absent

    @property
    def ours(self) -> bool:
        return self.unschedulable and self.cordoned_by_us.startswith(PREFIX)


@dataclass(frozen=True, slots=True)
class CordonPlan:
    cordon: list[tuple[str, str]] = field(default_factory=list)  # (node, annotation value)
    uncordon: list[str] = field(default_factory=list)
    leave: list[tuple[str, str]] = field(default_factory=list)  # (node, why nothing is done)

    def as_dict(self) -> dict:
        return {"cordon": [list(c) for c in self.cordon], "uncordon": self.uncordon,
                "leave": [list(x) for x in self.leave]}  # fmt: skip


def reason_text(why: str) -> str:
    """The annotation's value: our prefix and the reason on one line, at most REASON_MAX characters."""
    return (PREFIX + _CONTROL.sub(" ", why).strip())[:REASON_MAX]


def plan_cordons(wanted: Mapping[str, str], nodes: Mapping[str, K8sNode], hosts: Collection[str] = ()) -> CordonPlan:
    """`wanted`: host -> why it is out of service; `nodes`: the API server's nodes by name; `hosts`: every host of the
    cluster (a node of ours the API server lacks is reported, not an error). Sorted, so two workers agree."""
    plan = CordonPlan()
    for host in sorted(wanted):
        node = nodes.get(host)
        if node is None:
            plan.leave.append((host, "not a Kubernetes node"))
        elif node.unschedulable and not node.ours:
            plan.leave.append((host, "cordoned already, not by clusterctl: left as it is"))
        elif not node.unschedulable:
            plan.cordon.append((host, reason_text(wanted[host])))
    for name in sorted(nodes):
        node = nodes[name]
        if node.ours and name not in wanted and (not hosts or name in hosts):
            plan.uncordon.append(name)
    return plan


def cordon_patch(value: str) -> dict:
    """A JSON merge patch (application/merge-patch+json) for PATCH /api/v1/nodes/<name>."""
    return {"spec": {"unschedulable": True}, "metadata": {"annotations": {ANNOTATION: value}}}


def uncordon_patch() -> dict:
    return {"spec": {"unschedulable": False}, "metadata": {"annotations": {ANNOTATION: None}}}


def parse_nodes(doc: Mapping) -> dict[str, K8sNode]:
    """A NodeList (GET /api/v1/nodes) as K8sNodes by name."""
    if doc.get("kind") != "NodeList":
        raise ValueError(f"expected a NodeList from /api/v1/nodes, got kind {doc.get('kind')!r}")
    out = {}
    for item in doc.get("items") or ():
        meta = item.get("metadata") or {}
        name = meta.get("name")
        if not name:
            continue
        out[name] = K8sNode(
            name,
            bool((item.get("spec") or {}).get("unschedulable")),
            str((meta.get("annotations") or {}).get(ANNOTATION, "")),
        )
    return out
