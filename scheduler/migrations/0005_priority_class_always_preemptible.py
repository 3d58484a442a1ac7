from django.db import migrations, models

# The default classes whose jobs are always preemptible (scheduler.choices.ALWAYS_PREEMPTIBLE at the time).
ALWAYS = ("low", "best-effort")


def mark(apps, schema_editor):
    PriorityClass = apps.get_model("scheduler", "PriorityClass")
    PriorityClass.objects.filter(name__in=ALWAYS, preemptible_default=True).update(always_preemptible=True)


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0004_launches")]

    operations = [
        migrations.AddField(
            model_name="priorityclass",
            name="always_preemptible",
            field=models.BooleanField(
                default=False,
                help_text="Its jobs are always preemptible: a job asking for preemptible=false is refused (low, "
                "best-effort).",
            ),
        ),
        migrations.AddConstraint(
            model_name="priorityclass",
            constraint=models.CheckConstraint(
                condition=models.Q(("always_preemptible", True), ("preemptible_default", False), _negated=True),
                name="always_preemptible_is_preemptible_by_default",
                violation_error_message="a class whose jobs are always preemptible is preemptible by default",
            ),
        ),
        migrations.RunPython(mark, migrations.RunPython.noop),
    ]
