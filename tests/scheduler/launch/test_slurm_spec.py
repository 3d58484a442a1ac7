"""The sbatch command line and environment of a placed generation (scheduler.launch.slurm, pure): what reaches
Slurm, and what is refused before it could (values worked out by hand from the payloads below)."""

from __future__ import annotations

import pytest

from scheduler.launch.slurm import SlurmError, sbatch_argv, sbatch_env, spec_from_payloads


def payloads(hosts=("gpu01", "gpu02"), per_node=2, node_gpus=2, kind="whole", **extra) -> list[dict]:
    nodes = [
        {"hostname": h, "gpus": [{"uuid": f"GPU-{h}-{i}", "index": i, "kind": kind} for i in range(per_node)]}
        for h in hosts
    ]
    alloc = {"job_id": 7, "generation": 3, "env": {"EPOCHS": "2"}, "nodes": nodes, "master_port": 29507}
    base = {"allocation": alloc, "command": "python train.py", "workdir": "/data/run", "grace_s": 45, "run_as": ""}
    return [{**base, "host": h, "node_gpus": node_gpus, **extra} for h in hosts]


def test_the_command_line_pins_nodes_gpus_identity_and_mode():
    spec = spec_from_payloads(payloads(), partition="gpu", account="ml", output_dir="/shared/out/")
    assert sbatch_argv(spec, "site-a") == [
        "sbatch", "--parsable", "--job-name=cc-7-g3", "--comment=clusterctl:site-a:7:3", "--nodelist=gpu01,gpu02",
        "--nodes=2", "--ntasks-per-node=1", "--no-requeue", "--export=ALL", "--chdir=/data/run", "--gres=gpu:2",
        "--exclusive", "--partition=gpu", "--account=ml", "--output=/shared/out/cc-7-g3-%j.out",
    ]  # fmt: skip
    assert spec.grace_s == 45.0


def test_part_of_a_node_is_shared_and_no_workdir_is_tmp():
    spec = spec_from_payloads(payloads(per_node=1, node_gpus=8, workdir=""))
    argv = sbatch_argv(spec, "cc")
    assert "--oversubscribe" in argv and "--exclusive" not in argv and "--gres=gpu:1" in argv
    assert "--chdir=/tmp" in argv


def test_each_node_gets_its_own_ranks_and_the_rest_is_shared():
    env = sbatch_env(spec_from_payloads(payloads()), slurm_conf="/etc/slurm/x.conf")
    assert env["CLUSTERCTL_COMMAND"] == "python train.py" and env["EPOCHS"] == "2"
    assert env["WORLD_SIZE"] == "4" and env["MASTER_ADDR"] == "gpu01" and env["MASTER_PORT"] == "29507"
    assert env["SLURM_CONF"] == "/etc/slurm/x.conf"
    lines = env["CLUSTERCTL_SLURM_NODES"].splitlines()
    assert "gpu01 NODE_RANK=0" in lines and "gpu02 NODE_RANK=1" in lines
    assert "gpu01 RANK=0" in lines and "gpu02 RANK=2" in lines
    assert "CUDA_VISIBLE_DEVICES" not in env  # Slurm sets it to the GPUs its --gres gave


def test_the_tenants_user_becomes_uid_and_gid():
    argv = sbatch_argv(spec_from_payloads(payloads(run_as="2001:3001")), "cc")
    assert argv[-2:] == ["--uid=2001", "--gid=3001"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "mps"}, "job 7: mps shares cannot run in Slurm, whose --gres gives whole GPUs"),
        ({"command": ""}, "job 7: no command"),
        ({"run_as": "0:0"}, "job 7: run_as '0:0' is not uid:gid"),
        ({"run_as": "1:2 --x"}, "job 7: run_as '1:2 --x' is not uid:gid"),
        ({"hosts": ("gpu[01-02]",)}, "node 'gpu[01-02]' is not a Slurm name"),
        ({"hosts": ("-gpu01",)}, "node '-gpu01' is not a Slurm name"),
    ],
)
def test_what_may_not_reach_sbatch_is_refused_naming_it(change, message):
    hosts = change.pop("hosts", ("gpu01", "gpu02"))
    kind = change.pop("kind", "whole")
    with pytest.raises(SlurmError) as err:
        sbatch_argv(spec_from_payloads(payloads(hosts=hosts, kind=kind, **change)), "cc")
    assert str(err.value).startswith(message)


def test_slurms_own_variables_may_not_come_from_the_job():
    bad = payloads()
    for p in bad:
        p["allocation"]["env"]["SBATCH_PARTITION"] = "other"
    with pytest.raises(SlurmError, match="may not set SBATCH_PARTITION: Slurm reads those as its own options"):
        sbatch_argv(spec_from_payloads(bad), "cc")


def test_a_bad_partition_or_tag_is_refused():
    spec = spec_from_payloads(payloads(), partition="gpu,debug")
    with pytest.raises(SlurmError, match="partition 'gpu,debug' is not a Slurm name"):
        sbatch_argv(spec, "cc")
    with pytest.raises(SlurmError, match="SLURM_TAG 'Site A'"):
        sbatch_argv(spec_from_payloads(payloads()), "Site A")
