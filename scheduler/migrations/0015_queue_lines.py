"""The queue's order and reasons move from ClusterScheduler.queue (JSON) to queue_lines (packed bytes)."""

from django.db import migrations, models

from scheduler import queue_lines


def pack_lines(apps, schema_editor):
    ClusterScheduler = apps.get_model("scheduler", "ClusterScheduler")
    for row in ClusterScheduler.objects.all():
        queue = dict(row.queue or {})
        row.queue_lines = queue_lines.pack(queue.pop("order", []), queue.pop("reason", []))
        row.queue = queue
        row.save(update_fields=["queue", "queue_lines"])


def unpack_lines(apps, schema_editor):
    ClusterScheduler = apps.get_model("scheduler", "ClusterScheduler")
    for row in ClusterScheduler.objects.all():
        order, reasons = queue_lines.unpack(bytes(row.queue_lines))
        row.queue = {**(row.queue or {}), "order": order, "reason": reasons}
        row.save(update_fields=["queue"])


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0014_job_round_read_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="clusterscheduler",
            name="queue_lines",
            field=models.BinaryField(blank=True, default=b""),
        ),
        migrations.RunPython(pack_lines, unpack_lines),
    ]
