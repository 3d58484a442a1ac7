"""Revoke every token of DRF's authtoken app, which clusterctl used until it moved to django-rest-knox.

Those tokens were stored in plaintext (and shown in the admin): anyone who read the database, a backup or the admin
holds them, so they are not carried over (hashing them now would keep exactly those copies valid). Their table is
dropped, with authtoken's migration records and content types, and every client needs a new token: `manage.py
tenant_user` or `manage.py api_tokens issue` (README "Tenants and the API").
"""

from django.db import migrations

OLD_TABLE = "authtoken_token"


def drop_plaintext_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if OLD_TABLE in connection.introspection.table_names():
        schema_editor.execute(f"DROP TABLE {schema_editor.quote_name(OLD_TABLE)}")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = %s", ["authtoken"])
    # Their permissions go with the content type (cascade).
    apps.get_model("contenttypes", "ContentType").objects.filter(app_label="authtoken").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("clusterctl", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(drop_plaintext_tokens, migrations.RunPython.noop)]
