"""parse_spec: the documented example, the schema's conveniences, and every validation error."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import pytest
import yaml

from fabric.importers.spec import derived_guid, parse_spec
from fabric.importers.types import ParsedFabric, ParseError, PortRef

EXAMPLE = (Path(__file__).resolve().parents[3] / "docs" / "examples" / "small-cluster.yaml").read_text()

BASE = textwrap.dedent(
    """\
    rate: NDR
    switches:
      - name: spine1
        role: spine
        ports: 8
      - name: leaf1
        role: leaf
        ports: 8
    nodes:
      - hostname: gpu01
        gpu_model: H100
        gpus: 8
        hcas:
          - device: mlx5_0
            to: leaf1:1
    links:
      - a: leaf1:7
        b: spine1:1
    """
)


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_spec(text, "cluster.yaml")
    return info.value


@pytest.fixture(scope="module")
def example() -> ParsedFabric:
    return parse_spec(EXAMPLE, "small-cluster.yaml")


# --- the documented example ----------------------------------------------------------------------


def test_example_counts(example: ParsedFabric) -> None:
    assert (len(example.switches), len(example.nodes), len(example.cas), len(example.links)) == (3, 6, 10, 19)


def test_example_hosts(example: ParsedFabric) -> None:
    assert example.hosts() == {"gpu01", "gpu02", "gpu03", "gpu04", "store01", "login01"}


def test_example_gpus_come_from_the_catalog(example: ParsedFabric) -> None:
    gpu01 = example.nodes[0]
    assert (gpu01.gpu_model, len(gpu01.gpus)) == ("H100", 8)
    assert [g.index for g in gpu01.gpus] == list(range(8))
    gpu = gpu01.gpus[0]
    assert (gpu.memory_mib, gpu.nvlink_generation, gpu.nvlink_gbps, gpu.mig_capable) == (80 * 1024, 4, 900.0, True)


def test_example_roles(example: ParsedFabric) -> None:
    assert [n.role for n in example.nodes] == ["compute"] * 4 + ["storage", "login"]
    assert [s.role for s in example.switches] == ["spine", "leaf", "leaf"]


def test_example_dual_port_hca_is_one_ca(example: ParsedFabric) -> None:
    (store,) = [ca for ca in example.cas if ca.hostname == "store01"]
    assert sorted(store.port_guids) == [1, 2]
    assert store.description == "store01 mlx5_0"


def test_example_rate_default_and_overrides(example: ParsedFabric) -> None:
    rates = {(link.width, link.speed) for link in example.links}
    assert rates == {(4, "NDR"), (4, "HDR")}
    login = next(ca for ca in example.cas if ca.hostname == "login01")
    (link,) = [link for link in example.links if link.a.node_guid == login.guid]
    assert link.speed == "HDR"


def test_example_explicit_guid_is_kept(example: ParsedFabric) -> None:
    assert next(s for s in example.switches if s.name == "leaf2").guid == "b83fd20300da1100"


def test_example_link_ranges_pair_up_in_order(example: ParsedFabric) -> None:
    names = {s.guid: s.name for s in example.switches}
    pairs = [
        (names[link.a.node_guid], link.a.port, names[link.b.node_guid], link.b.port)
        for link in example.links
        if link.a.node_guid in names
    ]
    assert pairs[:2] == [("leaf1", 33, "spine1", 1), ("leaf1", 34, "spine1", 2)]
    assert pairs[-1] == ("leaf2", 36, "spine1", 8)


def test_example_source_is_named(example: ParsedFabric) -> None:
    assert example.source == "spec"


# --- conveniences --------------------------------------------------------------------------------


def test_missing_guid_is_sha1_of_the_name() -> None:
    spine = parse_spec(BASE).switches[0]
    assert spine.guid == hashlib.sha1(b"switch:spine1").hexdigest()[:16]


def test_derived_guids_are_stable_across_imports() -> None:
    assert parse_spec(BASE) == parse_spec(BASE)


def test_hca_guids_are_derived_from_host_and_device() -> None:
    ca = parse_spec(BASE).cas[0]
    assert ca.guid == derived_guid("hca", "gpu01", "mlx5_0")
    assert ca.port_guids == {1: derived_guid("port", "gpu01", "mlx5_0", "1")}


def test_hca_link_goes_to_the_named_switch_port() -> None:
    fabric = parse_spec(BASE)
    leaf1 = fabric.switches[1]
    assert fabric.links[0].b == PortRef(leaf1.guid, 1)
    assert (fabric.links[0].width, fabric.links[0].speed) == (4, "NDR")


def test_json_is_accepted() -> None:
    assert parse_spec(json.dumps(yaml.safe_load(BASE))) == parse_spec(BASE)


def test_string_fields_are_read_as_written() -> None:
    text = BASE.replace("    role: spine\n", "    role: spine\n    rack: 01\n    model: no\n")
    spine = parse_spec(text).switches[0]
    assert (spine.rack, spine.model) == ("01", "no")


def test_unquoted_hex_guid() -> None:
    text = BASE.replace("    role: spine\n", "    role: spine\n    guid: 0x0002c903002db102\n")
    assert parse_spec(text).switches[0].guid == "0002c903002db102"


def test_merge_keys_are_applied() -> None:
    text = BASE.replace(
        "  - name: spine1\n    role: spine\n    ports: 8\n", "  - &sw {name: spine1, role: spine, ports: 8}\n"
    )
    text = text.replace("  - name: leaf1\n    role: leaf\n", "  - <<: *sw\n    name: leaf1\n    role: leaf\n")
    fabric = parse_spec(text)
    assert [(s.name, s.role, s.port_count) for s in fabric.switches] == [("spine1", "spine", 8), ("leaf1", "leaf", 8)]


def test_an_aliased_mapping_whose_merge_is_overridden_is_not_a_duplicate_key() -> None:
    # Merging leaves both `name`s in the node; only the key check of the first visit may see it.
    text = "switches:\n  - &sw\n    <<: {ports: 4, name: base}\n    name: s1\n  - *sw\n"
    assert parse_error(text).message == "switches[1].name: duplicate switch name 's1'"


def test_nodes_without_gpus_or_hcas() -> None:
    fabric = parse_spec("switches:\n  - {name: s, ports: 4}\nnodes:\n  - hostname: login1\n    role: login\n")
    assert (fabric.nodes[0].gpus, fabric.cas, fabric.links) == ([], [], [])


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "# nothing\n", "---\n"])
def test_empty_spec(text: str) -> None:
    err = parse_error(text)
    assert (err.line, err.message) == (0, "empty spec: expected a mapping with 'switches', 'nodes' and 'links'")


def test_no_switches_and_no_nodes() -> None:
    assert parse_error("rate: NDR\n").message == "spec defines no switches and no nodes"


def test_yaml_syntax_error_reports_yamls_line() -> None:
    err = parse_error(BASE.replace("    gpus: 8\n", "    gpus: [8\n"))
    assert err.message.startswith("YAML syntax error")
    assert err.line == 13  # where yaml noticed: the line after the unclosed "["


def test_binary_junk() -> None:
    err = parse_error(BASE.replace("gpu01", "gpu\0\x0101"))
    assert err.line == 10
    assert "binary data: NUL byte" in err.message


def test_top_level_must_be_a_mapping() -> None:
    err = parse_error("- switches\n")
    assert (err.line, err.message) == (1, "must be a mapping, got a list")


def test_unsupported_version() -> None:
    err = parse_error("version: 2\n" + BASE)
    assert (err.line, err.message) == (1, "version: unsupported spec version (this parser reads version 1)")


def test_duplicate_key() -> None:
    err = parse_error(BASE.replace("    ports: 8\n", "    ports: 8\n    ports: 16\n", 1))
    assert (err.line, err.message) == (6, "switches[0].ports: duplicate key (first at line 5)")


def test_unknown_key_is_a_typo() -> None:
    err = parse_error(BASE.replace("    hcas:\n", "    hca:\n"))
    assert err.line == 13
    assert err.message.startswith("nodes[0].hca: unknown key 'hca' (expected one of: gpu_model, gpus, hcas,")


def test_wrong_type_for_ports() -> None:
    err = parse_error(BASE.replace("ports: 8", "ports: many", 1))
    assert (err.line, err.message) == (5, "switches[0].ports: must be a whole number, got a string 'many'")


def test_boolean_is_not_a_port_count() -> None:
    err = parse_error(BASE.replace("ports: 8", "ports: yes", 1))
    assert err.message == "switches[0].ports: must be a whole number, got a boolean 'yes'"


def test_section_must_be_a_list() -> None:
    err = parse_error(BASE.replace("links:\n  - a: leaf1:7\n    b: spine1:1\n", "links: leaf1:7\n"))
    assert (err.line, err.message) == (16, "links: must be a list, got a string")


def test_name_must_be_a_string_not_a_mapping() -> None:
    err = parse_error(BASE.replace("name: spine1", "name: {x: 1}"))
    assert (err.line, err.message) == (3, "switches[0].name: must be a string, got a mapping")


def test_missing_required_key() -> None:
    err = parse_error(BASE.replace("    ports: 8\n", "", 1))
    assert (err.line, err.message) == (3, "switches[0]: missing required key 'ports'")


def test_zero_ports() -> None:
    err = parse_error(BASE.replace("ports: 8", "ports: 0", 1))
    assert (err.line, err.message) == (5, "switches[0].ports: must be at least 1, got 0")


def test_bad_switch_role() -> None:
    err = parse_error(BASE.replace("role: spine", "role: top"))
    assert (err.line, err.message) == (4, "switches[0].role: 'top' is not one of leaf, spine, core")


def test_bad_node_role() -> None:
    err = parse_error(BASE.replace("  - hostname: gpu01\n", "  - hostname: gpu01\n    role: worker\n"))
    assert (err.line, err.message) == (11, "nodes[0].role: 'worker' is not one of compute, storage, login")


def test_duplicate_switch_name() -> None:
    err = parse_error(BASE.replace("name: leaf1", "name: spine1"))
    assert (err.line, err.message) == (6, "switches[1].name: duplicate switch name 'spine1'")


def test_duplicate_hostname() -> None:
    extra = "  - hostname: gpu01\n"
    err = parse_error(BASE.replace("links:\n", extra + "links:\n"))
    assert (err.line, err.message) == (16, "nodes[1].hostname: duplicate hostname 'gpu01'")


def test_unknown_gpu_model() -> None:
    err = parse_error(BASE.replace("gpu_model: H100", "gpu_model: H900"))
    assert err.line == 11
    assert err.message.startswith("nodes[0].gpu_model: unknown GPU model 'H900'; known: V100, A100")


def test_gpus_without_a_model() -> None:
    err = parse_error(BASE.replace("    gpu_model: H100\n", ""))
    assert (err.line, err.message) == (11, "nodes[0].gpus: 8 GPUs need a gpu_model")


def test_unknown_rate() -> None:
    err = parse_error(BASE.replace("rate: NDR", "rate: 4xQXR"))
    assert err.line == 1
    assert err.message.startswith("rate: unknown rate: link speed 'QXR'")


def test_unknown_speed_is_not_a_design_rate() -> None:
    err = parse_error(BASE.replace("rate: NDR", "rate: 4x???"))
    assert (err.line, err.message) == (1, "rate: '4x???' names no speed; a design must say e.g. 4xNDR")


def test_link_rate_override_is_validated() -> None:
    err = parse_error(BASE.replace("    b: spine1:1\n", "    b: spine1:1\n    rate: 5xNDR\n"))
    assert err.line == 19
    assert err.message.startswith("links[0].rate: unknown rate: link width 5x")


def test_no_rate_anywhere() -> None:
    err = parse_error(BASE.replace("rate: NDR\n", ""))
    assert (err.line, err.message) == (13, "nodes[0].hcas[0]: no rate: set one here or a top-level 'rate'")


def test_unknown_switch_in_to() -> None:
    err = parse_error(BASE.replace("to: leaf1:1", "to: leaf9:1"))
    assert (err.line, err.message) == (15, "nodes[0].hcas[0].to: unknown switch 'leaf9'; switches: spine1, leaf1")


def test_to_naming_a_node_gets_a_hint() -> None:
    err = parse_error(
        BASE.replace("links:\n", "  - hostname: gpu02\n    hcas: [{device: mlx5_0, to: 'gpu01:1'}]\nlinks:\n")
    )
    assert "unknown switch 'gpu01' (that is a node; cables here go to switches)" in err.message


def test_malformed_endpoint() -> None:
    err = parse_error(BASE.replace("to: leaf1:1", "to: leaf1/1"))
    assert (err.line, err.message) == (15, "nodes[0].hcas[0].to: 'leaf1/1' is not <switch>:<port>")


def test_range_is_not_allowed_in_to() -> None:
    err = parse_error(BASE.replace("to: leaf1:1", "to: leaf1:1-2"))
    assert err.message == "nodes[0].hcas[0].to: 'leaf1:1-2' is not <switch>:<port>"


def test_port_beyond_switch_port_count() -> None:
    err = parse_error(BASE.replace("to: leaf1:1", "to: leaf1:9"))
    assert (err.line, err.message) == (15, "nodes[0].hcas[0].to: port 9 is beyond the 8 ports of switch leaf1")


def test_range_beyond_switch_port_count() -> None:
    err = parse_error(BASE.replace("a: leaf1:7", "a: leaf1:7-9").replace("b: spine1:1", "b: spine1:1-3"))
    assert (err.line, err.message) == (17, "links[0].a: port 9 is beyond the 8 ports of switch leaf1")


def test_port_zero_in_a_range() -> None:
    err = parse_error(BASE.replace("a: leaf1:7", "a: leaf1:0-1").replace("b: spine1:1", "b: spine1:1-2"))
    assert err.message == "links[0].a: bad port range in 'leaf1:0-1'"


def test_switch_port_used_twice() -> None:
    err = parse_error(BASE.replace("a: leaf1:7", "a: leaf1:1"))
    assert err.line == 17
    assert err.message == "links[0].a: port 1 of leaf1 is used twice (first at nodes[0].hcas[0].to, line 15)"


def test_hca_port_used_twice() -> None:
    second = "      - device: mlx5_0\n        to: leaf1:2\n"
    err = parse_error(BASE.replace("links:\n", second + "links:\n"))
    assert err.line == 16
    assert err.message.startswith("nodes[0].hcas[1].port: port 1 of gpu01 mlx5_0 is used twice (first at nodes[0]")


def test_ranges_of_different_lengths() -> None:
    err = parse_error(BASE.replace("a: leaf1:7", "a: leaf1:5-7"))
    assert (err.line, err.message) == (17, "links[0]: a names 3 ports but b names 1; ranges must pair up")


def test_duplicate_guid() -> None:
    text = BASE.replace("    role: spine\n", "    role: spine\n    guid: '0xab'\n")
    text = text.replace("    role: leaf\n", "    role: leaf\n    guid: ab\n")
    err = parse_error(text)
    assert (err.line, err.message) == (9, "switches[1].guid: GUID 00000000000000ab is already used by switches[0]")


def test_bad_guid() -> None:
    err = parse_error(BASE.replace("    role: spine\n", "    role: spine\n    guid: xyz\n"))
    assert (err.line, err.message) == (5, "switches[0].guid: bad GUID 'xyz': expected up to 16 hex digits")


def test_recursive_alias() -> None:
    err = parse_error("switches: &a [*a]\n")
    assert "recursive alias" in err.message


def test_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    err = parse_error("\n".join(lines) + "\n")
    assert "too many alias expansions" in err.message


# --- nvlink_domain (issue 17: Slurm blocks, a Kueue level) -------------------------------------------------------


def test_nvlink_domain_is_read_as_written() -> None:
    fabric = parse_spec(BASE.replace("    gpus: 8\n", "    gpus: 8\n    nvlink_domain: nvl72-01\n"))
    assert fabric.nodes[0].nvlink_domain == "nvl72-01"


def test_no_nvlink_domain_means_inside_the_node() -> None:
    assert parse_spec(BASE).nodes[0].nvlink_domain == ""


@pytest.mark.parametrize("bad", ["nvl 72", "-nvl", "rack/7", "x" * 64])
def test_an_nvlink_domain_a_scheduler_cannot_name_is_refused(bad: str) -> None:
    err = parse_error(BASE.replace("    gpus: 8\n", f"    gpus: 8\n    nvlink_domain: '{bad}'\n"))
    assert err.line == 13
    assert err.message == (
        f"nodes[0].nvlink_domain: {bad!r} is not a domain name: letters, digits, '-', '_' and '.', starting and "
        "ending with a letter or digit, at most 63"
    )


# --- edges, worked by hand ----------------------------------------------------------------------------------------


def _aliases(k: int) -> str:
    # Walked once each: the top mapping, the anchored scalar, the links list (3 nodes); then k re-reads of the
    # scalar. The limit is 100,000 + 10 per distinct node = 100,030 re-reads.
    return "version: &v 1\nlinks: [" + ", ".join(["*v"] * k) + "]\n"


def test_alias_expansions_up_to_the_limit_are_read() -> None:
    err = parse_error(_aliases(100_030))
    assert err.message == "links[0]: must be a mapping, got a number"  # read in full, judged on its content


def test_one_alias_expansion_past_the_limit_is_a_bomb() -> None:
    err = parse_error(_aliases(100_031))
    assert (err.line, err.message) == (1, "too many alias expansions (an alias bomb?)")  # the re-read anchor's line


def test_switches_without_nodes_are_a_fabric() -> None:
    fabric = parse_spec("switches:\n  - {name: s1, ports: 36}\n")
    assert ([s.name for s in fabric.switches], fabric.nodes) == (["s1"], [])


def test_nodes_without_switches_are_a_fabric() -> None:
    fabric = parse_spec("nodes:\n  - {hostname: h1}\n")
    assert ([n.hostname for n in fabric.nodes], fabric.switches) == (["h1"], [])


def test_an_empty_list_entry_is_nothing() -> None:
    err = parse_error("switches:\n  -\n")
    assert (err.line, err.message) == (2, "switches[0]: must be a mapping, got nothing")


def test_a_character_yaml_refuses_is_reported_at_its_line() -> None:
    err = parse_error("switches: []\nversion: \ufffe\n")
    assert (err.line, err.message) == (2, "character U+FFFE is not allowed in YAML (binary data?)")


def test_a_spec_with_neither_switches_nor_nodes_is_refused_as_a_whole() -> None:
    err = parse_error("links: []\n")
    assert (err.line, err.message) == (0, "spec defines no switches and no nodes")


def test_a_character_yaml_refuses_after_a_leading_newline_is_on_line_two() -> None:
    assert parse_error("\n\ufffe\n").line == 2


def test_a_yaml_syntax_error_gives_pyyamls_problem_and_line() -> None:
    err = parse_error("switches: [\n")
    assert (err.line, err.message) == (2, "YAML syntax error: expected the node content, but found '<stream end>'")


def test_a_key_that_is_not_a_name_at_the_top_level() -> None:
    err = parse_error("? [a]\n: 1\n")
    assert (err.line, err.message) == (1, "top level: keys must be plain names")


def test_a_recursive_alias_is_reported_at_its_anchor() -> None:
    err = parse_error("switches: &a [*a]\n")
    assert (err.line, err.message) == (1, "switches[0]: recursive alias")


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("rate: NDR\n", "version: 0\nrate: NDR\n", 1, "version: must be at least 1, got 0"),
        ("gpus: 8", "gpus: -1", 12, "nodes[0].gpus: must be at least 0, got -1"),
        ("to: leaf1:1", "to: leaf1:1\n        port: 0", 16, "nodes[0].hcas[0].port: must be at least 1, got 0"),
    ],
)
def test_numbers_below_their_minimum_are_refused(old, new, line, message) -> None:
    err = parse_error(BASE.replace(old, new))
    assert (err.line, err.message) == (line, message)


def test_a_node_may_name_its_gpu_model_and_have_no_gpus() -> None:
    (node,) = parse_spec(BASE.replace("gpus: 8", "gpus: 0")).nodes
    assert (node.gpu_model, node.gpus) == ("H100", [])


def test_an_nvlink_domain_of_63_characters_is_a_name_and_of_64_is_not() -> None:
    (node,) = parse_spec(BASE.replace("gpus: 8", "gpus: 8\n    nvlink_domain: " + "a" * 63)).nodes
    assert node.nvlink_domain == "a" * 63
    err = parse_error(BASE.replace("gpus: 8", "gpus: 8\n    nvlink_domain: " + "a" * 64))
    assert err.message.startswith("nodes[0].nvlink_domain: 'aaaa") and err.message.endswith("at most 63")


def _two_ports(first_guid: str, second_guid: str) -> str:
    hcas = (
        f"      - device: mlx5_0\n        to: leaf1:1\n        guid: '{first_guid}'\n"
        f"      - device: mlx5_0\n        port: 2\n        to: leaf1:2\n        guid: '{second_guid}'\n"
    )
    old = "      - device: mlx5_0\n        to: leaf1:1\n"
    assert old in BASE
    return BASE.replace(old, hcas)


def test_two_ports_of_one_hca_may_repeat_its_guid() -> None:
    (ca,) = parse_spec(_two_ports("0xaa", "0xaa")).cas
    assert (ca.guid, sorted(ca.port_guids)) == ("00000000000000aa", [1, 2])


def test_two_ports_of_one_hca_may_not_give_it_two_guids() -> None:
    err = parse_error(_two_ports("0xaa", "0xbb"))
    assert err.message == "nodes[0].hcas[1].guid: gpu01 mlx5_0 was given GUID 00000000000000aa before"


def _loader_raising(monkeypatch: pytest.MonkeyPatch, exc: Exception) -> None:
    # PyYAML's own errors that carry no place in the text (defensive paths no document here reaches).
    def get_single_node(self):
        raise exc

    monkeypatch.setattr(yaml.SafeLoader, "get_single_node", get_single_node)


def test_a_yaml_error_without_a_mark_is_about_the_whole_file(monkeypatch):
    _loader_raising(monkeypatch, yaml.YAMLError("the loader gave up"))
    err = parse_error("cluster: x\n")
    assert (err.line, err.message) == (0, "YAML error: the loader gave up")


def test_a_marked_yaml_error_that_lost_its_marks_is_about_the_whole_file(monkeypatch):
    _loader_raising(monkeypatch, yaml.MarkedYAMLError(problem="no marks"))
    err = parse_error("cluster: x\n")
    assert (err.line, err.message) == (0, "YAML syntax error: no marks")


def test_a_marked_yaml_error_with_only_its_context_mark_points_there(monkeypatch):
    mark = yaml.Mark("spec", 0, 4, 0, None, None)  # line index 4: the fifth line
    _loader_raising(monkeypatch, yaml.MarkedYAMLError(context="while reading", context_mark=mark))
    err = parse_error("cluster: x\n")
    assert (err.line, err.message) == (5, "YAML syntax error: while reading")
