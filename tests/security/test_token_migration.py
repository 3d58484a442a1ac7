"""Moving from DRF's plaintext tokens to knox: the migration deletes the old tokens (their table, authtoken's migration
records, content types and permissions) instead of carrying them over (clusterctl/migrations/0002)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

migration = importlib.import_module("clusterctl.migrations.0002_revoke_plaintext_tokens")


@pytest.mark.django_db(transaction=True)
def test_the_old_plaintext_tokens_are_dropped(tenant_user):
    with connection.cursor() as cursor:  # the table and records an installation of the old release has
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp, user_id integer NOT NULL)"
        )
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, NULL, %s)", ["a" * 40, tenant_user.pk])
        cursor.execute(
            "INSERT INTO django_migrations (app, name, applied) VALUES ('authtoken', '0001_initial', CURRENT_TIMESTAMP)"
        )
    old = ContentType.objects.create(app_label="authtoken", model="token")
    Permission.objects.create(content_type=old, codename="view_token", name="Can view token")

    with connection.schema_editor() as editor:
        migration.drop_plaintext_tokens(apps, editor)

    assert "authtoken_token" not in connection.introspection.table_names()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_migrations WHERE app = 'authtoken'")
        assert cursor.fetchone() == (0,)
    assert not ContentType.objects.filter(app_label="authtoken").exists()
    assert not Permission.objects.filter(codename="view_token").exists()


@pytest.mark.django_db(transaction=True)
def test_a_new_installation_has_nothing_to_drop():
    with connection.schema_editor() as editor:
        migration.drop_plaintext_tokens(apps, editor)
    assert "authtoken_token" not in connection.introspection.table_names()
