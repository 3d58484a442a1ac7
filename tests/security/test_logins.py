"""OWASP API2 (broken authentication), password sign-ins: brute force locks a username out of an address (django-axes)
on each of the three sign-in forms, and one address spraying many usernames is throttled (clusterctl/throttles.py).
"""

from __future__ import annotations

import pytest
from django.core.cache import cache

pytestmark = pytest.mark.django_db
LOGIN_FORMS = ["/accounts/login/", "/admin/login/", "/api/v1/auth/login/"]


def sign_in(client, path: str, username: str, password: str, address: str = "127.0.0.1", **extra):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address, **extra)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def login_rate(settings):
    """The `login` rate at 3 failures an hour (the suite runs with rates too high to reach)."""

    def set_rate(rate: str = "3/hour") -> None:
        rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": rate}
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}

    yield set_rate
    cache.delete_many([f"throttle_login_{a}" for a in ("192.0.2.10", "192.0.2.11", "192.0.2.12", "203.0.113.7")])


@pytest.mark.parametrize("path", LOGIN_FORMS)
def test_five_wrong_passwords_lock_the_username_out_even_with_the_right_one(client, operator, path):
    answers = [sign_in(client, path, "operator", f"wrong-{i}").status_code for i in range(5)]
    assert answers == [200, 200, 200, 200, 429]
    assert sign_in(client, path, "operator", "pw-operator").status_code == 429
    assert not signed_in(client)


def test_the_lockout_holds_that_username_from_that_address_only(client, operator, tenant_user):
    for i in range(5):
        sign_in(client, "/accounts/login/", "operator", f"wrong-{i}")
    assert sign_in(client, "/accounts/login/", "tenant", "pw-tenant").status_code == 302
    client.logout()
    assert sign_in(client, "/accounts/login/", "operator", "pw-operator", address="10.0.0.2").status_code == 302


def test_a_success_resets_the_count(client, operator):
    for i in range(4):
        sign_in(client, "/accounts/login/", "operator", f"wrong-{i}")
    assert sign_in(client, "/accounts/login/", "operator", "pw-operator").status_code == 302
    client.logout()
    answers = [sign_in(client, "/accounts/login/", "operator", f"again-{i}").status_code for i in range(4)]
    assert answers == [200, 200, 200, 200]


def test_an_address_spraying_usernames_is_throttled_with_retry_after(client, operator, login_rate):
    login_rate("3/hour")
    for name in ("alice", "bob", "carol"):  # one wrong password each: no username reaches the lockout
        assert sign_in(client, "/accounts/login/", name, "Winter2026!", address="192.0.2.10").status_code == 200
    refused = sign_in(client, "/accounts/login/", "operator", "pw-operator", address="192.0.2.10")
    assert refused.status_code == 429
    assert 3590 <= int(refused["Retry-After"]) <= 3600
    assert not signed_in(client)


def test_the_failed_sign_in_rate_is_per_address(client, operator, login_rate):
    login_rate("3/hour")
    for name in ("alice", "bob", "carol"):
        sign_in(client, "/admin/login/", name, "Winter2026!", address="192.0.2.11")
    assert sign_in(client, "/admin/login/", "operator", "pw-operator", address="192.0.2.12").status_code == 302


def test_behind_the_proxy_a_forged_forwarded_for_does_not_reset_the_count(client, operator, login_rate, settings):
    login_rate("3/hour")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    # The client puts a fresh address first each time; the proxy appends the one it saw: 203.0.113.7.
    for i, name in enumerate(("alice", "bob", "carol")):
        forged = f"10.9.9.{i}, 203.0.113.7"
        sign_in(client, "/accounts/login/", name, "Winter2026!", address="127.0.0.1", HTTP_X_FORWARDED_FOR=forged)
    refused = sign_in(
        client,
        "/accounts/login/",
        "operator",
        "pw-operator",
        address="127.0.0.1",
        HTTP_X_FORWARDED_FOR="10.9.9.9, 203.0.113.7",
    )
    assert refused.status_code == 429
