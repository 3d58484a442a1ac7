"""The fabric page's layout: tiers top to bottom, nodes under their leaf, no overlap, aggregation, speed."""

from __future__ import annotations

import itertools
import random

import pytest

from fabric.topology.layout import UNATTACHED, LayoutLink, LayoutNode, LayoutSwitch, layout


def fat_tree(leaves: int, spines: int, per_leaf: int, *, cores: int = 0, storage_every: int = 0):
    """Switches, nodes and links as the fabric snapshot describes them (ids: spines 1.., leaves 1001..)."""
    switches = [LayoutSwitch(i, 1, f"spine{i:02d}") for i in range(1, spines + 1)]
    switches += [LayoutSwitch(1000 + i, 0, f"leaf{i:02d}") for i in range(1, leaves + 1)]
    switches += [LayoutSwitch(5000 + i, 2, f"core{i}") for i in range(1, cores + 1)]
    links = [
        LayoutLink(("switch", 1000 + i), ("switch", s)) for i in range(1, leaves + 1) for s in range(1, spines + 1)
    ]
    links += [
        LayoutLink(("switch", s), ("switch", 5000 + c)) for s in range(1, spines + 1) for c in range(1, cores + 1)
    ]
    nodes = []
    for n in range(leaves * per_leaf):
        storage = storage_every and n % storage_every == 0
        node = LayoutNode(n + 1, 1000 + n // per_leaf + 1, "storage" if storage else "compute", f"gpu{n + 1:04d}")
        nodes.append(node)
        links.append(LayoutLink(("node", node.id), ("switch", node.leaf)))
    return switches, nodes, links


def crossings(lay, links) -> int:
    """Pairs of switch-switch links that cross between adjacent rows."""
    segs = []
    for link in links:
        if link.a[0] == link.b[0] == "switch":
            p, q = lay.switches[link.a[1]], lay.switches[link.b[1]]
            top, low = (p, q) if p.row < q.row else (q, p)
            segs.append((top.row, top.x, low.x))
    return sum(
        1 for (r1, t1, l1), (r2, t2, l2) in itertools.combinations(segs, 2) if r1 == r2 and (t1 - t2) * (l1 - l2) < 0
    )


def test_tiers_run_top_to_bottom_core_spine_leaf_nodes():
    switches, nodes, links = fat_tree(4, 2, 3, cores=2)
    lay = layout(switches, nodes, links)
    y = {s.tier: lay.switches[s.id].y for s in switches}
    assert y[2] < y[1] < y[0]
    assert all(lay.nodes[n.id].y > y[0] for n in nodes)
    assert {lay.switches[s.id].row for s in switches if s.tier == 2} == {0}
    assert lay.order[0] == [5001, 5002] and len(lay.order) == 3


def test_every_node_hangs_under_its_own_leaf():
    switches, nodes, links = fat_tree(6, 3, 11)
    lay = layout(switches, nodes, links)
    leaves = {s.id: lay.switches[s.id] for s in switches if s.tier == 0}
    for node in nodes:
        p = lay.nodes[node.id]
        nearest = min(leaves, key=lambda leaf_id: abs(leaves[leaf_id].x - p.x))
        assert nearest == node.leaf
        assert p.y > leaves[node.leaf].y


def test_nothing_overlaps():
    switches, nodes, links = fat_tree(8, 4, 21, storage_every=7)
    nodes.append(LayoutNode("tank1", 2, "storage", "tank1"))  # a storage node on a spine
    nodes.append(LayoutNode(9999, None, "login", "login1"))  # not cabled
    lay = layout(switches, nodes, links)
    points = [(p.x, p.y) for p in [*lay.switches.values(), *lay.nodes.values()]]
    assert len(points) == len(switches) + len(nodes)
    gap = min(((ax - bx) ** 2 + (ay - by) ** 2) ** 0.5 for (ax, ay), (bx, by) in itertools.combinations(points, 2))
    assert gap >= 12.0 - 1e-6
    assert all(0 <= x <= lay.width and 0 <= y <= lay.height for x, y in points)


def test_storage_is_marked_and_nodes_off_the_leaves_are_placed():
    switches, nodes, links = fat_tree(3, 2, 4, storage_every=5)
    nodes.append(LayoutNode("tank1", 2, "storage", "tank1"))
    nodes.append(LayoutNode(9999, None, "login", "login1"))
    lay = layout(switches, nodes, links)
    assert {nid for nid, p in lay.nodes.items() if p.storage} == {1, 6, 11, "tank1"}
    spine, leaf = lay.switches[2], lay.switches[1001]
    assert spine.y < lay.nodes["tank1"].y < leaf.y and lay.nodes["tank1"].x == spine.x
    assert lay.nodes[9999].x > max(p.x for p in lay.switches.values())


def test_leaves_are_ordered_to_avoid_crossings():
    # Odd leaves are cabled to spines 1-2, even leaves to spines 3-4: name order
    # interleaves the two blocks, barycentre sets them side by side.
    switches = [LayoutSwitch(s, 1, f"spine{s}") for s in range(1, 5)]
    switches += [LayoutSwitch(100 + i, 0, f"leaf{i}") for i in range(1, 9)]
    links = [LayoutLink(("switch", 100 + i), ("switch", s)) for i in range(1, 9) for s in ((1, 2) if i % 2 else (3, 4))]
    assert crossings(layout(switches, [], links, sweeps=0), links) > 0
    lay = layout(switches, [], links)
    assert crossings(lay, links) == 2 * 6  # what each block (4 leaves x 2 spines, all cabled) cannot avoid
    assert lay.order[1][:4] == [101, 103, 105, 107]


def test_three_tier_pods_untangle():
    switches, links = [LayoutSwitch(900, 2, "core1"), LayoutSwitch(901, 2, "core2")], []
    for pod in range(3):
        for k in range(2):
            spine = 10 * pod + k
            switches.append(LayoutSwitch(spine, 1, f"spine-{k}-{pod}"))  # names interleave the pods
            links += [LayoutLink(("switch", spine), ("switch", c)) for c in (900, 901)]
            for leaf in range(3):
                leaf_id = 100 + 10 * pod + leaf
                switches.append(LayoutSwitch(leaf_id, 0, f"leaf-{leaf}-{pod}"))
                links.append(LayoutLink(("switch", leaf_id), ("switch", spine)))
    assert crossings(layout(switches, [], links), links) < crossings(layout(switches, [], links, sweeps=0), links)


def test_same_content_in_any_order_gives_the_same_layout():
    switches, nodes, links = fat_tree(5, 3, 6, cores=1, storage_every=4)
    first = layout(switches, nodes, links)
    rng = random.Random(7)
    for _ in range(3):
        rng.shuffle(switches), rng.shuffle(nodes), rng.shuffle(links)
        again = layout(switches, nodes, links)
        assert (again.switches, again.nodes, again.order) == (first.switches, first.nodes, first.order)


def test_above_the_threshold_nodes_fold_into_one_group_per_leaf():
    switches, nodes, links = fat_tree(4, 2, 65, storage_every=50)  # 260 nodes
    assert not layout(switches, nodes[:256], links).aggregated
    lay = layout(switches, nodes, links)
    assert lay.aggregated
    assert set(lay.nodes) == {f"leaf:{1000 + i}" for i in range(1, 5)}
    assert sum(p.members for p in lay.nodes.values()) == 260
    assert sum(p.storage for p in lay.nodes.values()) == 6
    assert lay.group_of[1] == "leaf:1001" and lay.group_of[260] == "leaf:1004"
    for group, p in lay.nodes.items():
        leaf = lay.switches[int(group.split(":")[1])]
        assert p.x == leaf.x and p.y > leaf.y


def test_groups_already_folded_are_placed_as_given_and_strays_get_their_own_group():
    switches, _, links = fat_tree(2, 1, 0)
    groups = [LayoutNode(f"leaf:{leaf}", leaf, "group", members=32, storage=1) for leaf in (1001, 1002)]
    lay = layout(switches, groups, links)
    assert not lay.aggregated and set(lay.nodes) == {"leaf:1001", "leaf:1002"}
    assert lay.nodes["leaf:1001"].members == 32 and lay.nodes["leaf:1001"].storage == 1
    strays = [LayoutNode(i, None, name=f"n{i}") for i in range(3)]
    lay = layout(switches, strays, links, aggregate_above=2)
    assert set(lay.nodes) == {UNATTACHED} and lay.nodes[UNATTACHED].members == 3


def test_empty_and_switch_only_inputs():
    lay = layout([], [], [])
    assert lay.switches == {} and lay.nodes == {} and lay.width == 0
    lay = layout([LayoutSwitch(1, -1, "lost"), LayoutSwitch(2, 0, "leaf")], [], [])
    assert lay.switches[1].row == 0 and lay.switches[2].row == 1


@pytest.mark.parametrize("aggregate_above", [256, 10_000], ids=["aggregated", "every-node"])
def test_two_thousand_nodes_and_128_switches_are_all_laid_out(aggregate_above):
    # Its speed (target < 50 ms) is measured by bench/bench_layout.py, not here: a timed test fails on a busy host.
    switches, nodes, links = fat_tree(64, 64, 32, storage_every=100)  # 2,048 nodes, 4,096 + 2,048 links
    lay = layout(switches, nodes, links, aggregate_above=aggregate_above)
    assert len(lay.switches) == len(switches)
    if aggregate_above > len(nodes):  # every node its own place
        assert len(lay.nodes) == len(nodes)
    else:  # one place per leaf, holding all of its nodes
        assert sum(p.members for p in lay.nodes.values()) == len(nodes)
