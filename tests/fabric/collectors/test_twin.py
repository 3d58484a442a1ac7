"""The twin model: pure, no database."""

from __future__ import annotations

import itertools

import pytest

from fabric.collectors.twin import TwinCollector
from fabric.collectors.twin_model import (
    FLAP,
    STORAGE_READ_GBPS,
    SYMBOL_ERRORS,
    WAIT_TICKS_PER_S,
    XID,
    TwinGpu,
    TwinJob,
    TwinModel,
)
from fabric.importers.fattree import generate_fat_tree
from fabric.telemetry.rates import port_rates
from fabric.topology.convert import fabric_from_parsed
from fabric.topology.types import Fabric, THost, TLink, TSwitch

NODES = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]


def fat_tree(storage_nodes: int = 0) -> Fabric:
    return fabric_from_parsed(generate_fat_tree(nodes=4, gpus_per_node=8, leaf_ports=8, storage_nodes=storage_nodes))


def gpus_of(nodes: list[str], n: int = 8) -> list[TwinGpu]:
    return [TwinGpu(node, i, f"GPU-{node}-{i}", "H100", 81559.0, 700.0) for node in nodes for i in range(n)]


def model(fabric: Fabric | None = None, **kw) -> TwinModel:
    return TwinModel(fabric or fat_tree(), gpus_of(NODES), **{"fault_rate": 0.0, **kw})


def job(job_id: str, nodes: list[str], gbps: float = 800.0, **kw) -> TwinJob:
    return TwinJob(job_id, [(n, i) for n in nodes for i in range(8)], allreduce_gbps_per_node=gbps, **kw)


def tx(sample, device: str = "mlx5_0") -> int:
    return next(p for p in sample.ports if p.device == device).counters["port_xmit_data"]


def host_links(fabric: Fabric, node: str) -> list[TLink]:
    return [link for link in fabric.links if node in (link.a, link.b)]


def test_idle_cluster_has_no_traffic_and_low_util():
    m = model()
    m.advance(0.0, [])
    m.advance(10.0, [])
    s = m.sample("gpu0001", 10.0)
    assert s.collector == "twin" and s.errors == []
    assert len(s.gpus) == 8
    for g in s.gpus:
        assert g.utilisation_gpu_pct <= 2
        assert 50 <= g.power_w <= 70
        assert g.memory_used_mib < 100 and g.memory_total_mib == 81559.0
        assert g.xid_events == []
    assert [p.device for p in s.ports] == [f"mlx5_{i}" for i in range(8)]
    for p in s.ports:
        assert p.port == 1 and p.state == "ACTIVE" and p.rate_gbps == 400.0 and p.counter_bits == {}
        assert p.counters["port_xmit_data"] == p.counters["port_rcv_data"] == 0
        assert p.counters["port_xmit_wait"] == 0
    assert all(v == 0 for v in m.link_loads().values())


def test_two_node_job_loads_both_nodes_links_cumulatively_in_4_octet_units():
    m = model()
    jobs = [job("j1", ["gpu0001", "gpu0002"], gbps=800.0)]
    m.advance(0.0, jobs)
    first = {n: m.sample(n, 0.0) for n in NODES}
    m.advance(10.0, jobs)
    second = {n: m.sample(n, 10.0) for n in NODES}
    m.advance(20.0, jobs)
    third = {n: m.sample(n, 20.0) for n in NODES}

    per_rail_bytes = 800e9 / 8 / 8 * 10  # 800 Gb/s over 8 rails, 10 s
    for n in ("gpu0001", "gpu0002"):
        for p0, p1, p2 in zip(first[n].ports, second[n].ports, third[n].ports, strict=True):
            assert p0.counters["port_xmit_data"] == 0
            assert p1.counters["port_xmit_data"] == pytest.approx(per_rail_bytes / 4, rel=1e-6)
            assert p1.counters["port_rcv_data"] == pytest.approx(per_rail_bytes / 4, rel=1e-6)
            assert p2.counters["port_xmit_data"] > p1.counters["port_xmit_data"] > p0.counters["port_xmit_data"]
            assert p2.counters["port_rcv_data"] > p1.counters["port_rcv_data"]
            assert p1.xmit_bytes == p1.counters["port_xmit_data"] * 4
            assert p1.counters["port_xmit_wait"] == 0
        assert all(g.utilisation_gpu_pct > 80 for g in second[n].gpus)
        assert all(g.memory_used_mib > 0.5 * g.memory_total_mib for g in second[n].gpus)
        assert all(g.power_w > 400 for g in second[n].gpus)
    for n in ("gpu0003", "gpu0004"):
        assert all(p.counters["port_xmit_data"] == 0 for p in third[n].ports)
        assert all(g.utilisation_gpu_pct <= 2 for g in third[n].gpus)
    fabric = m.fabric
    loads = m.link_loads()
    for link in host_links(fabric, "gpu0001") + host_links(fabric, "gpu0002"):
        assert loads[link.key] == pytest.approx(100.0 / 400.0)
    # rail-aligned fat tree: both nodes sit on the same leaves, nothing crosses a spine
    spines = {s.key for s in fabric.switches if s.role == "spine"}
    assert all(loads[link.key] == 0 for link in fabric.links if link.b in spines)


def test_sample_between_advances_extrapolates_and_stays_monotonic():
    m = model()
    m.advance(0.0, [job("j1", ["gpu0001", "gpu0002"], gbps=800.0)])
    mid = tx(m.sample("gpu0001", 5.0))
    assert mid == pytest.approx(800e9 / 8 / 8 * 5 / 4, rel=1e-6)
    m.advance(10.0, [])  # job ends: traffic so far stays, no more grows
    end = tx(m.sample("gpu0001", 10.0))
    later = tx(m.sample("gpu0001", 60.0))
    assert mid < end == later


def test_job_inside_one_node_has_no_ib_traffic():
    m = model()
    jobs = [job("j1", ["gpu0001"], gbps=800.0)]
    m.advance(0.0, jobs)
    m.advance(10.0, jobs)
    s = m.sample("gpu0001", 10.0)
    assert all(p.counters["port_xmit_data"] == 0 and p.counters["port_rcv_data"] == 0 for p in s.ports)
    assert all(g.utilisation_gpu_pct > 80 for g in s.gpus)
    assert all(v == 0 for v in m.link_loads().values())


def test_congestion_caps_traffic_and_grows_xmit_wait():
    m = model()
    jobs = [job("j1", ["gpu0001", "gpu0002"], gbps=4800.0)]  # 600 Gb/s per 400 Gb/s rail
    m.advance(0.0, jobs)
    a = m.sample("gpu0001", 0.0)
    m.advance(10.0, jobs)
    b = m.sample("gpu0001", 10.0)
    for p0, p1 in zip(a.ports, b.ports, strict=True):
        r = port_rates(p0, a.collected_at, p1, b.collected_at)
        assert r.tx_bytes_per_s == pytest.approx(400e9 / 8, rel=1e-6)  # capped at capacity
        assert r.xmit_wait_per_s == pytest.approx(WAIT_TICKS_PER_S * 0.5, rel=1e-6)
        assert p1.counters["port_xmit_wait"] > p0.counters["port_xmit_wait"]
    loads = m.link_loads()
    assert all(loads[link.key] == 1.0 for link in host_links(m.fabric, "gpu0001"))
    assert max(m.link_offered_gbps().values()) == pytest.approx(600.0)


def test_ring_over_many_nodes_and_spine_routing_on_a_hand_built_fabric():
    # two leaves, two spines; h1,h2 on leaf1, h3 on leaf2, one 100 Gb/s link each
    fabric = Fabric(
        switches=[TSwitch("L1", "leaf1"), TSwitch("L2", "leaf2"), TSwitch("S1", "spine1"), TSwitch("S2", "spine2")],
        hosts=[THost("h1"), THost("h2"), THost("h3")],
        links=[
            TLink("h1", "L1", "h1", 100.0),
            TLink("h2", "L1", "h2", 100.0),
            TLink("h3", "L2", "h3", 100.0),
            TLink("L1-S1", "L1", "S1", 100.0),
            TLink("L1-S2", "L1", "S2", 100.0),
            TLink("L2-S1", "L2", "S1", 100.0),
            TLink("L2-S2", "L2", "S2", 100.0),
        ],
    )
    m = TwinModel(fabric, gpus_of(["h1", "h2", "h3"], 1), fault_rate=0.0)
    jobs = [TwinJob("j", [("h1", 0), ("h2", 0), ("h3", 0)], allreduce_gbps_per_node=40.0)]
    m.advance(0.0, jobs)
    loads = m.link_loads()
    assert loads["h1"] == loads["h2"] == loads["h3"] == pytest.approx(0.4)
    # h2 -> h3 goes up leaf1 and down leaf2 through one spine; h3 -> h1 comes back the same way or the other
    up = [k for k in ("L1-S1", "L1-S2") if loads[k] > 0]
    down = [k for k in ("L2-S1", "L2-S2") if loads[k] > 0]
    assert up and down
    assert all(loads[k] == pytest.approx(0.4) for k in up + down)
    # one 100 Gb/s host link each: h1 sends to h2 and receives from h3
    m.advance(10.0, jobs)
    p = m.sample("h1", 10.0).ports[0]
    assert p.xmit_bytes == pytest.approx(40e9 / 8 * 10, rel=1e-6)
    assert p.rcv_bytes == pytest.approx(40e9 / 8 * 10, rel=1e-6)
    # the model is deterministic: a second one routes identically
    m2 = TwinModel(fabric, gpus_of(["h1", "h2", "h3"], 1), fault_rate=0.0)
    m2.advance(0.0, jobs)
    assert m2.link_loads() == loads


def test_data_intensive_job_reads_from_its_storage_node():
    fabric = fat_tree(storage_nodes=1)
    storage = next(h.key for h in fabric.hosts if h.role == "storage")
    m = TwinModel(fabric, gpus_of(NODES), fault_rate=0.0)
    jobs = [job("j1", ["gpu0001"], gbps=0.0, workload="data-intensive", dataset_node=storage)]
    m.advance(0.0, jobs)
    s0, n0 = m.sample(storage, 0.0), m.sample("gpu0001", 0.0)
    m.advance(10.0, jobs)
    s1, n1 = m.sample(storage, 10.0), m.sample("gpu0001", 10.0)
    expected = STORAGE_READ_GBPS * 1e9 / 8
    sent = sum(port_rates(a, 0.0, b, 10.0).tx_bytes_per_s for a, b in zip(s0.ports, s1.ports, strict=True))
    got = sum(port_rates(a, 0.0, b, 10.0).rx_bytes_per_s for a, b in zip(n0.ports, n1.ports, strict=True))
    assert sent == pytest.approx(expected, rel=0.01)
    assert got == pytest.approx(expected, rel=0.01)
    assert s1.gpus == []
    # a training job with the same dataset reads nothing
    m2 = TwinModel(fabric, gpus_of(NODES), fault_rate=0.0)
    m2.advance(0.0, [job("j1", ["gpu0001"], gbps=0.0, workload="training", dataset_node=storage)])
    assert all(v == 0 for v in m2.link_loads().values())


def test_port_rates_on_twin_samples_match_the_offered_rate():
    m = model()
    jobs = [job("j1", ["gpu0001", "gpu0003"], gbps=1000.0)]
    m.advance(100.0, jobs)
    a = m.sample("gpu0003", 100.0)
    m.advance(115.0, jobs)
    b = m.sample("gpu0003", 115.0)
    total_tx = total_rx = 0.0
    for p0, p1 in zip(a.ports, b.ports, strict=True):
        r = port_rates(p0, a.collected_at, p1, b.collected_at)
        assert r.reason == "" and r.resets == [] and r.saturated == []
        assert r.tx_bytes_per_s == pytest.approx(1000e9 / 8 / 8, rel=0.01)
        total_tx += r.tx_bytes_per_s
        total_rx += r.rx_bytes_per_s
    assert total_tx == pytest.approx(1000e9 / 8, rel=0.01)
    assert total_rx == pytest.approx(1000e9 / 8, rel=0.01)


def _run(seed: int, hours: float = 4.0, fault_rate: float = 30.0) -> TwinModel:
    m = model(seed=seed, fault_rate=fault_rate)
    t = 0.0
    while t <= hours * 3600:
        m.advance(t, [])
        t += 60.0
    return m


def test_fault_schedule_is_deterministic_per_seed_and_independent_of_step():
    a, b, c = _run(7), _run(7), _run(8)
    key = [(f.kind, f.start, f.end, f.target, f.xid) for f in a.faults]
    assert key == [(f.kind, f.start, f.end, f.target, f.xid) for f in b.faults]
    assert key != [(f.kind, f.start, f.end, f.target, f.xid) for f in c.faults]
    assert {f.kind for f in a.faults} == {FLAP, XID, SYMBOL_ERRORS}
    # a finer advance step draws the same faults
    m = model(seed=7, fault_rate=30.0)
    for t in range(0, 4 * 3600 + 1, 10):
        m.advance(float(t), [])
    assert [(f.kind, f.start, f.target) for f in m.faults] == [(f.kind, f.start, f.target) for f in a.faults]
    for f in a.faults:
        if f.kind == XID:
            assert f.xid in (79, 48)


def test_fault_rate_zero_disables_faults():
    assert _run(7, fault_rate=0.0).faults == []


def test_flapping_link_goes_down_then_counts_link_downed():
    m = model()
    link = host_links(m.fabric, "gpu0002")[3]
    fault = m.schedule_fault(FLAP, start=30.0, duration=25.0, link_key=link.key)
    assert fault.node == "gpu0002" and fault.end == 55.0
    jobs = [job("j1", ["gpu0001", "gpu0002"], gbps=800.0)]
    states, downed, samples = [], [], {}
    for t in range(0, 100, 10):
        m.advance(float(t), jobs)
        if t == 40:
            assert m.link_loads()[link.key] == 0
        samples[t] = s = m.sample("gpu0002", float(t))
        states.append(s.ports[3].state)
        downed.append(s.ports[3].counters["link_downed"])
    assert states == ["ACTIVE"] * 3 + ["DOWN"] * 3 + ["ACTIVE"] * 4
    assert downed == [0] * 6 + [1] * 4
    # while it is down the other seven rails carry the node's traffic
    rates = [port_rates(a, 40.0, b, 50.0) for a, b in zip(samples[40].ports, samples[50].ports, strict=True)]
    assert rates[3].tx_bytes_per_s == 0 and rates[3].rx_bytes_per_s == 0
    for i, r in enumerate(rates):
        if i != 3:
            assert r.tx_bytes_per_s == pytest.approx(800e9 / 8 / 7, rel=0.01)
    assert sum(r.rx_bytes_per_s for r in rates) == pytest.approx(800e9 / 8, rel=0.01)


def test_xid_appears_exactly_once():
    m = model()
    m.schedule_fault(XID, start=25.0, node="gpu0003", gpu_index=5, xid=48)
    seen = []
    for t in range(0, 100, 10):
        m.advance(float(t), [])
        s = m.sample("gpu0003", float(t))
        seen.extend((t, g.index, x) for g in s.gpus for x in g.xid_events)
    assert seen == [(30, 5, 48)]
    assert m.sample("gpu0003", 200.0).gpus[5].ecc_uncorrected == 1


def test_random_xid_is_reported_once_by_its_node():
    m = _run(3)
    xids = [f for f in m.faults if f.kind == XID]
    assert xids
    f = xids[0]
    first = m.sample(f.node, f.start + 1).gpus
    again = m.sample(f.node, f.start + 2).gpus
    assert next(g for g in first if g.index == f.gpu_index).xid_events == [f.xid]
    assert all(g.xid_events == [] for g in again)


def test_symbol_errors_climb_steadily_then_stop():
    m = model()
    link = host_links(m.fabric, "gpu0004")[0]
    m.schedule_fault(SYMBOL_ERRORS, start=10.0, duration=100.0, link_key=link.key, errors_per_s=2.0)
    m.advance(0.0, [])
    counts = [m.sample("gpu0004", float(t)).ports[0].counters["symbol_error"] for t in (0, 10, 20, 60, 110, 500)]
    assert counts == [0, 0, 20, 100, 200, 200]
    assert m.sample("gpu0004", 60.0).ports[0].state == "ACTIVE"
    assert m.sample("gpu0004", 60.0).ports[1].counters["symbol_error"] == 0


def test_schedule_fault_rejects_bad_input():
    m = model()
    with pytest.raises(ValueError):
        m.schedule_fault("meteor", 0.0)
    with pytest.raises(ValueError):
        m.schedule_fault(FLAP, 0.0, link_key="no-such-link")


def test_unknown_node_sample_has_an_error():
    m = model()
    m.advance(0.0, [])
    assert m.sample("nope", 0.0).errors


def test_collector_without_model_and_without_database_reports_an_error():
    # without a model the collector reads the stored cluster (tests/fabric/collectors/test_twin_db.py); no database here
    s = TwinCollector().collect("gpu0001")
    assert s.collector == "twin" and s.ports == [] and len(s.errors) == 1 and s.errors[0].startswith("twin: ")
    s = TwinCollector().collect_switches("gpu0001", ["0xb8cef60000100001"])
    assert s.collector == "twin" and s.ports == [] and s.errors[0].startswith("twin: ")


def test_collector_samples_the_model_now():
    m = model()
    m.advance(0.0, [job("j1", ["gpu0001", "gpu0002"])])
    s = TwinCollector(m).collect("gpu0001")
    assert s.collector == "twin" and s.collected_at > 1e9 and len(s.ports) == 8 and s.errors == []


# ---- switch ports ----


def two_tier(nodes: int = 8) -> Fabric:
    """A 2:1 fat tree with two units of leaves: nodes of different units talk through the spines."""
    return fabric_from_parsed(generate_fat_tree(nodes=nodes, gpus_per_node=8, leaf_ports=8, oversubscription=2.0))


def far_pair(fabric: Fabric) -> tuple[str, str]:
    """Two hosts that share no leaf."""
    leaves = {h.key: {link.a for link in host_links(fabric, h.key)} for h in fabric.hosts}
    first = fabric.hosts[0].key
    return first, next(h for h, ls in leaves.items() if not ls & leaves[first])


def by_port(sample) -> dict[tuple[str, int], object]:
    return {(p.device, p.port): p for p in sample.ports}


def test_switch_sample_has_every_linked_port_named_like_perfquery():
    fabric = two_tier()
    m = TwinModel(fabric, gpus_of([h.key for h in fabric.hosts]), fault_rate=0.0)
    m.advance(0.0, [])
    guids = ["0x" + s.key for s in fabric.switches]
    s = m.switch_sample("gpu0001", guids, 0.0)
    assert s.node == "gpu0001" and s.collector == "twin" and s.errors == [] and s.gpus == []
    expected = {("0x" + link.a, link.a_port) for link in fabric.links} | {
        ("0x" + link.b, link.b_port) for link in fabric.links if not link.b.startswith("gpu")
    }
    assert set(by_port(s)) == expected and len(s.ports) == len(expected)
    for p in s.ports:
        assert p.guid == p.device and p.state == "ACTIVE" and p.rate_gbps == 400.0
        assert p.counters["port_xmit_data"] == p.counters["port_rcv_data"] == p.counters["port_xmit_wait"] == 0
    # bare GUIDs work too; an unknown one is reported, the others still sampled
    s2 = m.switch_sample("gpu0001", [fabric.switches[0].key, "0x00000000deadbeef"], 0.0)
    assert s2.errors == ["switch '0x00000000deadbeef' is not in the twin"]
    assert {p.device for p in s2.ports} == {"0x" + fabric.switches[0].key}


def test_cross_leaf_job_loads_leaf_spine_ports_and_switch_counters_only_grow():
    fabric = two_tier()
    src, dst = far_pair(fabric)
    m = TwinModel(fabric, gpus_of([h.key for h in fabric.hosts]), fault_rate=0.0)
    jobs = [job("j", [src, dst], gbps=800.0)]
    guids = ["0x" + s.key for s in fabric.switches]
    spines = {"0x" + s.key for s in fabric.switches if s.role == "spine"}
    samples = []
    for t in range(0, 50, 10):
        m.advance(float(t), jobs)
        samples.append(m.switch_sample("agent", guids, float(t)))
    for a, b in itertools.pairwise(samples):
        pa, pb = by_port(a), by_port(b)
        for key, p in pb.items():
            for c in ("port_xmit_data", "port_rcv_data", "port_xmit_wait", "port_xmit_packets"):
                assert p.counters[c] >= pa[key].counters[c]
    first, last = by_port(samples[0]), by_port(samples[-1])
    moved = {key for key, p in last.items() if p.counters["port_xmit_data"] > first[key].counters["port_xmit_data"]}
    assert {dev for dev, _ in moved} & spines, "nothing crossed a spine"
    # every byte goes up from a leaf once and comes down to a leaf once (through spines and cores in between)
    roles = {s.key: s.role for s in fabric.switches}
    up = down = 0
    for link in fabric.links:
        if roles.get(link.a) == "leaf" and roles.get(link.b) == "spine":
            leaf_port = last[("0x" + link.a, link.a_port)]
            up += leaf_port.counters["port_xmit_data"] * 4
            down += leaf_port.counters["port_rcv_data"] * 4
        assert not (roles.get(link.b) == "leaf" and roles.get(link.a) == "spine")
    assert up == pytest.approx(2 * 800e9 / 8 * 40, rel=1e-3)  # 800 Gb/s each way, 40 s
    assert down == pytest.approx(up, rel=1e-6)


def test_switch_port_facing_a_host_mirrors_the_host_port():
    fabric = two_tier()
    src, dst = far_pair(fabric)
    m = TwinModel(fabric, gpus_of([h.key for h in fabric.hosts]), fault_rate=0.0)
    m.advance(0.0, [job("j", [src, dst], gbps=800.0)])
    host = m.sample(src, 7.0)
    switches = by_port(m.switch_sample("agent", ["0x" + s.key for s in fabric.switches], 7.0))
    for link, hp in zip(host_links(fabric, src), host.ports, strict=True):
        sp = switches[("0x" + link.a, link.a_port)]
        assert sp.counters["port_rcv_data"] == hp.counters["port_xmit_data"] > 0
        assert sp.counters["port_xmit_data"] == hp.counters["port_rcv_data"] > 0


def test_oversubscribed_uplinks_grow_xmit_wait_on_the_switch_port():
    fabric = two_tier()
    src, dst = far_pair(fabric)
    m = TwinModel(fabric, gpus_of([h.key for h in fabric.hosts]), fault_rate=0.0)
    jobs = [job("j", [src, dst], gbps=2400.0)]  # 300 Gb/s per rail; a 2:1 leaf has half the uplinks
    m.advance(0.0, jobs)
    guids = ["0x" + s.key for s in fabric.switches]
    a = m.switch_sample("agent", guids, 0.0)
    m.advance(10.0, jobs)
    b = m.switch_sample("agent", guids, 10.0)
    waits = [p.counters["port_xmit_wait"] - by_port(a)[k].counters["port_xmit_wait"] for k, p in by_port(b).items()]
    assert max(m.link_offered_gbps().values()) == pytest.approx(600.0)  # two rails' flows share an uplink
    assert max(waits) == pytest.approx(WAIT_TICKS_PER_S * 0.5 * 10, rel=1e-6)
    assert min(waits) == 0


def test_flap_shows_on_both_ends_and_symbol_errors_on_the_host_end():
    fabric = two_tier()
    m = TwinModel(fabric, gpus_of([h.key for h in fabric.hosts]), fault_rate=0.0)
    link = host_links(fabric, "gpu0002")[0]
    m.schedule_fault(FLAP, start=5.0, duration=10.0, link_key=link.key)
    m.schedule_fault(SYMBOL_ERRORS, start=0.0, duration=100.0, link_key=link.key, errors_per_s=1.0)
    m.advance(0.0, [])
    guid = "0x" + link.a

    def switch_port(t):
        return by_port(m.switch_sample("agent", [guid], t))[(guid, link.a_port)]

    assert switch_port(8.0).state == "DOWN" and m.sample("gpu0002", 8.0).ports[0].state == "DOWN"
    assert switch_port(20.0).counters["link_downed"] == 1 == m.sample("gpu0002", 20.0).ports[0].counters["link_downed"]
    assert (
        switch_port(20.0).counters["symbol_error"] == 0
        and m.sample("gpu0002", 20.0).ports[0].counters["symbol_error"] == 20
    )


def test_hand_built_fabric_without_port_numbers_gets_distinct_switch_ports():
    fabric = Fabric(
        switches=[TSwitch("L1", "leaf1"), TSwitch("S1", "spine1")],
        hosts=[THost("h1"), THost("h2")],
        links=[TLink("h1", "L1", "h1", 100.0), TLink("h2", "L1", "h2", 100.0), TLink("up", "L1", "S1", 100.0)],
    )
    m = TwinModel(fabric, gpus_of(["h1", "h2"], 1), fault_rate=0.0)
    s = m.switch_sample("agent", ["L1", "S1"], 0.0)
    assert sorted((p.device, p.port) for p in s.ports) == [("0xl1", 1), ("0xl1", 2), ("0xl1", 3), ("0xs1", 1)]


def test_host_devices_name_the_hca_ports():
    fabric = fat_tree()
    links = host_links(fabric, "gpu0001")
    names = {link.key: f"ib{i}" for i, link in enumerate(links)}
    m = TwinModel(fabric, gpus_of(NODES), fault_rate=0.0, host_devices=names)
    m.advance(0.0, [])
    assert [(p.device, p.port) for p in m.sample("gpu0001", 0.0).ports] == [(f"ib{i}", 1) for i in range(8)]


def test_inherit_keeps_counters_faults_and_clock():
    old = model(seed=5, fault_rate=0.0)
    jobs = [job("j1", ["gpu0001", "gpu0002"], gbps=800.0)]
    old.advance(0.0, jobs)
    old.schedule_fault(XID, start=1.0, node="gpu0003", gpu_index=2)
    old.advance(10.0, jobs)
    before = tx(old.sample("gpu0001", 10.0))
    new = model(seed=5, fault_rate=0.0)
    new.inherit(old)
    assert tx(new.sample("gpu0001", 10.0)) == before
    new.advance(20.0, jobs)
    assert tx(new.sample("gpu0001", 20.0)) == pytest.approx(2 * before, rel=1e-6)
    assert [f.target for f in new.faults] == ["gpu0003/gpu2"]


def test_shared_gpu_load_follows_the_share():
    m = model()
    m.advance(0.0, [TwinJob("mps", [("gpu0001", 0)], workload="inference", share=0.25)])
    g = m.sample("gpu0001", 0.0).gpus[0]
    assert 10 <= g.utilisation_gpu_pct <= 20
    assert g.memory_used_mib == pytest.approx(0.45 * 0.25 * 81559, rel=0.1)
