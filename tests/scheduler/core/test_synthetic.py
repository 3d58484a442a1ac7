"""The generated snapshot used by benchmarks: deterministic, consistent, realistic mix."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.core.synthetic import synthetic_snapshot

_IN_ANOTHER_PROCESS = (
    "import pickle, sys; from scheduler.core.synthetic import synthetic_snapshot; "
    "s = synthetic_snapshot(256, 500, seed=3, with_topology=False); "
    "sys.stdout.buffer.write(pickle.dumps((s.pending, s.running, s.nodes)))"
)


@pytest.mark.parametrize("hash_seed", ["1", "2"])
def test_a_seed_gives_the_same_snapshot_in_another_process_whatever_its_hash_seed(hash_seed):
    # Benchmarks compare runs of different processes: nothing may follow set or dict order of strings, which
    # changes with PYTHONHASHSEED from one interpreter to the next.
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", _IN_ANOTHER_PROCESS], cwd=root, env=env, capture_output=True, check=True
    )
    here = synthetic_snapshot(256, 500, seed=3, with_topology=False)
    assert pickle.loads(out.stdout) == (here.pending, here.running, here.nodes)


def test_another_seed_gives_another_snapshot():
    a = synthetic_snapshot(256, 500, seed=3, with_topology=False)
    b = synthetic_snapshot(256, 500, seed=4, with_topology=False)
    assert a.pending != b.pending


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
