"""python manage.py schedule_round --cluster NAME: run one scheduling round now and print what it decided."""

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Cluster
from scheduler.rounds import RoundBusy, run_round


class Command(BaseCommand):
    help = "Run one scheduling round for a cluster and print its decisions."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)

    def handle(self, **o):
        cluster = Cluster.objects.filter(name=o["cluster"]).first()
        if cluster is None:
            raise CommandError(f"no cluster named {o['cluster']!r}")
        try:
            record = run_round(cluster.pk, "manual")
        except RoundBusy as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"round {record.pk}: {record.pending} pending, {record.running} running -> placed {record.placed}, "
            f"preempted {record.preempted}, migrated {record.migrated}, requeued {record.requeued}, "
            f"stale {record.rejected_stale} in {record.duration_ms:.0f} ms (engine {record.engine_ms:.0f} ms)"
        )
        for entry in record.decisions[:50]:
            self.stdout.write(f"  {entry['kind']:10} job {entry['job']}: {entry.get('why', '')}")
