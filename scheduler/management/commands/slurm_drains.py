"""python manage.py slurm_drains --cluster NAME [--dry-run | --apply] [--json]: Slurm's drains brought in line with
the cluster's health now (what the beat does every SLURM_DRAIN_INTERVAL_S)."""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fabric.models import Cluster
from scheduler.launch.slurm import SlurmError
from scheduler.slurm_drains import sync_drains


class Command(BaseCommand):
    help = "Drain in Slurm the nodes a health alert took out of service; resume those clusterctl drained."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--dry-run", action="store_true", help="print the plan, change nothing in Slurm")
        mode.add_argument("--apply", action="store_true", help="run scontrol even where SLURM_DRAIN is not on")
        parser.add_argument("--json", action="store_true", help="print the plan and outcome as JSON")

    def handle(self, **o):
        cluster = Cluster.objects.filter(name=o["cluster"]).first()
        if cluster is None:
            raise CommandError(f"no cluster named {o['cluster']!r}")
        mode = "dry-run" if o["dry_run"] else "on" if o["apply"] else settings.SLURM_DRAIN
        if mode == "off":
            raise CommandError("SLURM_DRAIN is off: pass --dry-run to see the plan or --apply to carry it out")
        try:
            result = sync_drains(cluster.pk, mode=mode)
        except SlurmError as exc:
            raise CommandError(str(exc)) from exc
        if o["json"]:
            self.stdout.write(json.dumps(result.as_dict(), indent=2))
        else:
            verb = "would " if mode == "dry-run" else ""
            for node, reason in result.plan.drain:
                self.stdout.write(f"{verb}drain {node}: {reason}")
            for node in result.plan.resume:
                self.stdout.write(f"{verb}resume {node}")
            for node, why in result.plan.left:
                self.stdout.write(f"leave {node}: {why}")
            if not (result.plan.drain or result.plan.resume or result.plan.left):
                self.stdout.write("nothing to do: Slurm's drains match the cluster's health")
        for error in result.errors:
            self.stderr.write(error)
        if result.errors:
            raise CommandError(f"{len(result.errors)} scontrol command(s) failed")
