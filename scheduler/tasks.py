"""Celery tasks of the scheduler: thin, take ids, idempotent (a round recomputes everything it decides)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.cache import cache

log = logging.getLogger(__name__)
DEBOUNCE_S = 1.0


def _key(cluster_id: int) -> str:
    return f"scheduler:round-requested:{cluster_id}"


def request_round(cluster_id: int, trigger: str) -> None:
    """Enqueue one round for the cluster unless one is already waiting (bursts of submits make one round)."""
    if cache.add(_key(cluster_id), trigger, timeout=30):
        run_round.apply_async((cluster_id, trigger), countdown=DEBOUNCE_S)


@shared_task(
    bind=True,
    ignore_result=True,
    acks_late=True,
    autoretry_for=(Exception,),
    dont_autoretry_for=(),
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=10,
)
def run_round(self, cluster_id: int, trigger: str = "periodic") -> None:
    from scheduler.rounds import RoundBusy
    from scheduler.rounds import run_round as run

    # Requests arriving from now on need a new round: this one may already have read the state.
    cache.delete(_key(cluster_id))
    try:
        run(cluster_id, trigger)
    except RoundBusy:
        log.info("round for cluster %s busy; retrying", cluster_id)
        raise self.retry(countdown=DEBOUNCE_S) from None


@shared_task(ignore_result=True)
def periodic_rounds() -> None:
    """Beat: one round per cluster that has a scheduler, so nothing waits on a lost request."""
    from scheduler.models import ClusterScheduler

    for cluster_id in ClusterScheduler.objects.values_list("cluster_id", flat=True):
        request_round(cluster_id, "periodic")
