"""python manage.py subnet_manager --cluster NAME (--saquery-file FILE | --run [--ca mlx5_0])
[--opensm-conf FILE] [--at SECONDS]: the subnet manager's health into the cluster's alerts.

The fabric agent reads the SMs itself on its poll (TELEMETRY_SM_INTERVAL_S); this command is the same reading by hand
(--run, where `saquery` of infiniband-diags reaches the fabric) or from a saved output; each reading is compared with
the one kept (failover, a hung SM)."""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from fabric.collectors.subnet_manager import CA_NAME, SmReadError, read_subnet_managers
from fabric.models import Cluster
from fabric.subnet_manager import record_sm_view
from fabric.telemetry.subnet_manager import (
    SmParseError,
    SmView,
    parse_opensm_conf,
    parse_opensm_log,
    parse_saquery_smir,
)


class Command(BaseCommand):
    help = "Read the subnet managers (saquery SMIR) and raise or clear the SM alerts of a cluster."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--saquery-file", help="a saved `saquery SMIR` output")
        source.add_argument("--run", action="store_true", help="run `saquery SMIR` here")
        parser.add_argument("--ca", help="the HCA saquery uses (-C), e.g. mlx5_0")
        parser.add_argument("--opensm-conf", help="opensm.conf of the SM host: its routing engine is checked")
        parser.add_argument("--opensm-log", help="opensm.log of the SM host: its state changes and last sweep")
        parser.add_argument("--at", type=float, help="the reading's time, seconds since the epoch (default: now)")

    def handle(self, **o):
        cluster = Cluster.objects.filter(name=o["cluster"]).first()
        if cluster is None:
            raise CommandError(f"no cluster named {o['cluster']!r}")
        at = o["at"] if o["at"] is not None else time.time()
        if o["ca"] and not CA_NAME.match(o["ca"]):
            raise CommandError(f"--ca {o['ca']!r} is not an HCA name (letters, digits, _)")
        if o["run"]:
            try:
                view = read_subnet_managers(
                    o["ca"] or "", o["opensm_conf"] or "", o["opensm_log"] or "", now=lambda: at
                )
            except SmReadError as exc:
                raise CommandError(str(exc)) from exc
        else:
            try:
                sms = parse_saquery_smir(self._read(o["saquery_file"]))
            except SmParseError as exc:
                raise CommandError(str(exc)) from exc
            engine = parse_opensm_conf(self._read(o["opensm_conf"]))["routing_engine"] if o["opensm_conf"] else ""
            events = tuple(parse_opensm_log(self._read(o["opensm_log"]))[-20:]) if o["opensm_log"] else ()
            view = SmView(at, sms, engine or "", events)
        result = record_sm_view(cluster.pk, view)
        for s in view.sms:
            self.stdout.write(f"SM lid {s.lid} guid {s.guid}: {s.state_name}, priority {s.priority}, "
                              f"activity {s.activity}")  # fmt: skip
        self.stdout.write(f"findings: {', '.join(result['findings']) or 'none'}")

    def _read(self, path: str) -> str:
        try:
            return Path(path).read_text()
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror or exc}") from exc
