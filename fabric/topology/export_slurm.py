"""The hierarchy for Slurm: topology.conf (topology/tree, topology/block) and topology.yaml (Slurm 25.05+). PURE.

* `slurm-tree` (topology.conf(5), topology/tree): one `SwitchName=<group> Nodes=<hostlist>` per leaf group, one
  `SwitchName=<switch> Switches=<hostlist>` per switch above the leaves, children from its live links. Slurm allows
  nodes on leaf switches only ("switch %s has both child switches and nodes" is an error) and warns of a node under
  two leaves, which is why a rail group is one entry and a spine's own hosts are "<spine>-hosts".
* `slurm-block` (topology/block): one `BlockName=<domain> Nodes=<hostlist>` per multi-node NVLink domain, listed in
  fabric order (blocks under one leaf group, then one pod, side by side: Slurm aggregates *adjacent* blocks into the
  higher levels), and `BlockSizes=D,2D,...,2^k D` with D the smallest block's node count (every block must hold at
  least the base size) and 2^k the largest power of two not above the number of blocks, as NVIDIA topograph writes
  it (pkg/translate/block.go, getBlockSizes). Refused where no NVLink domain spans two servers.
* `slurm-yaml` (topology.yaml(5), Slurm 25.05): a list of topologies; the tree as `fabric` (cluster_default: true)
  and, where there are blocks, the NVLink domains as `nvlink`, which a partition selects with `Topology=nvlink`.
  Keys and types as Slurm's parser reads them (src/plugins/data_parser/v0.0.43/parsers.c, TOPOLOGY_CONF,
  SWITCH_CONFIG, BLOCK_CONFIG at slurm-25-05-8-1): `topology`, `cluster_default`, `tree.switches[].switch /
  children / nodes`, `block.block_sizes` (integers), `block.blocks[].block / nodes`.

Names: Slurm node names are the fabric's host names (the NodeName of slurm.conf must match them); a switch name has
at most 64 characters; neither may hold a character with a meaning in a hostlist (hostlist.invalid_name).
"""

from __future__ import annotations

import yaml

from fabric.topology.export import Export, ExportRefused, Hierarchy, header, register
from fabric.topology.graph import natural_key
from fabric.topology.hostlist import compress, invalid_name

MAX_SWITCH_NAME = 64  # topology.conf(5): "cannot be longer than 64 characters"
MAX_BLOCK_LEVELS = 16  # src/plugins/topology/block/block_record.h


def _check_names(h: Hierarchy, blocks: list[tuple[str, list[str]]] | None = None) -> None:
    for host in h.hosts:
        why = invalid_name(host)
        if why:
            raise ExportRefused(f"cluster {h.cluster}: host {host!r} cannot be a Slurm node name: it holds {why}")
    switch_names = [g.name for g in h.groups] + [u.name for u in h.upper]
    for name in switch_names:
        why = invalid_name(name)
        if why:
            raise ExportRefused(f"cluster {h.cluster}: switch {name!r} cannot be a Slurm switch name: it holds {why}")
        if len(name) > MAX_SWITCH_NAME:
            raise ExportRefused(
                f"cluster {h.cluster}: switch name {name!r} has {len(name)} characters, more than the "
                f"{MAX_SWITCH_NAME} Slurm takes: give the switch a shorter name (admin)"
            )
    for name, _ in blocks or []:
        why = invalid_name(name)
        if why:
            raise ExportRefused(f"cluster {h.cluster}: NVLink domain {name!r} cannot be a Slurm block name: {why}")


def tree_entries(h: Hierarchy) -> list[tuple[str, str, str]]:
    """(switch, "Nodes" or "Switches", hostlist) in the order written: leaf groups, then switches by tier."""
    _check_names(h)
    out = [(g.name, "Nodes", compress(g.hosts)) for g in h.groups]
    out.extend((u.name, "Switches", compress(u.children)) for u in h.upper)
    return out


def blocks_of(h: Hierarchy) -> tuple[list[tuple[str, list[str]]], list[int]]:
    """The multi-node NVLink domains in fabric order, and the BlockSizes. Raises ExportRefused where there is none."""
    if not h.nvlink:
        n = len(h.host_group)
        inside = (
            f"{h.hosts_nvlink_inside} of the {_n(n, 'compute host')} have GPUs joined by NVLink inside the server"
            if h.hosts_nvlink_inside
            else f"none of the {_n(n, 'compute host')} has GPUs known to be joined by NVLink"
        )
        raise ExportRefused(
            f"cluster {h.cluster}: no NVLink domain spans more than one server ({inside}), so topology/block has no "
            "block to write: use slurm-tree. A multi-node NVLink system (GB200 NVL72) names each server's domain in "
            "its nvlink_domain (cluster spec, admin, or PATCH /api/v1/nodes/<id>/)."
        )
    group_pos = {g.name: i for i, g in enumerate(h.groups)}
    tier_pos = [{d.name: i for i, d in enumerate(ds)} for ds in h.domains]

    def position(host: str) -> tuple[int, ...]:
        chain = h.host_domains[host]
        return (*(tier_pos[t][chain[t]] for t in reversed(range(len(chain)))), group_pos[h.host_group[host]])

    blocks = sorted(h.nvlink.items(), key=lambda kv: (min(position(x) for x in kv[1]), natural_key(kv[0])))
    base = min(len(hosts) for _, hosts in blocks)
    levels = min(len(blocks).bit_length(), MAX_BLOCK_LEVELS)
    _check_names(h, blocks)
    return blocks, [base << i for i in range(levels)]


def _n(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _outside_blocks(h: Hierarchy) -> list[str]:
    inside = {x for hosts in h.nvlink.values() for x in hosts}
    return [x for x in h.hosts if x not in inside]


def _block_note(h: Hierarchy, where: str = "") -> list[str]:
    outside = _outside_blocks(h)
    if not outside:
        return []
    return [f"{where}{_n(len(outside), 'compute host')} in no multi-node NVLink domain: {compress(outside)}"]


@register("slurm-tree")
def slurm_tree(h: Hierarchy) -> Export:
    lines = header("Slurm topology.conf for TopologyPlugin=topology/tree", h)
    lines.extend(f"SwitchName={name} {kind}={members}" for name, kind, members in tree_entries(h))
    return Export("slurm-tree", "\n".join(lines) + "\n", "text/plain", "topology.conf")


@register("slurm-block")
def slurm_block(h: Hierarchy) -> Export:
    blocks, sizes = blocks_of(h)
    lines = header("Slurm topology.conf for TopologyPlugin=topology/block", h, _block_note(h))
    lines.append(f"# {_n(len(blocks), 'block')}: the multi-node NVLink domains, in fabric order (adjacent blocks are "
                 "close on InfiniBand, for the aggregated block sizes).")  # fmt: skip
    lines.extend(f"BlockName={name} Nodes={compress(hosts)}" for name, hosts in blocks)
    lines.append("BlockSizes=" + ",".join(str(s) for s in sizes))
    return Export("slurm-block", "\n".join(lines) + "\n", "text/plain", "topology.conf")


@register("slurm-yaml")
def slurm_yaml(h: Hierarchy) -> Export:
    switches = []
    for name, kind, members in tree_entries(h):
        switches.append({"switch": name, "nodes" if kind == "Nodes" else "children": members})
    doc: list[dict] = [{"topology": "fabric", "cluster_default": True, "tree": {"switches": switches}}]
    blocks, sizes = blocks_of(h) if h.nvlink else ([], [])
    lines = header(
        "Slurm topology.yaml (Slurm 25.05 and later)", h, _block_note(h, "from topology nvlink: ") if blocks else []
    )
    if blocks:
        doc.append(
            {
                "topology": "nvlink",
                "cluster_default": False,
                "block": {
                    "block_sizes": sizes,
                    "blocks": [{"block": name, "nodes": compress(hosts)} for name, hosts in blocks],
                },
            }
        )
        lines.append("# Topology 'fabric' (the InfiniBand tree) is the default; 'nvlink' (the multi-node NVLink")
        lines.append(
            "# domains, topology/block) is for the partitions that name it: PartitionName=... Topology=nvlink."
        )
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1_000_000)
    return Export("slurm-yaml", "\n".join(lines) + "\n---\n" + body, "application/yaml", "topology.yaml")
