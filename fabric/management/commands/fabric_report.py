"""python manage.py fabric_report --cluster NAME [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Cluster
from fabric.reports import cluster_report
from fabric.subnet_manager import sm_status
from fabric.topology import render_text


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
        report = cluster_report(cluster.pk, memo=False).report  # analysed once per fabric version (fabric.reports)
        sm = sm_status(cluster.pk)
        if o["json"]:
            doc = {"cluster": cluster.name, **report.to_dict(), "subnet_manager": sm}
            self.stdout.write(json.dumps(doc, indent=2, sort_keys=True, default=str))
        else:
            self.stdout.write(f"Fabric report for cluster {cluster.name}\n")
            self.stdout.write(render_text(report))
            self.stdout.write(_sm_text(sm))


def _sm_text(sm: dict | None) -> str:
    lines = ["", "Subnet manager", "--------------"]
    if sm is None:
        return "\n".join([*lines, "not read yet: manage.py subnet_manager --cluster NAME --run (docs/node-agent.md)"])
    lines.append(
        f"read {sm['read_at']:%Y-%m-%d %H:%M:%S} UTC, activity last moved {sm['moved_at']:%Y-%m-%d %H:%M:%S} UTC"
    )
    lines += [f"lid {s['lid']} {s['guid']} {s['state']}, priority {s['priority']}, activity {s['activity']}"
              for s in sm["sms"]] or ["no subnet manager answered"]  # fmt: skip
    if sm["no_standby"]:
        lines.append("SPOF: no standby SM (the master is a single point of failure)")
    return "\n".join(lines)
