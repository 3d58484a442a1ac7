"""Job events after commit (topic "queue"): the live views' broadcaster marks the queue dirty (dashboard.broadcast)."""

from __future__ import annotations

from fabric.events import send_on_commit


def job_changed_on_commit(job) -> None:
    send_on_commit(
        job.pool.cluster_id,
        {"kind": "job", "id": job.pk, "tenant_id": job.tenant_id, "status": job.status, "held": job.held},
        topic="queue",
    )


def jobs_changed_on_commit(cluster_id: int, changes: list[tuple[int, str]]) -> None:
    """One message for many jobs (a round's placements), never one per job."""
    if changes:
        send_on_commit(cluster_id, {"kind": "jobs", "changes": [list(c) for c in changes]}, topic="queue")
