from django.db import migrations

DEFAULTS = [
    ("high", 100, False, "Production work; may preempt lower classes."),
    ("normal", 50, True, "The default class."),
    ("low", 10, True, "Runs when there is room; preempted first."),
    ("best-effort", 0, True, "Scavenges idle GPUs; always preemptible."),
]


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
