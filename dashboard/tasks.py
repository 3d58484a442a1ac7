"""Celery task of the live views: thin, takes an id, idempotent (it sends what changed since it last sent)."""

from __future__ import annotations

from celery import shared_task

from dashboard.broadcast import flush


@shared_task(ignore_result=True, acks_late=True)
def broadcast(cluster_id: int) -> None:
    """Send the dirty topics of a cluster to its groups (dashboard.broadcast.flush)."""
    flush(cluster_id)
