"""The generator's identities, worked by hand: GUIDs, LIDs, the NVLink codes of `nvidia-smi topo -m`, and the
limits of its numbering."""

from __future__ import annotations

import pytest

import fabric.importers.fattree as fattree
from fabric.importers.fattree import generate_fat_tree, plan_fat_tree
from fabric.topology.catalog import GpuModel

# One server with one HCA on 4-port switches: up = floor(4 / 2) = 2, the unit shrinks to the one server (down 1,
# uplinks max(2, ceil(1 / 1)) = 2), 1 leaf, spines = the smallest divisor of 2 that is >= max(ceil(1 * 2 / 4), 2) = 2.
# Built in this order: the leaf, the server's HCA (node GUID, then port GUID), then the two spines.


def test_guids_are_oui_name_hash_kind_and_counter() -> None:
    f = generate_fat_tree(nodes=1, gpus_per_node=1, leaf_ports=4)
    # "b8cef6" + crc32("") & 0xffff = "0000" + kind (1 switch, 2 CA, 3 port) + a 5-digit counter per kind.
    assert [(s.name, s.guid) for s in f.switches] == [
        ("leaf001", "b8cef60000100001"),
        ("spine01", "b8cef60000100002"),
        ("spine02", "b8cef60000100003"),
    ]
    (ca,) = f.cas
    assert (ca.guid, ca.port_guids) == ("b8cef60000200001", {1: "b8cef60000300001"})


def test_the_name_prefix_hashes_into_the_guid() -> None:
    # CRC-32 of "a" is 0xe8b7be43: its low 16 bits, be43, follow the OUI.
    f = generate_fat_tree(nodes=1, gpus_per_node=1, leaf_ports=4, name_prefix="a")
    assert [s.guid for s in f.switches] == ["b8cef6be43100001", "b8cef6be43100002", "b8cef6be43100003"]
    assert f.cas[0].guid == "b8cef6be43200001"


def test_lids_are_handed_out_in_build_order_from_one() -> None:
    f = generate_fat_tree(nodes=1, gpus_per_node=1, leaf_ports=4)
    assert [s.lid for s in f.switches] == [1, 3, 4]
    assert f.cas[0].lids == {1: 2}


def test_past_the_last_unicast_lid_there_is_none() -> None:
    # Unicast LIDs end at 0xBFFF = 49151; what comes after gets no LID (as an SM that ran out would leave it).
    b = fattree._Builder(plan_fat_tree(1, 1, leaf_ports=4), "", "NDR", 4)
    b.next_lid = 49150
    assert [b.lid(), b.lid(), b.lid()] == [49150, 49151, None]


class _NoBuild:
    def __init__(self, *args, **kwargs) -> None:
        pass

    def build(self, *args, **kwargs) -> str:
        return "would build"


def test_the_counter_limit_is_five_hex_digits_of_hcas(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xFFFFF = 1,048,575 HCAs still number in 5 hex digits; one more would not. (The build itself is skipped.)
    monkeypatch.setattr(fattree, "_Builder", _NoBuild)
    assert generate_fat_tree(nodes=1_048_575, gpus_per_node=0, hcas_per_node=1, leaf_ports=256) == "would build"
    with pytest.raises(ValueError, match=r"1048576 HCAs is more than the generator numbers \(1048575\)"):
        generate_fat_tree(nodes=1_048_576, gpus_per_node=0, hcas_per_node=1, leaf_ports=256)


@pytest.mark.parametrize(("generation", "per_link"), [(1, 40.0), (2, 50.0), (3, 50.0), (4, 50.0), (5, 100.0)])
def test_the_nvlink_code_counts_links_of_the_generations_bandwidth(generation, per_link) -> None:
    # 51 links' worth: a 1 GB/s slip in the per-link figure would round to 50 or 52 links.
    model = GpuModel("X", 1024, generation, 51 * per_link, False)
    topo = fattree._build_topology(model, 2, ["mlx5_0"])
    assert topo.gpu_links == {(0, 1): "NV51"}


def test_a_two_port_switch_has_one_uplink_and_one_spine() -> None:
    # up = floor(2 / 2) = 1 (allowed: one uplink), down 1; no divisor of 1 is >= 2, so the one spine there is.
    plan = plan_fat_tree(1, 1, leaf_ports=2)
    assert (plan.down, plan.up, plan.leaves, plan.spines_per_pod) == (1, 1, 1, (1,))


def test_the_default_leaf_is_a_64_port_switch_and_the_ratio_is_down_over_up() -> None:
    plan = plan_fat_tree(64, 1)
    assert (plan.down, plan.up, plan.oversubscription) == (32, 32, 1.0)
    assert plan_fat_tree(64, 1, oversubscription=2.0).oversubscription == 2.0  # 42 / 21
    # 2,080 single-HCA servers are 65 leaves of 32: one more than a 64-port spine reaches, so three tiers.
    assert plan_fat_tree(2080, 1).tiers == 3
