"""python manage.py fabric_report --cluster NAME [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.graph_from_db import fabric_for_cluster
from fabric.models import Cluster
from fabric.topology import analyse, render_text


class Command(BaseCommand):
    help = "Fabric analysis: tiers, oversubscription, bisection bandwidth, single points of failure, degraded links."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)
        parser.add_argument("--json", action="store_true")

    def handle(self, **o):
        cluster = Cluster.objects.filter(name=o["cluster"]).first()
        if cluster is None:
            known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no cluster named {o['cluster']!r} (known: {known})")
        report = analyse(fabric_for_cluster(cluster))
        if o["json"]:
            self.stdout.write(json.dumps({"cluster": cluster.name, **report.to_dict()}, indent=2, sort_keys=True))
        else:
            self.stdout.write(f"Fabric report for cluster {cluster.name}\n")
            self.stdout.write(render_text(report))
