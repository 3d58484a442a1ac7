"""A real slurmctld reads the exported topology.conf (topology/tree) and `scontrol show topology` reports the switches
and nodes of our fabric.

Debian's Slurm 22.05 (`apt-get install slurmctld slurm-client munge`; ../shared/slurm_emu/ explains the set-up):
each test starts its own munged (own key and socket) and its own slurmctld in the foreground on free ports, with a
slurm.conf that names every exported node (NodeAddr 127.0.0.1: no slurmd is needed to read a topology), asks
`scontrol show topology`, and stops both by the PIDs it started. Skipped, saying so, where Slurm is not installed.
topology/block and topology.yaml are newer than 22.05 (23.11, 25.05): they are checked against Slurm's published
rules in test_export_schemas.py.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from fabric.importers.fattree import generate_fat_tree
from fabric.topology.convert import fabric_from_parsed
from fabric.topology.export import ExportInput, build_hierarchy, render
from fabric.topology.hostlist import compress, expand
from tests.fabric.topology.factories import SX6036
from tests.fabric.topology.test_export import NDR_DGX, _capture

SLURMCTLD = shutil.which("slurmctld") or shutil.which("slurmctld", path="/usr/sbin:/usr/local/sbin")
MUNGED = shutil.which("munged") or shutil.which("munged", path="/usr/sbin:/usr/local/sbin")
SCONTROL = shutil.which("scontrol")
MISSING = [name for name, path in (("slurmctld", SLURMCTLD), ("munged", MUNGED), ("scontrol", SCONTROL)) if not path]

pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"Slurm is not installed here ({', '.join(MISSING)} missing): apt-get install slurmctld slurm-client munge",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def scontrol_show_topology(topology_conf: str, nodes: list[str]) -> str:
    """Start munged and slurmctld on `topology_conf`, return what `scontrol show topology` prints, stop both."""
    run = Path(tempfile.mkdtemp(prefix="cctopo"))  # short: a unix socket path holds at most 107 bytes
    procs: list[subprocess.Popen] = []
    try:
        run.chmod(0o755)  # munged: "execute permissions for all required" on the socket's directories
        for sub in ("state", "log", "msock", "munge", "spool"):
            (run / sub).mkdir()
        (run / "munge").chmod(0o700)
        (run / "msock").chmod(0o755)
        key = run / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (run / "topology.conf").write_text(topology_conf)
        conf = run / "slurm.conf"
        conf.write_text(
            "\n".join(
                [
                    "ClusterName=exporttest",
                    "SlurmctldHost=localhost",
                    f"SlurmUser={getpass.getuser()}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={run}/msock/munge.socket",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    f"StateSaveLocation={run}/state",
                    f"SlurmdSpoolDir={run}/spool",
                    f"SlurmctldPidFile={run}/slurmctld.pid",
                    f"SlurmctldLogFile={run}/log/slurmctld.log",
                    "ProctrackType=proctrack/pgid",
                    "TaskPlugin=task/none",
                    "SwitchType=switch/none",
                    "MpiDefault=none",
                    "SelectType=select/cons_tres",
                    "TopologyPlugin=topology/tree",
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "MailProg=/bin/true",
                    f"NodeName={compress(nodes)} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
                    "PartitionName=all Nodes=ALL Default=YES State=UP",
                    "",
                ]
            )
        )
        env = {**os.environ, "SLURM_CONF": str(conf)}
        procs.append(
            subprocess.Popen(
                [MUNGED, "-F", f"--key-file={key}", f"--socket={run}/msock/munge.socket",
                 f"--pid-file={run}/munged.pid", f"--log-file={run}/log/munged.log", f"--seed-file={run}/munge/seed"],
                stdout=subprocess.DEVNULL, stderr=(run / "log" / "munged.stderr").open("w"),
            )
        )  # fmt: skip
        for _ in range(200):
            if (run / "msock" / "munge.socket").exists():
                break
            if procs[0].poll() is not None:
                pytest.fail(f"munged stopped (exit {procs[0].returncode}); see its log in {run}/log")
            time.sleep(0.05)
        ctld = subprocess.Popen(
            [SLURMCTLD, "-D", "-c", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        procs.append(ctld)
        deadline = time.monotonic() + 30
        while True:
            ping = subprocess.run([SCONTROL, "ping"], env=env, capture_output=True, text=True, timeout=30)
            if "UP" in ping.stdout:
                break
            log = (run / "log" / "slurmctld.log").read_text() if (run / "log" / "slurmctld.log").exists() else ""
            if ctld.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"slurmctld did not come up (exit {ctld.poll()}):\n{log[-3000:]}")
            time.sleep(0.2)
        shown = subprocess.run([SCONTROL, "show", "topology"], env=env, capture_output=True, text=True, timeout=30)
        assert shown.returncode == 0, shown.stderr
        log = (run / "log" / "slurmctld.log").read_text()
        assert "switches lack access" not in log and "Multiple leaf switches" not in log, log[-3000:]
        return shown.stdout
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(run, ignore_errors=True)


def _parse(shown: str) -> dict[str, tuple[int, set[str], set[str]]]:
    """SwitchName=ib7 Level=1 LinkSpeed=1 Nodes=... Switches=... -> {name: (level, nodes, child switches)}"""
    out = {}
    for line in shown.splitlines():
        if not line.startswith("SwitchName="):
            continue
        words = dict(w.split("=", 1) for w in line.split())
        out[words["SwitchName"]] = (
            int(words["Level"]),
            set(expand(words.get("Nodes", ""))),
            set(expand(words.get("Switches", ""))),
        )
    return out


def _expected(inp: ExportInput) -> dict[str, tuple[int, set[str], set[str]]]:
    """Our fabric: each leaf group with its hosts, each switch above with its tier and every host below it."""
    h = build_hierarchy(inp)
    below: dict[str, set[str]] = {g.name: set(g.hosts) for g in h.groups}
    out = {g.name: (0, set(g.hosts), set()) for g in h.groups}
    for u in h.upper:  # by tier: children come first
        below[u.name] = set().union(*(below[c] for c in u.children))
        out[u.name] = (u.level, below[u.name], set(u.children))
    return out


def test_slurmctld_reads_the_sx6036_tree():
    inp = _capture(SX6036)
    topology = _parse(scontrol_show_topology(render(inp, "slurm-tree").text, build_hierarchy(inp).hosts))
    assert topology == _expected(inp)
    # By hand (SOURCES.md): 6 leaves, both spines over all of them, tank1/tank2 on ib7 only.
    assert sorted(topology) == ["ib1", "ib2", "ib3", "ib4", "ib5", "ib6", "ib7", "ib7-hosts", "ib8"]
    assert topology["ib7"][0] == topology["ib8"][0] == 1
    assert len(topology["ib7"][1]) == 144 and len(topology["ib8"][1]) == 142
    assert topology["ib7"][1] - topology["ib8"][1] == {"tank1", "tank2"}
    assert topology["ib1"] == (0, {f"stage{i}" for i in range(1, 25)}, set())


def test_slurmctld_reads_the_ndr_dgx_rail_groups():
    inp = _capture(NDR_DGX)
    topology = _parse(scontrol_show_topology(render(inp, "slurm-tree").text, build_hierarchy(inp).hosts))
    assert topology == _expected(inp)
    leaves = [name for name, (level, _, _) in topology.items() if level == 0]
    assert len(leaves) == 8  # the 8 scalable units, each one leaf to Slurm
    assert sum(len(topology[leaf][1]) for leaf in leaves) == 121
    assert all(len(nodes) == 121 for level, nodes, _ in topology.values() if level == 1)  # every spine reaches all


def test_slurmctld_reads_a_three_tier_tree():
    fabric = fabric_from_parsed(generate_fat_tree(16, leaf_ports=8, hcas_per_node=2, storage_nodes=2))
    inp = ExportInput("gen", fabric)
    topology = _parse(scontrol_show_topology(render(inp, "slurm-tree").text, build_hierarchy(inp).hosts))
    assert topology == _expected(inp)
    assert {level for level, _, _ in topology.values()} == {0, 1, 2}
    assert topology["core01"] == (2, {f"gpu{i:04d}" for i in range(1, 17)}, {"spine01", "spine05"})
