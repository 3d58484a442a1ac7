"""The fabric page's layout, coordinate by coordinate, on small inputs worked out by hand (the arithmetic is in
the comments), with the default gaps (switch 48, node 12, tier 120, 8 columns, 4 sweeps) unless a test says."""

from __future__ import annotations

import dataclasses

import pytest

from fabric.topology.layout import LayoutLink, LayoutNode, LayoutSwitch, Placed, layout, natural_key


def _sw(a: int, b: int) -> LayoutLink:
    return LayoutLink(("switch", a), ("switch", b))


def _example_a():
    # core1 (1), core2 (2) | spine1 (3), spine2 (4), spine3 (7), spine4 (8) | leaf1 (5), leaf2 (6).
    # Cables cross: core1-spine2, core2-spine1, spine1-leaf1, spine2-leaf2; spine3 and spine4 have none.
    switches = [LayoutSwitch(1, 2, "core1"), LayoutSwitch(2, 2, "core2"), LayoutSwitch(3, 1, "spine1")]
    switches += [LayoutSwitch(4, 1, "spine2"), LayoutSwitch(7, 1, "spine3"), LayoutSwitch(8, 1, "spine4")]
    switches += [LayoutSwitch(5, 0, "leaf1"), LayoutSwitch(6, 0, "leaf2")]
    links = [_sw(1, 4), _sw(2, 3), _sw(3, 5), _sw(4, 6)]
    nodes = [LayoutNode(10 + i, 5, name=f"n{i}") for i in range(1, 10)]  # nine under leaf1
    nodes.append(LayoutNode(21, 6, name="m1"))
    nodes += [LayoutNode(30 + i, 3, "storage", f"t{i}") for i in range(1, 5)]  # four storage nodes on spine1
    nodes.append(LayoutNode(41, None, name="x1"))  # not cabled
    nodes.append(LayoutNode(42, 99, name="y1"))  # under a switch the layout does not have
    return switches, nodes, links


def test_rows_follow_the_cables_by_barycentre():
    # Initial rel (i + 0.5) / n: cores .25 .75; spines 1-4 .125 .375 .625 .875; leaves .25 .75.
    # Down: spine1 -> core2 .75, spine2 -> core1 .25, spine3 and spine4 keep .625 and .875: [spine2, spine3,
    # spine1, spine4]; leaf1 -> spine1 (now .625), leaf2 -> spine2 (.125): [leaf2, leaf1]. Up: unchanged.
    lay = layout(*_example_a())
    assert lay.order == [[1, 2], [4, 7, 3, 8], [6, 5]]


def test_every_coordinate_of_the_example():
    # Bottom blocks: leaf2 max(1 x 12, 48) = 48, leaf1 min(9, 8) x 12 = 96, the two uncabled nodes 48: width 192.
    # Rows above spread over 192: cores 96 apart (48, 144), spines 48 apart (24, 72, 120, 168).
    # Nodes: half a tier below the leaves, y = 2.5 x 120 = 300; leaf1's nine in 8 columns about x = 96:
    # 96 + (c - 3.5) x 12 = 54 ... 138, the ninth on a second line (y 312). Storage under spine1 (x 120):
    # 192 / 4 = 48 per spine, 48 // 12 - 1 = 3 columns, y = 120 + 120 / 3 = 160, the fourth at y 172.
    lay = layout(*_example_a())
    assert lay.switches == {
        1: Placed(48.0, 0.0, 0),
        2: Placed(144.0, 0.0, 0),
        4: Placed(24.0, 120.0, 1),
        7: Placed(72.0, 120.0, 1),
        3: Placed(120.0, 120.0, 1),
        8: Placed(168.0, 120.0, 1),
        6: Placed(24.0, 240.0, 2),
        5: Placed(96.0, 240.0, 2),
    }
    expected = {21: Placed(24.0, 300.0, 3)}
    for i, x in enumerate((54.0, 66.0, 78.0, 90.0, 102.0, 114.0, 126.0, 138.0), start=1):
        expected[10 + i] = Placed(x, 300.0, 3)
    expected[19] = Placed(54.0, 312.0, 3)
    expected |= {41: Placed(162.0, 300.0, 3), 42: Placed(174.0, 300.0, 3)}
    expected |= {31: Placed(108.0, 160.0, 1, 1, 1), 32: Placed(120.0, 160.0, 1, 1, 1)}
    expected |= {33: Placed(132.0, 160.0, 1, 1, 1), 34: Placed(108.0, 172.0, 1, 1, 1)}
    assert lay.nodes == expected
    assert (lay.width, lay.height, lay.aggregated, lay.group_of) == (192.0, 312.0, False, {})


def _example_r():
    # An unknown-tier switch u1 (9) on top, spines s1-s3 (1-3), leaves l1, l2 (4, 5) cabled to every spine;
    # n1 under l1, n2 under l2, storage t1, t2 on s1. Every gap is g = 10 / 3, so coordinates are not round.
    switches = [LayoutSwitch(9, -1, "u1"), *(LayoutSwitch(i, 1, f"s{i}") for i in (1, 2, 3))]
    switches += [LayoutSwitch(4, 0, "l1"), LayoutSwitch(5, 0, "l2")]
    links = [_sw(leaf, spine) for leaf in (4, 5) for spine in (1, 2, 3)]
    nodes = [LayoutNode(11, 4, name="n1"), LayoutNode(12, 5, name="n2")]
    nodes += [LayoutNode(21, 1, "storage", "t1"), LayoutNode(22, 1, "storage", "t2")]
    g = 10 / 3
    return layout(switches, nodes, links, switch_gap=g, node_gap=g, tier_gap=g)


def test_coordinates_are_rounded_to_two_decimals():
    # width = 3 spines x g = 10; spines at (i + 0.5) x g = 1.67, 5, 8.33 on y = g = 3.33 (row 1: u1 is row 0).
    # Leaves: blocks of g each, starting at (10 - 2g) / 2 = g / 2: centres g = 3.33 and 2g = 6.67, y = 2g = 6.67.
    # Nodes at y = 2.5g = 8.33 (row 3). s1's storage: 10 / 3 per spine // g - 1 = 0 -> 1 column, from
    # y = 3.33 + g / 3 = 4.44, the second g lower: 7.77.
    lay = _example_r()
    assert lay.switches == {
        9: Placed(5.0, 0.0, 0),
        1: Placed(1.67, 3.33, 1),
        2: Placed(5.0, 3.33, 1),
        3: Placed(8.33, 3.33, 1),
        4: Placed(3.33, 6.67, 2),
        5: Placed(6.67, 6.67, 2),
    }
    assert lay.nodes == {
        11: Placed(3.33, 8.33, 3),
        12: Placed(6.67, 8.33, 3),
        21: Placed(1.67, 4.44, 1, 1, 1),
        22: Placed(1.67, 7.77, 1, 1, 1),
    }
    assert (lay.width, lay.height) == (10.0, 8.33)


def test_a_single_row_of_leaves_and_a_width_that_is_not_round():
    # One leaf (the only row: leaf_row 0) with seven nodes, node gap g = 10 / 3, switch gap 1: the block is
    # 7g = 23.33 wide, the leaf at its centre 11.67, y 0; the nodes half a tier (g) below: y = 1.67.
    g = 10 / 3
    nodes = [LayoutNode(i, 1, name=f"n{i}") for i in range(1, 8)]
    lay = layout([LayoutSwitch(1, 0, "leaf1")], nodes, [], switch_gap=1.0, node_gap=g, tier_gap=g)
    assert lay.switches == {1: Placed(11.67, 0.0, 0)}
    # x = 11.67 + (c - 3) x g: 1.67, 5, 8.33, 11.67, 15, 18.33, 21.67
    assert [(p.x, p.y, p.row) for p in lay.nodes.values()] == [
        (x, 1.67, 1) for x in (1.67, 5.0, 8.33, 11.67, 15.0, 18.33, 21.67)
    ]
    assert (lay.width, lay.height) == (23.33, 1.67)


def test_spines_without_leaves_are_the_bottom_row():
    # No tier 0: the spines' row is where the nodes hang. Two spines, one node each: blocks of 48, width 96.
    switches = [LayoutSwitch(1, 1, "spine1"), LayoutSwitch(2, 1, "spine2")]
    nodes = [LayoutNode(11, 1, name="a"), LayoutNode(12, 2, name="b")]
    lay = layout(switches, nodes, [])
    assert lay.switches == {1: Placed(24.0, 0.0, 0), 2: Placed(72.0, 0.0, 0)}
    assert lay.nodes == {11: Placed(24.0, 60.0, 1), 12: Placed(72.0, 60.0, 1)}


def test_an_unknown_switch_above_spines_without_leaves():
    # Rows: [u1], [spine1]: the spines' row (the last) is the bottom one, not the unknown switch's.
    switches = [LayoutSwitch(1, -1, "u1"), LayoutSwitch(2, 1, "spine1")]
    lay = layout(switches, [LayoutNode(11, 2, name="a")], [])
    assert lay.switches == {1: Placed(24.0, 0.0, 0), 2: Placed(24.0, 120.0, 1)}
    assert lay.nodes == {11: Placed(24.0, 180.0, 2)}


def test_nodes_without_any_switch():
    # No switch at all: the nodes' block is the whole width (48), half a tier down (60).
    lay = layout([], [LayoutNode(1, None, name="a"), LayoutNode(2, None, name="b")], [])
    assert lay.nodes == {1: Placed(18.0, 60.0, 0), 2: Placed(30.0, 60.0, 0)}
    assert (lay.width, lay.height) == (48.0, 60.0)


def test_switches_without_nodes_are_as_high_as_their_rows():
    # Three rows, no node: height = (3 - 1) x 120.
    switches = [LayoutSwitch(1, 2, "c"), LayoutSwitch(2, 1, "s"), LayoutSwitch(3, 0, "l")]
    assert layout(switches, [], []).height == 240.0


def test_one_leaf_without_nodes_has_no_height():
    lay = layout([LayoutSwitch(1, 0, "leaf1")], [], [])
    assert (lay.switches, lay.width, lay.height) == ({1: Placed(24.0, 0.0, 0)}, 48.0, 0.0)


def test_nothing_at_all():
    lay = layout([], [], [])
    assert (lay.switches, lay.nodes, lay.width, lay.height, lay.order) == ({}, {}, 0.0, 0.0, [])


def test_an_empty_leaf_is_one_node_gap_wide_when_that_is_wider_than_a_switch():
    # Switch gap 10, node gap 12: the empty leaf1 still takes max(1, 0) x 12 = 12; leaf2's two nodes take 24.
    switches = [LayoutSwitch(1, 0, "leaf1"), LayoutSwitch(2, 0, "leaf2")]
    nodes = [LayoutNode(11, 2, name="a"), LayoutNode(12, 2, name="b")]
    lay = layout(switches, nodes, [], switch_gap=10.0)
    assert lay.switches == {1: Placed(6.0, 0.0, 0), 2: Placed(24.0, 0.0, 0)}
    assert lay.width == 36.0


def _singles(n: int) -> list[LayoutNode]:
    return [LayoutNode(i, 1, name=f"n{i}") for i in range(n)]


def test_256_nodes_are_drawn_one_by_one():
    assert layout([LayoutSwitch(1, 0, "leaf1")], _singles(256), []).aggregated is False


def test_257_nodes_are_drawn_as_groups():
    lay = layout([LayoutSwitch(1, 0, "leaf1")], _singles(257), [])
    assert lay.aggregated is True
    assert list(lay.nodes) == ["leaf:1"]
    assert (lay.nodes["leaf:1"].members, lay.nodes["leaf:1"].storage) == (257, 0)


def test_entries_that_already_are_groups_are_kept_as_given():
    # Three single nodes under leaf 1 (above aggregate_above = 2: grouped), a "group" entry of 5 under leaf 2,
    # and an entry of 2 members (role compute) under leaf 2: only the singles are grouped.
    switches = [LayoutSwitch(1, 0, "leaf1"), LayoutSwitch(2, 0, "leaf2")]
    nodes = [LayoutNode(i, 1, name=f"n{i}") for i in (1, 2, 3)]
    nodes += [LayoutNode("leaf:2", 2, "group", "leaf:2", 5, 1), LayoutNode("pair", 2, "compute", "pair", 2)]
    lay = layout(switches, nodes, [], aggregate_above=2)
    assert lay.group_of == {1: "leaf:1", 2: "leaf:1", 3: "leaf:1"}
    assert {k: (p.members, p.storage) for k, p in lay.nodes.items()} == {
        "leaf:1": (3, 0),
        "leaf:2": (5, 1),
        "pair": (2, 0),
    }


def test_a_node_counts_as_one_member_and_no_storage_unless_told():
    node = LayoutNode(7, leaf=3)
    assert (node.role, node.members, node.storage) == ("compute", 1, 0)


def test_the_records_cannot_be_changed_in_place():
    for record in (LayoutSwitch(1, 0), LayoutNode(1, 1), LayoutLink(("switch", 1), ("switch", 2)), Placed(0, 0, 0)):
        field = dataclasses.fields(record)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, 5)


def test_numbers_in_names_sort_before_letters_and_by_value():
    assert sorted(["sw-a", "sw-10", "sw-2"], key=natural_key) == ["sw-2", "sw-10", "sw-a"]
    # A number and a word at the same place: the number first ("2" and "10" are numbered racks, "a" and "b"
    # named ones).
    assert sorted(["b", "10", "a", "2"], key=natural_key) == ["2", "10", "a", "b"]


def test_four_sweeps_by_default_where_the_order_swings_back_and_forth():
    # Rows [1, 2] / [3, 4, 5, 6] / [7, 8]; cables 1-3, 1-6, 2-4, 2-6, 3-8, 4-8, 6-7 (5 has none).
    # Sweep 1, down: 3 -> .25, 6 -> (.25 + .75) / 2 = .5, 5 keeps .625, 4 -> .75: [3, 6, 5, 4]; 7 -> 6 (.375),
    # 8 -> (3, 4) = (.125 + .875) / 2 = .5: [7, 8]. Up: 6 -> 7 (.25), 5 keeps .625, 3 -> 8 (.75, place .125),
    # 4 -> 8 (.75, place .875): [6, 5, 3, 4]; top [1, 2] (1: .375, 2: .5).
    # Sweep 2, down: 3 .25, 5 .375, 6 .5, 4 .75: [3, 5, 6, 4]; 8 -> (.125 + .875) / 2 = .5, 7 -> 6 (.625):
    # [8, 7]. Up: 3 -> 8 (.25, place .125), 4 -> 8 (.25, place .875), 5 .375, 6 -> 7 (.75): [3, 4, 5, 6].
    # That is the state sweep 1 started from (the leaves swapped): odd sweeps end as sweep 1, even as sweep 2.
    switches = [LayoutSwitch(1, 2, "t2s1"), LayoutSwitch(2, 2, "t2s2")]
    switches += [LayoutSwitch(i, 1, f"t1s{i - 2}") for i in (3, 4, 5, 6)]
    switches += [LayoutSwitch(7, 0, "t0s1"), LayoutSwitch(8, 0, "t0s2")]
    links = [_sw(1, 3), _sw(1, 6), _sw(2, 4), _sw(2, 6), _sw(3, 8), _sw(4, 8), _sw(6, 7)]
    assert layout(switches, [], links).order == [[1, 2], [3, 4, 5, 6], [8, 7]]
    assert layout(switches, [], links, sweeps=1).order == [[1, 2], [6, 5, 3, 4], [7, 8]]


def test_the_top_row_is_ordered_by_the_row_below_it():
    # Top [1, 2, 3], then [4, 5], then [6, 7]; cables 1-5 and 3-5 only. Up: 1 and 3 -> 5 (.75), 2 keeps .5:
    # [2, 1, 3] (1 before 3 by place).
    switches = [LayoutSwitch(i, 2, f"c{i}") for i in (1, 2, 3)]
    switches += [LayoutSwitch(4, 1, "s1"), LayoutSwitch(5, 1, "s2"), LayoutSwitch(6, 0, "l1"), LayoutSwitch(7, 0, "l2")]
    assert layout(switches, [], [_sw(1, 5), _sw(3, 5)]).order == [[2, 1, 3], [4, 5], [6, 7]]


def test_the_bottom_row_is_not_reordered_after_the_last_up_sweep():
    # Rows [1, 2] / [3, 4, 5] / [6, 7, 8]; cables 1-4, 1-5, 3-7, 3-8, 4-8, 5-6, 5-7.
    # Sweep 1: down [3, 4, 5] (3 keeps 1/6, 4 and 5 -> .25), leaves 8 (1/3), 7 (.5), 6 (5/6): [8, 7, 6];
    # up [4, 3, 5] (4 -> 8 = 1/6, 3 -> 7, 8 = 1/3, 5 -> 6, 7 = 2/3).
    # Sweep 2: down 4 and 5 -> .25, 3 keeps .5: [4, 5, 3]; leaves 8 -> (3, 4) = .5 (place 1/6), 6 -> 5 = .5
    # (place 5/6), 7 -> (3, 5) = 2/3: [8, 6, 7]; up [4, 3, 5] again. Sweeps 3 and 4 repeat sweep 2.
    # (Sorting the leaves once more after an up sweep, by [4, 3, 5]'s places, would give [8, 7, 6].)
    switches = [LayoutSwitch(1, 2, "c1"), LayoutSwitch(2, 2, "c2")]
    switches += [LayoutSwitch(i, 1, f"s{i - 2}") for i in (3, 4, 5)]
    switches += [LayoutSwitch(i, 0, f"l{i - 5}") for i in (6, 7, 8)]
    links = [_sw(1, 4), _sw(1, 5), _sw(3, 7), _sw(3, 8), _sw(4, 8), _sw(5, 6), _sw(5, 7)]
    assert layout(switches, [], links).order == [[1, 2], [4, 3, 5], [8, 6, 7]]
