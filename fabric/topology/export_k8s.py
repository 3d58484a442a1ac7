"""The hierarchy for Kubernetes schedulers: a Kueue Topology with its node labels, and Volcano HyperNodes. PURE.

* `kueue`: a `Topology` (kueue.x-k8s.io/v1beta2, the storage version of the CRD since Kueue v0.16 and served since
  v0.15; the v1beta1 object is the same) whose levels are the fabric's tiers, top first: `fabric.clusterctl.io/core`
  (tier 2 and up, where there is a core), `fabric.clusterctl.io/spine` (the pod: leaf groups one spine layer joins),
  `fabric.clusterctl.io/leaf` (the leaf group), `fabric.clusterctl.io/nvlink-domain` (where servers share
  multi-node NVLink domains that each lie inside one leaf group; a server outside one is its own domain), then
  `kubernetes.io/hostname`, which the CRD allows at the lowest level only. Kueue's levels must nest, which the
  domains do by construction (export.py).
* `kueue-labels`: the `kubectl label node` lines that put those labels on the nodes (a POSIX sh script).
* `volcano`: `HyperNode`s (topology.volcano.sh/v1alpha1): tier 1 = a leaf group (members: its nodes, exactMatch),
  tier 2 = a spine domain (members: its tier-1 HyperNodes), tier 3 = a core domain, and so on. A domain that no
  switch of its tier joins (a leaf group with no live uplink) gets no HyperNode of its own there: its child stands
  alone. Volcano's UFM discoverer groups leaves that share nodes into one tier-1 HyperNode the same way
  (pkg/controllers/hypernode/discovery/ufm/ufm.go, classifyLeafs).

Kubernetes node names are the hosts' names in lower case (the kubelet registers the lowercased hostname); each must be
a DNS-1123 subdomain, and a label value at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric.
A name that cannot be written is refused with the reason, never altered.
"""

from __future__ import annotations

import re
import shlex

import yaml

from fabric.topology.export import Export, ExportRefused, Hierarchy, header, register, tier_name
from fabric.topology.graph import natural_key

LABEL_PREFIX = "fabric.clusterctl.io/"
HOSTNAME_LABEL = "kubernetes.io/hostname"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
VOLCANO_API = "topology.volcano.sh/v1alpha1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "clusterctl"}

# k8s.io/apimachinery/pkg/util/validation: IsDNS1123Subdomain, IsValidLabelValue
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def node_name(h: Hierarchy, host: str) -> str:
    name = host.lower()
    if len(name) > 253 or not _DNS1123.match(name):
        raise ExportRefused(
            f"cluster {h.cluster}: host {host!r} cannot be a Kubernetes node name ({name!r} is not a DNS-1123 "
            "subdomain: lower-case letters, digits, '-' and '.', at most 253 characters)"
        )
    return name


def _node_names(h: Hierarchy) -> dict[str, str]:
    names = {host: node_name(h, host) for host in h.hosts}
    seen: dict[str, str] = {}
    for host, name in names.items():
        if name in seen:
            raise ExportRefused(
                f"cluster {h.cluster}: hosts {seen[name]!r} and {host!r} are both node {name!r} in Kubernetes "
                "(node names are lower case)"
            )
        seen[name] = host
    return names


def _label_value(h: Hierarchy, value: str, what: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ExportRefused(
            f"cluster {h.cluster}: {what} {value!r} cannot be a Kubernetes label value (at most 63 characters of "
            "letters, digits, '-', '_' and '.', starting and ending with a letter or digit): give it a shorter name"
        )
    return value


def _object_name(h: Hierarchy, value: str, what: str) -> str:
    name = value.lower()
    if len(name) > 253 or not _DNS1123.match(name):
        raise ExportRefused(
            f"cluster {h.cluster}: {what} {value!r} cannot name a Kubernetes object ({name!r} is not a DNS-1123 "
            "subdomain: lower-case letters, digits, '-' and '.')"
        )
    return name


def _nvlink_level(h: Hierarchy) -> tuple[bool, str]:
    """Whether the NVLink domains can be a Kueue level (each inside one leaf group), and why not when not."""
    if not h.nvlink:
        return False, ""
    split = [d for d, hosts in h.nvlink.items() if len({h.host_group[x] for x in hosts}) > 1]
    if split:
        shown = ", ".join(sorted(split, key=natural_key)[:3])
        return False, (
            f"the NVLink domains as a level: {len(split)} of them span more than one leaf group ({shown}), and "
            "Kueue's levels must nest"
        )
    return True, ""


def kueue_levels(h: Hierarchy) -> list[tuple[str, dict[str, str]]]:
    """(label key, {hostname: value}) per level, top first, kubernetes.io/hostname last (set by the kubelet)."""
    levels: list[tuple[str, dict[str, str]]] = []
    for t in reversed(range(h.top_tier)):
        key = LABEL_PREFIX + tier_name(t + 1)
        what = f"{tier_name(t + 1)} domain"
        levels.append((key, {x: _label_value(h, chain[t], what) for x, chain in h.host_domains.items()}))
    levels.append((LABEL_PREFIX + "leaf", {x: _label_value(h, g, "leaf group") for x, g in h.host_group.items()}))
    with_nvlink, _ = _nvlink_level(h)
    if with_nvlink:
        domain_of = {x: d for d, hosts in h.nvlink.items() for x in hosts}
        levels.append(
            (
                LABEL_PREFIX + "nvlink-domain",
                {x: _label_value(h, domain_of.get(x, x.lower()), "NVLink domain") for x in h.host_group},
            )
        )
    levels.append((HOSTNAME_LABEL, {}))
    return levels


def _topology_name(h: Hierarchy) -> str:
    return _object_name(h, h.cluster.replace("_", "-"), "cluster name")


def _kueue_notes(h: Hierarchy) -> list[str]:
    _, why_not = _nvlink_level(h)
    return [why_not] if why_not else []


@register("kueue")
def kueue(h: Hierarchy) -> Export:
    levels = kueue_levels(h)
    _node_names(h)
    name = _topology_name(h)
    topology = {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "spec": {"levels": [{"nodeLabel": key} for key, _ in levels]},
    }
    lines = header(f"Kueue Topology {name!r}", h, _kueue_notes(h))
    lines.append("# The nodes need the labels first: manage.py export_topology --format kueue-labels (kubectl label).")
    lines.append(f"# A ResourceFlavor uses it with spec.topologyName: {name}.")
    body = yaml.safe_dump(topology, sort_keys=False, default_flow_style=False, width=1_000_000)
    return Export("kueue", "\n".join(lines) + "\n---\n" + body, "application/yaml", "kueue-topology.yaml")


@register("kueue-labels")
def kueue_labels(h: Hierarchy) -> Export:
    levels = [(key, values) for key, values in kueue_levels(h) if key != HOSTNAME_LABEL]
    nodes = _node_names(h)
    lines = ["#!/bin/sh", *header(f"Node labels of the Kueue Topology {_topology_name(h)!r}", h, _kueue_notes(h))]
    lines.append("# Node names are the hosts' names in lower case, as the kubelet registers them.")
    lines.append("set -e")
    for host in h.hosts:
        labels = " ".join(shlex.quote(f"{key}={values[host]}") for key, values in levels)
        lines.append(f"kubectl label node {shlex.quote(nodes[host])} --overwrite {labels}")
    return Export("kueue-labels", "\n".join(lines) + "\n", "text/x-shellscript", "kueue-node-labels.sh")


def hypernodes(h: Hierarchy) -> list[dict]:
    """The HyperNode objects, tier 1 first."""
    nodes = _node_names(h)
    out: list[dict] = []
    seen: dict[str, str] = {}

    def add(name: str, what: str, tier: int, members: list[tuple[str, str]]) -> str:
        obj_name = _object_name(h, name, what)
        if obj_name in seen:
            raise ExportRefused(
                f"cluster {h.cluster}: {seen[obj_name]} and {what} {name!r} would both be HyperNode {obj_name!r}"
            )
        seen[obj_name] = f"{what} {name!r}"
        out.append(
            {
                "apiVersion": VOLCANO_API,
                "kind": "HyperNode",
                "metadata": {"name": obj_name, "labels": dict(MANAGED_BY)},
                "spec": {
                    "tier": tier,
                    "tierName": tier_name(tier - 1),
                    "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for kind, m in members],
                },
            }
        )
        return obj_name

    object_of: dict[str, str] = {}
    for g in h.groups:
        object_of[g.name] = add(g.name, "leaf group", 1, [("Node", nodes[x]) for x in g.hosts])
    for t, domains in enumerate(h.domains, start=1):
        below = object_of
        object_of = {}
        for d in domains:
            if not d.switches:  # nothing of this tier joins it: its one child stands alone
                object_of[d.name] = below[d.children[0]]
                continue
            members = [("HyperNode", below[c]) for c in d.children]
            object_of[d.name] = add(d.name, f"{tier_name(t)} domain", t + 1, members)
    return out


@register("volcano")
def volcano(h: Hierarchy) -> Export:
    objects = hypernodes(h)
    notes = []
    if h.nvlink:
        notes.append(f"the {len(h.nvlink)} multi-node NVLink domains (tier 1 is the leaf here; see kueue)")
    lines = header("Volcano HyperNodes", h, notes)
    lines.append("# Apply with kubectl apply -f; node names are the hosts' names in lower case.")
    body = yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False, width=1_000_000)
    return Export("volcano", "\n".join(lines) + "\n---\n" + body, "application/yaml", "volcano-hypernodes.yaml")
