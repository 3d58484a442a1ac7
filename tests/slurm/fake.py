"""A Slurm controller in memory, answering the commands SlurmLauncher runs (sbatch, squeue, scontrol show job,
scancel) as Slurm 22.05 does, for the database tests of LAUNCHER=slurm. The real one (tests/slurm/emu.py) runs the
end-to-end tests; this one lets a test put a job in any state Slurm can (requeued, forgotten, pending on a drained
node) without waiting for Slurm to get there.

Wording of the errors is Slurm's own: sbatch's "Batch job submission failed: Invalid node name specified",
scontrol's "Invalid job id specified", "Unable to contact slurm controller (connect failure)" when it is down."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field


@dataclass
class FakeJob:
    slurm_id: int
    name: str
    comment: str
    nodes: str
    argv: list[str]
    env: dict[str, str]
    script: str
    state: str = "PENDING"
    reason: str = "None"
    exit_code: str = "0:0"
    restarts: int = 0
    signals: list[str] = field(default_factory=list)


class FakeSlurm:
    def __init__(self, nodes: set[str] | None = None) -> None:
        self.nodes = nodes  # None: every node name is known
        self.jobs: dict[int, FakeJob] = {}
        self.next_id = 100
        self.down = False
        self.commands: list[list[str]] = []

    def __call__(self, argv, *, env=None, input=None, **kw) -> subprocess.CompletedProcess:
        self.commands.append(list(argv))
        name = argv[0].rsplit("/", 1)[-1]
        if self.down:
            return self._done(argv, 1, err=f"{name}: error: Unable to contact slurm controller (connect failure)")
        return getattr(self, f"_{name}")(argv, env or {}, input or "")

    @staticmethod
    def _done(argv, code: int, out: str = "", err: str = "") -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(argv, code, out, err)

    def _sbatch(self, argv, env, script):
        opts = dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--") and "=" in a)
        hosts = opts["nodelist"].split(",")
        if self.nodes is not None and not set(hosts) <= self.nodes:
            return self._done(argv, 1, err="sbatch: error: Batch job submission failed: Invalid node name specified")
        sid = self.next_id
        self.next_id += 1
        self.jobs[sid] = FakeJob(
            sid, opts["job-name"], opts["comment"], opts["nodelist"], list(argv), dict(env), script
        )
        return self._done(argv, 0, out=f"{sid}\n")

    def _squeue(self, argv, env, _):
        lines = [f"{j.slurm_id}|{j.name}|{j.comment}|{j.state}|{j.nodes if j.state != 'PENDING' else ''}|{j.reason}|"
                 "gres:gpu:2" for j in self.jobs.values()]  # fmt: skip
        return self._done(argv, 0, out="".join(line + "\n" for line in lines))

    def _scontrol(self, argv, env, _):
        sid = int(argv[-1])
        j = self.jobs.get(sid)
        if j is None:
            return self._done(argv, 1, err="slurm_load_jobs error: Invalid job id specified")
        out = (
            f"JobId={sid} JobName={j.name} UserId=cc(1000) JobState={j.state} Reason={j.reason} Dependency=(null) "
            f"Requeue=0 Restarts={j.restarts} ExitCode={j.exit_code} NodeList={j.nodes} Comment={j.comment}\n"
        )
        return self._done(argv, 0, out=out)

    def _scancel(self, argv, env, _):
        sid = int(argv[-1])
        j = self.jobs.get(sid)
        if j is None:
            return self._done(argv, 1, err=f"scancel: error: Kill job error on job id {sid}: Invalid job id specified")
        sig = next((a.split("=", 1)[1] for a in argv if a.startswith("--signal=")), "")
        j.signals.append(sig or "cancel")
        if j.state in ("COMPLETED", "FAILED", "CANCELLED"):
            return self._done(argv, 1, err=f"scancel: error: Kill job error on job id {sid}: Job/step already "
                              "completing or completed")  # fmt: skip
        if sig != "TERM" or j.state == "RUNNING":
            j.state, j.exit_code = "CANCELLED", "0:15"
        return self._done(argv, 0)

    # -- what a test makes Slurm do --

    def set(self, sid: int, state: str, *, exit_code: str | None = None, reason: str = "None", restarts: int = 0):
        j = self.jobs[sid]
        j.state, j.reason, j.restarts = state, reason, restarts
        if exit_code is not None:
            j.exit_code = exit_code
