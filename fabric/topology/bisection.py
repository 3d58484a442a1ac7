"""Bisection bandwidth of the fabric, in Gb/s.

Definition used here (the "tree bisection"):

* The endpoints are the host ports (live host-switch links), each one carrying
  its own link capacity. A server with 8 HCAs is 8 endpoints: bisection is a
  property of the network, not of which server owns which port (on a rail-
  optimised fabric the rails of one server land on different leaves anyway).
* The ports are ordered along the tree: by pod, then by tier of the switch they
  hang off (leaves before spines that carry a few host ports), then by switch
  name, hostname and link key. The first floor(P/2) ports are half A, the rest
  half B. When the leaves are alike and even in number, the cut falls between
  leaves, so the traffic from A to B must cross the spines (a cut inside a leaf
  is only possible when the port count forces it; that leaf then carries its
  share internally, as the real switch would).
* Bisection bandwidth = the maximum flow from all A ports to all B ports, each
  port limited by its own link, every switch-to-switch cable full duplex with
  its capacity in each direction (parallel cables add up). By max-flow/min-cut
  this is the capacity of the narrowest cut that separates A from B.

For a non-blocking (1:1) fat tree with P equal ports of rate r this gives P/2 * r;
at 2:1 the leaf uplinks are the cut and it halves. `ratio` = bandwidth / the
smaller half's host capacity: 1.0 means full bisection.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric.topology.graph import FabricGraph
from fabric.topology.maxflow import MaxFlow
from fabric.topology.tiers import Tiers


@dataclass(slots=True)
class BisectionReport:
    gbps: float
    ratio: float | None  # gbps / min(half_a_gbps, half_b_gbps); None with no host ports in one half
    half_a_ports: int
    half_b_ports: int
    half_a_gbps: float
    half_b_gbps: float
    half_a_switches: list[str]  # names of the switches holding A ports (one may also hold B ports)
    half_b_switches: list[str]


def bisection_bandwidth(graph: FabricGraph, tiers: Tiers) -> BisectionReport:
    links = graph.links
    names = graph.switch_names
    big = 1 << 30
    ports: list[tuple[object, ...]] = []
    for s in range(graph.n_switches):
        pod = tiers.pod[s] if tiers.pod[s] >= 0 else big
        level = tiers.level[s] if tiers.level[s] >= 0 else big
        skey = (pod, level, graph.switch_sort[s], graph.switch_keys[s])
        for h, li in graph.sw_hosts[s]:
            ports.append((skey, graph.host_sort[h], links[li].key, s, li))
    ports.sort()

    n_sw = graph.n_switches
    src_cap = [0.0] * n_sw
    sink_cap = [0.0] * n_sw
    half = len(ports) // 2
    for k, (*_, s, li) in enumerate(ports):
        if k < half:
            src_cap[s] += links[li].capacity_gbps
        else:
            sink_cap[s] += links[li].capacity_gbps

    # Parallel cables between the same two switches become one full-duplex arc pair.
    pair_cap: dict[tuple[int, int], float] = {}
    for s in range(n_sw):
        for w, li in graph.sw_adj[s]:
            if s < w:
                pair_cap[(s, w)] = pair_cap.get((s, w), 0.0) + links[li].capacity_gbps
    source, sink = n_sw, n_sw + 1
    net = MaxFlow(n_sw + 2)
    for s in range(n_sw):
        if src_cap[s] > 0:
            net.add_edge(source, s, src_cap[s])
        if sink_cap[s] > 0:
            net.add_edge(s, sink, sink_cap[s])
    for (u, v), c in pair_cap.items():
        net.add_edge(u, v, c, c)
    gbps = net.max_flow(source, sink)

    a_gbps, b_gbps = sum(src_cap), sum(sink_cap)
    smaller = min(a_gbps, b_gbps)
    in_a = {p[3] for p in ports[:half]}
    in_b = {p[3] for p in ports[half:]}
    order = graph.switch_order()
    return BisectionReport(
        gbps=gbps,
        ratio=gbps / smaller if smaller > 0 else None,
        half_a_ports=half,
        half_b_ports=len(ports) - half,
        half_a_gbps=a_gbps,
        half_b_gbps=b_gbps,
        half_a_switches=[names[s] for s in order if s in in_a],
        half_b_switches=[names[s] for s in order if s in in_b],
    )
