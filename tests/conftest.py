"""Shared fixtures: real tool outputs, users with the two kinds of access, API clients."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_text():
    def read(name: str) -> str:
        return (FIXTURES / name).read_text()

    return read


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_user("operator", "op@example.org", "pw-operator", is_staff=True)


@pytest.fixture
def tenant_user(django_user_model):
    return django_user_model.objects.create_user("tenant", "t@example.org", "pw-tenant")


def _token_client(user):
    # Imported here so the pure-core tests can run without Django (pytest -p no:django).
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def operator_api(operator):
    return _token_client(operator)


@pytest.fixture
def tenant_api(tenant_user):
    return _token_client(tenant_user)
