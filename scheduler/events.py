"""Queue events after commit, to the cluster's "queue.<id>" group (the live queue page, issue 5)."""

from __future__ import annotations

from fabric.events import send_on_commit


def job_changed_on_commit(job) -> None:
    send_on_commit(
        job.pool.cluster_id,
        {"kind": "job", "id": job.pk, "tenant_id": job.tenant_id, "status": job.status, "held": job.held},
        topic="queue",
    )
