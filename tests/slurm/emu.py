"""A small real Slurm cluster on this host for the tests (Debian's Slurm 22.05; ../shared/slurm_emu/ explains how).

`SlurmEmu(nodes=4, gpus=8).start()` writes slurm.conf and gres.conf in a temporary directory, starts its own munged
(own key and socket), slurmctld and one `slurmd -N <node>` per node, each in the foreground on its own free port, and
waits until every node is idle. Node names are gpu1..gpuN (fake NodeHostname h1..hN, NodeAddr 127.0.0.1: Debian's
slurmd is built without --enable-multiple-slurmd, and the one-slurmd-per-host check compares NodeHostname only);
GPUs are /dev/null symlinks (slurmd wants a character device). `stop()` cancels every job, then stops exactly the
processes it started (by PID: slurmds, slurmctld, munged) and the job processes Slurm left (their slurmstepd, found
as children of those slurmds), and removes the directory.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SBIN = "/usr/sbin:/usr/local/sbin:/usr/bin:/usr/local/bin"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol")
PATHS = {name: shutil.which(name) or shutil.which(name, path=SBIN) for name in BINARIES}
MISSING = [name for name, path in PATHS.items() if not path]
SKIP_REASON = (
    f"Slurm is not installed here ({', '.join(MISSING)} missing): apt-get install slurmctld slurmd slurm-client munge"
)


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class SlurmEmu:
    def __init__(self, nodes: int = 4, gpus: int = 8, prefix: str = "gpu", names: list[str] | None = None) -> None:
        self.prefix = prefix
        # `names`: the hosts of a cluster stored in the test (generated fat trees name them gpu0001...).
        self.names = list(names) if names else [f"{prefix}{i}" for i in range(1, nodes + 1)]
        self.gpus = gpus
        self.run = Path(tempfile.mkdtemp(prefix="ccslurm"))  # short: a unix socket path holds at most 107 bytes
        self.conf = self.run / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: dict[str, subprocess.Popen] = {}

    def _popen(self, name: str, argv: list[str]) -> subprocess.Popen:
        err = (self.run / "log" / f"{name}.stderr").open("w")
        proc = subprocess.Popen(argv, env=self.env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        self.procs[name] = proc
        return proc

    def write_conf(self) -> None:
        run = self.run
        run.chmod(0o755)
        for sub in ("state", "log", "msock", "munge", "spool", "dev", "out"):
            (run / sub).mkdir()
        (run / "munge").chmod(0o700)
        (run / "out").chmod(0o1777)
        for name in self.names:
            (run / "spool" / name).mkdir()
        for i in range(self.gpus):
            (run / "dev" / f"nvidia{i}").symlink_to("/dev/null")
        ctld, *ports = free_ports(1 + len(self.names))
        self.ports = ports
        n = len(self.names)
        lines = [
            "ClusterName=cctest",
            "SlurmctldHost=localhost",
            f"SlurmUser={getpass.getuser()}",
            f"SlurmdUser={getpass.getuser()}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={run}/msock/munge.socket",
            f"SlurmctldPort={ctld}",
            f"StateSaveLocation={run}/state",
            f"SlurmdSpoolDir={run}/spool/%n",
            f"SlurmctldPidFile={run}/slurmctld.pid",
            f"SlurmdPidFile={run}/slurmd-%n.pid",
            f"SlurmctldLogFile={run}/log/slurmctld.log",
            f"SlurmdLogFile={run}/log/slurmd-%n.log",
            "SlurmdParameters=config_overrides",
            "TreeWidth=65533",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "KillWait=2",
            "MinJobAge=300",
            "MailProg=/bin/true",
        ]
        for name, port, i in zip(self.names, ports, range(1, n + 1), strict=True):
            lines.append(
                f"NodeName={name} NodeHostname=h{i} NodeAddr=127.0.0.1 Port={port} CPUs=16 Boards=1 "
                f"SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=65536 Gres=gpu:{self.gpus} "
                "State=UNKNOWN"
            )
        lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (run / "gres.conf").write_text(
            f"AutoDetect=off\nNodeName={','.join(self.names)} Name=gpu File={run}/dev/nvidia[0-{self.gpus - 1}]\n"
        )
        key = run / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)

    def start(self, timeout: float = 60.0) -> SlurmEmu:
        try:
            self.write_conf()
            run = self.run
            munged = self._popen("munged", [
                PATHS["munged"], "-F", f"--key-file={run}/munge/munge.key", f"--socket={run}/msock/munge.socket",
                f"--pid-file={run}/munged.pid", f"--log-file={run}/log/munged.log", f"--seed-file={run}/munge/seed",
                "--num-threads=4"])  # fmt: skip
            self._wait(lambda: (run / "msock" / "munge.socket").exists(), 10, "munged", munged)
            ctld = self._popen("slurmctld", [PATHS["slurmctld"], "-D", "-c", "-f", str(self.conf)])
            self._wait(lambda: "UP" in self.cmd("scontrol", "ping").stdout, timeout, "slurmctld", ctld)
            for name in self.names:
                self._popen(f"slurmd-{name}", [PATHS["slurmd"], "-D", "-N", name, "-f", str(self.conf)])
            self._wait(lambda: self.idle() == len(self.names), timeout, "slurmd", None)
        except BaseException:
            self.stop()
            raise
        return self

    def stepds(self) -> list[int]:
        """The slurmstepd processes of this cluster (SLURM_CONF in their environment is this cluster's file)."""
        mine = f"SLURM_CONF={self.conf}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and (proc / "comm").read_text().startswith("slurmstepd"):
                    if mine in (proc / "environ").read_bytes().split(b"\0"):
                        found.append(int(proc.name))
            except OSError:
                continue
        return found

    def idle(self) -> int:
        out = self.cmd("sinfo", "-h", "-N", "-t", "idle", "-o", "%N").stdout
        return len(out.split())

    def _wait(self, ok, timeout: float, what: str, proc: subprocess.Popen | None) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                logs = "\n".join(p.read_text()[-1500:] for p in sorted((self.run / "log").glob("*")) if p.is_file())
                raise RuntimeError(f"{what} did not come up (exit {proc.poll() if proc else None}):\n{logs}")
            time.sleep(0.2)

    def cmd(self, *argv: str, check: bool = False) -> subprocess.CompletedProcess:
        binary = PATHS.get(argv[0]) or shutil.which(argv[0]) or argv[0]
        return subprocess.run([binary, *argv[1:]], env=self.env, capture_output=True, text=True, timeout=30,
                              check=check)  # fmt: skip

    def stop(self) -> None:
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.cmd("scancel", "--partition=gpu")
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and self.cmd("squeue", "-h").stdout.strip():
                time.sleep(0.3)
        for group in ("slurmd-", "slurmctld", "munged"):
            procs = [p for name, p in self.procs.items() if name.startswith(group)]
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        for pid in self.stepds():  # a job's slurmstepd outlives its slurmd (it is the init's child then)
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(self.run, ignore_errors=True)
