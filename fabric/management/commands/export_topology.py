"""python manage.py export_topology --cluster NAME --format FORMAT [--output FILE]"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from fabric.exporting import FORMATS, ExportRefused, export_cluster
from fabric.models import Cluster


class Command(BaseCommand):
    help = (
        "Write the cluster's fabric in a format a scheduler reads: Slurm's topology.conf (tree or block) or "
        "topology.yaml, a Kueue Topology or its node labels, Volcano HyperNodes (docs/integrations.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True, help="cluster name")
        parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
        parser.add_argument("--output", default="", help="file to write (default: standard output)")

    def handle(self, cluster, fmt, output, **options):
        found = Cluster.objects.filter(name=cluster).first()
        if found is None:
            known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no cluster named {cluster!r} (known: {known})")
        if output and Path(output).is_dir():
            raise CommandError(f"{output}: is a directory; name the file to write")
        try:
            export = export_cluster(found, fmt)
        except ExportRefused as exc:
            raise CommandError(f"{exc}\nnothing was written.") from exc
        if not output:
            self.stdout.write(export.text, ending="")
            return
        try:
            Path(output).write_text(export.text)
        except OSError as exc:
            raise CommandError(f"{output}: cannot write: {exc.strerror}") from exc
        lines = export.text.count("\n")
        self.stderr.write(self.style.SUCCESS(f"wrote {output} ({fmt}, {lines} lines) for cluster {found.name}"))
