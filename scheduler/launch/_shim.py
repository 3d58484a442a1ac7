"""Run one job command, then record its exit status in a file: the status outlives the agent.

    python -I _shim.py EXIT_FILE [UID:GID] -- ARGV...

The launcher starts this in a new session, so the shim leads the job's process group. Why a shim: once
the agent that launched a job restarts, it is no longer the job's parent and can never wait() for it; the
exit file is how the new agent still learns the exit code. Run as a file with -I (isolated), so neither
the job's PYTHONPATH nor this package's imports touch it. With UID:GID (the shim is then root), the job runs
as that user and group with no supplementary groups, while the shim keeps root to write the exit file.
"""

import json
import os
import signal
import subprocess
import sys
import time


def _ignore(signum, frame):
    pass


def main(argv: list[str]) -> None:
    exit_path, rest = argv[1], argv[2:]
    ids = None
    if rest and rest[0] != "--":
        uid, _, gid = rest.pop(0).partition(":")
        ids = int(uid), int(gid)
    if not rest or rest[0] != "--" or len(rest) < 2:
        sys.exit("usage: _shim.py EXIT_FILE [UID:GID] -- ARGV...")
    command = rest[1:]
    switch = {"user": ids[0], "group": ids[1], "extra_groups": []} if ids else {}
    # The stop signal goes to the whole group, this shim included: it must outlive the job to record it.
    # A handler, not SIG_IGN: handled signals revert to their default in the exec'd job, ignored ones not.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)
    try:
        # Inherits the log as stdout/stderr, the working directory and the environment.
        child = subprocess.Popen(command, **switch)
    except (OSError, ValueError) as exc:  # ValueError: nothing of it could be exec'd (an embedded NUL)
        reason = getattr(exc, "strerror", None) or exc
        print(f"clusterctl: cannot start {command[0]!r}: {reason}", file=sys.stderr, flush=True)
        returncode = 127 if isinstance(exc, FileNotFoundError) else 126
    else:
        returncode = child.wait()
    how = f"killed by signal {-returncode}" if returncode < 0 else f"exited with code {returncode}"
    print(f"--- clusterctl: job {how} ---", file=sys.stderr, flush=True)
    tmp = f"{exit_path}.tmp"
    with open(tmp, "w") as handle:
        json.dump({"returncode": returncode, "finished_at": time.time()}, handle)
    os.replace(tmp, exit_path)
    # Whatever the job left running in its group ends with it.
    os.killpg(0, signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv)
