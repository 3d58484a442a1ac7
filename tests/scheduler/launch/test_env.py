"""scheduler.launch.env: the job environment from an allocation (pure; runs with -p no:django)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from fabric.importers.nvidia_topo import PCIE_ORDER, parse_nvidia_topo
from scheduler.launch.env import (
    HCA_TIERS,
    RESERVED,
    GpuShare,
    HcaAffinity,
    JobAllocation,
    LaunchEnvError,
    LaunchSettings,
    NodeAllocation,
    check_job_env,
    checkpoint_dir,
    hostfile,
    job_environment,
    master_port,
    nccl_ib_hca,
    ordered_nodes,
    torchrun_args,
)

ROOT = Path(__file__).resolve().parents[3]
A100 = (ROOT / "tests" / "fixtures" / "nvidia_smi_topo_m_dgx_a100.txt").read_text()
SETTINGS = LaunchSettings(checkpoint_root="/shared/ckpt", mps_pipe_directory="/run/mps", mps_log_directory="/log/mps")


def uuid(node: int, gpu: int) -> str:
    return f"GPU-{node:08x}-0000-4000-8000-{gpu:012x}"


def node(host: str, gpus: list[int], *, n: int = 0, kind: str = "whole", address: str = "", **share) -> NodeAllocation:
    return NodeAllocation(host, tuple(GpuShare(uuid(n, g), g, kind, **share) for g in gpus), address)


@pytest.fixture(scope="module")
def a100() -> HcaAffinity:
    return HcaAffinity.from_parsed(parse_nvidia_topo(A100, "dgx-a100"))


# -- single node, the three sharing modes --------------------------------------------------------------------


def test_exclusive_single_node():
    job = JobAllocation(7, (node("gpu01", [2, 3]),), generation=4, env={"EPOCHS": "3"})
    env = job_environment(job, "gpu01", settings=SETTINGS)
    assert env["CUDA_VISIBLE_DEVICES"] == f"{uuid(0, 2)},{uuid(0, 3)}"
    assert env["CLUSTERCTL_JOB_ID"] == "7"
    assert env["CLUSTERCTL_GENERATION"] == "4"
    assert env["CLUSTERCTL_CHECKPOINT_DIR"] == "/shared/ckpt/job-7"
    assert env["EPOCHS"] == "3"
    assert (env["WORLD_SIZE"], env["NNODES"], env["NODE_RANK"], env["RANK"], env["LOCAL_WORLD_SIZE"]) == (
        "2",
        "1",
        "0",
        "0",
        "2",
    )
    assert env["MASTER_ADDR"] == "gpu01"
    assert not [k for k in env if k.startswith("CUDA_MPS_")]
    assert "NCCL_IB_HCA" not in env  # no topology given


def test_checkpoint_dir_is_the_same_across_relaunches():
    first = JobAllocation(7, (node("gpu01", [0]),), generation=1)
    moved = JobAllocation(7, (node("gpu09", [5], n=9),), generation=2)
    assert (
        job_environment(first, "gpu01", settings=SETTINGS)["CLUSTERCTL_CHECKPOINT_DIR"]
        == job_environment(moved, "gpu09", settings=SETTINGS)["CLUSTERCTL_CHECKPOINT_DIR"]
        == checkpoint_dir(7, SETTINGS)
    )


def test_mps_share():
    job = JobAllocation(8, (node("gpu01", [0, 1], kind="mps", compute_pct=30, memory_mib=10240),))
    env = job_environment(job, "gpu01", settings=SETTINGS)
    assert env["CUDA_VISIBLE_DEVICES"] == f"{uuid(0, 0)},{uuid(0, 1)}"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    # Ordinals as the client enumerates its visible devices, in MiB with the M suffix (NVIDIA's MPS guide).
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=10240M,1=10240M"
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == "/run/mps"
    assert env["CUDA_MPS_LOG_DIRECTORY"] == "/log/mps"


def test_mps_defaults_and_uneven_shares():
    shares = (GpuShare(uuid(0, 4), 4, "mps", 50, 0), GpuShare(uuid(0, 1), 1, "mps", 25, 2048))
    env = job_environment(JobAllocation(9, (NodeAllocation("gpu01", shares),)), "gpu01")
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"  # the smallest grant: no GPU gets more
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "1=2048M"  # the second visible device; no limit on the first
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == "/tmp/nvidia-mps"
    assert env["CUDA_MPS_LOG_DIRECTORY"] == "/var/log/nvidia-mps"


def test_mps_without_memory_limit_sets_none():
    env = job_environment(JobAllocation(9, (node("gpu01", [0], kind="mps", compute_pct=40),)), "gpu01")
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in env


def test_mig_uses_mig_uuids():
    shares = (
        GpuShare(uuid(0, 0), 0, "mig", mig_uuid="MIG-11111111-2222-3333-4444-555555555555"),
        GpuShare(uuid(0, 1), 1, "mig", mig_uuid="MIG-66666666-2222-3333-4444-555555555555"),
    )
    env = job_environment(JobAllocation(10, (NodeAllocation("gpu01", shares),)), "gpu01")
    assert env["CUDA_VISIBLE_DEVICES"] == (
        "MIG-11111111-2222-3333-4444-555555555555,MIG-66666666-2222-3333-4444-555555555555"
    )
    assert env["LOCAL_WORLD_SIZE"] == "2"


def test_mig_share_without_mig_uuid_is_refused():
    job = JobAllocation(10, (NodeAllocation("gpu01", (GpuShare(uuid(0, 0), 0, "mig"),)),))
    with pytest.raises(LaunchEnvError, match="has no MIG UUID"):
        job_environment(job, "gpu01")


def test_timeslice_sets_devices_only():
    env = job_environment(JobAllocation(11, (node("gpu01", [3], kind="timeslice"),)), "gpu01")
    assert env["CUDA_VISIBLE_DEVICES"] == uuid(0, 3)
    assert not [k for k in env if k.startswith("CUDA_MPS_")]


# -- multi-node ---------------------------------------------------------------------------------------------


def three_node_job() -> JobAllocation:
    # Given out of order, uneven, with one node reachable on an IPoIB address: every node must still agree.
    return JobAllocation(
        4242,
        (
            node("gpu10", [0, 1, 2, 3], n=10),
            node("gpu2", [4, 5, 6, 7, 0, 1, 2, 3], n=2, address="10.10.0.2"),
            node("gpu9", [6, 7], n=9),
        ),
        generation=3,
    )


def test_multi_node_ranks_are_consistent_and_disjoint():
    job = three_node_job()
    envs = {n.hostname: job_environment(job, n.hostname, settings=SETTINGS) for n in job.nodes}
    shared = {(e["MASTER_ADDR"], e["MASTER_PORT"], e["WORLD_SIZE"], e["NNODES"]) for e in envs.values()}
    assert shared == {("10.10.0.2", str(master_port(4242, SETTINGS)), "14", "3")}
    # Natural order of hostnames: gpu2 < gpu9 < gpu10 (not the order given, not plain string order).
    assert [envs[h]["NODE_RANK"] for h in ("gpu2", "gpu9", "gpu10")] == ["0", "1", "2"]
    ranks = []
    for env in envs.values():
        first, count = int(env["RANK"]), int(env["LOCAL_WORLD_SIZE"])
        ranks.extend(range(first, first + count))
    assert sorted(ranks) == list(range(14))  # disjoint and covering 0..WORLD_SIZE-1
    assert envs["gpu9"]["RANK"] == "8" and envs["gpu10"]["RANK"] == "10"
    assert envs["gpu9"]["CUDA_VISIBLE_DEVICES"] == f"{uuid(9, 6)},{uuid(9, 7)}"


def test_the_order_of_nodes_in_the_message_does_not_matter():
    job = three_node_job()
    reversed_job = JobAllocation(job.job_id, tuple(reversed(job.nodes)), job.generation)
    for host in ("gpu2", "gpu9", "gpu10"):
        assert job_environment(job, host) == job_environment(reversed_job, host)
    assert hostfile(job) == hostfile(reversed_job)


def test_hostfile_and_torchrun_args_follow_the_rank_order():
    job = three_node_job()
    assert hostfile(job) == "gpu2 slots=8\ngpu9 slots=2\ngpu10 slots=4\n"
    port = master_port(4242)
    assert torchrun_args(job, "gpu9") == [
        "--nnodes=3",
        "--nproc_per_node=2",
        "--node_rank=1",
        "--master_addr=10.10.0.2",
        f"--master_port={port}",
    ]
    assert [ordered.hostname for ordered in ordered_nodes(job)] == ["gpu2", "gpu9", "gpu10"]


def test_master_port_is_deterministic_and_in_range():
    settings = LaunchSettings(master_port_min=40000, master_port_max=40099)
    ports = {job: master_port(job, settings) for job in range(1, 1000)}
    assert all(40000 <= p <= 40099 for p in ports.values())
    assert master_port(123, settings) == master_port(123, settings) == 40023
    assert len(set(ports.values())) == 100  # spread over the whole range
    with pytest.raises(LaunchEnvError, match="not within"):
        master_port(1, LaunchSettings(master_port_min=70000, master_port_max=70010))


def test_unknown_host_duplicate_host_and_mixed_modes_are_clear_errors():
    job = three_node_job()
    with pytest.raises(LaunchEnvError, match=r"job 4242 has no allocation on gpu3 \(its nodes: gpu2, gpu9, gpu10\)"):
        job_environment(job, "gpu3")
    with pytest.raises(LaunchEnvError, match="node gpu1 appears twice"):
        job_environment(JobAllocation(1, (node("gpu1", [0]), node("gpu1", [1]))), "gpu1")
    mixed = JobAllocation(1, (node("a", [0]), node("b", [0], kind="mps", compute_pct=50)))
    with pytest.raises(LaunchEnvError, match="one sharing mode per job, got mps, whole"):
        job_environment(mixed, "a")
    with pytest.raises(LaunchEnvError, match="no GPUs allocated"):
        job_environment(JobAllocation(1, (NodeAllocation("a", ()),)), "a")
    with pytest.raises(LaunchEnvError, match="a GPU is listed twice"):
        job_environment(JobAllocation(1, (node("a", [0, 0]),)), "a")


# -- NCCL_IB_HCA from the DGX A100 `nvidia-smi topo -m` --------------------------------------------------------


def test_tiers_cover_the_importers_codes_in_its_order():
    assert tuple(code for tier in HCA_TIERS for code in tier) == PCIE_ORDER


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ([0], "=mlx5_0,mlx5_1"),
        ([0, 1], "=mlx5_0,mlx5_1"),
        ([0, 2], "=mlx5_0,mlx5_1,mlx5_2,mlx5_3"),
        ([4, 5], "=mlx5_6,mlx5_7"),
        # mlx5_8/9 only: mlx5_10/11 (the storage pair, PIX to each other but SYS to every GPU) stay out, and
        # the "=" keeps NCCL from reading "mlx5_1" as a prefix of them.
        ([6, 7], "=mlx5_8,mlx5_9"),
        ([7, 0], "=mlx5_8,mlx5_9,mlx5_0,mlx5_1"),  # the job's GPU order, then topology order
        (list(range(8)), "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_6,mlx5_7,mlx5_8,mlx5_9"),
    ],
)
def test_nccl_ib_hca_on_dgx_a100(a100, gpus, expected):
    assert nccl_ib_hca(gpus, a100) == expected


def test_nccl_ib_hca_in_the_environment(a100):
    job = JobAllocation(5, (node("dgx", [2, 3]),))
    assert job_environment(job, "dgx", affinity=a100)["NCCL_IB_HCA"] == "=mlx5_2,mlx5_3"


def test_stored_topology_gives_the_same_answer(a100):
    # fabric.models.NodeTopology keeps `nics` and `nic_affinity` as {"<gpu>": {"<nic>": "<code>"}}.
    topo = parse_nvidia_topo(A100, "dgx-a100")
    stored: dict[str, dict[str, str]] = {}
    for (gpu, nic), code in topo.nic_affinity.items():
        stored.setdefault(str(gpu), {})[nic] = code
    from_db = HcaAffinity.from_stored(topo.nics, stored)
    for gpus in ([0], [1, 6], list(range(8))):
        assert nccl_ib_hca(gpus, from_db) == nccl_ib_hca(gpus, a100)


def test_closer_tier_wins_over_farther_ones():
    affinity = HcaAffinity(
        ("ib0", "ib1", "ib2"),
        {0: {"ib0": "SYS", "ib1": "PHB", "ib2": "NODE"}, 1: {"ib0": "NODE", "ib1": "SYS", "ib2": "SYS"}},
    )
    assert nccl_ib_hca([0], affinity) == "=ib1"  # PHB before NODE
    assert nccl_ib_hca([1, 0], affinity) == "=ib1"  # GPU0's PHB beats GPU1's NODE
    assert nccl_ib_hca([1], affinity) == "=ib0"
    only_sys = HcaAffinity(("ib0",), {0: {"ib0": "SYS"}})
    assert nccl_ib_hca([0], only_sys) == "=ib0"
    assert nccl_ib_hca([5], affinity) == ""  # a GPU the (stale) topology lacks: NCCL picks
    assert nccl_ib_hca([0], HcaAffinity((), {})) == ""
    env = job_environment(JobAllocation(1, (node("a", [5]),)), "a", affinity=affinity)
    assert "NCCL_IB_HCA" not in env


# -- the job's own environment ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA", "RANK", "NVIDIA_VISIBLE_DEVICES"])
def test_job_env_may_not_override_ours(name):
    job = JobAllocation(3, (node("gpu01", [0]),), env={"A": "1", name: "x"})
    with pytest.raises(LaunchEnvError, match=f"may not set {name}: clusterctl sets it from the allocation"):
        job_environment(job, "gpu01")


def test_job_env_errors_name_the_problem():
    with pytest.raises(LaunchEnvError, match="may not set CLUSTERCTL_JOB_ID, MASTER_PORT: clusterctl sets them"):
        check_job_env({"MASTER_PORT": "1", "CLUSTERCTL_JOB_ID": "9"})
    with pytest.raises(LaunchEnvError, match="'1BAD' is not valid"):
        check_job_env({"1BAD": "x"})
    with pytest.raises(LaunchEnvError, match="A: value must be a string, not int"):
        check_job_env({"A": 1})
    with pytest.raises(LaunchEnvError, match="NUL"):
        check_job_env({"A": "x\0y"})
    assert check_job_env({"HF_HOME": "/data/hf", "_X": ""}) == {"HF_HOME": "/data/hf", "_X": ""}


def test_every_variable_we_set_is_reserved():
    job = three_node_job()
    mps = JobAllocation(1, (node("a", [0], kind="mps", compute_pct=50, memory_mib=100),))
    affinity = HcaAffinity(("ib0",), {0: {"ib0": "PIX"}})
    ours = set(job_environment(job, "gpu2")) | set(job_environment(mps, "a", affinity=affinity))
    assert all(k in RESERVED or k.startswith("CLUSTERCTL_") for k in ours)


# -- purity ---------------------------------------------------------------------------------------------


def test_env_module_is_pure():
    source = (ROOT / "scheduler" / "launch" / "env.py").read_text()
    imported = set()
    for item in ast.walk(ast.parse(source)):
        if isinstance(item, ast.Import):
            imported.update(a.name.split(".")[0] for a in item.names)
        elif isinstance(item, ast.ImportFrom) and item.module and item.level == 0:
            imported.add(item.module.split(".")[0])
    assert not imported & {"django", "os", "io", "pathlib", "subprocess", "socket", "shutil", "scheduler", "fabric"}
    code = "import sys, scheduler.launch.env; print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_reconcile_is_pure_and_the_node_side_loads_no_django():
    source = (ROOT / "scheduler" / "launch" / "reconcile.py").read_text()
    assert "import os" not in source and "django" not in source
    code = (
        "import sys, scheduler.launch.process, scheduler.launch.container, scheduler.launch.ledger, "
        "scheduler.launch.reconcile; print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'celery')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
