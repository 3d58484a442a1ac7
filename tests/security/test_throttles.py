"""OWASP API4 (unrestricted resource consumption), request rates and page sizes: past its rate a user or an address
gets 429 with Retry-After in DRF's error shape, each user has a count of its own, and a page is never larger than
the paginator's cap (a larger ?limit= is refused)."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from tests.conftest import _token_client

pytestmark = pytest.mark.django_db
CLUSTERS = "/api/v1/clusters/"


@pytest.fixture
def rates(settings):
    """Set API rates for one test (the suite runs with rates too high to reach); forget the counts after."""
    touched: list[str] = []

    def set_rates(**scopes: str) -> None:
        merged = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **scopes}
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": merged}

    def forget(key: str) -> None:
        cache.delete(key)  # user ids repeat across tests on SQLite: start from no count
        touched.append(key)

    set_rates.forget = forget
    yield set_rates
    cache.delete_many(touched)


def test_a_user_over_the_rate_gets_429_with_retry_after(operator, rates):
    rates(user="2/min")
    rates.forget(f"throttle_user_{operator.pk}")
    api = _token_client(operator)
    assert [api.get(CLUSTERS).status_code for _ in range(2)] == [200, 200]
    refused = api.get(CLUSTERS)
    assert refused.status_code == 429
    wait = int(refused["Retry-After"])
    assert 55 <= wait <= 60
    assert refused.json() == {"detail": f"Request was throttled. Expected available in {wait} seconds."}


def test_each_user_has_a_count_of_its_own(operator, tenant_user, rates):
    rates(user="2/min")
    for user in (operator, tenant_user):
        rates.forget(f"throttle_user_{user.pk}")
    busy = _token_client(operator)
    for _ in range(3):
        busy.get(CLUSTERS)
    assert _token_client(tenant_user).get(CLUSTERS).status_code == 200


def test_an_anonymous_address_over_its_rate_gets_429(client, rates):
    # The schema is the API's one path open without a login (401 comes before any rate elsewhere).
    rates(anon="1/min")
    rates.forget("throttle_anon_198.51.100.20")
    assert client.get("/api/v1/schema/", REMOTE_ADDR="198.51.100.20").status_code == 200
    assert client.get("/api/v1/schema/", REMOTE_ADDR="198.51.100.20").status_code == 429


def test_a_page_is_never_larger_than_the_cap(operator_api, monkeypatch):
    from clusterctl.pagination import Pagination
    from tests.factories import ClusterFactory

    for i in range(5):
        ClusterFactory(name=f"c{i}")
    monkeypatch.setattr(Pagination, "max_limit", 3)
    assert len(operator_api.get(CLUSTERS, {"limit": 3}).json()["results"]) == 3
    too_many = operator_api.get(CLUSTERS, {"limit": 1_000_000})
    assert too_many.status_code == 400 and list(too_many.json()) == ["limit"]
