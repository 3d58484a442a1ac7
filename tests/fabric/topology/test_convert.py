from fabric.importers.types import (
    ParsedCA,
    ParsedFabric,
    ParsedLink,
    ParsedNode,
    ParsedPort,
    ParsedSwitch,
    PortRef,
)
from fabric.topology.convert import fabric_from_parsed

LEAF = "000000000000000a"
SPINE = "000000000000000b"


def parsed() -> ParsedFabric:
    p = ParsedFabric(source="test")
    p.switches = [
        ParsedSwitch(guid=LEAF, name="leaf1", description="leaf1", role="leaf"),
        ParsedSwitch(guid=SPINE, name="", description="spine"),
    ]
    p.cas = [
        ParsedCA(guid="0000000000000001", description="gpu1 mlx5_0", hostname="gpu1", device="mlx5_0"),
        ParsedCA(guid="0000000000000002", description="gpu1 mlx5_1", hostname="gpu1", device="mlx5_1"),
        ParsedCA(guid="0000000000000003", description="stor1 mlx5_0", hostname="stor1", device="mlx5_0"),
        ParsedCA(
            guid="00000000000000aa", description="Mellanox Aggregation Node", hostname="", device="", kind="aggregation"
        ),
        ParsedCA(guid="0000000000000004", description="", hostname="", device="HCA-1"),
    ]
    p.links = [
        ParsedLink(PortRef(LEAF, 1), PortRef("0000000000000001", 1), 4, "NDR"),
        ParsedLink(PortRef(LEAF, 2), PortRef("0000000000000002", 1), 4, "HDR"),
        ParsedLink(PortRef("0000000000000003", 1), PortRef(LEAF, 3), 4, ""),
        ParsedLink(PortRef(LEAF, 4), PortRef("00000000000000aa", 1), 4, "NDR"),
        ParsedLink(PortRef(LEAF, 5), PortRef(SPINE, 1), 2, "NDR"),
        ParsedLink(PortRef(SPINE, 1), PortRef(LEAF, 5), 2, "NDR"),  # the same cable seen from the spine
        ParsedLink(PortRef(LEAF, 6), PortRef("0000000000000004", 1), 1, "QDR"),
    ]
    p.down_ports = [ParsedPort(PortRef(LEAF, 7), 4, "NDR")]
    p.nodes = [ParsedNode(hostname="stor1", role="storage"), ParsedNode(hostname="spare9")]
    return p


def test_hcas_of_one_server_become_one_host():
    f = fabric_from_parsed(parsed())
    gpu1 = [lk for lk in f.links if "gpu1" in (lk.a, lk.b)]
    assert len(gpu1) == 2
    assert [h.key for h in f.hosts].count("gpu1") == 1


def test_aggregation_node_is_not_a_host():
    f = fabric_from_parsed(parsed())
    assert all("aa" not in h.key for h in f.hosts)
    assert all("00000000000000aa" not in lk.key for lk in f.links)


def test_capacity_is_the_data_rate():
    f = fabric_from_parsed(parsed())
    by_key = {lk.key: lk for lk in f.links}
    assert by_key[f"0000000000000001:1-{LEAF}:1"].capacity_gbps == 400.0
    assert by_key[f"0000000000000002:1-{LEAF}:2"].capacity_gbps == 200.0
    assert by_key[f"{LEAF}:5-{SPINE}:1"].capacity_gbps == 200.0  # 2x NDR
    assert by_key[f"0000000000000004:1-{LEAF}:6"].capacity_gbps == 8.0  # 1x QDR


def test_unknown_speed_has_zero_capacity():
    f = fabric_from_parsed(parsed())
    stor = next(lk for lk in f.links if "stor1" in (lk.a, lk.b))
    assert stor.capacity_gbps == 0.0


def test_cable_listed_from_both_ends_is_one_link():
    f = fabric_from_parsed(parsed())
    assert sum(1 for lk in f.links if {lk.a, lk.b} == {LEAF, SPINE}) == 1


def test_down_ports_are_not_links():
    f = fabric_from_parsed(parsed())
    assert all(lk.a_port != 7 and lk.b_port != 7 for lk in f.links)
    assert len(f.links) == 5


def test_roles_come_from_nodes_and_can_be_overridden():
    f = fabric_from_parsed(parsed(), host_roles={"gpu1": "login"})
    roles = {h.key: h.role for h in f.hosts}
    assert roles["stor1"] == "storage"
    assert roles["gpu1"] == "login"
    assert roles["spare9"] == "compute"  # a node with no HCA on the fabric is still a host


def test_switch_role_and_name_are_carried_over():
    f = fabric_from_parsed(parsed())
    assert [(s.key, s.name, s.role) for s in f.switches] == [(LEAF, "leaf1", "leaf"), (SPINE, SPINE, "")]


def test_hca_without_hostname_gets_a_key_of_its_own():
    # Unnamed: one host per system image GUID, else node GUID, named as the import's placeholder node.
    f = fabric_from_parsed(parsed())
    assert "unnamed-0000000000000004" in {h.key for h in f.hosts}
