import json

from fabric.topology.report import analyse, render_text
from tests.fabric.topology.factories import FabricBuilder, two_tier

TOP_KEYS = ["counts", "tiers", "oversubscription", "bisection", "spof", "degraded_links"]


def test_to_dict_has_stable_top_level_keys():
    assert list(analyse(two_tier().fabric).to_dict()) == TOP_KEYS


def test_to_dict_is_strict_json_even_with_a_leaf_without_uplinks():
    b = two_tier(leaves=2, spines=1)
    lonely = b.switch("leaf9")
    b.link(b.host("h9"), lonely)
    data = analyse(b.fabric).to_dict()
    text = json.dumps(data, allow_nan=False)
    leaf9 = next(x for x in json.loads(text)["oversubscription"]["leaves"] if x["name"] == "leaf9")
    assert leaf9["ratio"] is None
    assert leaf9["no_uplinks"] is True


def test_to_dict_is_the_same_whatever_the_input_order():
    b = two_tier(leaves=3, spines=2)
    shuffled = FabricBuilder()
    shuffled.fabric.switches = list(reversed(b.fabric.switches))
    shuffled.fabric.hosts = list(reversed(b.fabric.hosts))
    shuffled.fabric.links = list(reversed(b.fabric.links))
    assert analyse(shuffled.fabric).to_dict() == analyse(b.fabric).to_dict()


def test_lists_are_in_natural_name_order():
    data = analyse(two_tier(leaves=11, spines=2).fabric).to_dict()
    names = [s["name"] for s in data["tiers"]["switches"]]
    assert names[:3] == ["leaf1", "leaf2", "leaf3"]
    assert names[10:] == ["leaf11", "spine1", "spine2"]


def test_text_has_every_section():
    lines = render_text(analyse(two_tier().fabric)).splitlines()
    for title in (
        "Fabric report",
        "Switch tiers",
        "Leaf oversubscription",
        "Bisection bandwidth",
        "Single points of failure",
        "Degraded links",
    ):
        i = next(n for n, line in enumerate(lines) if line.startswith(title))
        assert set(lines[i + 1]) == {"-"}  # underlined


def test_text_columns_are_aligned():
    text = render_text(analyse(two_tier(leaves=12).fabric))
    lines = text.splitlines()
    start = lines.index("Switch tiers") + 2
    header, rule = lines[start], lines[start + 1]
    # Each column starts where its header starts, on every row of the table.
    col = header.index("TIER")
    for row in lines[start + 2 : start + 16]:
        assert row[col - 2 : col] == "  "
        assert row[col] != " "
    assert set(rule) <= {"-", " "}


def test_text_cuts_long_tables():
    text = render_text(analyse(two_tier(leaves=30).fabric), max_rows=5)
    assert "... 27 more rows" in text  # 30 leaves + 2 spines in the tier table


def test_text_says_when_there_is_no_spof():
    b = FabricBuilder()
    leaves = [b.switch("leaf1"), b.switch("leaf2")]
    for s in (b.switch("spine1"), b.switch("spine2")):
        for lf in leaves:
            b.link(lf, s)
    h = b.host("h1")
    for lf in leaves:
        b.link(h, lf)
    assert "None: every host survives" in render_text(analyse(b.fabric))


def test_degraded_link_appears_in_text():
    b = two_tier()
    b.link("guid-leaf1", "guid-spine1", 100.0)
    text = render_text(analyse(b.fabric))
    assert "leaf-spine links usually run at 400" in text
