"""The fat-tree generator: layout arithmetic by hand, then the analyses on what it builds."""

import dataclasses
import itertools
import re
import uuid
from collections import Counter

import pytest

import fabric.importers.fattree as fattree
from fabric.importers.fattree import FatTreePlan, generate_fat_tree, plan_fat_tree, plan_flat_fat_tree
from fabric.importers.types import ParsedFabric, normalise_guid
from fabric.topology.catalog import GpuModel
from fabric.topology.convert import fabric_from_parsed
from fabric.topology.distance import LEVEL_CORE, LEVEL_LEAF, LEVEL_POD, Distance, HopIndex
from fabric.topology.graph import FabricGraph
from fabric.topology.report import FabricReport, analyse
from fabric.topology.tiers import detect_tiers
from tests.fabric.topology.factories import strip_roles


@pytest.fixture(scope="module")
def big() -> ParsedFabric:
    return generate_fat_tree(2000)


@pytest.fixture(scope="module")
def big_report(big: ParsedFabric) -> FabricReport:
    return analyse(fabric_from_parsed(big))


# --- plan ------------------------------------------------------------------------------------------------------


def test_plan_32_dgx_non_blocking():
    # 64 ports at 1:1 -> 32 down / 32 up. One scalable unit of 32 servers, one leaf per rail: 8 leaves.
    # 8 leaves x 32 uplinks = 256 cables / 64 spine ports = 4 spines. 8 leaves <= 64: two tiers.
    assert plan_fat_tree(32, 8) == FatTreePlan(
        tiers=2,
        down=32,
        up=32,
        hcas_per_node=8,
        compute_units=1,
        storage_units=0,
        leaves=8,
        leaves_per_pod=8,
        pods=1,
        spines_per_pod=(4,),
        cores_per_group=(),
    )


@pytest.mark.parametrize(("ratio", "down", "up"), [(1.0, 32, 32), (2.0, 42, 21), (3.0, 48, 16), (1.5, 37, 25)])
def test_port_split(ratio, down, up):
    # up = floor(64 / (1 + o)), down = floor(up * o): 2:1 -> 21 up, 42 down, one port unused;
    # 1.5:1 -> 25 up, 37 down (1.48, not 38 = 1.52: the ratio asked for is a ceiling).
    plan = plan_fat_tree(64, 1, 64, ratio)
    assert (plan.down, plan.up) == (down, up)


def test_plan_2000_dgx_is_three_tiers():
    # 2000 / 32 = 63 units (the last has 16 servers) x 8 rails = 504 leaves > 64: three tiers.
    # A spine has 32 ports down, so a pod holds 32 leaves = 4 units: 16 pods (the last 24 leaves),
    # each with 32 spines (512). Core group k takes spine k of every pod: 15 x 32 + 24 = 504
    # cables -> 8 cores of 64 ports, 32 groups -> 256 cores.
    plan = plan_fat_tree(2000, 8)
    assert (plan.tiers, plan.leaves, plan.pods, plan.leaves_per_pod) == (3, 504, 16, 32)
    assert plan.spines_per_pod == (32,) * 16
    assert plan.cores_per_group == (8,) * 32
    assert (plan.spines, plan.cores) == (512, 256)


# --- validation ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, "nodes must be"),
        ({"nodes": 4, "oversubscription": 0.5}, "oversubscription must be >= 1"),
        ({"nodes": 4, "leaf_ports": 1}, "leaf_ports must be >= 2"),
        ({"nodes": 4, "leaf_ports": 2, "oversubscription": 2.0}, "too small for oversubscription 2:1"),
        ({"nodes": 4, "gpu_model": "Z9000"}, "unknown GPU model 'Z9000'"),
        ({"nodes": 4, "rate": "WARP"}, "unknown rate 'WARP'"),
        ({"nodes": 4, "gpus_per_node": 0}, "hcas_per_node must be >= 1"),
        ({"nodes": 4, "storage_nodes": -1}, "storage_nodes must be"),
        ({"nodes": 200, "leaf_ports": 8, "hcas_per_node": 1}, "pods"),
    ],
)
def test_impossible_designs_are_refused_clearly(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        generate_fat_tree(**kwargs)


# --- what it builds --------------------------------------------------------------------------------------------


def test_counts_for_32_dgx():
    p = generate_fat_tree(32)
    assert Counter(s.role for s in p.switches) == {"leaf": 8, "spine": 4}
    assert len(p.cas) == 32 * 8
    assert len(p.links) == 32 * 8 + 8 * 32  # host cables + leaf uplinks
    assert {s.port_count for s in p.switches} == {64}
    assert p.source == "generated"


def test_rail_optimised_hca_i_goes_to_leaf_i_of_its_unit():
    p = generate_fat_tree(40)  # two units: gpu0001-0032 on leaf001-008, gpu0033-0040 on leaf009-016
    names = {s.guid: s.name for s in p.switches}
    ca = {c.guid: c for c in p.cas}
    leaf_of = {}
    for lk in p.links:
        if lk.a.node_guid in ca:
            c = ca[lk.a.node_guid]
            leaf_of[(c.hostname, c.device)] = names[lk.b.node_guid]
    assert [leaf_of[("gpu0001", f"mlx5_{i}")] for i in range(8)] == [f"leaf{i:03d}" for i in range(1, 9)]
    assert leaf_of[("gpu0032", "mlx5_7")] == "leaf008"
    assert leaf_of[("gpu0033", "mlx5_0")] == "leaf009"


def test_no_port_is_used_twice_nor_beyond_the_radix():
    p = generate_fat_tree(300, leaf_ports=40, oversubscription=2.0, storage_nodes=5, rate="HDR")
    ends = [(lk.a.node_guid, lk.a.port) for lk in p.links] + [(lk.b.node_guid, lk.b.port) for lk in p.links]
    assert len(ends) == len(set(ends))
    switches = {s.guid for s in p.switches}
    assert all(1 <= port <= 40 for guid, port in ends if guid in switches)


def test_every_leaf_has_its_uplinks_and_at_most_down_hosts():
    p = generate_fat_tree(100, oversubscription=3.0)  # 48 down / 16 up
    role = {s.guid: s.role for s in p.switches}
    ups, downs = Counter(), Counter()
    for lk in p.links:
        for x, y in ((lk.a, lk.b), (lk.b, lk.a)):
            if role.get(x.node_guid) == "leaf":
                (ups if role.get(y.node_guid) == "spine" else downs)[x.node_guid] += 1
    leaves = [g for g, r in role.items() if r == "leaf"]
    assert all(ups[g] == 16 for g in leaves)
    assert max(downs.values()) == 48


def test_guids_and_lids_are_unique_and_well_formed():
    p = generate_fat_tree(64, storage_nodes=2)
    guids = [s.guid for s in p.switches] + [c.guid for c in p.cas] + [g for c in p.cas for g in c.port_guids.values()]
    assert len(guids) == len(set(guids))
    assert all(normalise_guid(g) == g for g in guids)
    lids = [s.lid for s in p.switches] + [lid for c in p.cas for lid in c.lids.values()]
    assert len(lids) == len(set(lids))


def test_same_arguments_same_fabric():
    assert generate_fat_tree(16, storage_nodes=2) == generate_fat_tree(16, storage_nodes=2)


def test_name_prefix_changes_names_and_guids():
    a, b = generate_fat_tree(4), generate_fat_tree(4, name_prefix="b-")
    assert b.nodes[0].hostname == "b-gpu0001"
    assert b.switches[0].name == "b-leaf001"
    assert not {s.guid for s in a.switches} & {s.guid for s in b.switches}


def test_gpus_carry_the_catalog_facts():
    node = generate_fat_tree(2).nodes[0]
    assert (node.hostname, node.role, node.gpu_model, len(node.gpus)) == ("gpu0001", "compute", "H100", 8)
    gpu = node.gpus[3]
    assert (gpu.index, gpu.memory_mib, gpu.nvlink_generation, gpu.nvlink_gbps, gpu.mig_capable) == (
        3,
        80 * 1024,
        4,
        900.0,
        True,
    )
    assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", gpu.uuid)


def test_gpu_uuids_are_unique_and_stable():
    uuids = [g.uuid for n in generate_fat_tree(10).nodes for g in n.gpus]
    assert len(uuids) == len(set(uuids)) == 80
    assert uuids == [g.uuid for n in generate_fat_tree(10).nodes for g in n.gpus]


def test_node_topology_of_a_dgx_h100():
    topo = generate_fat_tree(1).nodes[0].topology
    assert topo is not None
    assert set(topo.gpu_links.values()) == {"NV18"}
    assert len(topo.gpu_links) == 28  # 8 choose 2
    assert topo.nic_affinity[(0, "mlx5_0")] == "PIX"
    assert topo.nic_affinity[(0, "mlx5_3")] == "NODE"  # same CPU socket (NICs 0-3 with GPUs 0-3)
    assert topo.nic_affinity[(0, "mlx5_4")] == "SYS"
    assert topo.nic_affinity[(7, "mlx5_7")] == "PIX"
    assert topo.numa_affinity[5] == 1


@pytest.mark.parametrize(("model", "code"), [("A100", "NV12"), ("A800", "NV8"), ("V100", "NV6"), ("B200", "NV18")])
def test_nvlink_code_follows_the_model(model, code):
    topo = generate_fat_tree(1, gpu_model=model).nodes[0].topology
    assert topo is not None
    assert set(topo.gpu_links.values()) == {code}


def test_gpus_without_nvlink_talk_over_pcie():
    topo = generate_fat_tree(1, gpu_model="L4", gpus_per_node=4, hcas_per_node=2).nodes[0].topology
    assert topo is not None
    assert topo.gpu_links[(0, 1)] == "NODE"
    assert topo.gpu_links[(0, 2)] == "SYS"


def test_storage_nodes_have_two_hcas_on_two_leaves_and_no_gpus():
    p = generate_fat_tree(8, storage_nodes=3)
    stor = [n for n in p.nodes if n.role == "storage"]
    assert [n.hostname for n in stor] == ["stor01", "stor02", "stor03"]
    assert all(n.gpus == [] and n.topology is None for n in stor)
    cas = [c for c in p.cas if c.hostname == "stor02"]
    assert [c.device for c in cas] == ["mlx5_0", "mlx5_1"]
    leaves = {lk.b.node_guid for lk in p.links if lk.a.node_guid in {c.guid for c in cas}}
    assert len(leaves) == 2


# --- analysed --------------------------------------------------------------------------------------------------


def test_32_dgx_non_blocking_analysis():
    r = analyse(fabric_from_parsed(generate_fat_tree(32)))
    assert {x.ratio for x in r.oversubscription.leaves} == {1.0}
    # 256 host ports; half A = leaf001-004 (128 ports) must cross the spines: 128 x 400 = 51,200.
    assert r.bisection.half_a_switches == ["leaf001", "leaf002", "leaf003", "leaf004"]
    assert r.bisection.gbps == 128 * 400.0
    assert r.bisection.ratio == 1.0


def test_two_to_one_halves_the_bisection():
    # 42 servers fill one unit at 42 down / 21 up. Half A = leaf001-004 = 168 ports (67,200 Gb/s)
    # but only 4 x 21 x 400 = 33,600 Gb/s of uplinks: half of full bisection.
    r = analyse(fabric_from_parsed(generate_fat_tree(42, oversubscription=2.0)))
    assert {x.ratio for x in r.oversubscription.leaves} == {2.0}
    assert r.bisection.half_a_gbps == 168 * 400.0
    assert r.bisection.gbps == 4 * 21 * 400.0
    assert r.bisection.ratio == 0.5


def test_2000_dgx_three_tiers_all_connected(big_report: FabricReport):
    c = big_report.counts
    assert c.switches_by_tier == {"leaf": 504, "spine": 512, "core": 256, "unknown": 0}
    assert (c.hosts, c.host_links) == (2000, 16000)
    assert c.unreachable_hosts == 0
    assert big_report.tiers.pods == 16


def test_2000_dgx_rail_optimised_has_no_spof(big_report: FabricReport):
    # 8 HCAs on 8 different leaves, every leaf on 32 spines, every spine on 8 cores: no single loss
    # cuts any server off.
    assert big_report.spof.by_scope == {"fabric": 0, "leaf": 0, "host-link": 0}
    assert big_report.spof.single_uplink_leaves == []


def test_2000_dgx_full_bisection(big_report: FabricReport):
    # 16,000 ports; half A = the first 8,000 = pods 1-7 and 26 leaves of pod 8; 1:1 all the way up.
    assert big_report.bisection.half_a_gbps == 8000 * 400.0
    assert big_report.bisection.gbps == 8000 * 400.0


def test_2000_dgx_hop_levels(big: ParsedFabric):
    idx = HopIndex.build(fabric_from_parsed(big))
    assert idx.distance("gpu0001", "gpu0032") == Distance(2, LEVEL_LEAF)  # same unit, same rail leaves
    assert idx.distance("gpu0001", "gpu0033") == Distance(4, LEVEL_POD)  # next unit, same pod
    assert idx.distance("gpu0001", "gpu0129") == Distance(6, LEVEL_CORE)  # unit 5 is in pod 2
    hosts = [n.hostname for n in big.nodes]
    assert all(idx.distance(a, b).reachable for a, b in itertools.combinations(hosts[::97], 2))


def test_single_homed_variant_has_host_link_and_leaf_spofs():
    # 128 servers x 1 HCA: 4 leaves of 32, 2 spines with 16 cables to each leaf.
    r = analyse(fabric_from_parsed(generate_fat_tree(128, hcas_per_node=1)))
    assert r.spof.by_scope == {"fabric": 0, "leaf": 4, "host-link": 128}


def test_storage_nodes_have_no_spof():
    r = analyse(fabric_from_parsed(generate_fat_tree(8, storage_nodes=3)))
    assert r.counts.hosts_by_role == {"compute": 8, "storage": 3}
    assert r.spof.switches == []


@pytest.mark.parametrize("nodes", [32, 2000])
def test_detected_tiers_match_the_generator_roles(nodes):
    p = generate_fat_tree(nodes)
    g = FabricGraph.build(strip_roles(fabric_from_parsed(p)))
    t = detect_tiers(g)
    assert {g.switch_names[i]: t.role[i] for i in range(g.n_switches)} == {s.name: s.role for s in p.switches}


def test_small_cluster_gets_the_ratio_asked_for():
    # 32 ports at 2:1 -> 10 up / 20 down, but 16 servers fill only 16 host ports: cable 16 / 8.
    # 8 rail leaves, 2 spines (4 cables each). Half A = leaf001-004: 4 x 8 x 400 = 12,800 Gb/s.
    plan = plan_fat_tree(16, 8, 32, 2.0)
    assert (plan.down, plan.up, plan.leaves, plan.spines) == (16, 8, 8, 2)
    r = analyse(fabric_from_parsed(generate_fat_tree(16, leaf_ports=32, oversubscription=2.0)))
    assert r.oversubscription.worst_ratio == 2.0
    assert r.bisection.gbps == 4 * 8 * 400.0


def test_at_least_two_spines():
    # 7 servers, 1 HCA: one leaf with 7 hosts and 8 uplinks (7 rounded up to even) needs
    # 8 / 64 -> 1 spine by ports, but one spine is a SPOF.
    plan = plan_fat_tree(7, 1)
    assert (plan.down, plan.up, plan.spines_per_pod) == (7, 8, (2,))


def test_spine_count_divides_the_uplinks():
    # 40 ports at 2:1 -> 13 up / 26 down; 10 leaves need ceil(130 / 40) = 4 spines by ports, but
    # 13 cables do not split evenly over 4: the smallest divisor of 13 that is >= 4 is 13.
    assert plan_fat_tree(130, 2, 40, 2.0).spines_per_pod == (13,)


@pytest.mark.parametrize(
    ("nodes", "ports", "ratio", "hcas", "storage"),
    [
        (1, 64, 1.0, 8, 0),
        (7, 8, 2.0, 2, 3),
        (33, 36, 1.5, 1, 0),
        (130, 40, 2.0, 2, 0),
        (130, 64, 3.0, 1, 3),
        (600, 36, 2.0, 8, 0),
        (600, 40, 1.5, 8, 3),
    ],
)
def test_generated_trees_are_consistent(nodes, ports, ratio, hcas, storage):
    p = generate_fat_tree(nodes, leaf_ports=ports, oversubscription=ratio, hcas_per_node=hcas, storage_nodes=storage)
    plan = plan_fat_tree(nodes, hcas, ports, ratio, storage)
    used = Counter(e.node_guid for lk in p.links for e in (lk.a, lk.b))
    assert max(used[s.guid] for s in p.switches) <= ports
    r = analyse(fabric_from_parsed(p))
    assert r.counts.unreachable_hosts == 0
    assert r.spof.by_scope["fabric"] == 0
    if hcas > 1:
        assert r.spof.by_scope == {"fabric": 0, "leaf": 0, "host-link": 0}
    # Symmetric wiring: the bisection is what the leaf port split promises, never less.
    assert r.bisection.ratio >= min(1.0, plan.up / plan.down) - 1e-9


# -- not rail-optimised (plan_flat_fat_tree, generate_fat_tree(rail_optimised=False)) -------------------------------


def test_a_flat_tree_puts_every_hca_of_a_server_on_one_leaf():
    # 64 ports at 1:1: 32 host ports per leaf, so 4 servers of 8 HCAs per leaf; 9 servers need 3 leaves.
    plan, per_leaf = plan_flat_fat_tree(9, 8, 64, 1.0)
    assert (per_leaf, plan.leaves, plan.down, plan.up, plan.tiers) == (4, 3, 32, 32, 2)
    fab = generate_fat_tree(9, gpus_per_node=8, leaf_ports=64, rail_optimised=False)
    leaf_of = {}
    names = {s.guid: s.name for s in fab.switches}
    cas = {ca.guid: ca.hostname for ca in fab.cas}
    for link in fab.links:
        ends = (link.a.node_guid, link.b.node_guid)
        host = next((cas[g] for g in ends if g in cas), None)
        leaf = next((names[g] for g in ends if g in names), None)
        if host:
            leaf_of.setdefault(host, set()).add(leaf)
    assert all(len(v) == 1 for v in leaf_of.values()) and len(leaf_of) == 9
    assert sorted(h for h, v in leaf_of.items() if v == leaf_of["gpu0001"]) == [
        "gpu0001",
        "gpu0002",
        "gpu0003",
        "gpu0004",
    ]
    assert leaf_of["gpu0009"] != leaf_of["gpu0005"]


def test_one_server_of_one_hca_is_the_smallest_flat_tree():
    plan, per_leaf = plan_flat_fat_tree(1, 1, 36, 1.0)
    assert (per_leaf, plan.leaves) == (18, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 8), "nodes must be a whole number >= 1, got 0"),
        ((4, 0), "hcas_per_node must be >= 1, got 0"),
        ((4, 20, 36, 1.0), "a server's 20 HCAs do not fit one leaf's 18 host ports at 1:1"),
    ],
)
def test_an_impossible_flat_tree_is_refused_naming_why(args, message):
    with pytest.raises(ValueError, match=message):
        plan_flat_fat_tree(*args)


def test_storage_servers_are_refused_on_a_flat_tree():
    with pytest.raises(ValueError, match="storage servers are cabled rail-optimised only"):
        generate_fat_tree(4, storage_nodes=2, rail_optimised=False)


# --- edges of the plan, worked by hand -----------------------------------------------------------------------------


def test_three_tiers_keep_units_whole_in_a_pod() -> None:
    # 704 servers x 3 HCAs on 64 ports at 1:1: down 32, 22 units, 66 leaves > 64: three tiers. A pod holds 32 leaves
    # but only 10 whole units of 3 (30 leaves): 3 pods (30, 30, 6). Spines per pod: the smallest divisor of 32 that
    # is >= ceil(30 * 32 / 32) = 30: 32. Group k takes 30 + 30 + 6 = 66 cables; a spine of a full pod goes up with
    # 30 * 32 / 32 = 30: cores per group the smallest divisor of 30 >= ceil(66 / 64) = 2: 2.
    plan = plan_fat_tree(704, 3)
    assert (plan.tiers, plan.leaves, plan.leaves_per_pod, plan.pods) == (3, 66, 30, 3)
    assert plan.spines_per_pod == (32, 32, 32)
    assert plan.cores_per_group == (2,) * 32


def test_three_tiers_with_more_hcas_than_a_pod_has_leaves() -> None:
    # 8 servers x 5 HCAs on 8 ports: down 4 up 4, 2 units, 10 leaves > 8. A spine has 4 ports down, fewer than a
    # unit's 5 leaves: pods of 4 leaves, 3 of them (4, 4, 2). Spines: smallest divisor of 4 >= ceil(4 * 4 / 4) = 4.
    # Group k: 4 + 4 + 2 = 10 cables; per spine 4 * 4 / 4 = 4 up: cores the smallest divisor of 4 >= ceil(10 / 8) = 2.
    plan = plan_fat_tree(8, 5, leaf_ports=8)
    assert (plan.tiers, plan.leaves, plan.leaves_per_pod, plan.pods) == (3, 10, 4, 3)
    assert (plan.spines_per_pod, plan.cores_per_group) == ((4, 4, 4), (2, 2, 2, 2))


def test_a_flat_tree_defaults_to_64_ports_at_one_to_one() -> None:
    # A full 64-port leaf at 1:1 has 32 host ports: 4 servers of 8 HCAs per leaf, 16 servers on 4 leaves, planned
    # as 128 single-HCA hosts: 2 spines (the smallest divisor of 32 >= max(ceil(4 * 32 / 64), 2) = 2).
    plan, per_leaf = plan_flat_fat_tree(16, 8)
    assert (per_leaf, plan.down, plan.up, plan.leaves, plan.spines_per_pod) == (4, 32, 32, 4, (2,))
    # 260 such servers fill 65 leaves: one more than a 64-port spine reaches, so three tiers.
    assert plan_flat_fat_tree(260, 8)[0].tiers == 3


def test_a_flat_tree_of_two_port_switches() -> None:
    # 2 ports: one host port, one uplink; one server of one HCA per leaf, one spine.
    plan, per_leaf = plan_flat_fat_tree(1, 1, leaf_ports=2)
    assert (per_leaf, plan.tiers, plan.down, plan.up, plan.leaves, plan.spines_per_pod) == (1, 2, 1, 1, 1, (1,))


@pytest.mark.parametrize(("nodes", "got"), [(-5, "-5"), (2.5, "2.5"), (0, "0")])
def test_a_flat_tree_names_the_bad_node_count(nodes, got) -> None:
    with pytest.raises(ValueError, match=f"nodes must be a whole number >= 1, got {got}$"):
        plan_flat_fat_tree(nodes, 8)


@pytest.mark.parametrize("hcas", [None, 1])
def test_a_negative_gpu_count_is_refused(hcas) -> None:
    with pytest.raises(ValueError, match="gpus_per_node must be a whole number >= 0, got -1"):
        generate_fat_tree(4, gpus_per_node=-1, hcas_per_node=hcas)


def test_a_plan_cannot_be_changed_once_made() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan_fat_tree(32, 8).up = 1


def test_gpu_uuids_are_uuid5_of_salt_host_and_index() -> None:
    # The module's documented recipe, in the namespace uuid5(DNS, "generated.clusterctl").
    ns = uuid.uuid5(uuid.NAMESPACE_DNS, "generated.clusterctl")
    plain = generate_fat_tree(1, gpus_per_node=2, leaf_ports=8).nodes[0]
    salted = generate_fat_tree(1, gpus_per_node=2, leaf_ports=8, uuid_salt="c1").nodes[0]
    assert [g.uuid for g in plain.gpus] == [f"GPU-{uuid.uuid5(ns, f'gpu0001/{i}')}" for i in range(2)]
    assert [g.uuid for g in salted.gpus] == [f"GPU-{uuid.uuid5(ns, f'c1/gpu0001/{i}')}" for i in range(2)]


def test_an_nvlink_generation_the_generator_does_not_know_is_pcie() -> None:
    # Generation 6 has no per-link figure here: no NV code is made up; GPUs 0 and 1 share a socket, 0 and 3 do not.
    topo = fattree._build_topology(GpuModel("X", 1024, 6, 3600.0, False), 4, ["mlx5_0"])
    assert (topo.gpu_links[(0, 1)], topo.gpu_links[(0, 3)]) == ("NODE", "SYS")


# --- whole fabrics written out by hand -------------------------------------------------------------------------------


def _wiring(f: ParsedFabric) -> tuple[list, list, list]:
    """(switches as (name, rack, lid, description), CAs as (name, lid), cables as (end, port, end, port)) in the
    order built, each end named: a switch by its name, an HCA as host/device."""
    name = {s.guid: s.name for s in f.switches} | {c.guid: f"{c.hostname}/{c.device}" for c in f.cas}
    switches = [(s.name, s.rack, s.lid, s.description) for s in f.switches]
    cas = [(name[c.guid], c.lids) for c in f.cas]
    cables = [(name[lk.a.node_guid], lk.a.port, name[lk.b.node_guid], lk.b.port) for lk in f.links]
    assert {(lk.width, lk.speed) for lk in f.links} == {(4, "NDR")}
    return switches, cas, cables


def test_two_servers_and_one_storage_server_on_4_port_switches() -> None:
    # 1:1 on 4 ports: down 2, up 2. One compute unit (2 leaves, one per rail) and one storage unit (2 leaves):
    # 4 leaves <= 4 ports, two tiers, spines = the smallest divisor of 2 >= max(ceil(4 * 2 / 4), 2) = 2.
    # Built in order: leaf001-002, the compute servers, leaf003-004, the storage server, then the spines.
    f = generate_fat_tree(2, gpus_per_node=2, leaf_ports=4, storage_nodes=1)
    switches, cas, cables = _wiring(f)
    assert switches == [
        ("leaf001", "rack01", 1, "leaf001 (4-port NDR leaf, generated)"),
        ("leaf002", "rack01", 2, "leaf002 (4-port NDR leaf, generated)"),
        ("leaf003", "rack-s01", 7, "leaf003 (4-port NDR leaf, generated)"),
        ("leaf004", "rack-s01", 8, "leaf004 (4-port NDR leaf, generated)"),
        ("spine01", "net01", 11, "spine01 (4-port NDR spine, generated)"),
        ("spine02", "net01", 12, "spine02 (4-port NDR spine, generated)"),
    ]
    assert cas == [
        ("gpu0001/mlx5_0", {1: 3}),
        ("gpu0001/mlx5_1", {1: 4}),
        ("gpu0002/mlx5_0", {1: 5}),
        ("gpu0002/mlx5_1", {1: 6}),
        ("stor01/mlx5_0", {1: 9}),
        ("stor01/mlx5_1", {1: 10}),
    ]
    assert cables == [
        ("gpu0001/mlx5_0", 1, "leaf001", 1),
        ("gpu0001/mlx5_1", 1, "leaf002", 1),
        ("gpu0002/mlx5_0", 1, "leaf001", 2),
        ("gpu0002/mlx5_1", 1, "leaf002", 2),
        ("stor01/mlx5_0", 1, "leaf003", 1),
        ("stor01/mlx5_1", 1, "leaf004", 1),
        # each leaf deals its uplinks (ports down + 1 = 3 and 4) over the spines in turn
        ("leaf001", 3, "spine01", 1),
        ("leaf001", 4, "spine02", 1),
        ("leaf002", 3, "spine01", 2),
        ("leaf002", 4, "spine02", 2),
        ("leaf003", 3, "spine01", 3),
        ("leaf003", 4, "spine02", 3),
        ("leaf004", 3, "spine01", 4),
        ("leaf004", 4, "spine02", 4),
    ]
    assert [(n.hostname, n.role, n.rack, len(n.gpus)) for n in f.nodes] == [
        ("gpu0001", "compute", "rack01", 2),
        ("gpu0002", "compute", "rack01", 2),
        ("stor01", "storage", "rack-s01", 0),
    ]


def test_ten_servers_on_4_port_switches_need_three_tiers() -> None:
    # down 2, up 2; 5 units of 1 leaf, 5 leaves > 4: three tiers. A spine has 2 ports down: pods of 2 leaves, 3 pods
    # (2, 2, 1), each with 2 spines (the smallest divisor of 2 >= ceil(2 * 2 / 2) = 2). Spine k of every pod goes up
    # with as many cables as it has down (2, 2, 1): group k takes 5, cores per group the smallest divisor of
    # 2 * 2 / 2 = 2 that is >= ceil(5 / 4) = 2: 2, 4 cores in all.
    f = generate_fat_tree(10, gpus_per_node=0, hcas_per_node=1, leaf_ports=4)
    switches, _, cables = _wiring(f)
    assert [(name, rack) for name, rack, _, _ in switches] == [
        *[(f"leaf00{i}", f"rack0{i}") for i in range(1, 6)],
        ("spine01", "net01"), ("spine02", "net01"), ("spine03", "net02"), ("spine04", "net02"),
        ("spine05", "net03"), ("spine06", "net03"),
        ("core01", "core"), ("core02", "core"), ("core03", "core"), ("core04", "core"),
    ]  # fmt: skip
    above = [c for c in cables if c[0].startswith(("leaf", "spine"))]
    assert above == [
        ("leaf001", 3, "spine01", 1), ("leaf001", 4, "spine02", 1),
        ("leaf002", 3, "spine01", 2), ("leaf002", 4, "spine02", 2),
        ("leaf003", 3, "spine03", 1), ("leaf003", 4, "spine04", 1),
        ("leaf004", 3, "spine03", 2), ("leaf004", 4, "spine04", 2),
        ("leaf005", 3, "spine05", 1), ("leaf005", 4, "spine06", 1),
        # group 0 (spine 0 of each pod) dealt over core01, core02 in turn, across the pods
        ("spine01", 3, "core01", 1), ("spine01", 4, "core02", 1),
        ("spine03", 3, "core01", 2), ("spine03", 4, "core02", 2),
        ("spine05", 2, "core01", 3),
        # group 1 over core03, core04
        ("spine02", 3, "core03", 1), ("spine02", 4, "core04", 1),
        ("spine04", 3, "core03", 2), ("spine04", 4, "core04", 2),
        ("spine06", 2, "core03", 3),
    ]  # fmt: skip


def test_three_servers_on_a_flat_tree_of_8_port_switches() -> None:
    # A full 8-port leaf at 1:1 has 4 host ports: 2 servers of 2 HCAs each; 3 servers on 2 leaves, one rack each,
    # HCA i of the server in slot s on port 2s + i + 1; uplinks on ports 5-8, dealt over 2 spines.
    f = generate_fat_tree(3, gpus_per_node=2, leaf_ports=8, rail_optimised=False)
    switches, _, cables = _wiring(f)
    assert [(name, rack) for name, rack, _, _ in switches] == [
        ("leaf001", "rack01"), ("leaf002", "rack02"), ("spine01", "net01"), ("spine02", "net01"),
    ]  # fmt: skip
    assert cables == [
        ("gpu0001/mlx5_0", 1, "leaf001", 1), ("gpu0001/mlx5_1", 1, "leaf001", 2),
        ("gpu0002/mlx5_0", 1, "leaf001", 3), ("gpu0002/mlx5_1", 1, "leaf001", 4),
        ("gpu0003/mlx5_0", 1, "leaf002", 1), ("gpu0003/mlx5_1", 1, "leaf002", 2),
        ("leaf001", 5, "spine01", 1), ("leaf001", 6, "spine02", 1),
        ("leaf001", 7, "spine01", 2), ("leaf001", 8, "spine02", 2),
        ("leaf002", 5, "spine01", 3), ("leaf002", 6, "spine02", 3),
        ("leaf002", 7, "spine01", 4), ("leaf002", 8, "spine02", 4),
    ]  # fmt: skip
    assert [(n.hostname, n.rack) for n in f.nodes] == [
        ("gpu0001", "rack01"),
        ("gpu0002", "rack01"),
        ("gpu0003", "rack02"),
    ]


@pytest.mark.parametrize(
    ("nodes", "hcas", "ports", "message"),
    [
        (17, 1, 4, "17 nodes need 5 pods of 2 leaves, more than a 3-tier fat tree of 4-port switches can join "
                   "(at most 4 pods, about 16 nodes)"),
        (28, 5, 8, "28 nodes need 9 pods of 4 leaves, more than a 3-tier fat tree of 8-port switches can join "
                   "(at most 8 pods, about 32 nodes)"),
    ],
)  # fmt: skip
def test_more_pods_than_a_core_can_join_says_how_many_nodes_fit(nodes, hcas, ports, message) -> None:
    # At most P pods of `per_pod // hcas` units (at least 1) of `down` servers: 4 x 2 x 2 = 16; 8 x 1 x 4 = 32.
    with pytest.raises(ValueError, match=re.escape(message)):
        plan_fat_tree(nodes, hcas, leaf_ports=ports)


def test_too_few_ports_for_one_uplink_says_how_many_are_needed() -> None:
    # 2 ports at 2.5:1: floor(2 / 3.5) = 0 uplinks; one uplink needs ceil(1 + 2.5) = 4 ports.
    with pytest.raises(ValueError, match=re.escape("(needs at least 4 ports for one uplink)")):
        plan_fat_tree(4, 1, leaf_ports=2, oversubscription=2.5)


def test_storage_servers_fill_their_units_in_order() -> None:
    # 2 host ports per leaf: 3 storage servers are 2 units, stor01-02 on the first, stor03 on the second.
    f = generate_fat_tree(2, gpus_per_node=0, hcas_per_node=1, leaf_ports=4, storage_nodes=3)
    storage = [(n.hostname, n.rack) for n in f.nodes if n.role == "storage"]
    assert storage == [("stor01", "rack-s01"), ("stor02", "rack-s01"), ("stor03", "rack-s02")]
