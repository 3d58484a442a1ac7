import itertools

from fabric.topology.graph import FabricGraph
from fabric.topology.tiers import CORE, LEAF, SPINE, UNKNOWN, detect_tiers
from fabric.topology.types import TSwitch
from tests.fabric.topology.factories import FabricBuilder, three_tier, two_tier


def roles(b: FabricBuilder) -> dict[str, str]:
    g = FabricGraph.build(b.fabric)
    t = detect_tiers(g)
    return {g.switch_names[i]: t.role[i] for i in range(g.n_switches)}


def test_two_tier_leaves_are_the_switches_with_hosts():
    r = roles(two_tier(leaves=4, spines=2))
    assert r == {"spine1": SPINE, "spine2": SPINE, "leaf1": LEAF, "leaf2": LEAF, "leaf3": LEAF, "leaf4": LEAF}


def test_three_tier_switches_above_spines_are_core():
    r = roles(three_tier(pods=2, cores=2))
    assert r["core1"] == r["core2"] == CORE
    assert r["p1spine1"] == r["p2spine2"] == SPINE
    assert r["p1leaf1"] == r["p2leaf2"] == LEAF


def test_three_tier_has_one_pod_per_spine_group():
    b = three_tier(pods=3)
    g = FabricGraph.build(b.fabric)
    t = detect_tiers(g)
    assert t.n_pods == 3
    pod = {g.switch_names[i]: t.pod[i] for i in range(g.n_switches)}
    assert pod["p1leaf1"] == pod["p1leaf2"] == pod["p1spine1"] == 0
    assert pod["p3leaf2"] == 2
    assert pod["core1"] == -1


def test_spine_that_carries_a_storage_host_stays_a_spine():
    # Like ib7 of the SX6036 fabric: a spine with a dual-ported storage node on it.
    b = two_tier(leaves=3, spines=2)
    tank = b.host("tank1", role="storage")
    b.link(tank, "guid-spine1", count=2)
    r = roles(b)
    assert r["spine1"] == SPINE
    assert r["spine2"] == SPINE
    assert [n for n, role in r.items() if role == LEAF] == ["leaf1", "leaf2", "leaf3"]


def test_every_spine_carrying_hosts_is_still_told_from_the_leaves():
    b = two_tier(leaves=4, spines=2)
    for s in (1, 2):
        b.link(b.host(f"stor{s}", role="storage"), f"guid-spine{s}")
    r = roles(b)
    assert r["spine1"] == r["spine2"] == SPINE
    assert r["leaf4"] == LEAF


def test_operator_role_overrides_detection():
    b = two_tier(leaves=2, spines=1)
    b.fabric.switches[0] = TSwitch("guid-spine1", "spine1", role="core")
    g = FabricGraph.build(b.fabric)
    t = detect_tiers(g)
    i = g.switch_index["guid-spine1"]
    assert t.role[i] == CORE
    assert t.source[i] == "operator"
    assert t.source[g.switch_index["guid-leaf1"]] == "detected"


def test_leaf_whose_hosts_are_all_down_is_still_a_leaf():
    b = two_tier(leaves=2, spines=1, hosts_per_leaf=0)
    b.link(b.host("h1"), "guid-leaf1")
    b.link(b.host("h2"), "guid-leaf2", up=False)
    assert roles(b)["leaf2"] == LEAF


def test_switch_no_leaf_reaches_is_unknown():
    b = two_tier(leaves=2, spines=1)
    b.switch("orphan")
    assert roles(b)["orphan"] == UNKNOWN


def test_uplink_direction_follows_levels():
    b = two_tier(leaves=1, spines=1)
    g = FabricGraph.build(b.fabric)
    t = detect_tiers(g)
    leaf, spine = g.switch_index["guid-leaf1"], g.switch_index["guid-spine1"]
    assert t.is_uplink(leaf, spine)
    assert not t.is_uplink(spine, leaf)


def test_lateral_cable_between_two_leaves_keeps_both_leaves():
    b = two_tier(leaves=3, spines=2)
    b.link("guid-leaf1", "guid-leaf2")
    r = roles(b)
    assert r["leaf1"] == r["leaf2"] == LEAF
    assert r["spine1"] == SPINE


def test_two_spines_with_storage_on_a_two_leaf_fabric():
    # Ties on candidate neighbours (2 each): the switch with fewer host cables is the spine.
    b = two_tier(leaves=2, spines=2, hosts_per_leaf=4)
    for s in (1, 2):
        b.link(b.host(f"stor{s}", role="storage"), f"guid-spine{s}")
    r = roles(b)
    assert (r["spine1"], r["spine2"], r["leaf1"], r["leaf2"]) == (SPINE, SPINE, LEAF, LEAF)


def _tiers(b: FabricBuilder):
    g = FabricGraph.build(b.fabric)
    return g, detect_tiers(g)


def test_a_switch_no_leaf_reaches_has_level_minus_one_and_no_pod():
    b = two_tier(leaves=1, spines=1)
    b.switch("orphan")
    g, t = _tiers(b)
    i = g.switch_index["guid-orphan"]
    assert (t.role[i], t.level[i], t.pod[i]) == (UNKNOWN, -1, -1)


def test_nothing_is_up_from_a_switch_of_unknown_tier():
    # x is cabled only to y, an operator's spine (level 1 by its role): no leaf reaches x, so x is unknown
    # (-1); the cable from x to y is not an uplink although 1 > -1.
    b = two_tier(leaves=1, spines=1)
    x, y = b.switch("x"), b.switch("y", role=SPINE)
    b.link(x, y)
    g, t = _tiers(b)
    xi, yi = g.switch_index[x], g.switch_index[y]
    assert (t.level[xi], t.level[yi]) == (-1, 1)
    assert t.is_uplink(xi, yi) is False


def test_a_spine_left_with_two_leaf_neighbours_after_a_drop_is_dropped_too():
    # spine1 and spine2 both carry a storage host, are cabled to each other and to leaf1 and leaf2: each spine
    # sees 3 candidates, each leaf 2. Dropping spine2 (the tie goes to the later name) leaves spine1 with 2
    # (leaf1, leaf2): still a conflict, so it goes too; the leaves keep 0 and stay leaves.
    b = FabricBuilder()
    spines = [b.switch("spine1"), b.switch("spine2")]
    for n, sp in enumerate(spines, start=1):
        b.link(b.host(f"stor{n}", role="storage"), sp)
    b.link(spines[0], spines[1])
    for n in (1, 2):
        leaf = b.switch(f"leaf{n}")
        b.link(b.host(f"h{n}"), leaf)
        for sp in spines:
            b.link(leaf, sp)
    assert roles(b) == {"spine1": SPINE, "spine2": SPINE, "leaf1": LEAF, "leaf2": LEAF}


def test_a_chain_of_four_switches_with_hosts_drops_one_inner_switch():
    # a - b - c - d, each with a server: b and c see two candidates each; c goes (the later name), which leaves
    # b with one neighbour candidate (a): no conflict any more, so b stays a leaf beside a and d.
    b = FabricBuilder()
    names = ["a", "b", "c", "d"]
    keys = [b.switch(n) for n in names]
    for n, k in zip(names, keys, strict=True):
        b.link(b.host(f"h-{n}"), k)
    for left, right in itertools.pairwise(keys):
        b.link(left, right)
    assert roles(b) == {"a": LEAF, "b": LEAF, "c": SPINE, "d": LEAF}


def test_an_operator_spine_cabled_to_no_leaf_belongs_to_no_pod():
    # spineX is a spine by the operator's word but hangs off the core only: leaves and spines
    # form pods, and a group of them without a leaf is no pod (-1), not a pod of its own.
    b = two_tier(leaves=2, spines=1)
    b.switch("core1")
    b.switch("spineX", role="spine")
    b.link("guid-spine1", "guid-core1")
    b.link("guid-spineX", "guid-core1")
    g, t = _tiers(b)
    i = g.switch_index["guid-spineX"]
    assert (t.role[i], t.pod[i]) == (SPINE, -1)
    assert t.n_pods == 1
