"""Failures: running jobs on capacity that left (unhealthy GPU, node down, node off the fabric). PURE.

Such jobs are requeued, keeping their `queue_seq` (their place in line), or failed when they opted out
of requeueing. Their surviving GPUs go back to the free capacity of this round. A node that is merely
drained or cordoned (up, not schedulable) keeps its jobs: it only takes no new work. A single-node job
on a node that lost its fabric links keeps running (it needs no network); a multi-node one cannot.
"""

from __future__ import annotations

from scheduler.core import reasons
from scheduler.core.state import ClusterState
from scheduler.core.types import RunningJob


def broken_jobs(state: ClusterState) -> list[tuple[RunningJob, str]]:
    """Running jobs that lost capacity, each with the first problem found (in plain words). A job the index kept
    from the last round has the answer it had then (ClusterState.broken_found)."""
    out: list[tuple[RunningJob, str]] = []
    gpus = state.gpus
    found = state.broken_found
    for jid, rj in state.running.items():
        if jid in found:
            why = found[jid]
            if why is not None:
                out.append((rj, why))
            continue
        why = None
        nodes: set[str] = set()
        for sh in rj.shares:
            g = gpus.get(sh.gpu_id)
            if g is None:
                why = reasons.gpu_gone(sh.gpu_id)
                break
            node = g.node
            nodes.add(node.name)
            if not node.up:
                why = reasons.node_down(node.name)
                break
            if not g.healthy:
                why = reasons.gpu_unhealthy(g.index, node.name)
                break
        if why is None and len(nodes) > 1:
            for name in sorted(nodes):
                if state.nodes[name].off_fabric:
                    why = reasons.node_off_fabric(name)
                    break
        found[jid] = why
        if why is not None:
            out.append((rj, why))
    return out
