"""python manage.py import_fabric --cluster NAME --format FMT PATH [--node HOST] [--json]"""

import json as jsonlib
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from clusterctl.celery import tasks_left_to_the_server
from fabric.actions import ActionError
from fabric.actions.imports import ALL_FORMATS, import_text
from fabric.importers import read_text
from fabric.importers.types import ParseError


class Command(BaseCommand):
    help = "Import a fabric (ibnetdiscover, ibnetdiscover -p, YAML/JSON spec) or one server's nvidia-smi topo -m."

    def add_arguments(self, parser):
        parser.add_argument("path", help="file to read ('-' for standard input)")
        parser.add_argument("--cluster", required=True, help="cluster name (created if new)")
        parser.add_argument("--format", required=True, choices=ALL_FORMATS, dest="fmt")
        parser.add_argument("--node", default="", help="hostname, for --format nvidia-topo")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    def handle(self, path, cluster, fmt, node, **options):
        try:
            if path == "-":
                text, source = sys.stdin.read(), "<stdin>"
            else:
                if not Path(path).is_file():
                    raise CommandError(f"{path}: no such file")
                text, source = read_text(path), path
            if not options["json"]:
                self.stderr.write(f"parsing {source} as {fmt} ...")
            with tasks_left_to_the_server():  # the demo process broadcasts what changed (embedded mode)
                summary = import_text(cluster, fmt, text, source=source, node=node, progress=self._progress)
        except (ParseError, ActionError) as exc:
            raise CommandError(f"{exc}\nnothing was stored.") from exc
        self._print(summary, as_json=options["json"])

    def _progress(self, message: str) -> None:
        self.stderr.write(f"  {message}")

    def _print(self, summary: dict, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(_json(summary))
            return
        if "switches" in summary:
            changes = summary["changes"]
            self.stdout.write(
                self.style.SUCCESS(
                    f"cluster {summary['cluster']}: {summary['switches']} switches, {summary['hosts']} hosts, "
                    f"{summary['cas']} channel adapters, {summary['links']} links, {summary['down_ports']} down ports, "
                    f"{summary['gpus']} GPUs"
                )
            )
            flagged = [
                f"{summary[key]} {what}"
                for key, what in (
                    ("unnamed_hosts", "unnamed hosts (name them: admin, or import again once named)"),
                    ("loopbacks", "loopbacks (never routed over)"),
                    ("degraded_links", "degraded links (ends disagreed on the rate)"),
                )
                if summary.get(key)
            ]
            if flagged:
                self.stdout.write(self.style.WARNING("  flagged   " + "; ".join(flagged)))
            for what in ("switches", "nodes", "cas", "ports", "links", "gpus"):
                self.stdout.write(f"  {what:9} {changes[what]}")
            self.stdout.write(f"  tiers     {changes['roles']}")
            for warning in summary["warnings"]:
                self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        else:
            self.stdout.write(self.style.SUCCESS(f"node {summary['node']}: {summary}"))


def _json(data: dict) -> str:
    return jsonlib.dumps(data, indent=2, sort_keys=True, default=str)
