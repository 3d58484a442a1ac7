"""OWASP API2 (broken authentication), API tokens: stored hashed, issued new each time and shown once, several per
user, expiring, revocable from the command line and the admin; the admin never shows a secret."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection, models
from django.utils import timezone
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db
CLUSTERS = "/api/v1/clusters/"


def tenant_user_token(*args: str) -> str:
    """The secret `manage.py tenant_user --tenant acme --user alice` prints."""
    out = StringIO()
    call_command("tenant_user", "--tenant", "acme", "--user", "alice", *args, stdout=out)
    (secret,) = re.findall(r"^token (\S+)$", out.getvalue(), re.M)
    return secret


def status_with(secret: str) -> int:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return api.get(CLUSTERS).status_code


def test_a_token_works_with_the_token_header():
    assert status_with(tenant_user_token()) == 200


def test_no_column_of_any_table_holds_the_secret():
    secret = tenant_user_token()
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if isinstance(field, (models.CharField, models.TextField)):
                assert not model._default_manager.filter(**{field.name: secret}).exists(), (model, field.name)
    with connection.cursor() as cursor:  # nor a table that no installed app owns any more
        for table in connection.introspection.table_names():
            if "token" in table:
                cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
                assert all(secret not in map(str, row) for row in cursor.fetchall()), table


def test_tenant_user_issues_a_new_token_each_run_and_both_work():
    first, second = tenant_user_token(), tenant_user_token()
    assert first != second
    assert (status_with(first), status_with(second)) == (200, 200)


def test_tenant_user_token_days_sets_the_expiry():
    from knox.models import AuthToken

    before = timezone.now()
    tenant_user_token("--token-days", "2")
    expiry = AuthToken.objects.get(user__username="alice").expiry
    assert before + timedelta(days=2) <= expiry <= timezone.now() + timedelta(days=2)


def test_tenant_user_refuses_a_token_that_never_expires_before_creating_anything():
    from django.core.management.base import CommandError

    from scheduler.models import Tenant

    with pytest.raises(CommandError, match="--token-days 0 days: a token's lifetime is more than 0 and at most 365"):
        tenant_user_token("--token-days", "0")
    assert not Tenant.objects.filter(name="acme").exists()


def test_an_expired_token_is_refused():
    from knox.models import AuthToken

    secret = tenant_user_token()
    AuthToken.objects.filter(user__username="alice").update(expiry=timezone.now() - timedelta(seconds=1))
    assert status_with(secret) == 401


def test_a_revoked_token_is_refused_from_the_next_request():
    secret = tenant_user_token()
    assert status_with(secret) == 200
    call_command("api_tokens", "revoke", "--user", "alice", "--prefix", secret[:8], stdout=StringIO())
    assert status_with(secret) == 401


def test_revoking_one_token_keeps_the_others():
    first, second = tenant_user_token(), tenant_user_token()
    call_command("api_tokens", "revoke", "--user", "alice", "--prefix", first[:12], stdout=StringIO())
    assert (status_with(first), status_with(second)) == (401, 200)


def test_api_tokens_list_shows_first_characters_and_expiry_never_the_secret():
    secret = tenant_user_token("--token-days", "30")
    out = StringIO()
    call_command("api_tokens", "list", "--user", "alice", stdout=out)
    expiry = (timezone.now() + timedelta(days=30)).strftime("%Y-%m-%d")
    assert re.fullmatch(rf"{secret[:15]}\.\.\.  created \S+ \S+  expires {expiry} \S+  valid\n", out.getvalue())


def test_the_admin_issues_a_token_shows_it_once_and_lists_it_by_prefix(operator, client):
    from knox.models import AuthToken

    operator.is_superuser = True
    operator.save()
    client.force_login(operator)
    issued = client.post(
        "/admin/clusterctl/apitoken/add/", {"user": operator.pk, "days": "7"}, follow=True
    ).content.decode()
    (secret,) = re.findall(r"Token for operator: ([0-9a-f]{64}) - copy it now", issued)
    token = AuthToken.objects.get(user=operator)
    listing = client.get("/admin/clusterctl/apitoken/").content.decode()
    # The digest is the row's key (in its links): a SHA-512 of the secret, not a way to it.
    assert token.token_key in listing and secret not in listing
    assert secret not in client.get(f"/admin/clusterctl/apitoken/{token.pk}/change/").content.decode()
    assert status_with(secret) == 200


def test_the_admin_revokes_selected_tokens(operator, client):
    from knox.models import AuthToken

    secret = tenant_user_token()
    operator.is_superuser = True
    operator.save()
    client.force_login(operator)
    digest = AuthToken.objects.get(user__username="alice").digest
    client.post("/admin/clusterctl/apitoken/", {"action": "revoke", "_selected_action": [digest]})
    assert status_with(secret) == 401
