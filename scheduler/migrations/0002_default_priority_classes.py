from django.db import migrations

from scheduler.choices import DEFAULT_PRIORITY_CLASSES as DEFAULTS


def create(apps, schema_editor):
    PriorityClass = apps.get_model("scheduler", "PriorityClass")
    for name, value, preemptible, description in DEFAULTS:
        PriorityClass.objects.get_or_create(
            name=name, defaults={"value": value, "preemptible_default": preemptible, "description": description}
        )


def remove(apps, schema_editor):
    apps.get_model("scheduler", "PriorityClass").objects.filter(name__in=[d[0] for d in DEFAULTS]).delete()


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0001_initial")]
    operations = [migrations.RunPython(create, remove)]
