"""python manage.py slurm_observe [--cluster NAME ...] [--file FILE] [--json]: Slurm's own jobs mirrored read-only.

On a host with the Slurm client and munge (SLURM_CONF, SLURM_BINDIR), one pass of what the beat does every
SLURM_OBSERVE_INTERVAL_S: `scontrol show job -d -o`, each running job onto the GPUs Slurm bound it to, each pending
one into the queue with Slurm's reason (docs/integrations.md "Observe a Slurm cluster"). --file reads a saved output.
"""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduler import slurm_mirror
from scheduler.actions.errors import ActionError
from scheduler.launch.slurm import SlurmError
from scheduler.launch.slurm_observe import ObserveError, parse_scontrol_jobs


class Command(BaseCommand):
    help = "Mirror Slurm's own jobs (scontrol show job -d -o) onto clusters, read-only."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", action="append", help="a cluster to mirror into (default: SLURM_OBSERVE)")
        parser.add_argument("--file", help="a saved `scontrol show job -d -o` output instead of asking Slurm")
        parser.add_argument("--json", action="store_true")

    def handle(self, **o):
        names = o["cluster"] or list(settings.SLURM_OBSERVE)
        if not names:
            raise CommandError("no cluster: give --cluster NAME (or set SLURM_OBSERVE)")
        jobs = None
        if o["file"]:
            try:
                jobs = parse_scontrol_jobs(Path(o["file"]).read_text())
            except OSError as exc:
                raise CommandError(f"{o['file']}: {exc.strerror or exc}") from exc
            except ObserveError as exc:
                raise CommandError(f"{o['file']}: {exc}") from exc
        try:
            result = slurm_mirror.observe(names, jobs=jobs)
        except (SlurmError, ActionError) as exc:
            raise CommandError(str(exc)) from exc
        if o["json"]:
            self.stdout.write(json.dumps(result, indent=2))
            return
        for name, counts in result.items():
            self.stdout.write(f"{name}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
