"""Drop three single-column indexes that composite indexes beginning with the same column already serve: a job row
is updated several times in its life and an allocation row is written per GPU placed, and each index takes an entry
every time (issue 16: a filling round updates 5,893 jobs and inserts 9,905 allocations).

Explicit SQL, not AlterField(db_index=False): on PostgreSQL Django drops whatever index it finds on the column, which
for Allocation.gpu includes the partial unique index `one_active_whole_gpu` (the double-allocation guard), and it
drops and re-adds the foreign keys, which re-checks every row."""

import django.db.models.deletion
from django.db import migrations, models

DROPPED = [
    ("scheduler_job_tenant_id_8615d828", "scheduler_job", "tenant_id"),  # (tenant_id, status) serves it
    ("scheduler_job_pool_id_e22604f7", "scheduler_job", "pool_id"),  # (pool_id, status) serves it
    ("scheduler_allocation_gpu_id_870d2cfe", "scheduler_allocation", "gpu_id"),  # (gpu_id, active) serves it
]


class Migration(migrations.Migration):
    dependencies = [
        ("fabric", "0008_metric_indexes_once"),
        ("scheduler", "0015_queue_lines"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for name, table, column in DROPPED
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="allocation",
                    name="gpu",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="allocations",
                        to="fabric.gpu",
                    ),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="pool",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="jobs",
                        to="scheduler.pool",
                    ),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="tenant",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="jobs",
                        to="scheduler.tenant",
                    ),
                ),
            ],
        ),
    ]
