from django.db import migrations, models

import scheduler.models.tenants


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0005_priority_class_always_preemptible")]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="run_as",
            field=models.CharField(
                blank=True,
                help_text="uid:gid its jobs run as on the nodes (container --user; the process launcher when the agent "
                "is root); empty: the node agent's own user.",
                max_length=21,
                validators=[scheduler.models.tenants.run_as_validator],
            ),
        ),
    ]
