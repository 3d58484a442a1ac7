"""python manage.py generate_fabric --cluster NAME --nodes N --gpus-per-node G ..."""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from clusterctl.celery import tasks_left_to_the_server
from fabric.actions import generate_fabric, no_progress
from fabric.topology.link_speeds import SPEEDS


class Command(BaseCommand):
    help = "Generate a consistent fat tree (2 tiers, 3 when one spine layer cannot reach all leaves) and import it."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)
        parser.add_argument("--nodes", type=int, required=True, help="compute nodes")
        parser.add_argument("--gpus-per-node", type=int, default=8)
        parser.add_argument("--gpu-model", default="H100")
        parser.add_argument("--leaf-ports", type=int, default=64, help="switch radix")
        parser.add_argument("--oversubscription", type=float, default=1.0, help="leaf down:up ratio, e.g. 2 for 2:1")
        parser.add_argument("--storage-nodes", type=int, default=0)
        parser.add_argument("--rate", default="NDR", choices=SPEEDS)
        parser.add_argument("--hcas-per-node", type=int, default=None, help="default: one per GPU, as on DGX")
        parser.add_argument(
            "--flat", action="store_true", help="not rail-optimised: every HCA of a server on one leaf (no storage)"
        )
        parser.add_argument("--json", action="store_true")

    def _progress(self, message: str) -> None:
        self.stderr.write(f"  {message}")

    def handle(self, **o):
        started = time.monotonic()
        params = {
            "nodes": o["nodes"],
            "gpus_per_node": o["gpus_per_node"],
            "gpu_model": o["gpu_model"],
            "leaf_ports": o["leaf_ports"],
            "oversubscription": o["oversubscription"],
            "storage_nodes": o["storage_nodes"],
            "rate": o["rate"],
            "hcas_per_node": o["hcas_per_node"],
            **({"rail_optimised": False} if o["flat"] else {}),
        }
        try:
            progress = self._progress if o["verbosity"] >= 1 else no_progress
            with tasks_left_to_the_server():  # the demo process broadcasts what changed (embedded mode)
                summary = generate_fabric(o["cluster"], progress=progress, **params).to_dict()
        except (ValueError, KeyError) as exc:
            raise CommandError(str(exc).strip("'\"")) from exc
        summary["seconds"] = round(time.monotonic() - started, 2)
        if o["json"]:
            self.stdout.write(json.dumps(summary, indent=2, sort_keys=True))
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"cluster {summary['cluster']}: {summary['switches']} switches {summary['changes']['roles']}, "
                f"{summary['hosts']} hosts, {summary['links']} links, {summary['gpus']} GPUs "
                f"in {summary['seconds']} s"
            )
        )
