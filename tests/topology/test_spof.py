import dataclasses
import itertools

from fabric.topology.graph import FabricGraph
from fabric.topology.spof import FABRIC, HOST_LINK, LEAF_SCOPE, SpofReport, find_spofs
from fabric.topology.tiers import detect_tiers
from tests.topology.factories import FabricBuilder, three_tier, two_tier


def spofs(b: FabricBuilder) -> SpofReport:
    g = FabricGraph.build(b.fabric)
    return find_spofs(g, detect_tiers(g))


def dual_homed(leaves: int = 4, hosts: int = 4) -> FabricBuilder:
    """Leaves in pairs; each host cabled to both leaves of its pair; every leaf to both spines."""
    b = FabricBuilder()
    spines = [b.switch("spine1"), b.switch("spine2")]
    leaf_keys = [b.switch(f"leaf{i + 1}") for i in range(leaves)]
    for lk in leaf_keys:
        for sp in spines:
            b.link(lk, sp)
    for pair in range(leaves // 2):
        for i in range(hosts):
            h = b.host(f"h{pair + 1}-{i + 1}")
            b.link(h, leaf_keys[2 * pair])
            b.link(h, leaf_keys[2 * pair + 1])
    return b


def test_redundant_fabric_has_no_spof():
    r = spofs(dual_homed())
    assert r.switches == []
    assert r.links == []
    assert r.by_scope == {FABRIC: 0, LEAF_SCOPE: 0, HOST_LINK: 0}


def test_single_homed_hosts_make_host_link_and_leaf_spofs():
    r = spofs(two_tier(leaves=2, spines=2, hosts_per_leaf=3))
    assert r.by_scope == {FABRIC: 0, LEAF_SCOPE: 2, HOST_LINK: 6}
    leaf1 = r.switches[0]
    assert (leaf1.name, leaf1.tier, leaf1.scope) == ("leaf1", "leaf", LEAF_SCOPE)
    assert leaf1.hosts == ["h1-1", "h1-2", "h1-3"]
    assert all(x.scope == HOST_LINK and len(x.hosts) == 1 for x in r.links)


def test_leaf_with_all_uplinks_to_one_spine_makes_that_spine_a_fabric_spof():
    b = dual_homed(leaves=2, hosts=2)
    b.fabric.links = [lk for lk in b.fabric.links if {lk.a, lk.b} != {"guid-leaf2", "guid-spine2"}]
    b.fabric.links = [lk for lk in b.fabric.links if {lk.a, lk.b} != {"guid-leaf1", "guid-spine2"}]
    # Now spine2 is cabled to nothing and spine1 joins the two leaves, but hosts are dual-homed
    # onto both leaves, so losing spine1 still leaves each host on its own leaf pair: no SPOF.
    assert spofs(b).switches == []


def test_spine_joining_pods_is_a_fabric_spof_for_the_far_side():
    # Two pods, one core switch: the core joins them; hosts on the smaller side are cut off.
    b = three_tier(pods=2, leaves_per_pod=1, spines_per_pod=1, cores=1, hosts_per_leaf=2)
    b.link(b.host("p1extra"), "guid-p1leaf1")  # pod 1 is the bigger part and stays "the fabric"
    r = spofs(b)
    by_name = {x.name: x for x in r.switches}
    assert by_name["core1"].scope == FABRIC
    assert by_name["core1"].hosts == ["p2h1-1", "p2h1-2"]
    assert by_name["p2spine1"].scope == FABRIC
    assert by_name["p2spine1"].hosts == ["p2h1-1", "p2h1-2"]


def test_single_inter_switch_cable_is_a_bridge():
    b = three_tier(pods=2, leaves_per_pod=1, spines_per_pod=1, cores=1, hosts_per_leaf=1)
    b.link(b.host("p1extra"), "guid-p1leaf1")
    r = spofs(b)
    fabric_links = [x for x in r.links if x.scope == FABRIC]
    # Every cable of the line p1leaf1 - p1spine1 - core1 - p2spine1 - p2leaf1 is a bridge; pod 1
    # (2 hosts) is the bigger side whichever cable goes, so each one cuts off pod 2's host.
    assert {(x.a, x.b) for x in fabric_links} == {
        ("p1leaf1", "p1spine1"),
        ("p1spine1", "core1"),
        ("p2spine1", "core1"),
        ("p2leaf1", "p2spine1"),
    }
    assert all(x.hosts == ["p2h1-1"] for x in fabric_links)


def test_parallel_cables_are_not_bridges():
    b = FabricBuilder()
    l1, l2, sp = b.switch("leaf1"), b.switch("leaf2"), b.switch("spine1")
    b.link(l1, sp, count=2)
    b.link(l2, sp, count=2)
    for lf, leaf in ((1, l1), (2, l2)):
        h = b.host(f"h{lf}")
        b.link(h, leaf, count=2)
    r = spofs(b)
    assert r.links == []
    assert {x.name for x in r.switches} == {"leaf1", "leaf2", "spine1"}


def test_spine_carrying_a_dual_ported_storage_node_is_its_spof():
    # SX6036's ib7: tank1's two ports both go to the spine, so the spine is tank1's SPOF.
    b = two_tier(leaves=2, spines=2)
    tank = b.host("tank1", role="storage")
    b.link(tank, "guid-spine1", count=2)
    r = spofs(b)
    spine = next(x for x in r.switches if x.name == "spine1")
    assert spine.tier == "spine"
    assert spine.scope == LEAF_SCOPE
    assert spine.hosts == ["tank1"]
    assert spine.storage_hosts == ["tank1"]
    assert not any("tank1" in x.hosts for x in r.links)  # neither of its two links alone


def test_unreachable_host_is_listed_apart():
    b = two_tier(leaves=1, spines=1, hosts_per_leaf=1)
    b.host("lonely")
    b.link(b.host("cable-down"), "guid-leaf1", up=False)
    r = spofs(b)
    assert r.unreachable_hosts == ["cable-down", "lonely"]
    assert all("lonely" not in x.hosts for x in r.switches)


def test_island_with_fewer_hosts_is_unreachable():
    b = two_tier(leaves=2, spines=1, hosts_per_leaf=2)
    island = b.switch("island")
    b.link(b.host("far"), island)
    assert spofs(b).unreachable_hosts == ["far"]


def test_single_uplink_leaves_are_listed_with_their_hosts():
    b = two_tier(leaves=3, spines=2, hosts_per_leaf=2, links_per_pair=2)
    b.fabric.links = [lk for lk in b.fabric.links if {lk.a, lk.b} != {"guid-leaf3", "guid-spine2"}]
    r = spofs(b)
    assert [(x.name, x.uplinks, x.uplink_switches, x.hosts) for x in r.single_uplink_leaves] == [
        ("leaf3", 2, ["spine1"], ["h3-1", "h3-2"])
    ]
    spine1 = next(x for x in r.switches if x.name == "spine1")
    assert spine1.scope == FABRIC
    assert spine1.hosts == ["h3-1", "h3-2"]


def test_long_chain_does_not_hit_the_recursion_limit():
    # 3,000 switches in a line (a recursive DFS would die at depth ~1,000), 3 hosts at one end
    # and 1 at the other: every inner switch and every cable cuts the far host off.
    b = FabricBuilder()
    chain = [b.switch(f"s{i}") for i in range(3000)]
    for a, c in itertools.pairwise(chain):
        b.link(a, c)
    for i in range(3):
        b.link(b.host(f"near{i}"), chain[0])
    b.link(b.host("far"), chain[-1])
    r = spofs(b)
    fabric_switches = [x for x in r.switches if x.scope == FABRIC]
    assert len(fabric_switches) == 2998
    assert all(x.hosts == ["far"] for x in fabric_switches)
    bridges = [x for x in r.links if x.scope == FABRIC]
    assert len(bridges) == 2999
    assert {x.name: x.hosts for x in r.switches if x.scope == LEAF_SCOPE} == {
        "s0": ["near0", "near1", "near2"],
        "s2999": ["far"],
    }


def test_down_links_do_not_count_as_redundancy():
    b = dual_homed(leaves=2, hosts=1)
    h_links = [i for i, lk in enumerate(b.fabric.links) if lk.a == "h1-1"]
    b.fabric.links[h_links[1]] = dataclasses.replace(b.fabric.links[h_links[1]], up=False)
    r = spofs(b)
    assert [x.hosts for x in r.links] == [["h1-1"]]
    assert [x.name for x in r.switches] == ["leaf1"]
