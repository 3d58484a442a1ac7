"""Kueue and Volcano exports: the exact documents, and the limits Kubernetes puts on names (apimachinery's
validation: a DNS-1123 subdomain of at most 253 characters, a label value of at most 63)."""

import pytest

from fabric.topology.export import ExportInput, ExportRefused, HostFacts, render
from fabric.topology.types import Fabric
from tests.fabric.topology.factories import FabricBuilder, two_tier
from tests.fabric.topology.test_export import _text, gb200


def _one_switch(host: str = "n1", switch: str = "sw1") -> Fabric:
    b = FabricBuilder()
    b.link(b.host(host), b.switch(switch))
    return b.fabric


def test_the_kueue_topology_document_exactly():
    assert _text(_one_switch(), "kueue").split("---\n")[1] == (
        "apiVersion: kueue.x-k8s.io/v1beta2\n"
        "kind: Topology\n"
        "metadata:\n"
        "  name: lab\n"
        "  labels:\n"
        "    app.kubernetes.io/managed-by: clusterctl\n"
        "spec:\n"
        "  levels:\n"
        "  - nodeLabel: fabric.clusterctl.io/leaf\n"
        "  - nodeLabel: kubernetes.io/hostname\n"
    )


def test_the_volcano_hypernode_document_exactly():
    assert _text(_one_switch(), "volcano").split("---\n")[1] == (
        "apiVersion: topology.volcano.sh/v1alpha1\n"
        "kind: HyperNode\n"
        "metadata:\n"
        "  name: sw1\n"
        "  labels:\n"
        "    app.kubernetes.io/managed-by: clusterctl\n"
        "spec:\n"
        "  tier: 1\n"
        "  tierName: leaf\n"
        "  members:\n"
        "  - type: Node\n"
        "    selector:\n"
        "      exactMatch:\n"
        "        name: n1\n"
    )


def test_volcano_says_it_leaves_the_nvlink_domains_out():
    fabric, facts = gb200()  # nvl-1 .. nvl-4
    assert "#   the 4 multi-node NVLink domains (tier 1 is the leaf here; see kueue)\n" in _text(
        fabric, "volcano", facts
    )


def test_volcano_without_nvlink_domains_leaves_nothing_out():
    assert "Left out" not in _text(two_tier(leaves=2, spines=1, hosts_per_leaf=1).fabric, "volcano")


def test_split_nvlink_domains_are_named_three_at_most():
    # Four domains, each with one server under leaf1 and one under leaf2.
    fabric, _ = gb200(domains_per_leaf=1, trays=4)
    pairs = {"nvl-a": ("gb001", "gb005"), "nvl-b": ("gb002", "gb006"), "nvl-c": ("gb003", "gb007")}
    pairs["nvl-d"] = ("gb004", "gb008")
    facts = {h: HostFacts(nvlink_domain=d) for d, hosts in pairs.items() for h in hosts}
    assert (
        "#   the NVLink domains as a level: 4 of them span more than one leaf group (nvl-a, nvl-b, nvl-c), and "
        "Kueue's levels must nest\n"
    ) in _text(fabric, "kueue", facts)


def test_a_host_name_of_253_characters_is_a_node_name():
    host = "n" * 253
    assert f"        name: {host}\n" in _text(_one_switch(host), "volcano")


def test_a_host_name_of_254_characters_is_refused():
    with pytest.raises(ExportRefused, match="cannot be a Kubernetes node name"):
        _text(_one_switch("n" * 254), "volcano")


def test_a_leaf_name_of_63_characters_is_a_label_value():
    leaf = "l" * 63
    assert f"fabric.clusterctl.io/leaf={leaf}\n" in _text(_one_switch(switch=leaf), "kueue-labels")


def test_a_leaf_name_of_64_characters_is_refused_as_a_label_value():
    leaf = "l" * 64
    with pytest.raises(ExportRefused) as err:
        _text(_one_switch(switch=leaf), "kueue-labels")
    assert str(err.value) == (
        f"cluster lab: leaf group {leaf!r} cannot be a Kubernetes label value (at most 63 characters of letters, "
        "digits, '-', '_' and '.', starting and ending with a letter or digit): give it a shorter name"
    )


def test_a_short_leaf_name_with_a_colon_is_refused_as_a_label_value():
    with pytest.raises(ExportRefused, match="leaf group 'leaf:1' cannot be a Kubernetes label value"):
        _text(_one_switch(switch="leaf:1"), "kueue-labels")


def test_a_spine_domain_that_cannot_be_a_label_is_named_as_a_spine_domain():
    b = FabricBuilder()
    spine = b.switch("sp:1")
    for n in (1, 2):
        leaf = b.switch(f"leaf{n}")
        b.link(b.host(f"h{n}"), leaf)
        b.link(leaf, spine)
    with pytest.raises(ExportRefused, match="cluster lab: spine domain 'sp:1' cannot be a Kubernetes label value"):
        _text(b.fabric, "kueue-labels")


def _kueue_of_cluster(cluster: str) -> str:
    return render(ExportInput(cluster, _one_switch(), {}), "kueue").text


def test_a_cluster_name_of_253_characters_names_the_topology():
    cluster = "c" * 253
    assert f"  name: {cluster}\n" in _kueue_of_cluster(cluster)


def test_a_cluster_name_of_254_characters_cannot_name_the_topology():
    with pytest.raises(ExportRefused, match="cannot name a Kubernetes object"):
        _kueue_of_cluster("c" * 254)


def test_a_short_cluster_name_with_a_bang_cannot_name_the_topology():
    with pytest.raises(ExportRefused) as err:
        _kueue_of_cluster("lab!")
    assert str(err.value) == (
        "cluster lab!: cluster name 'lab!' cannot name a Kubernetes object ('lab!' is not a DNS-1123 subdomain: "
        "lower-case letters, digits, '-' and '.')"
    )
