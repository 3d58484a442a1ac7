"""Each exported format against its published schema, where no real consumer runs here.

* Kueue `Topology`: the CRD's OpenAPI schema, tests/fixtures/kueue_crd_topologies_v0.19.2.yaml (kubernetes-sigs/kueue,
  config/components/crd/bases/kueue.x-k8s.io_topologies.yaml at v0.19.2), version v1beta2.
* Volcano `HyperNode`: tests/fixtures/volcano_crd_hypernodes_v1.15.1.yaml (volcano-sh/volcano,
  config/crd/volcano/bases/topology.volcano.sh_hypernodes.yaml at v1.15.1), version v1alpha1.
  Both strictly: an object schema with `properties` takes no other field (the API server prunes unknown fields, and
  kubectl's default strict field validation refuses them), and their CEL rules (x-kubernetes-validations, which
  jsonschema does not read) are checked by hand below, each quoted.
* Slurm topology.yaml (25.05): the keys and types of Slurm's parser, src/plugins/data_parser/v0.0.43/parsers.c at
  slurm-25-05-8-1 (TOPOLOGY_CONF, TOPOLOGY_TREE_CONFIG, SWITCH_CONFIG, TOPOLOGY_BLOCK_CONFIG, BLOCK_CONFIG), written
  here as a JSON schema, with topology.yaml(5)'s rules ("topology ... must be the first attribute", "exactly one of"
  block / flat / tree) and the switch rule of src/plugins/topology/tree (a switch has nodes or child switches, not
  both, not neither; a name of at most 64 characters).
* Slurm topology/block (topology.conf): the rules of src/plugins/topology/block/block_record.c at slurm-25-05-8-1
  (_read_topo_file, block_record_validate): BlockSizes' first value is the base block size, each later one a
  power-of-two multiple of it, at most 16 levels; block names unique; every block at least the base size
  (topology.conf(5): "Each block must have at least the planning base block size count of nodes").
  topology/tree's topology.conf is read by a real slurmctld in test_export_slurmctld.py.
"""

from __future__ import annotations

import copy
import re

import jsonschema
import pytest
import yaml

from fabric.importers.fattree import generate_fat_tree
from fabric.topology.convert import fabric_from_parsed
from fabric.topology.export import ExportInput, render
from fabric.topology.hostlist import expand
from tests.fabric.topology.factories import FIXTURES, SX6036
from tests.fabric.topology.test_export import NDR_DGX, _capture, gb200

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def _strict(schema: dict) -> dict:
    """The structural schema as the API server applies it: no field the schema does not name."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def _crd_schema(filename: str, version: str) -> dict:
    crd = yaml.safe_load((FIXTURES / filename).read_text())
    (found,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert found["served"]
    return _strict(found["schema"]["openAPIV3Schema"])


KUEUE = _crd_schema("kueue_crd_topologies_v0.19.2.yaml", "v1beta2")
VOLCANO = _crd_schema("volcano_crd_hypernodes_v1.15.1.yaml", "v1alpha1")


def _check_metadata(obj: dict) -> None:
    meta = obj["metadata"]
    assert set(meta) <= {"name", "labels"}
    assert len(meta["name"]) <= 253 and DNS1123_SUBDOMAIN.match(meta["name"]), meta["name"]
    for key, value in meta.get("labels", {}).items():
        assert LABEL_KEY.match(key) and LABEL_VALUE.match(value) and len(value) <= 63


def _fabrics():
    fat = fabric_from_parsed(generate_fat_tree(16, leaf_ports=8, hcas_per_node=2, storage_nodes=2))
    fabric, facts = gb200()
    return {
        "sx6036": _capture(SX6036),
        "ndr_dgx": _capture(NDR_DGX),
        "three_tier": ExportInput("gen", fat),
        "gb200": ExportInput("gb", fabric, facts),
    }


FABRICS = _fabrics()


@pytest.mark.parametrize("name", FABRICS)
def test_kueue_topology_matches_the_crd(name):
    obj = yaml.safe_load(render(FABRICS[name], "kueue").text)
    jsonschema.validate(obj, KUEUE)
    _check_metadata(obj)
    assert (obj["apiVersion"], obj["kind"]) == ("kueue.x-k8s.io/v1beta2", "Topology")
    labels = [lv["nodeLabel"] for lv in obj["spec"]["levels"]]
    # CEL "must be unique": size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0
    assert len(labels) == len(set(labels))
    # CEL "the kubernetes.io/hostname label can only be used at the lowest level of topology"
    assert "kubernetes.io/hostname" not in labels[:-1]


@pytest.mark.parametrize("name", FABRICS)
def test_kueue_labels_give_every_node_each_level(name):
    inp = FABRICS[name]
    levels = [lv["nodeLabel"] for lv in yaml.safe_load(render(inp, "kueue").text)["spec"]["levels"]][:-1]
    lines = [ln for ln in render(inp, "kueue-labels").text.splitlines() if ln.startswith("kubectl label node ")]
    parent: dict[tuple[int, str], str] = {}
    for line in lines:
        words = line.split()
        assert DNS1123_SUBDOMAIN.match(words[3]) and words[4] == "--overwrite"
        pairs = [w.split("=", 1) for w in words[5:]]
        assert [k for k, _ in pairs] == levels
        for k, v in pairs:
            assert LABEL_KEY.match(k) and len(v) <= 63 and LABEL_VALUE.match(v)
        # The levels nest: a value at one level always sits under the same value at the level above.
        for i in range(1, len(pairs)):
            assert parent.setdefault((i, pairs[i][1]), pairs[i - 1][1]) == pairs[i - 1][1]
    assert len(lines) == len({ln.split()[3] for ln in lines})


@pytest.mark.parametrize("name", FABRICS)
def test_volcano_hypernodes_match_the_crd(name):
    objs = list(yaml.safe_load_all(render(FABRICS[name], "volcano").text))
    names = {o["metadata"]["name"] for o in objs}
    assert len(names) == len(objs)
    for obj in objs:
        jsonschema.validate(obj, VOLCANO)
        _check_metadata(obj)
        assert (obj["apiVersion"], obj["kind"]) == ("topology.volcano.sh/v1alpha1", "HyperNode")
        for member in obj["spec"]["members"]:
            chosen = [k for k in ("exactMatch", "regexMatch", "labelMatch") if k in member["selector"]]
            # CEL: has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch), and at most one of them
            assert len(chosen) == 1
            if member["type"] == "HyperNode":  # a child HyperNode exists, one tier below
                child = next(o for o in objs if o["metadata"]["name"] == member["selector"]["exactMatch"]["name"])
                assert child["spec"]["tier"] == obj["spec"]["tier"] - 1


#
# Slurm
#

_NAME = {"type": "string", "minLength": 1}
SLURM_TOPOLOGY_YAML = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "topology": _NAME,
            "cluster_default": {"type": "boolean"},
            "tree": {
                "type": "object",
                "properties": {
                    "switches": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "switch": {"type": "string", "minLength": 1, "maxLength": 64},
                                "children": _NAME,
                                "nodes": _NAME,
                            },
                            "required": ["switch"],
                            "oneOf": [{"required": ["children"]}, {"required": ["nodes"]}],
                            "additionalProperties": False,
                        },
                    }
                },
                "required": ["switches"],
                "additionalProperties": False,
            },
            "block": {
                "type": "object",
                "properties": {
                    "block_sizes": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                    "blocks": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"block": _NAME, "nodes": _NAME},
                            "required": ["block"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["blocks"],
                "additionalProperties": False,
            },
            "flat": {"type": "boolean"},
        },
        "required": ["topology"],
        "oneOf": [{"required": ["tree"]}, {"required": ["block"]}, {"required": ["flat"]}],
        "additionalProperties": False,
    },
}


def _check_block_rules(sizes: list[int], blocks: list[tuple[str, list[str]]]) -> None:
    base = sizes[0]
    assert 1 <= len(sizes) <= 16
    for size in sizes:
        assert size % base == 0
        ratio = size // base
        assert ratio & (ratio - 1) == 0  # log2(size / base) is whole
    assert sizes == sorted(set(sizes))
    assert len({name for name, _ in blocks}) == len(blocks)
    assert all(len(nodes) >= base for _, nodes in blocks)
    every = [n for _, nodes in blocks for n in nodes]
    assert len(every) == len(set(every))


@pytest.mark.parametrize("name", FABRICS)
def test_slurm_yaml_matches_slurms_parser(name):
    inp = FABRICS[name]
    doc = yaml.safe_load(render(inp, "slurm-yaml").text)
    jsonschema.validate(doc, SLURM_TOPOLOGY_YAML)
    assert all(next(iter(topology)) == "topology" for topology in doc)  # topology.yaml(5): the first attribute
    assert [t["cluster_default"] for t in doc][:1] == [True]
    tree = render(inp, "slurm-tree").text
    switches = doc[0]["tree"]["switches"]
    assert [f"SwitchName={s['switch']} " + (f"Nodes={s['nodes']}" if "nodes" in s else f"Switches={s['children']}")
            for s in switches] == [ln for ln in tree.splitlines() if not ln.startswith("#")]  # fmt: skip
    if len(doc) > 1:
        block = doc[1]["block"]
        _check_block_rules(block["block_sizes"], [(b["block"], expand(b["nodes"])) for b in block["blocks"]])


def test_slurm_block_conf_follows_block_record_rules():
    fabric, facts = gb200(domains_per_leaf=3, trays=18)  # six NVL72 racks of 18 compute trays
    text = render(ExportInput("gb", fabric, facts), "slurm-block").text
    blocks, sizes = [], None
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        words = dict(w.split("=", 1) for w in line.split())
        if "BlockSizes" in words:
            assert set(words) == {"BlockSizes"}
            sizes = [int(s) for s in words["BlockSizes"].split(",")]
        else:
            assert set(words) == {"BlockName", "Nodes"}
            blocks.append((words["BlockName"], expand(words["Nodes"])))
    assert sizes == [18, 36, 72]  # base 18; floor(log2 6) = 2 levels above it
    assert len(blocks) == 6
    _check_block_rules(sizes, blocks)


def test_the_schemas_refuse_what_the_api_server_would():
    # Controls: the checks above would catch a misspelt field, a bad label key, a wrong type.
    hypernode = yaml.safe_load(render(FABRICS["sx6036"], "volcano").text.split("---\n")[1])
    hypernode["spec"]["tiername"] = hypernode["spec"].pop("tierName")
    with pytest.raises(jsonschema.ValidationError, match="'tiername' was unexpected"):
        jsonschema.validate(hypernode, VOLCANO)
    topology = yaml.safe_load(render(FABRICS["sx6036"], "kueue").text)
    topology["spec"]["levels"][0]["nodeLabel"] = "fabric.clusterctl.io/spine group"
    with pytest.raises(jsonschema.ValidationError, match="does not match"):
        jsonschema.validate(topology, KUEUE)
    doc = yaml.safe_load(render(FABRICS["gb200"], "slurm-yaml").text)
    doc[1]["block"]["block_sizes"] = "4,8"
    with pytest.raises(jsonschema.ValidationError, match="is not of type 'array'"):
        jsonschema.validate(doc, SLURM_TOPOLOGY_YAML)
