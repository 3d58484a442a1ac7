from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0006_tenant_run_as")]

    operations = [
        migrations.AddField(
            model_name="launch",
            name="master_port",
            field=models.PositiveIntegerField(
                blank=True, help_text="On the job's master node only: the MASTER_PORT it listens on.", null=True
            ),
        ),
        migrations.AddConstraint(
            model_name="launch",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    ("master_port__isnull", False),
                    ("state__in", ("sent", "prepared", "starting", "running", "stopping")),
                ),
                fields=("node", "master_port"),
                name="one_open_launch_per_master_port",
            ),
        ),
    ]
