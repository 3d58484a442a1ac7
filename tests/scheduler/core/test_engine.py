"""The round as a whole: purity, determinism, equivalence classes, stats, and invariants at scale."""

import copy
import random
from collections import defaultdict
from dataclasses import replace

import pytest

from scheduler.core import build_topology, schedule
from scheduler.core.mig import is_valid_layout
from scheduler.core.synthetic import synthetic_snapshot
from tests.scheduler.core.builders import two_leaves


@pytest.fixture(scope="module")
def synthetic():
    return synthetic_snapshot(gpus=512, pending=3000, seed=7)


@pytest.fixture(scope="module")
def decided(synthetic):
    return schedule(synthetic)


def _decisions(d):
    return d.placements, d.pending_reasons, d.preemptions, d.migrations, d.queue_order


@pytest.mark.parametrize("field", ["pending", "running", "pools", "tenants"])
def test_the_order_of_the_snapshots_lists_does_not_change_a_decision(synthetic, decided, field):
    # 3000 pending and 122 running jobs, 4 pools, 6 tenants: each list shuffled (three different shuffles),
    # every placement, reason, preemption, migration and the queue order stay the same.
    rng = random.Random(11)
    for _ in range(3):
        items = list(getattr(synthetic, field))
        rng.shuffle(items)
        assert _decisions(schedule(replace(synthetic, **{field: items}))) == _decisions(decided)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known (issue 15): placement breaks some ties, and prunes some searches, in the order of Snapshot.nodes "
    "(28 of 204 placements differ, one scoring 1.20 instead of 1.02); the adapter passes nodes in hostname order",
)
def test_the_order_of_the_nodes_does_not_change_a_decision(synthetic, decided):
    nodes = list(synthetic.nodes)
    random.Random(5).shuffle(nodes)
    assert _decisions(schedule(replace(synthetic, nodes=nodes))) == _decisions(decided)


def test_snapshot_is_not_changed():
    b = two_leaves()
    b.pool(1, "train")
    b.run(20, {"n1": [0, 1]})
    b.job(1, gpus=4)
    snap = b.snapshot()
    before = copy.deepcopy((snap.nodes, snap.running, snap.pending, snap.link_utilisation))
    schedule(snap)
    assert (snap.nodes, snap.running, snap.pending, snap.link_utilisation) == before


def test_prebuilt_topology_gives_the_same_answer(synthetic, decided):
    without = schedule(replace(synthetic, topology=None))
    with_fresh = schedule(replace(synthetic, topology=build_topology(synthetic.fabric)))
    assert without.placements == decided.placements == with_fresh.placements


def test_equivalence_classes_skip_repeated_failures():
    b = two_leaves()
    b.pool(1, "train")
    b.run(20, {h: list(range(8)) for h in ("n1", "n2", "n3", "n4")})
    for j in range(1, 101):
        b.job(j, gpus=8)
    d = schedule(b.snapshot())
    # One search before the first job's reservation exists and one after (the answer may change), then skips.
    assert d.stats["searches"] == 2 and d.stats["class_skips"] == 98
    assert len(set(d.pending_reasons.values()) - {d.pending_reasons[1]}) == 1  # the rest share one text


def test_jobs_differing_only_in_cost_inputs_share_a_class():
    b = two_leaves()
    b.pool(1, "train")
    b.run(20, {h: list(range(8)) for h in ("n1", "n2", "n3", "n4")})
    for j in range(1, 51):
        b.job(j, gpus=8, allreduce_bytes=float(j << 20), step_compute_s=0.01 * j)
    d = schedule(b.snapshot())
    assert d.stats["searches"] == 2 and d.stats["class_skips"] == 48


def test_stats_report_phases_and_counters(decided):
    assert set(decided.stats["ms"]) == {"build", "failures", "order", "place", "migrate", "total"}
    assert decided.stats["placed"] == len(decided.placements)
    assert decided.stats["pending"] == len(decided.queue_order)


def test_every_pending_job_is_placed_or_explained(synthetic, decided):
    placed = {p.job_id for p in decided.placements}
    requeued = {j for j, _ in decided.requeues}
    pending = {j.id for j in synthetic.pending} | requeued
    assert placed | set(decided.pending_reasons) == pending
    assert not placed & set(decided.pending_reasons)
    assert decided.queue_order and set(decided.queue_order) == pending


def test_no_gpu_is_given_twice(synthetic, decided):
    busy = {sh.gpu_id for rj in synthetic.running if rj.request.sharing == "exclusive" for sh in rj.shares}
    requeued = {j for j, _ in [*decided.requeues, *decided.failures]}
    busy -= {sh.gpu_id for rj in synthetic.running if rj.request.id in requeued for sh in rj.shares}
    whole = [s.gpu_id for p in decided.placements for s in p.shares if s.kind == "whole"]
    whole += [s.gpu_id for m in decided.migrations for s in m.placement.shares if s.kind == "whole"]
    assert len(whole) == len(set(whole))
    assert not set(whole) & busy


def test_shared_gpus_stay_within_limits(synthetic, decided):
    gpus = {g.id: g for n in synthetic.nodes for g in n.gpus}
    mps = defaultdict(lambda: [0, 0])
    mig = defaultdict(list)
    ts = defaultdict(int)
    for g in gpus.values():
        mps[g.id] = [g.mps_compute_pct_used, g.mps_memory_mib_used]
        mig[g.id] = list(g.mig_used)
        ts[g.id] = g.timeslice_used
    for p in decided.placements:
        for s in p.shares:
            if s.kind == "mps":
                mps[s.gpu_id][0] += s.compute_pct
                mps[s.gpu_id][1] += s.memory_mib
            elif s.kind == "mig":
                mig[s.gpu_id].append((s.mig_profile, s.mig_start))
            elif s.kind == "timeslice":
                ts[s.gpu_id] += 1
    for gid, (pct, mem) in mps.items():
        assert pct <= 100 and mem <= gpus[gid].memory_mib
    for gid, layout in mig.items():
        assert is_valid_layout(gpus[gid].model, gpus[gid].memory_mib, layout) is None
    replicas = {h: p.timeslice_replicas for p in synthetic.pools for h in p.hostnames}
    node_of = {g.id: n.hostname for n in synthetic.nodes for g in n.gpus}
    for gid, used in ts.items():
        if used:
            assert used <= replicas.get(node_of[gid], 1)


def test_placements_respect_pools(synthetic, decided):
    pool_hosts = {p.id: p.hostnames for p in synthetic.pools}
    jobs = {j.id: j for j in synthetic.pending}
    jobs.update({rj.request.id: rj.request for rj in synthetic.running})
    for p in decided.placements:
        assert set(p.nodes) <= pool_hosts[jobs[p.job_id].pool]


def test_synthetic_round_exercises_every_mechanism(decided):
    assert decided.placements and decided.pending_reasons and decided.reservations
    assert decided.preemptions
    kinds = {s.kind for p in decided.placements for s in p.shares}
    assert kinds == {"whole", "mps", "mig", "timeslice"}
