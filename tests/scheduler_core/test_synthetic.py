"""The generated snapshot used by benchmarks: deterministic, consistent, realistic mix."""

from scheduler.core.synthetic import synthetic_snapshot


def test_same_seed_same_snapshot():
    a = synthetic_snapshot(256, 500, seed=3, with_topology=False)
    b = synthetic_snapshot(256, 500, seed=3, with_topology=False)
    assert a.pending == b.pending and a.running == b.running and a.nodes == b.nodes


def test_sizes_and_pools():
    s = synthetic_snapshot(1024, 2000, seed=1, with_topology=False)
    assert sum(len(n.gpus) for n in s.nodes) == 1024
    assert {p.sharing for p in s.pools} == {"exclusive", "mps", "mig", "timeslice"}
    assert len(s.pending) == 2000
    sizes = {j.gpus for j in s.pending if j.sharing == "exclusive"}
    assert sizes == {1, 2, 4, 8, 16, 32, 64}
    assert any(j.workload == "data-intensive" and j.dataset_node for j in s.pending)


def test_running_jobs_match_gpu_occupancy():
    s = synthetic_snapshot(512, 0, running_fraction=0.7, seed=2, with_topology=False)
    held = {g.id: g.exclusive_job for n in s.nodes for g in n.gpus if g.exclusive_job is not None}
    from_jobs = {sh.gpu_id: rj.request.id for rj in s.running for sh in rj.shares if sh.kind == "whole"}
    assert held == from_jobs
    train = next(p for p in s.pools if p.name == "train")
    train_gpus = sum(len(n.gpus) for n in s.nodes if n.hostname in train.hostnames)
    assert 0.6 < len(from_jobs) / train_gpus <= 0.71


def test_dgx_nodes_are_one_nvlink_island_with_eight_rails():
    s = synthetic_snapshot(64, 0, with_topology=False)
    node = next(n for n in s.nodes if not n.storage)
    assert node.nvlink_islands == (tuple(range(8)),)
    assert node.hca_gbps == 8 * 400.0
