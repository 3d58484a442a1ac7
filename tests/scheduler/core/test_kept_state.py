"""A cluster index kept between rounds (ClusterState.advance, held in the RoundCarry) is the index a build gives:
every field of every node, GPU and partition, every bucket in its order, the running jobs in theirs. Checked over
churn rounds of a cluster with all four ways of sharing (exclusive, MPS, MIG, time-sliced), with the live load
moving, and refused where more than occupancy and load changed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.core.carry import RoundCarry
from scheduler.core.engine import schedule
from scheduler.core.state import ClusterState
from scheduler.core.synthetic import next_round, synthetic_snapshot
from scheduler.core.topology import build_topology
from tests.scheduler.core.fingerprint import fingerprint


@pytest.fixture(scope="module")
def cluster():
    snap = synthetic_snapshot(512, 2000, 0.7, seed=3)
    return snap, snap.topology  # the index of the fabric the snapshot carries (as the adapter caches it)


@pytest.fixture(scope="module")
def host_cluster(cluster):
    """The same cluster with host CPU and memory tracked: every node has 64 cores and 512 GiB, and every job asks
    for some of each per node (the host part a kept index counts again on the nodes whose jobs changed)."""
    snap, topo = cluster
    nodes = [replace(n, cpu_milli=64_000, memory_mib=524_288) for n in snap.nodes]

    def asks(job):
        return replace(job, host_cpu_milli=1_000 * (1 + job.id % 7), host_memory_mib=4_096 * (1 + job.id % 5))

    running = [replace(rj, request=asks(rj.request)) for rj in snap.running]
    pending = [asks(j) for j in snap.pending]
    return replace(snap, nodes=nodes, running=running, pending=pending), topo


def _load_moved(snap, step: int):
    """The live load of every third link changed, as a telemetry poll between two rounds changes it."""
    util = {k: (u + 0.1 * step) % 1.0 if i % 3 == 0 else u for i, (k, u) in enumerate(snap.link_utilisation.items())}
    return replace(snap, link_utilisation=util)


@pytest.mark.parametrize(
    ("load_moves", "host", "probes"),
    [(False, False, 24), (True, False, 24), (False, True, 24), (False, False, 1)],
    ids=["steady-load", "load-moves", "host", "probe-limit"],
)
def test_the_kept_index_is_the_built_one_after_each_churn_round(cluster, host_cluster, load_moves, host, probes):
    # probe-limit: every reservation plan that does not fit at the first end releases the rest of its line at once
    # (ClusterState.release_many) and undoes it; the nodes it touched are not read again by the next advance.
    snap, topo = host_cluster if host else cluster
    snap = replace(snap, config=replace(snap.config, backfill_probes=probes))
    carry = RoundCarry()
    dec = schedule(snap, carry=carry)
    for i in range(5):
        snap = next_round(snap, dec, 0.03, seed=i)
        if load_moves:
            snap = _load_moved(snap, i + 1)
        kept = carry.state
        assert kept is not None and kept.touched  # the round held and released GPUs on it
        assert kept.advance(snap, topo)
        assert fingerprint(kept) == fingerprint(ClusterState(snap, topo))
        dec = schedule(snap, carry=carry)


def test_decisions_with_the_kept_index_are_those_with_a_built_one(cluster):
    snap, _ = cluster
    kept_carry, fresh_carry = RoundCarry(), RoundCarry()
    kept_dec = schedule(snap, carry=kept_carry)
    fresh_dec = schedule(snap, carry=fresh_carry)
    for i in range(5):
        snap = _load_moved(next_round(snap, kept_dec, 0.03, seed=i), i)
        fresh_carry.state = None  # the other carry keeps its jobs' values but builds its index every round
        kept_dec, fresh_dec = schedule(snap, carry=kept_carry), schedule(snap, carry=fresh_carry)
        assert kept_carry.state is not None
        assert kept_dec.placements == fresh_dec.placements and kept_dec.reservations == fresh_dec.reservations
        assert kept_dec.preemptions == fresh_dec.preemptions and kept_dec.migrations == fresh_dec.migrations
        assert kept_dec.pending_reasons == fresh_dec.pending_reasons


def _kept_after_one_round(cluster):
    snap, topo = cluster
    carry = RoundCarry()
    dec = schedule(snap, carry=carry)
    return carry.state, next_round(snap, dec, 0.03, seed=9), topo


def _with_node(snap, i: int, **changes):
    nodes = list(snap.nodes)
    nodes[i] = replace(nodes[i], **changes)
    return replace(snap, nodes=nodes)


def test_a_gpu_whose_health_changed_makes_the_index_build_again(cluster):
    kept, snap, topo = _kept_after_one_round(cluster)
    node = snap.nodes[4]
    gpus = (replace(node.gpus[0], healthy=not node.gpus[0].healthy), *node.gpus[1:])
    assert not kept.advance(_with_node(snap, 4, gpus=gpus), topo)


def test_a_node_that_went_down_makes_the_index_build_again(cluster):
    kept, snap, topo = _kept_after_one_round(cluster)
    assert not kept.advance(_with_node(snap, 4, up=False), topo)


def test_another_topology_makes_the_index_build_again(cluster):
    kept, snap, _ = _kept_after_one_round(cluster)
    assert not kept.advance(snap, build_topology(snap.fabric))


def test_a_refused_advance_leaves_the_index_as_it_was(cluster):
    kept, snap, topo = _kept_after_one_round(cluster)
    before = fingerprint(kept)
    assert not kept.advance(_with_node(snap, 4, up=False), topo)
    assert fingerprint(kept) == before


def test_a_round_that_fails_half_way_drops_the_kept_index(cluster, monkeypatch):
    snap, _ = cluster
    carry = RoundCarry()
    dec = schedule(snap, carry=carry)
    assert carry.state is not None

    def boom(*_a, **_k):
        raise RuntimeError("half-way")

    monkeypatch.setattr("scheduler.core.engine.plan_migrations", boom)
    with pytest.raises(RuntimeError):
        schedule(next_round(snap, dec, 0.03, seed=1), carry=carry)
    assert carry.state is None


def test_what_the_last_rounds_placer_cached_on_a_node_is_dropped(cluster):
    # The fragmentation search caches a node's state on it (NodeSlot.frag_sig) for its own round only.
    kept, snap, topo = _kept_after_one_round(cluster)
    for node in kept.nodes.values():
        node.frag_sig = ("a value the last round's placer left",)
    assert kept.advance(snap, topo)
    assert fingerprint(kept) == fingerprint(ClusterState(snap, topo))


# A running job's GPUs are kept while its inputs are the same objects and values; the cases below change a job but
# leave every node's state as it was (the same NodeState objects), so only the job's own change can tell.


def _host_index(host_cluster):
    snap, topo = host_cluster
    return ClusterState(snap, topo), snap, topo


def _multi_gpu_job(snap) -> int:
    return next(i for i, rj in enumerate(snap.running) if len(rj.shares) > 1)


def test_a_running_job_with_new_shares_on_unchanged_nodes_is_counted_once(host_cluster):
    kept, snap, topo = _host_index(host_cluster)
    i = _multi_gpu_job(snap)
    running = list(snap.running)
    running[i] = replace(running[i], shares=tuple(running[i].shares))  # equal shares, another tuple: read again
    moved = replace(snap, running=running)
    assert kept.advance(moved, topo)
    assert fingerprint(kept) == fingerprint(ClusterState(moved, topo))


def test_a_running_job_gone_from_unchanged_nodes_gives_its_host_part_back(host_cluster):
    kept, snap, topo = _host_index(host_cluster)
    i = _multi_gpu_job(snap)
    gone = replace(snap, running=[rj for k, rj in enumerate(snap.running) if k != i])
    assert kept.advance(gone, topo)
    assert fingerprint(kept) == fingerprint(ClusterState(gone, topo))


def test_a_running_job_that_asks_for_more_host_cpu_on_the_same_shares_is_counted_again(host_cluster):
    kept, snap, topo = _host_index(host_cluster)
    i = _multi_gpu_job(snap)
    running = list(snap.running)
    req = running[i].request
    running[i] = replace(running[i], request=replace(req, host_cpu_milli=req.host_cpu_milli + 2_000))
    more = replace(snap, running=running)
    assert kept.advance(more, topo)
    assert fingerprint(kept) == fingerprint(ClusterState(more, topo))
