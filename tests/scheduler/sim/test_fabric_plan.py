"""All-reduce time on a fabric design (scheduler.sim.fabric_plan), with the scheduler's network model, by hand.

1,024 GPUs (128 servers x 8 GPUs, 8 NDR HCAs each) on 64-port switches. A 1 GiB all-reduce over n = 64 ranks moves
2 x 63 / 64 x 2^30 = 2,113,929,216 bytes per rank; a server drives 8 x 50 GB/s x 0.96 = 384 GB/s; a ring step costs
5 us inside a leaf (latency level 2), 6 us across the spines (level 3)."""

from __future__ import annotations

import pytest

from fabric.topology.plan import PlanRequest, plan_designs
from scheduler.sim.fabric_plan import allreduce

REQ = PlanRequest(gpus=1024)
BYTES = 2 * 63 / 64 * 2**30


def design(did: str):
    return next(d for d in plan_designs(REQ) if d.id == did)


def test_best_placement_on_a_rail_optimised_fabric_stays_inside_one_leaf():
    a = allreduce(REQ, design("2t-1:1-rail"), 64)
    assert a.best_level == "leaf"
    assert a.best_s == pytest.approx(BYTES / 384e9 + 126 * 5e-6)  # 6.135 ms


def test_worst_placement_at_2_to_1_shares_half_an_uplink_and_pays_the_ecmp_loss():
    # 21 uplinks for 42 hosts: 384 x 21/42 x 0.9 = 172.8 GB/s.
    a = allreduce(REQ, design("2t-2:1-rail"), 64)
    assert (a.worst_level, a.worst_s) == ("spine", pytest.approx(BYTES / 172.8e9 + 126 * 6e-6))  # 12.99 ms


def test_a_flat_fabric_sends_even_the_best_placed_64_gpu_job_over_the_spines():
    # 4 servers per leaf < 8: the ring crosses a spine. On an idle fabric it is the only ring on the leaf's 32 uplinks
    # (1,600 GB/s pooled): no ECMP loss (the engine's shared_gbs takes it only beside another ring), so the servers'
    # 400 GB/s x 0.96 = 384 GB/s, at the spine's 6 us a step: 5.505 + 0.756 = 6.261 ms.
    flat, rail = allreduce(REQ, design("2t-1:1-flat"), 64), allreduce(REQ, design("2t-1:1-rail"), 64)
    assert (flat.best_level, flat.best_s) == ("spine", pytest.approx(BYTES / 384e9 + 126 * 6e-6))
    assert rail.best_s < flat.best_s


def test_the_flat_worst_shares_a_leafs_uplinks_with_its_other_servers_rings():
    # 1:1 flat: 4 servers per leaf on 32 uplinks (1,600 GB/s); the job's server beside 3 other rings gets 400 GB/s,
    # x 0.9 ECMP = 360, under its HCAs' 400: 360 x 0.96 = 345.6 GB/s.
    a = allreduce(REQ, design("2t-1:1-flat"), 64)
    assert (a.worst_level, a.worst_s) == ("spine", pytest.approx(BYTES / 345.6e9 + 126 * 6e-6))


def test_the_planner_asks_the_engines_network_model(monkeypatch):
    import scheduler.sim.fabric_plan as fp

    seen = []
    monkeypatch.setattr(fp, "network_gbs", lambda *a: seen.append(a) or 100.0)
    a = allreduce(REQ, design("2t-2:1-rail"), 64)
    assert a.worst_s == pytest.approx(BYTES / 100e9 + 126 * 6e-6)
    # the worst: a server's 8 x 50 GB/s HCAs, the rail group's 8 x 21 uplinks pooled, beside 41 other rings, 0.9 ECMP
    assert seen[-1][:5] == (400.0, 400.0, 1.0, 0, [(8400.0, 8400.0, 41, 0.9)])


def test_worst_is_never_better_than_best_and_oversubscription_hurts_the_worst():
    worst = []
    for did in ("2t-1:1-rail", "2t-2:1-rail", "2t-3:1-rail"):
        a = allreduce(REQ, design(did), 512)
        assert a.best_s <= a.worst_s
        worst.append(a.worst_s)
    assert worst == sorted(worst) and worst[0] < worst[-1]


def test_a_job_larger_than_the_cluster_or_inside_one_server_has_no_fabric_time():
    assert allreduce(REQ, design("2t-1:1-rail"), 2048).best_s is None
    assert allreduce(REQ, design("2t-1:1-rail"), 8).best_s is None
