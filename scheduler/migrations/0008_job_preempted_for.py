from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0007_launch_master_port"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="preempted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="preempted_for",
            field=models.BigIntegerField(blank=True, help_text="The job it was last preempted for.", null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="preempted_gpus",
            field=models.JSONField(blank=True, default=list, help_text="Ids of its GPUs that job takes."),
        ),
    ]
