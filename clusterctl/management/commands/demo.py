"""python manage.py demo: the embedded demo in one process.

Migrates, builds two clusters (a generated H100 fat tree, and the real 8-switch SX6036
fabric from tests/fixtures), makes an operator login, and serves UI, admin and API.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from fabric import actions
from fabric.importers import read_text
from fabric.importing import import_text
from fabric.models import Cluster

REAL_FABRIC = Path(settings.BASE_DIR) / "tests" / "fixtures" / "ibnetdiscover_sx6036_8switch.topo"
REAL_TOPO = Path(settings.BASE_DIR) / "tests" / "fixtures" / "nvidia_smi_topo_m_dgx_a100.txt"


class Command(BaseCommand):
    help = "Set up and serve the embedded demo on 127.0.0.1 (no external services)."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=128, help="compute nodes of the generated cluster")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-serve", action="store_true", help="set up, then exit")

    def handle(self, **o):
        self.stdout.write("migrating the database ...")
        call_command("migrate", interactive=False, verbosity=0)
        self._clusters(o["nodes"])
        password = self._operator()
        url = f"http://127.0.0.1:{o['port']}/"
        self.stdout.write(
            self.style.SUCCESS(
                f"\nclusterctl demo ready\n"
                f"  UI      {url}\n"
                f"  admin   {url}admin/\n"
                f"  API     {url}api/v1/  (docs: {url}api/v1/docs/)\n"
                f"  login   user 'admin', password '{password}'\n"
            )
        )
        if not o["no_serve"]:
            call_command("runserver", f"127.0.0.1:{o['port']}", use_reloader=False)

    def _clusters(self, nodes: int) -> None:
        if not Cluster.objects.filter(name="demo").exists():
            started = time.monotonic()
            self.stdout.write(f"generating cluster 'demo': {nodes} x 8 H100, NDR fat tree, 2:1 at the leaves ...")
            summary = actions.generate_fabric(
                "demo",
                nodes=nodes,
                gpus_per_node=8,
                gpu_model="H100",
                leaf_ports=64,
                oversubscription=2.0,
                storage_nodes=4,
                rate="NDR",
            )
            self.stdout.write(
                f"  {summary.switches} switches, {summary.hosts} hosts, {summary.links} links, {summary.gpus} GPUs "
                f"in {time.monotonic() - started:.1f} s"
            )
        if not Cluster.objects.filter(name="sx6036").exists() and REAL_FABRIC.is_file():
            self.stdout.write("importing cluster 'sx6036' from a real ibnetdiscover output ...")
            import_text("sx6036", "ibnetdiscover", read_text(REAL_FABRIC), source=REAL_FABRIC.name)
            import_text("sx6036", "nvidia-topo", read_text(REAL_TOPO), source=REAL_TOPO.name, node="stage100")

    def _operator(self) -> str:
        """The demo's operator login; its password is kept in var/ so it stays the same across restarts."""
        secret = Path(settings.BASE_DIR) / "var" / "demo-admin-password"
        secret.parent.mkdir(exist_ok=True)
        if not secret.exists():
            secret.write_text(secrets.token_urlsafe(12))
            secret.chmod(0o600)
        password = secret.read_text().strip()
        user, _ = get_user_model().objects.get_or_create(username="admin", defaults={"email": "admin@localhost"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        return password
