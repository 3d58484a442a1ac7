"""Redis restarting (the cache refuses connections): the API keeps answering. The throttles fail open, a submit is
stored and answers 201 (its round follows from state), a failed sign-in is refused as usual, and the log says so
once per outage, not once per request."""

from __future__ import annotations

import logging

import pytest

from clusterctl import throttles
from scheduler.choices import JobStatus
from tests.resilience.conftest import stored, submit
from tests.scheduler.api.helpers import JOBS

pytestmark = pytest.mark.django_db


def test_a_tenant_lists_jobs_while_redis_is_down(site, cache_down):
    answer = site.api.get(JOBS)
    assert answer.status_code == 200
    assert answer.json()["count"] == 0


@pytest.mark.django_db(transaction=True)  # what follows the commit runs inside the request, as in production
def test_a_submit_while_redis_is_down_is_stored_and_answers_201(site, cache_down):
    answer = submit(site, "during-the-restart")
    assert answer.status_code == 201, answer.content
    job = stored("during-the-restart")
    assert (answer.json()["id"], job.status) == (job.pk, JobStatus.PENDING)


def test_the_throttles_warn_once_per_outage_not_per_request(site, cache_down, caplog):
    with caplog.at_level(logging.WARNING):
        statuses = [site.api.get(JOBS).status_code for _ in range(3)]
        throttles.cache_state.down_until = 0.0  # past CACHE_RETRY_S: the cache is asked again, and fails again
        statuses.append(site.api.get(JOBS).status_code)
    assert statuses == [200, 200, 200, 200]
    warnings = [r.getMessage() for r in caplog.records if "request rates are not limited" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith("the cache cannot be reached (ConnectionError: Error 111 connecting to 127.0.0.1:")


def test_requests_let_through_unthrottled_are_counted_for_metrics(site, cache_down):
    def unthrottled(scope: str) -> float:
        # The counter's own samples: a scrape of the whole registry would also read the cluster state (the cache).
        [family] = throttles.UNTHROTTLED.collect()
        found = [s.value for s in family.samples if s.name.endswith("_total") and s.labels == {"scope": scope}]
        return found[0] if found else 0.0

    before = unthrottled("user"), unthrottled("anon")
    for _ in range(3):  # the first finds the cache down; the next two skip it (CACHE_RETRY_S)
        assert site.api.get(JOBS).status_code == 200
    # Three user-rate checks let through; the anonymous rate never applies to a signed-in tenant, so none there.
    assert (unthrottled("user") - before[0], unthrottled("anon") - before[1]) == (3.0, 0.0)


def test_rates_are_limited_again_once_redis_is_back(site, settings, closed_port):
    from django.core.cache import cache
    from django.test import override_settings

    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "user": "1/min"},
    }
    cache.delete(f"throttle_user_{site.user.pk}")
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                               "LOCATION": f"redis://127.0.0.1:{closed_port}/0"}}):  # fmt: skip
        during = [site.api.get(JOBS).status_code for _ in range(3)]  # over 1/min, uncounted
    throttles.cache_state.down_until = 0.0  # CACHE_RETRY_S passed
    after = [site.api.get(JOBS).status_code for _ in range(2)]
    cache.delete(f"throttle_user_{site.user.pk}")
    assert (during, after) == ([200, 200, 200], [200, 429])


def test_a_wrong_password_while_redis_is_down_shows_the_sign_in_form_again(site, cache_down, client):
    # The failed-sign-in rate per address lives in the cache: it lets the attempt through (axes, in the database,
    # still counts it against the username).
    answer = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert answer.status_code == 200
    assert b"Please enter a correct username and password" in answer.content
