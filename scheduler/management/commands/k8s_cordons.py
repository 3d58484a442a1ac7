"""python manage.py k8s_cordons --cluster NAME (--dry-run | --apply) [--kubeconfig FILE] [--json]: Kubernetes'
cordons brought in line with the cluster's health, whatever K8S_CORDON says (docs/integrations.md)."""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fabric.models import Cluster
from scheduler.k8s_cordons import K8sError, api_from_kubeconfig, sync_cordons


class Command(BaseCommand):
    help = "Cordon in Kubernetes the nodes clusterctl's health took out of service; uncordon those it cordoned."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)
        how = parser.add_mutually_exclusive_group(required=True)
        how.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
        how.add_argument("--apply", action="store_true", help="PATCH the nodes now")
        parser.add_argument("--kubeconfig", help="default: K8S_KUBECONFIG")
        parser.add_argument("--json", action="store_true")

    def handle(self, **o):
        cluster = Cluster.objects.filter(name=o["cluster"]).first()
        if cluster is None:
            raise CommandError(f"no cluster named {o['cluster']!r}")
        path = o["kubeconfig"] or settings.K8S_KUBECONFIG
        if not path:
            raise CommandError("no kubeconfig: give --kubeconfig FILE (or set K8S_KUBECONFIG)")
        try:
            result = sync_cordons(cluster.pk, mode="dry-run" if o["dry_run"] else "on", api=api_from_kubeconfig(path))
        except K8sError as exc:
            raise CommandError(str(exc)) from exc
        if o["json"]:
            self.stdout.write(json.dumps(result.as_dict(), indent=2))
            return
        plan = result.plan
        for name, value in plan.cordon:
            self.stdout.write(f"cordon {name}: {value}")
        for name in plan.uncordon:
            self.stdout.write(f"uncordon {name}")
        for name, why in plan.leave:
            self.stdout.write(f"leave {name}: {why}")
        for error in result.errors:
            self.stderr.write(f"error: {error}")
        if not (plan.cordon or plan.uncordon or plan.leave):
            self.stdout.write("nothing to do")
