"""Known answers on the real SX6036 fabric (tests/fixtures/ibnetdiscover_sx6036_8switch.topo).

Every figure was first counted on the file itself, independently of this code:
  grep -c '^Switch' -> 8;  grep -c '^Ca' -> 144 CAs, 144 distinct hostnames (one CA each).
  grep -o '4x[A-Z0-9?]*' | sort | uniq -c -> 290 4xQDR and 94 4xFDR10 mentions: every cable is
  listed from both ends, so 145 host cables (QDR, 32 Gb/s) and 47 switch cables (FDR10, 40 Gb/s),
  192 in all.
  awk over the switch blocks, counting "H-" and "S-" port lines per switch:
    ib1: 24 host ports, 7 switch ports (4 to ib7, 3 to ib8)
    ib2..ib5: 24 host ports, 8 switch ports (4 + 4);  ib6: 22 host ports, 8 switch ports
    ib7: 24 switch ports, 3 host ports (tank1 ports 1 and 2, tank2 port 2);  ib8: 23 switch ports
So every host is single-homed except tank1, whose two ports both end on spine ib7.
"""

import json

import pytest

from fabric.topology.convert import fabric_from_parsed
from fabric.topology.distance import LEVEL_LEAF, LEVEL_POD, Distance, HopIndex
from fabric.topology.report import FabricReport, analyse, render_text
from fabric.topology.types import Fabric
from tests.fabric.topology.factories import load_sx6036


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return fabric_from_parsed(load_sx6036(), host_roles={"tank1": "storage"})


@pytest.fixture(scope="module")
def report(fabric: Fabric) -> FabricReport:
    return analyse(fabric)


def test_counts(report: FabricReport):
    c = report.counts
    assert (c.switches, c.hosts, c.links, c.host_links, c.switch_links) == (8, 144, 192, 145, 47)
    assert c.switches_by_tier == {"leaf": 6, "spine": 2, "core": 0, "unknown": 0}
    assert c.hosts_by_role == {"compute": 143, "storage": 1}
    assert c.host_facing_gbps == 145 * 32.0


def test_tiers_leaves_ib1_to_ib6_spines_ib7_ib8(report: FabricReport):
    tiers = {r.name: r.tier for r in report.tiers.switches}
    assert tiers == {f"ib{i}": "leaf" for i in range(1, 7)} | {"ib7": "spine", "ib8": "spine"}
    assert report.tiers.pods == 1
    assert report.tiers.non_leaf_with_hosts == ["ib7"]


def test_hosts_per_leaf(report: FabricReport):
    assert report.tiers.hosts_per_leaf == {"ib1": 24, "ib2": 24, "ib3": 24, "ib4": 24, "ib5": 24, "ib6": 22}


def test_oversubscription_per_leaf(report: FabricReport):
    # ib1: 24 x 32 = 768 over 7 x 40 = 280; ib2-ib5: 768 / 320; ib6: 22 x 32 = 704 / 320.
    ratios = {r.name: r.ratio for r in report.oversubscription.leaves}
    assert ratios == pytest.approx({"ib1": 768 / 280, "ib2": 2.4, "ib3": 2.4, "ib4": 2.4, "ib5": 2.4, "ib6": 2.2})
    assert report.oversubscription.worst == "ib1"
    assert report.oversubscription.worst_ratio == pytest.approx(2.742857, rel=1e-6)


def test_bisection(report: FabricReport):
    # 145 host ports: half A = the first 72 = ib1, ib2, ib3 exactly; half B = ib4-ib6 (70) + ib7's 3.
    # A's only way out is its uplinks: ib1 7 x 40 + ib2 8 x 40 + ib3 8 x 40 = 920 Gb/s, and the far
    # side can take more (ib4-ib6 downlinks 960 + tank ports 96), so the min cut is 920.
    b = report.bisection
    assert (b.half_a_ports, b.half_b_ports) == (72, 73)
    assert b.half_a_switches == ["ib1", "ib2", "ib3"]
    assert b.half_b_switches == ["ib4", "ib5", "ib6", "ib7"]
    assert (b.half_a_gbps, b.half_b_gbps) == (72 * 32.0, 73 * 32.0)
    assert b.gbps == 920.0
    assert b.ratio == pytest.approx(920 / 2304)


def test_ib7_is_the_spof_of_storage_node_tank1(report: FabricReport):
    ib7 = next(x for x in report.spof.switches if x.name == "ib7")
    assert ib7.tier == "spine"
    assert ib7.scope == "leaf"  # it is tank1's (and tank2's) only access switch
    assert ib7.hosts == ["tank1", "tank2"]
    assert ib7.storage_hosts == ["tank1"]


def test_spof_scopes(report: FabricReport):
    # Every host but tank1 hangs on one cable; each leaf and ib7 is the only switch of its hosts;
    # ib8 and every inter-switch cable have a twin, so nothing inside the fabric is a SPOF.
    s = report.spof
    assert s.by_scope == {"fabric": 0, "leaf": 7, "host-link": 143}
    assert {x.name: len(x.hosts) for x in s.switches} == {
        "ib1": 24,
        "ib2": 24,
        "ib3": 24,
        "ib4": 24,
        "ib5": 24,
        "ib6": 22,
        "ib7": 2,
    }
    assert not any("tank1" in x.hosts for x in s.links)
    assert s.single_uplink_leaves == []
    assert s.unreachable_hosts == []


def test_no_degraded_links(report: FabricReport):
    # QDR host links and FDR10 inter-switch links are each the usual rate of their class.
    assert report.degraded_links == []


def test_text_report_names_ib7_and_tank1(report: FabricReport):
    text = render_text(report)
    ib7_line = next(line for line in text.splitlines() if line.startswith("ib7") and "tank1" in line)
    assert "storage: tank1" in ib7_line
    assert "143 hosts are single-homed" in text
    assert "920 Gb/s" in text
    assert "Worst leaf: ib1 at 2.74:1" in text


def test_report_dict_is_json(report: FabricReport):
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["bisection"]["gbps"] == 920.0


def test_hop_distances(fabric: Fabric):
    idx = HopIndex.build(fabric)
    assert idx.distance("stage18", "stage16") == Distance(2, LEVEL_LEAF)  # both on ib1
    assert idx.distance("stage18", "stage42") == Distance(4, LEVEL_POD)  # ib1 - spine - ib2
    assert idx.distance("stage18", "tank1") == Distance(3, LEVEL_POD)  # ib1 - ib7 - tank1
