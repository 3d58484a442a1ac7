"""python manage.py subnet_manager --cluster NAME (--saquery-file FILE | --run [--ca mlx5_0])
[--opensm-conf FILE] [--at SECONDS]: the subnet manager's health into the cluster's alerts.

Run it where the fabric is reachable (a fabric agent's host: `saquery` of infiniband-diags), every minute or so from
cron or a systemd timer; each run compares with the reading it kept (failover, a hung SM)."""

import re
import subprocess
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Cluster
from fabric.subnet_manager import record_sm_view
from fabric.telemetry.subnet_manager import SmParseError, SmView, parse_opensm_conf, parse_saquery_smir

CA_NAME = re.compile(r"^[A-Za-z0-9_]{1,32}$")


class Command(BaseCommand):
    help = "Read the subnet managers (saquery SMIR) and raise or clear the SM alerts of a cluster."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--saquery-file", help="a saved `saquery SMIR` output")
        source.add_argument("--run", action="store_true", help="run `saquery SMIR` here")
        parser.add_argument("--ca", help="the HCA saquery uses (-C), e.g. mlx5_0")
        parser.add_argument("--opensm-conf", help="opensm.conf of the SM host: its routing engine is checked")
        parser.add_argument("--at", type=float, help="the reading's time, seconds since the epoch (default: now)")

    def handle(self, **o):
        cluster = Cluster.objects.filter(name=o["cluster"]).first()
        if cluster is None:
            raise CommandError(f"no cluster named {o['cluster']!r}")
        text = self._read(o["saquery_file"]) if o["saquery_file"] else self._saquery(o["ca"])
        try:
            sms = parse_saquery_smir(text)
        except SmParseError as exc:
            raise CommandError(str(exc)) from exc
        engine = parse_opensm_conf(self._read(o["opensm_conf"]))["routing_engine"] if o["opensm_conf"] else ""
        view = SmView(o["at"] if o["at"] is not None else time.time(), sms, engine or "")
        result = record_sm_view(cluster.pk, view)
        for s in sms:
            self.stdout.write(f"SM lid {s.lid} guid {s.guid}: {s.state_name}, priority {s.priority}, "
                              f"activity {s.activity}")  # fmt: skip
        self.stdout.write(f"findings: {', '.join(result['findings']) or 'none'}")

    def _read(self, path: str) -> str:
        try:
            return Path(path).read_text()
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror or exc}") from exc

    def _saquery(self, ca: str | None) -> str:
        argv = ["saquery", "SMIR"]
        if ca:
            if not CA_NAME.match(ca):
                raise CommandError(f"--ca {ca!r} is not an HCA name (letters, digits, _)")
            argv += ["-C", ca]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CommandError(f"saquery: {exc}") from exc
        if done.returncode != 0 and "SMInfoRecord" not in done.stdout:
            # No SA answers: no SM at all (saquery asks the master's SA).
            return ""
        return done.stdout
