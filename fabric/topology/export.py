"""The fabric as the schedulers see it: one hierarchy, written out in each scheduler's format. PURE.

    text = render(ExportInput(cluster="prod", fabric=fabric, hosts=facts), "slurm-tree").text

`build_hierarchy` reads the fabric (`types.Fabric`, tiers from `tiers.detect_tiers`) and the facts the fabric graph
does not hold (`HostFacts`: an unnamed placeholder, the multi-node NVLink domain); `fabric.topology.export_slurm`
and `fabric.topology.export_k8s` write it for Slurm (topology.conf tree and block, topology.yaml), Kueue (a Topology
and its node labels) and Volcano (HyperNodes). `fabric/exporting.py` reads the database in bulk and calls `render`.

What the hierarchy holds, and why:

* **Hosts**: the compute servers with a name and a live link. Storage and login servers run no jobs; an unnamed
  placeholder ("unnamed-<GUID>") is no host a scheduler knows; a server whose every link is down is not on the
  fabric now. Each is left out with a note saying so (the notes head every file written).
* **Links that are down are left out**: a host belongs to the leaves it reaches now, a leaf to the spines it reaches
  now. The tiers themselves come from the cabling as built (links up or down), as in the fabric report.
* **Leaf groups (rail groups kept together)**: the leaves joined by servers cabled to more than one of them are one
  group: in a rail-optimised fabric (DGX SuperPOD) a server's HCAs go to the rail leaves of its scalable unit, and its
  peers reach it through any of them without a spine. A scheduler's tree allows a server under one leaf only, so the
  group is the leaf it sees ("A09-IBLEAF-01-01-A09-IBLEAF-04-01": its first and last leaf). A lone leaf is itself.
  Servers cabled straight to a switch above the leaves (storage on a spine) are that switch's "<switch>-hosts" group:
  Slurm refuses a switch with both child switches and nodes.
* **Upper switches**: every live switch above the leaves, with the groups and lower switches it reaches (for
  Slurm's tree, which lists physical switches). **Domains**: for the formats whose levels must nest (Kueue, Volcano),
  tier t's domains are the connected parts of the fabric up to tier t: tier 1 a pod (the leaf groups one spine layer
  joins), tier 2 what a core joins, named after their switches of that tier ("ib7-ib8").
* **NVLink domains**: a server's GPUs joined by NVLink inside it are one domain by nature; a multi-node NVLink system
  (GB200 NVL72) is declared per node (`HostFacts.nvlink_domain`). Only domains of two or more hosts are blocks.

Refused (`ExportRefused`, with the reason), since nothing is written out that the fabric does not say: a fabric
without switches; one without clear tiers (a cable between two switches of one tier: two leaves cabled to each other,
a mesh or ring where no leaf/spine split holds); one where no leaf carries a compute host; names a format cannot take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fabric.topology.graph import SWITCH_SWITCH, FabricGraph, natural_key
from fabric.topology.tiers import Tiers, detect_tiers
from fabric.topology.types import Fabric

COMPUTE = "compute"
DIRECT_SUFFIX = "-hosts"
TIER_NAMES = {0: "leaf", 1: "spine", 2: "core"}


def tier_name(level: int) -> str:
    return TIER_NAMES.get(level, f"tier{level}")


class ExportRefused(ValueError):
    """The fabric cannot be written in the format asked for; the message says why and what would make it possible."""


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the fabric graph does not say about a host."""

    unnamed: bool = False  # a placeholder for HCAs whose host the fabric did not name
    nvlink_domain: str = ""  # the multi-node NVLink domain its GPUs are in (GB200 NVL72 rack); "" = inside the server
    nvlink: bool = False  # two or more of its GPUs are joined by NVLink inside the server


@dataclass(slots=True)
class ExportInput:
    cluster: str
    fabric: Fabric
    hosts: dict[str, HostFacts] = field(default_factory=dict)  # hostname -> facts; absent: the defaults


@dataclass(frozen=True, slots=True)
class Export:
    format: str
    text: str
    media_type: str
    filename: str  # what the consumer calls the file


@dataclass(slots=True)
class Group:
    """Servers a scheduler sees under one leaf: a leaf, the rail leaves of a scalable unit, or a switch's own hosts."""

    name: str
    switches: list[str]  # names, natural order
    hosts: list[str]  # natural order
    level: int  # 0: leaves; >= 1: hosts cabled straight to a switch of that tier


@dataclass(slots=True)
class UpperSwitch:
    name: str
    level: int
    children: list[str]  # group and switch names, natural order
    index: int = -1  # in the fabric graph


@dataclass(slots=True)
class Domain:
    """A connected part of the fabric up to tier `tier` (1: a pod, the groups one spine layer joins)."""

    name: str
    tier: int
    children: list[str]  # domains of tier - 1 (groups for tier 1), natural order
    switches: list[str]  # its switches of this tier; empty when none joins it (its one child stands alone)


@dataclass(slots=True)
class Hierarchy:
    cluster: str
    groups: list[Group]  # leaf groups first, then switches' own hosts; natural order within each
    upper: list[UpperSwitch]  # by level, then natural order
    domains: list[list[Domain]]  # domains[t - 1]: tier t, natural order
    host_group: dict[str, str]
    host_domains: dict[str, list[str]]  # hostname -> its domain at tier 1, 2, ...
    nvlink: dict[str, list[str]]  # multi-node NVLink domain -> its hosts (two or more), natural order
    hosts_nvlink_inside: int  # hosts whose GPUs are joined by NVLink inside the server only
    notes: list[str]  # what was left out, and why
    summary: list[str]  # lines: what the export holds

    @property
    def hosts(self) -> list[str]:
        return [h for g in self.groups for h in g.hosts]

    @property
    def top_tier(self) -> int:
        return len(self.domains)


def _range_name(names: list[str]) -> str:
    ordered = sorted(names, key=natural_key)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}-{ordered[-1]}"


def _few(names: list[str], limit: int = 6) -> str:
    ordered = sorted(names, key=natural_key)
    shown = ", ".join(ordered[:limit])
    return shown if len(ordered) <= limit else f"{shown} and {len(ordered) - limit} more"


def _plural(n: int, word: str, plural: str = "") -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[object, object] = {}

    def find(self, x: object) -> object:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: object, b: object) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _check_clear_tiers(cluster: str, graph: FabricGraph, tiers: Tiers) -> None:
    level = tiers.level
    same: dict[tuple[str, str], int] = {}
    for li, kind in enumerate(graph.link_kind):
        if kind != SWITCH_SWITCH:
            continue
        a, b = graph.end_a[li], graph.end_b[li]
        if level[a] >= 0 and level[a] == level[b]:
            pair = tuple(sorted((graph.switch_names[a], graph.switch_names[b]), key=natural_key))
            same[pair] = level[a]
    if not same:
        return
    pairs = sorted(same, key=lambda p: (natural_key(p[0]), natural_key(p[1])))
    shown = "; ".join(f"{a} - {b} (both {tier_name(same[(a, b)])})" for a, b in pairs[:3])
    more = f" and {len(pairs) - 3} more" if len(pairs) > 3 else ""
    raise ExportRefused(
        f"cluster {cluster}: the fabric has no clear tiers: switches of the same tier are cabled to each other "
        f"({shown}{more}), which a tree of leaves and spines cannot say. If one of them is a spine, set its "
        "role (admin, or PATCH /api/v1/switches/<id>/ with role) and export again."
    )


def build_hierarchy(inp: ExportInput) -> Hierarchy:
    cluster = inp.cluster
    graph = FabricGraph.build(inp.fabric)
    if graph.n_switches == 0:
        raise ExportRefused(
            f"cluster {cluster} has no switches: there is no fabric to export (import one first: "
            "manage.py import_fabric)"
        )
    tiers = detect_tiers(graph)
    _check_clear_tiers(cluster, graph, tiers)
    level, names = tiers.level, graph.switch_names

    attach, notes = _attach_hosts(graph, tiers, inp.hosts)
    if not any(level[s] == 0 for chosen in attach.values() for s in chosen):
        raise ExportRefused(
            f"cluster {cluster}: no leaf switch has a live link to a named compute host, so no leaf can be "
            "identified to place servers under" + (f" (left out: {'; '.join(notes)})" if notes else "")
        )
    groups, group_of_switch = _groups(graph, tiers, attach)
    host_group = {h: g.name for g in groups for h in g.hosts}
    empty_leaves = [names[s] for s in range(graph.n_switches) if level[s] == 0 and s not in group_of_switch]
    if empty_leaves:
        notes.append(f"{_plural(len(empty_leaves), 'leaf', 'leaves')} with no compute host: {_few(empty_leaves)}")
    no_tier = [names[s] for s in range(graph.n_switches) if level[s] < 0]
    if no_tier:
        notes.append(f"{_plural(len(no_tier), 'switch', 'switches')} no leaf reaches: {_few(no_tier)}")

    upper = _upper_switches(graph, tiers, groups, group_of_switch)
    listed = {u.index for u in upper}
    unreached = [names[s] for s in range(graph.n_switches) if level[s] >= 1 and s not in listed]
    if unreached:
        notes.append(
            f"{_plural(len(unreached), 'switch', 'switches')} above the leaves with no live link down to a compute "
            f"host: {_few(unreached)}"
        )
    _check_unique_names(cluster, [g.name for g in groups] + [u.name for u in upper])
    domains = _domains(graph, tiers, groups, group_of_switch, upper)
    host_domains: dict[str, list[str]] = {h: [] for h in host_group}
    for tier_domains in domains:
        owner = {child: d.name for d in tier_domains for child in d.children}
        for h, chain in host_domains.items():
            chain.append(owner[chain[-1] if chain else host_group[h]])

    nvlink, lone = _nvlink_domains(host_group, inp.hosts)
    if lone:
        notes.append(
            f"{_plural(len(lone), 'NVLink domain')} with one exported host only (no block of servers): {_few(lone)}"
        )
    facts = [inp.hosts.get(h, _DEFAULT) for h in host_group]
    return Hierarchy(
        cluster=cluster,
        groups=groups,
        upper=upper,
        domains=domains,
        host_group=host_group,
        host_domains=host_domains,
        nvlink=nvlink,
        hosts_nvlink_inside=sum(1 for f in facts if f.nvlink and not f.nvlink_domain),
        notes=notes,
        summary=_summary(groups, upper, domains),
    )


_DEFAULT = HostFacts()


def _attach_hosts(
    graph: FabricGraph, tiers: Tiers, facts: dict[str, HostFacts]
) -> tuple[dict[str, list[int]], list[str]]:
    """Named compute hosts with a live link -> the switches of the lowest tier they reach; notes for the rest."""
    level = tiers.level
    by_role: dict[str, list[str]] = {}
    unnamed: list[str] = []
    offline: list[str] = []
    unknown_tier: list[str] = []
    above_leaf: list[str] = []
    attach: dict[str, list[int]] = {}
    for h, key in enumerate(graph.host_keys):
        role = graph.host_roles[h] or COMPUTE
        if role != COMPUTE:
            by_role.setdefault(role, []).append(key)
            continue
        if facts.get(key, _DEFAULT).unnamed:
            unnamed.append(key)
            continue
        switches = sorted({s for s, _ in graph.host_links[h]})
        if not switches:
            offline.append(key)
            continue
        low = min(level[s] for s in switches)
        if low < 0:
            unknown_tier.append(key)
            continue
        attach[key] = [s for s in switches if level[s] == low]
        if len(attach[key]) < len(switches):
            above_leaf.append(key)
    notes = [f"{_plural(len(by_role[r]), r + ' server')} (run no jobs): {_few(by_role[r])}" for r in sorted(by_role)]
    if unnamed:
        notes.append(
            f"{_plural(len(unnamed), 'unnamed host')} (HCAs whose node description names no host; name them in the "
            "admin, or import again once named)"
        )
    if offline:
        notes.append(f"{_plural(len(offline), 'host')} with no live link to the fabric: {_few(offline)}")
    if unknown_tier:
        notes.append(f"{_plural(len(unknown_tier), 'host')} on switches of no known tier: {_few(unknown_tier)}")
    if above_leaf:
        notes.append(
            f"the links of {_plural(len(above_leaf), 'host')} straight to a switch above their leaf (a tree "
            f"places a server under one leaf): {_few(above_leaf)}"
        )
    return attach, notes


def _groups(graph: FabricGraph, tiers: Tiers, attach: dict[str, list[int]]) -> tuple[list[Group], dict[int, int]]:
    """The switches joined by hosts that reach several of them (rail leaves), with their hosts; switch -> group."""
    uf = _UnionFind()
    for chosen in attach.values():
        for s in chosen:
            uf.union(chosen[0], s)
    hosts: dict[object, list[str]] = {}
    switches: dict[object, set[int]] = {}
    for key, chosen in attach.items():
        root = uf.find(chosen[0])
        hosts.setdefault(root, []).append(key)
        switches.setdefault(root, set()).update(chosen)
    found = []
    for root, members in hosts.items():
        sws = switches[root]
        lv = tiers.level[next(iter(sws))]
        sw_names = sorted((graph.switch_names[s] for s in sws), key=natural_key)
        name = _range_name(sw_names) + ("" if lv == 0 else DIRECT_SUFFIX)
        found.append((Group(name, sw_names, sorted(members, key=natural_key), lv), sws))
    found.sort(key=lambda gs: (gs[0].level > 0, natural_key(gs[0].name)))
    group_of_switch = {s: gi for gi, (_, sws) in enumerate(found) for s in sws}
    return [g for g, _ in found], group_of_switch


def _nvlink_domains(host_group: dict[str, str], facts: dict[str, HostFacts]) -> tuple[dict[str, list[str]], list[str]]:
    """Multi-node NVLink domains of the exported hosts (natural order), and the names of those with one host only."""
    found: dict[str, list[str]] = {}
    for h in host_group:
        domain = facts.get(h, _DEFAULT).nvlink_domain
        if domain:
            found.setdefault(domain, []).append(h)
    lone = sorted((d for d, hs in found.items() if len(hs) < 2), key=natural_key)
    multi = {d: sorted(found[d], key=natural_key) for d in sorted(found, key=natural_key) if len(found[d]) > 1}
    return multi, lone


def _summary(groups: list[Group], upper: list[UpperSwitch], domains: list[list[Domain]]) -> list[str]:
    leaf_groups = [g for g in groups if g.level == 0]
    direct = [g for g in groups if g.level > 0]
    n_leaves = sum(len(g.switches) for g in leaf_groups)
    multi = sum(1 for g in leaf_groups if len(g.switches) > 1)
    n_hosts = sum(len(g.hosts) for g in groups)
    first = f"{_plural(n_hosts, 'compute host')}: {sum(len(g.hosts) for g in leaf_groups)} under "
    first += _plural(n_leaves, "leaf", "leaves")
    if multi:
        first += f" in {_plural(len(leaf_groups), 'leaf group')} ({multi} of rail leaves)"
    if direct:
        first += (
            f", {sum(len(g.hosts) for g in direct)} on switches above the leaves ({_few([g.name for g in direct])})"
        )
    second = f"Above the leaves: {_plural(len(upper), 'switch', 'switches')}"
    second += "".join(f", {_plural(len(ds), tier_name(t + 1) + ' domain')}" for t, ds in enumerate(domains))
    return [first + ".", second + ". Links that are down are left out."]


def _check_unique_names(cluster: str, names: list[str]) -> None:
    seen: set[str] = set()
    twice = sorted({n for n in names if n in seen or seen.add(n)}, key=natural_key)
    if twice:
        raise ExportRefused(
            f"cluster {cluster}: {_plural(len(twice), 'name')} would stand for two different switches or leaf groups "
            f"({_few(twice)}): give the switches names of their own (admin, or PATCH /api/v1/switches/<id>/)"
        )


def _upper_switches(
    graph: FabricGraph, tiers: Tiers, groups: list[Group], group_of_switch: dict[int, int]
) -> list[UpperSwitch]:
    level = tiers.level
    names = graph.switch_names
    included: set[int] = set()
    out: list[UpperSwitch] = []
    for s in sorted(
        (s for s in range(graph.n_switches) if level[s] >= 1), key=lambda s: (level[s], graph.switch_sort[s])
    ):
        children: set[str] = set()
        for w, _ in graph.sw_adj[s]:
            if not 0 <= level[w] < level[s]:
                continue
            if level[w] == 0:
                gi = group_of_switch.get(w)
                if gi is not None and groups[gi].level == 0:
                    children.add(groups[gi].name)
            elif w in included:
                children.add(names[w])
        gi = group_of_switch.get(s)
        if gi is not None:  # its own hosts
            children.add(groups[gi].name)
        if children:
            included.add(s)
            out.append(UpperSwitch(names[s], level[s], sorted(children, key=natural_key), s))
    return out


def _domains(
    graph: FabricGraph,
    tiers: Tiers,
    groups: list[Group],
    group_of_switch: dict[int, int],
    upper: list[UpperSwitch],
) -> list[list[Domain]]:
    level = tiers.level
    upper_idx = [u.index for u in upper]
    top = max((u.level for u in upper), default=0)
    uf = _UnionFind()
    for gi in range(len(groups)):
        uf.find(("g", gi))

    def item(s: int) -> tuple[str, int]:
        gi = group_of_switch.get(s)
        return ("g", gi) if level[s] == 0 and gi is not None else ("s", s)

    listed = set(upper_idx)
    below_names: dict[object, str] = {("g", gi): g.name for gi, g in enumerate(groups)}
    out: list[list[Domain]] = []
    for t in range(1, top + 1):
        tier_switches = [s for s in upper_idx if level[s] == t]
        for s in tier_switches:
            uf.find(("s", s))
            for w, _ in graph.sw_adj[s]:
                if level[w] < t and (w in listed or (level[w] == 0 and w in group_of_switch)):
                    uf.union(("s", s), item(w))
            gi = group_of_switch.get(s)
            if gi is not None:
                uf.union(("s", s), ("g", gi))
        # Components that hold a group: the domains of tier t.
        comps: dict[object, dict[str, list]] = {}
        for gi in range(len(groups)):
            comps.setdefault(uf.find(("g", gi)), {"below": set(), "switches": []})
        for x, parent_name in list(below_names.items()):
            root = uf.find(x)
            if root in comps:
                comps[root]["below"].add(parent_name)
        for s in tier_switches:
            root = uf.find(("s", s))
            if root in comps:
                comps[root]["switches"].append(graph.switch_names[s])
        tier_domains: list[Domain] = []
        new_below: dict[object, str] = {}
        for root, c in comps.items():
            children = sorted(c["below"], key=natural_key)
            name = _range_name(c["switches"]) if c["switches"] else children[0]
            tier_domains.append(Domain(name, t, children, sorted(c["switches"], key=natural_key)))
            new_below[root] = name
        tier_domains.sort(key=lambda d: natural_key(d.name))
        out.append(tier_domains)
        below_names = new_below
    return out


def header(what: str, h: Hierarchy, extra_notes: list[str] | None = None, comment: str = "#") -> list[str]:
    """The lines every file written opens with: what it is, what it holds, what was left out and why."""
    lines = [
        f"{comment} {what} of cluster {h.cluster}: written by clusterctl export_topology from its fabric.",
        *(f"{comment} {line}" for line in h.summary),
    ]
    notes = [*h.notes, *(extra_notes or [])]
    if notes:
        lines.append(f"{comment} Left out:")
        lines.extend(f"{comment}   {note}" for note in notes)
    return lines


# Every format, in the order help texts list them; each writer registers itself under its name.
FORMAT_NAMES = ("slurm-tree", "slurm-block", "slurm-yaml", "kueue", "kueue-labels", "volcano")
FORMATS: dict[str, Callable[[Hierarchy], Export]] = {}


def register(name: str) -> Callable[[Callable[[Hierarchy], Export]], Callable[[Hierarchy], Export]]:
    def add(fn: Callable[[Hierarchy], Export]) -> Callable[[Hierarchy], Export]:
        FORMATS[name] = fn
        return fn

    return add


def format_names() -> list[str]:
    _load_writers()
    return [name for name in FORMAT_NAMES if name in FORMATS]


def render(inp: ExportInput, fmt: str) -> Export:
    """The fabric in format `fmt`. Raises ExportRefused with the reason when it cannot be written in it, and
    ValueError for a format that does not exist."""
    _load_writers()
    writer = FORMATS.get(fmt)
    if writer is None:
        raise ValueError(f"unknown format {fmt!r}; the formats are {', '.join(format_names())}")
    return writer(build_hierarchy(inp))


def _load_writers() -> None:
    # The writers register themselves; imported here so `import fabric.topology.export` alone stays light.
    import fabric.topology.export_k8s
    import fabric.topology.export_slurm  # noqa: F401
