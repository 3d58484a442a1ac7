"""Node-side execution of allocated jobs: the job environment (PURE), process and container launchers.

- `env`: allocation description in, environment dict out (no Django, no I/O); the central side and the
  agents compute the same values from the same description.
- `state`: the per-job state files a node agent keeps in its run directory, and /proc identity checks.
- `ledger`: the node-side guard refusing GPUs the node lacks or another job on it holds.
- `process`, `container`: launchers (start, poll, tail, stop, adopt).

Nothing here imports Django: a node agent needs the broker only (docs/node-agent.md). The lifecycle that
drives these (launch on commit, acknowledgements, stop/relaunch, reconciliation) is planned in
docs/running-jobs.md.
"""
